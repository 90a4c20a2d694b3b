//! Route registration. Public routes are registered through
//! `utoipa-actix-web`, so the OpenAPI document is collected from the same
//! registrations as the router and the two cannot drift. Operator routes
//! (metrics, the event audit, bulk seeding) are served on their own
//! listener (`OPS_ADDR`) and are not part of the public API's document.

mod audit;
mod chats;
mod health;
mod import_jobs;
mod members;
mod messages;
mod metrics;
mod read_state;
pub(crate) mod responses;
mod users;
pub mod web_client;

use actix_web::web;
use utoipa_actix_web::scope;
use utoipa_actix_web::service_config::ServiceConfig;

/// Registers the public routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(
        scope("/v1")
            .service(users::create_user)
            .service(users::get_user)
            .service(users::issue_token)
            .service(chats::create_chat)
            .service(chats::get_chat)
            .service(chats::list_members)
            .service(messages::send_message)
            .service(messages::list_messages)
            .service(read_state::mark_read)
            .service(read_state::my_chats)
            .service(read_state::my_chat)
            .service(import_jobs::import_members)
            .service(import_jobs::import_messages)
            // After the imports: `/members/{user_id}` would otherwise also
            // be the route name of `/members/import` (actix names a request
            // by the first pattern its path matches, whatever the method).
            .service(members::add_members)
            .service(members::remove_member)
            .service(members::transfer_ownership)
            .service(crate::live::tickets::issue_ticket)
            .service(crate::live::stream::events)
            .service(crate::live::socket::socket),
    )
    .service(health::healthz)
    .service(health::readyz);
}

/// Registers the operator routes: `/metrics`, `GET /audit`,
/// `POST /v1/users/bulk`, and the health probes (so that a scraper needs
/// only this port).
pub fn configure_ops(cfg: &mut web::ServiceConfig) {
    cfg.service(web::scope("/v1").service(users::create_users_bulk))
        .service(health::healthz)
        .service(health::readyz)
        .service(metrics::metrics)
        .service(audit::audit);
}
