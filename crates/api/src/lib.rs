//! chatlab's REST server: actix-web handlers and DTOs, configuration from
//! env vars, telemetry, startup and graceful shutdown.
//!
//! [`startup::Application::build`] is the one way to start the server: the
//! binary and the integration tests both call it, the tests on port 0.

pub mod audit;
pub mod auth;
pub mod background;
pub mod config;
pub mod dto;
pub mod http;
pub mod live;
pub mod openapi;
pub mod problem;
pub mod routes;
pub mod startup;
pub mod state;
pub mod telemetry;
