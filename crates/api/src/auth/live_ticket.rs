//! Live tickets on the API side: making one, and the [`StreamCaller`]
//! extractor that lets a live stream be opened by a ticket in its URL
//! (`?ticket=`) where a browser's `EventSource` or `WebSocket` cannot send
//! `Authorization`. A ticket is 32 random bytes, base64url: what the store
//! keeps is its SHA-256, and neither the ticket nor its hash is ever
//! logged (the request span records the path, not the query).

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{FromRequest, HttpRequest};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::future::LocalBoxFuture;
use sha2::{Digest, Sha256};

use chatlab_auth::TokenRejection;
use chatlab_persistence::live_tickets;

use super::Caller;
use crate::problem::ApiError;
use crate::state;

/// A new ticket as handed to the client, and the hash the store keeps.
pub struct NewTicket {
    /// What the client puts in `?ticket=`.
    pub ticket: String,
    /// Its SHA-256.
    pub hash: Vec<u8>,
}

/// Makes a ticket from the operating system's random source.
pub fn new_ticket() -> Result<NewTicket, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        ApiError::Internal(format!("no random bytes for a live ticket: {e}").into())
    })?;
    let ticket = URL_SAFE_NO_PAD.encode(bytes);
    let hash = hash(&ticket);
    Ok(NewTicket { ticket, hash })
}

/// The SHA-256 of a ticket as presented.
fn hash(ticket: &str) -> Vec<u8> {
    Sha256::digest(ticket.as_bytes()).to_vec()
}

/// The `ticket` query parameter of a live stream's URL.
#[derive(Debug, serde::Deserialize)]
struct TicketQuery {
    ticket: Option<String>,
}

/// The user a live stream is opened for: from a ticket (`?ticket=`,
/// redeemed here, so used once) or, without one, from the bearer token as
/// [`Caller`] reads it. A request carrying both must carry them for the
/// same user.
#[derive(Debug, Clone, Copy)]
pub struct StreamCaller(pub Caller);

impl FromRequest for StreamCaller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { identify(&req).await })
    }
}

async fn identify(req: &HttpRequest) -> Result<StreamCaller, ApiError> {
    let ticket = actix_web::web::Query::<TicketQuery>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().ticket);
    let Some(ticket) = ticket else {
        return super::caller::identify(req).map(StreamCaller);
    };
    let bearer = if req.headers().contains_key(AUTHORIZATION) {
        Some(super::caller::identify(req)?)
    } else {
        None
    };
    let state = state::of(req)?;
    let user = live_tickets::redeem(state.store.db(), hash(&ticket))
        .await?
        .ok_or(ApiError::Unauthorized(TokenRejection::BadTicket))?;
    match bearer {
        Some(Caller(other)) if other != user => {
            Err(ApiError::Unauthorized(TokenRejection::TicketOfAnotherUser))
        }
        _ => Ok(StreamCaller(Caller(user))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_long_random_and_kept_only_as_a_hash() {
        let (a, b) = (new_ticket().unwrap(), new_ticket().unwrap());
        assert_ne!(a.ticket, b.ticket);
        assert_eq!(a.ticket.len(), 43, "32 bytes in base64url without padding");
        assert!(
            a.ticket
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_eq!(a.hash, hash(&a.ticket));
        assert_eq!(a.hash.len(), 32);
        assert_ne!(a.hash, a.ticket.as_bytes());
    }
}
