//! `POST /v1/live/tickets`: a single-use ticket that opens a live stream
//! from a browser, whose `EventSource` and `WebSocket` cannot send
//! `Authorization`, without putting the long-lived token in a URL.

use actix_web::{HttpResponse, post, web};

use chatlab_auth::TokenRejection;
use chatlab_persistence::live_tickets;

use super::Live;
use crate::auth::Caller;
use crate::auth::live_ticket::new_ticket;
use crate::dto::LiveTicketResponse;
use crate::problem::{ApiError, Problem};
use crate::routes::responses::Unauthenticated;
use crate::state::AppState;

/// Issues a ticket for the caller: valid for `LIVE_TICKET_TTL_SECS` (30 s),
/// once, on any instance, for `GET /v1/events?ticket=` or
/// `GET /v1/ws?ticket=`. A used, expired or unknown ticket, or one whose
/// user is gone, is a 401 there. The stream budget applies as to any
/// stream, and a stream refused by it has used its ticket.
#[utoipa::path(
    tag = "live",
    responses(
        (status = 201, description = "A ticket for one stream", body = LiveTicketResponse),
        Unauthenticated,
        (status = 503, description = "Database unavailable; no ticket issued", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/live/tickets")]
pub async fn issue_ticket(
    caller: Caller,
    state: web::Data<AppState>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let ticket = new_ticket()?;
    let expires_at = live_tickets::issue(state.store.db(), caller.0, ticket.hash, live.ticket_ttl)
        .await?
        .ok_or(ApiError::Unauthorized(TokenRejection::UnknownUser))?;
    Ok(HttpResponse::Created()
        .insert_header(("cache-control", "no-store"))
        .json(LiveTicketResponse {
            ticket: ticket.ticket,
            expires_at,
        }))
}
