//! The two HTTP servers: the public one (the API, the live streams, the
//! spec and Swagger UI) and the operator one (`/metrics`, `/audit`, bulk
//! users), each on its own listener, bound before anything slow starts.

use std::net::{SocketAddr, TcpListener};

use actix_cors::Cors;
use actix_web::dev::Server;
use actix_web::http::header;
use actix_web::middleware::{Condition, from_fn};
use actix_web::{App, web};
use tracing_actix_web::TracingLogger;
use utoipa_actix_web::AppExt;
use utoipa_swagger_ui::SwaggerUi;

use super::StartupError;
use crate::config::origins::AllowedOrigins;
use crate::config::{BrowserSettings, HttpSettings};
use crate::http::limits::{self, BodyTimeout, KnownPaths};
use crate::http::listener;
use crate::http::metrics::{self, HttpMetrics};
use crate::live::Live;
use crate::openapi;
use crate::problem::rejections;
use crate::state::AppState;
use crate::telemetry::{RequestSpan, trace_headers};

/// Both listeners, bound, with their ports.
pub(super) struct Listeners {
    public: TcpListener,
    ops: TcpListener,
    /// The public listener's port (`HTTP_ADDR` with port 0 picks one).
    pub port: u16,
    /// The operator listener's port.
    pub ops_port: u16,
}

impl Listeners {
    /// Binds `HTTP_ADDR` and `HTTP_OPS_ADDR` with `HTTP_BACKLOG`.
    pub fn bind(http: &HttpSettings) -> Result<Self, StartupError> {
        let (public, port) = bind(http.addr, http.backlog)?;
        let (ops, ops_port) = bind(http.ops_addr, http.backlog)?;
        Ok(Self {
            public,
            ops,
            port,
            ops_port,
        })
    }
}

/// Binds `addr` (port 0 picks one) with `backlog`, answering the bound port.
fn bind(addr: SocketAddr, backlog: u32) -> Result<(TcpListener, u16), StartupError> {
    let listener =
        listener::bind(addr, backlog).map_err(|source| StartupError::Bind { addr, source })?;
    let port = listener
        .local_addr()
        .map_err(|source| StartupError::Bind { addr, source })?
        .port();
    Ok((listener, port))
}

/// The servers, built on their listeners, not yet running.
pub(super) struct Servers {
    /// The public server.
    pub public: Server,
    /// The operator server.
    pub ops: Server,
}

/// Builds both servers. Signals are taken in `run_until_stopped`, which
/// first ends the live streams (they would hold a graceful stop to its
/// timeout).
pub(super) fn serve(
    listeners: Listeners,
    (http, browser): (&HttpSettings, &BrowserSettings),
    state: web::Data<AppState>,
    live: Live,
    http_metrics: HttpMetrics,
) -> Result<Servers, StartupError> {
    let Listeners {
        public,
        ops,
        port,
        ops_port,
    } = listeners;
    let public = public_server(public, (http, browser), state.clone(), live, http_metrics)?;
    tracing::info!(addr = %http.addr, port, "listening");
    let ops = ops_server(ops, http, state)?;
    tracing::info!(addr = %http.ops_addr, port = ops_port,
        "operator endpoints (/metrics, /audit, /v1/users/bulk) listening");
    Ok(Servers { public, ops })
}

/// The public server: every worker serves the routes, the spec and Swagger
/// UI behind the same limits and metrics.
fn public_server(
    listener: TcpListener,
    (http, browser): (&HttpSettings, &BrowserSettings),
    state: web::Data<AppState>,
    live: Live,
    http_metrics: HttpMetrics,
) -> Result<Server, StartupError> {
    let allowed_origins = browser.allowed_origins.clone();
    let cross_origin = !allowed_origins.0.is_empty();
    let web_client = browser.web_client;
    let live = web::Data::new(live);
    let http_metrics = web::Data::new(http_metrics);
    let json_limit = http.json_limit_bytes;
    let body_timeout = web::Data::new(BodyTimeout(http.body_timeout));
    // Built once, here and for `chatlab openapi` alike; each worker serves
    // a copy.
    let built = openapi::document();
    let known_paths = web::Data::new(KnownPaths::from_document(&built));
    let doc = openapi::render(&built);
    let limits = listener::Limits {
        workers: http.workers,
        max_connections_per_worker: http.max_connections_per_worker,
        header_timeout: http.header_timeout,
        shutdown_timeout_secs: http.shutdown_timeout.as_secs(),
    };
    listener::serve("public", listener, limits, move || {
        // On each worker's thread, in its runtime: with
        // DB_POOL_LAYOUT=per_worker the worker takes its slice here.
        if let Some(slice) = state.store.db().adopt_slice() {
            tracing::debug!(slice, "this worker owns a slice of the pool");
        }
        App::new()
            .into_utoipa_app()
            .app_data(state.clone())
            .app_data(live.clone())
            .app_data(http_metrics.clone())
            .app_data(body_timeout.clone())
            .app_data(known_paths.clone())
            .app_data(rejections::json_config(json_limit))
            .app_data(rejections::path_config())
            .app_data(rejections::query_config())
            .configure(crate::routes::configure)
            .into_app()
            .configure(|cfg| {
                if web_client {
                    crate::routes::web_client::configure(cfg);
                }
            })
            .service(
                SwaggerUi::new("/docs/{_:.*}").external_url_unchecked("/openapi.json", doc.clone()),
            )
            .default_service(web::to(rejections::no_route))
            .wrap(from_fn(limits::head_as_get))
            .wrap(from_fn(limits::bound_head))
            // Outside `bound_head`: a request answered there has its body
            // kept too.
            .wrap(from_fn(limits::bound_body))
            .wrap(from_fn(metrics::record))
            .wrap(from_fn(trace_headers::add))
            // Inside the span: a preflight is a request like any other in
            // the log and the traces.
            .wrap(Condition::new(cross_origin, cors(&allowed_origins)))
            .wrap(TracingLogger::<RequestSpan>::new())
            .wrap(from_fn(limits::count_in_flight))
    })
    .map_err(|source| StartupError::Bind {
        addr: http.addr,
        source,
    })
}

