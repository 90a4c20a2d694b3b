//! What actix itself rejects before a handler runs (a JSON body, a path
//! parameter or a query string that does not parse, a path with no
//! endpoint), as problems like every other error.

use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{HttpRequest, HttpResponse, web};

use super::ApiError;
use crate::http::limits::{BODY_TIMEOUT_MESSAGE, KnownPaths, is_body_timeout, method_label};

/// The JSON body reader of every endpoint but the import jobs, bounded by
/// `HTTP_JSON_LIMIT_BYTES`.
pub(crate) fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(|err, _req| json_error(&err, "HTTP_JSON_LIMIT_BYTES").into())
}

/// A JSON body that could not be read, as a problem; `limit_var` names the
/// setting that bounds its size.
pub(crate) fn json_error(err: &JsonPayloadError, limit_var: &str) -> ApiError {
    match err {
        JsonPayloadError::ContentType => ApiError::UnsupportedMediaType(
            "send the body as JSON with Content-Type: application/json".into(),
        ),
        JsonPayloadError::OverflowKnownLength { length, limit } => ApiError::PayloadTooLarge(
            format!("the body has {length} bytes; the limit is {limit} ({limit_var})"),
        ),
        JsonPayloadError::Overflow { limit } => ApiError::PayloadTooLarge(format!(
            "the body is larger than the limit of {limit} bytes ({limit_var})"
        )),
        JsonPayloadError::Payload(e) if is_body_timeout(e) => ApiError::RequestTimeout(format!(
            "{BODY_TIMEOUT_MESSAGE}: send the whole body within HTTP_BODY_TIMEOUT_MS of the headers"
        )),
        other => ApiError::BadRequest(format!("malformed JSON body: {other}")),
    }
}

/// Path parameters that do not parse (a malformed id) answer 400.
pub(crate) fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err: PathError, _req: &HttpRequest| {
        ApiError::BadRequest(format!("malformed path parameter: {err}")).into()
    })
}

/// A query string that does not parse answers 400.
pub(crate) fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err: QueryPayloadError, _req: &HttpRequest| {
        ApiError::BadRequest(format!("malformed query string: {err}")).into()
    })
}

/// A path with no endpoint answers 404 problem+json; a known path asked
/// with a method it does not take answers 405 with `Allow`. A known path
/// asked with a method it takes reaches here only when a route refused the
/// shape of a path parameter (a member id that is no UUID): 400.
pub(crate) async fn no_route(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    if let Some(allow) = req
        .app_data::<web::Data<KnownPaths>>()
        .and_then(|known| known.allowed(req.path()))
    {
        if allow.contains(&req.method().as_str()) {
            return Err(ApiError::BadRequest(format!(
                "malformed path parameter in {}",
                req.path()
            )));
        }
        return Err(ApiError::MethodNotAllowed {
            allow: allow.to_vec(),
        });
    }
    Err(ApiError::NoRoute(format!(
        "no endpoint {} {}",
        method_label(req.method()),
        req.path()
    )))
}
