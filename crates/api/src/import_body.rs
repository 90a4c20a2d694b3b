//! [`ImportBody`]: the JSON body of an import job, read up to
//! `HTTP_IMPORT_LIMIT_BYTES` rather than the smaller limit of every other
//! endpoint (a 100,000-row job is several megabytes).

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::problem::ApiError;
use crate::state::AppState;

/// An import job's body, parsed.
#[derive(Debug)]
pub struct ImportBody<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ImportBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = req
            .app_data::<web::Data<AppState>>()
            .map_or(0, |s| s.import_limit_bytes);
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        Box::pin(async move {
            if !is_json {
                return Err(ApiError::UnsupportedMediaType(
                    "send the body as JSON with Content-Type: application/json".into(),
                ));
            }
            let too_large = || {
                ApiError::PayloadTooLarge(format!(
                    "the body is larger than the limit of {limit} bytes (HTTP_IMPORT_LIMIT_BYTES)"
                ))
            };
            if declared.is_some_and(|n| n > limit) {
                return Err(too_large());
            }
            let mut body = Vec::with_capacity(declared.unwrap_or(0));
            while let Some(chunk) = payload.next().await {
                let chunk = chunk
                    .map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
                if body.len() + chunk.len() > limit {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            serde_json::from_slice(&body)
                .map(ImportBody)
                .map_err(|e| ApiError::BadRequest(format!("malformed JSON body: {e}")))
        })
    }
}
