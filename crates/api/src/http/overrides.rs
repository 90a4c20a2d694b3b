//! Per-request overrides: `X-Chatlab-Insert-Strategy`,
//! `X-Chatlab-Publish-Mode` and `X-Chatlab-Message-Fanout`.
//!
//! With `CHATLAB_ALLOW_OVERRIDES=true` a request may pick its member insert
//! strategy and its event publish mode, so one load run can mix them against
//! one server and compare them in the same minute. With overrides off, a
//! request that names one is refused (400) rather than silently served with
//! another: a measurement must never be attributed to a choice that did not
//! run. Every write names what it used in the same response headers.

use std::fmt::Display;
use std::future::{Ready, ready};
use std::str::FromStr;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use chatlab_domain::{FieldError, InsertStrategy, MessageFanout, PublishMode, ValidationErrors};
use chatlab_persistence::Driver;

use crate::problem::ApiError;
use crate::state::AppState;

/// Request and response header naming the member insert strategy.
pub const INSERT_STRATEGY_HEADER: &str = "x-chatlab-insert-strategy";
/// Request and response header naming the event publish mode.
pub const PUBLISH_MODE_HEADER: &str = "x-chatlab-publish-mode";

/// Request and response header naming the message fan-out.
pub const MESSAGE_FANOUT_HEADER: &str = "x-chatlab-message-fanout";

/// The strategy this request uses; recorded on the request's span.
#[derive(Debug, Clone, Copy)]
pub struct ChosenStrategy(pub InsertStrategy);

/// The publish mode this request uses; recorded on the request's span.
#[derive(Debug, Clone, Copy)]
pub struct ChosenPublishMode(pub PublishMode);

/// The message fan-out this request uses: what a send writes, and which
/// rows a read of unread counts reads.
#[derive(Debug, Clone, Copy)]
pub struct ChosenFanout(pub MessageFanout);

impl ChosenFanout {
    /// The response header that names it.
    pub fn header(self) -> (&'static str, &'static str) {
        (MESSAGE_FANOUT_HEADER, self.0.as_str())
    }
}

impl FromRequest for ChosenFanout {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            choose(req, MESSAGE_FANOUT_HEADER, |s| s.writes.default_fanout).map(|f| {
                tracing::Span::current().record("chatlab.message_fanout", f.as_str());
                ChosenFanout(f)
            }),
        )
    }
}

impl ChosenStrategy {
    /// The response header that names it.
    pub fn header(self) -> (&'static str, &'static str) {
        (INSERT_STRATEGY_HEADER, self.0.as_str())
    }
}

impl ChosenPublishMode {
    /// The response header that names it.
    pub fn header(self) -> (&'static str, &'static str) {
        (PUBLISH_MODE_HEADER, self.0.as_str())
    }
}

impl FromRequest for ChosenStrategy {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            choose(req, INSERT_STRATEGY_HEADER, |s| s.writes.default_strategy)
                .and_then(|s| runnable(req, s))
                .map(|s| {
                    tracing::Span::current().record("chatlab.insert_strategy", s.as_str());
                    ChosenStrategy(s)
                }),
        )
    }
}

impl FromRequest for ChosenPublishMode {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            choose(req, PUBLISH_MODE_HEADER, |s| s.writes.default_publish_mode).map(|m| {
                tracing::Span::current().record("chatlab.publish_mode", m.as_str());
                ChosenPublishMode(m)
            }),
        )
    }
}

/// `strategy`, if this server's driver can run it: `copy` needs the
/// blocking driver. A well-formed name this server cannot run is a 422
/// (the request is understood; this server cannot carry it out), not a
/// 400.
fn runnable(req: &HttpRequest, strategy: InsertStrategy) -> Result<InsertStrategy, ApiError> {
    let driver = crate::state::of(req)?.store.db().driver();
    if strategy.needs_blocking_driver() && driver != Driver::Blocking {
        return Err(ApiError::Validation(ValidationErrors(vec![FieldError {
            field: INSERT_STRATEGY_HEADER,
            message: format!(
                "{strategy} needs a server with DB_DRIVER=blocking; this one runs the {} \
                 driver, and diesel-async has no COPY",
                driver.as_str()
            ),
        }])));
    }
    Ok(strategy)
}

