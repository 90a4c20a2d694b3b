//! The web client (`WEB_CLIENT=true`): the repository's `web/` page, built
//! into the binary so the server needs no folder beside it, served at
//! `/web/`. Same-origin with the API it calls, so it needs no CORS; it is
//! not part of the API's document.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION};
use actix_web::{HttpResponse, web};

/// The page.
const INDEX_HTML: &str = include_str!("../../../../web/index.html");
/// Its script.
const APP_JS: &str = include_str!("../../../../web/app.js");
/// Its style.
const APP_CSS: &str = include_str!("../../../../web/app.css");

/// Nothing from elsewhere: the page's own script and style, and requests
/// to its own origin or any other the operator allowed (CORS decides who
/// answers), WebSockets included.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self' http: https: ws: wss:; img-src 'self' data:; \
                      base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Registers `/web` (a redirect), `/web/`, `/web/app.js` and `/web/app.css`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/web",
        web::get().to(|| async {
            HttpResponse::PermanentRedirect()
                .insert_header((LOCATION, "/web/"))
                .finish()
        }),
    )
    .route(
        "/web/",
        web::get().to(|| serve("text/html; charset=utf-8", INDEX_HTML)),
    )
    .route(
        "/web/app.js",
        web::get().to(|| serve("text/javascript; charset=utf-8", APP_JS)),
    )
    .route(
        "/web/app.css",
        web::get().to(|| serve("text/css; charset=utf-8", APP_CSS)),
    );
}

async fn serve(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((CACHE_CONTROL, "no-cache"))
        .insert_header((CONTENT_SECURITY_POLICY, POLICY))
        .body(body)
}