/// Cross-origin access for the pages of `origins`: the methods and request
/// headers the API takes, the response headers a client reads (where a
/// write went, when to retry, what a write used, whether it was a replay),
/// preflights cached for ten minutes. No credentials: tokens travel in
/// `Authorization`, never in cookies. A request from another origin is
/// served without these headers, so its page cannot read the answer (and
/// a preflight from it fails); a same-origin request sends no `Origin` or
/// is not judged by it.
fn cors(origins: &AllowedOrigins) -> Cors {
    use crate::http::idempotency::{IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER};
    use crate::http::overrides::{
        INSERT_STRATEGY_HEADER, MESSAGE_FANOUT_HEADER, PUBLISH_MODE_HEADER,
    };
    // Sent by a client that picks its strategies, and answered by every
    // write with the ones it used.
    let choices = [
        INSERT_STRATEGY_HEADER,
        PUBLISH_MODE_HEADER,
        MESSAGE_FANOUT_HEADER,
    ]
    .map(header::HeaderName::from_static);
    let cors = Cors::default()
        .allowed_methods(["GET", "HEAD", "POST", "PUT", "DELETE"])
        .allowed_headers(
            [
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::HeaderName::from_static(IDEMPOTENCY_KEY_HEADER),
                header::HeaderName::from_static("last-event-id"),
                header::HeaderName::from_static("traceparent"),
                header::HeaderName::from_static("tracestate"),
            ]
            .into_iter()
            .chain(choices.clone()),
        )
        .expose_headers(
            [
                header::LOCATION,
                header::RETRY_AFTER,
                header::WWW_AUTHENTICATE,
                header::HeaderName::from_static(REPLAYED_HEADER),
                header::HeaderName::from_static("traceparent"),
            ]
            .into_iter()
            .chain(choices),
        )
        .max_age(600);
    origins
        .0
        .iter()
        .fold(cors, |cors, origin| cors.allowed_origin(origin))
}

/// The operator server: one worker, its own connections, so neither a
/// scrape nor an audit takes a public worker, and the public port answers
/// none of its paths. Its heads and bodies have the public listener's
/// deadlines. It stops when the public server stops (it handles no signals
/// itself).
fn ops_server(
    listener: TcpListener,
    http: &HttpSettings,
    state: web::Data<AppState>,
) -> Result<Server, StartupError> {
    let (addr, json_limit) = (http.ops_addr, http.json_limit_bytes);
    let body_timeout = web::Data::new(BodyTimeout(http.body_timeout));
    let limits = listener::Limits {
        workers: 1,
        // actix's default.
        max_connections_per_worker: 25_000,
        header_timeout: http.header_timeout,
        shutdown_timeout_secs: 5,
    };
    listener::serve("operator", listener, limits, move || {
        App::new()
            .app_data(state.clone())
            .app_data(body_timeout.clone())
            .app_data(rejections::json_config(json_limit))
            .app_data(rejections::path_config())
            .app_data(rejections::query_config())
            .configure(crate::routes::configure_ops)
            .default_service(web::to(rejections::no_route))
            .wrap(from_fn(limits::bound_head))
            .wrap(from_fn(limits::bound_body))
            .wrap(from_fn(limits::count_in_flight))
    })
    .map_err(|source| StartupError::Bind { addr, source })
}