/// The header's value when overrides are allowed, else the server default.
fn choose<T>(
    req: &HttpRequest,
    header: &str,
    default: impl Fn(&AppState) -> T,
) -> Result<T, ApiError>
where
    T: FromStr + Display,
    T::Err: Display,
{
    let state = crate::state::of(req)?;
    let default = default(state);
    let Some(value) = req.headers().get(header) else {
        return Ok(default);
    };
    if !state.writes.allow_overrides {
        return Err(ApiError::BadRequest(format!(
            "the {header} header is only honoured when the server runs with \
             CHATLAB_ALLOW_OVERRIDES=true; this server always uses {default}"
        )));
    }
    let value = value
        .to_str()
        .map_err(|_| ApiError::BadRequest(format!("{header} is not ASCII")))?;
    value
        .parse()
        .map_err(|e| ApiError::BadRequest(format!("{header}: {e}")))
}

/// A header's values as the OpenAPI document lists them: a string schema
/// whose `enum` is the domain's own list of names, so a name is declared
/// once (in the domain's enum) and the document, the web page (which reads
/// it from `/openapi.json`) and the parser cannot disagree.
fn names_schema(
    names: impl IntoIterator<Item = &'static str>,
    description: &str,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

/// Declares a schema type named `$name` for a header whose values are
/// `$domain::ALL`'s names.
macro_rules! header_values {
    ($(#[$doc:meta])* $name:ident, $domain:ty, $description:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                names_schema(<$domain>::ALL.iter().map(|v| v.as_str()), $description)
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
}

header_values!(
    /// The values `X-Chatlab-Insert-Strategy` takes: [`InsertStrategy::ALL`].
    StrategyName,
    InsertStrategy,
    "The insert strategies (`X-Chatlab-Insert-Strategy`), as the server declares them"
);

header_values!(
    /// The values `X-Chatlab-Publish-Mode` takes: [`PublishMode::ALL`].
    PublishModeName,
    PublishMode,
    "The publish modes (`X-Chatlab-Publish-Mode`), as the server declares them"
);

header_values!(
    /// The values `X-Chatlab-Message-Fanout` takes: [`MessageFanout::ALL`].
    FanoutName,
    MessageFanout,
    "The message fan-outs (`X-Chatlab-Message-Fanout`), as the server declares them"
);

#[cfg(test)]
mod tests {
    use chatlab_domain::{InsertStrategy, MessageFanout, PublishMode};

    fn names<T: utoipa::PartialSchema>() -> Vec<String> {
        let schema = serde_json::to_value(T::schema()).unwrap_or_default();
        schema["enum"]
            .as_array()
            .map(|values| {
                values
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn the_documented_header_values_are_the_ones_the_server_parses() {
        let strategies = names::<super::StrategyName>();
        assert_eq!(strategies.len(), InsertStrategy::ALL.len());
        assert_eq!(strategies[0], "per_row", "in the domain's order");
        for s in &strategies {
            assert!(s.parse::<InsertStrategy>().is_ok(), "{s}");
        }
        let modes = names::<super::PublishModeName>();
        assert_eq!(modes.len(), PublishMode::ALL.len());
        for m in &modes {
            assert!(m.parse::<PublishMode>().is_ok(), "{m}");
        }
        let fanouts = names::<super::FanoutName>();
        assert_eq!(fanouts.len(), MessageFanout::ALL.len());
        for f in &fanouts {
            assert!(f.parse::<MessageFanout>().is_ok(), "{f}");
        }
    }
}
