//! [`ImportBody`]: the JSON body of an import job, read by actix's own
//! JSON reader up to `HTTP_IMPORT_LIMIT_BYTES` rather than the smaller
//! limit of every other endpoint (a 100,000-row job is several megabytes),
//! with the same problems for a wrong type, an oversize or malformed body.

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::problem::ApiError;
use crate::problem::rejections::json_error;
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
        let body = web::JsonBody::<T>::new(req, payload, None, true).limit(limit);
        Box::pin(async move {
            body.await
                .map(ImportBody)
                .map_err(|e| json_error(&e, "HTTP_IMPORT_LIMIT_BYTES"))
        })
    }
}
