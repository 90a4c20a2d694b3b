//! The OpenAPI 3.1 document. Paths are collected from the route
//! registrations ([`crate::routes::configure`]); this module adds the
//! document's header and shared schemas. `make openapi` writes it to
//! `openapi/openapi.json`, and a test fails when that file is stale.

use actix_web::App;
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;

use crate::problem::{FieldProblem, Problem};

/// Header, tags and shared schemas of the document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "chatlab",
        description = "A chat-room backend built as a laboratory for the write path: \
            createChat switches between per-row, batched, unnest and one-statement writes, \
            and every pool and write metric is exposed for measurement.",
        license(name = "Apache-2.0")
    ),
    components(schemas(Problem, FieldProblem)),
    tags(
        (name = "users", description = "Users, one at a time or in bulk"),
        (name = "chats", description = "Chat rooms and their members"),
        (name = "messages", description = "Messages in a chat"),
        (name = "imports", description = "Bulk jobs: many members or messages into one chat, in chunked transactions"),
        (name = "operations", description = "Health, readiness and metrics"),
    )
)]
pub struct ApiDoc;

/// The full document, exactly as the server serves it at `/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_app, doc) = App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(crate::routes::configure)
        .split_for_parts();
    doc
}

/// The document as pretty JSON with a trailing newline, as committed.
pub fn document_json() -> Result<String, serde_json::Error> {
    document().to_pretty_json().map(|mut s| {
        s.push('\n');
        s
    })
}
