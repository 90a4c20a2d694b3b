//! The per-request strategy override: `X-Chatlab-Insert-Strategy`.
//!
//! With `CHATLAB_ALLOW_OVERRIDES=true` a request may pick its member insert
//! strategy, so one load run can mix strategies against one server and
//! compare them in the same minute. With overrides off, a request that names
//! a strategy is refused (400) rather than silently served with another one:
//! a measurement must never be attributed to a strategy that did not run.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};

use chatlab_domain::InsertStrategy;

use crate::problem::ApiError;
use crate::state::AppState;

/// Request and response header naming the member insert strategy.
pub const INSERT_STRATEGY_HEADER: &str = "x-chatlab-insert-strategy";

/// The strategy this request uses; recorded on the request's span.
#[derive(Debug, Clone, Copy)]
pub struct ChosenStrategy(pub InsertStrategy);

impl ChosenStrategy {
    /// The response header that names it.
    pub fn header(self) -> (&'static str, &'static str) {
        (INSERT_STRATEGY_HEADER, self.0.as_str())
    }
}

impl FromRequest for ChosenStrategy {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(choose(req).inspect(|chosen| {
            tracing::Span::current().record("chatlab.insert_strategy", chosen.0.as_str());
        }))
    }
}

fn choose(req: &HttpRequest) -> Result<ChosenStrategy, ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| ApiError::Internal("application state is missing".into()))?;
    let Some(value) = req.headers().get(INSERT_STRATEGY_HEADER) else {
        return Ok(ChosenStrategy(state.writes.default_strategy));
    };
    if !state.writes.allow_overrides {
        return Err(ApiError::BadRequest(format!(
            "the {INSERT_STRATEGY_HEADER} header is only honoured when the server runs with \
             CHATLAB_ALLOW_OVERRIDES=true; this server always uses {}",
            state.writes.default_strategy
        )));
    }
    let value = value
        .to_str()
        .map_err(|_| ApiError::BadRequest(format!("{INSERT_STRATEGY_HEADER} is not ASCII")))?;
    value
        .parse()
        .map(ChosenStrategy)
        .map_err(|e| ApiError::BadRequest(format!("{INSERT_STRATEGY_HEADER}: {e}")))
}
