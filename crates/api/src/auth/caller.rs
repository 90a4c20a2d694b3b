//! The `Caller` extractor.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{FromRequest, HttpRequest};

use chatlab_auth::TokenRejection;
use chatlab_domain::UserId;

use crate::problem::ApiError;
use crate::state;

/// The user a request acts as: the subject of its verified bearer token.
/// Never a field of the body.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub UserId);

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(identify(req))
    }
}

/// The caller of `req`, from its bearer token.
pub(super) fn identify(req: &HttpRequest) -> Result<Caller, ApiError> {
    let state = state::of(req)?;
    let token = bearer_token(req).map_err(ApiError::Unauthorized)?;
    state
        .auth
        .verify(token)
        .map(Caller)
        .map_err(ApiError::Unauthorized)
}

/// The token of `Authorization: Bearer <token>` (the scheme is
/// case-insensitive, RFC 9110 §11.1).
fn bearer_token(req: &HttpRequest) -> Result<&str, TokenRejection> {
    let value = req
        .headers()
        .get(AUTHORIZATION)
        .ok_or(TokenRejection::Missing)?
        .to_str()
        .map_err(|_| TokenRejection::NotBearer)?;
    let (scheme, token) = value
        .trim()
        .split_once(' ')
        .ok_or(TokenRejection::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(TokenRejection::NotBearer);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(TokenRejection::NotBearer);
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn token_of(header: Option<&str>) -> Result<String, TokenRejection> {
        let mut req = TestRequest::default();
        if let Some(h) = header {
            req = req.insert_header((AUTHORIZATION, h));
        }
        bearer_token(&req.to_http_request()).map(str::to_owned)
    }

    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        assert_eq!(
            token_of(Some("Bearer abc.def.ghi")),
            Ok("abc.def.ghi".to_owned())
        );
        assert_eq!(token_of(Some("bearer  abc ")), Ok("abc".to_owned()));
    }

    #[test]
    fn other_schemes_and_empty_tokens_are_refused() {
        assert_eq!(token_of(None), Err(TokenRejection::Missing));
        assert_eq!(
            token_of(Some("Basic dXNlcjpwYXNz")),
            Err(TokenRejection::NotBearer)
        );
        assert_eq!(token_of(Some("Bearer")), Err(TokenRejection::NotBearer));
        assert_eq!(token_of(Some("Bearer   ")), Err(TokenRejection::NotBearer));
    }
}
