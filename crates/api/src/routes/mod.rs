//! Route registration. Routes are registered through `utoipa-actix-web`, so
//! the OpenAPI document is collected from the same registrations as the
//! router and the two cannot drift.

mod audit;
mod chats;
mod health;
mod import_jobs;
mod messages;
mod metrics;
mod users;

use utoipa_actix_web::scope;
use utoipa_actix_web::service_config::ServiceConfig;

/// Registers every route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(
        scope("/v1")
            .service(users::create_user)
            .service(users::create_users_bulk)
            .service(users::get_user)
            .service(chats::create_chat)
            .service(chats::get_chat)
            .service(chats::list_members)
            .service(messages::send_message)
            .service(messages::list_messages)
            .service(import_jobs::import_members)
            .service(import_jobs::import_messages),
    )
    .service(health::healthz)
    .service(health::readyz)
    .service(metrics::metrics)
    .service(audit::audit);
}
