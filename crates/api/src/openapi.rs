//! The OpenAPI 3.1 document. Paths are collected from the route
//! registrations ([`crate::routes::configure`]); this module adds the
//! document's header and shared schemas. `make openapi` writes it to
//! `openapi/openapi.json`, and a test fails when that file is stale.

use actix_web::App;
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;

use crate::http::idempotency::IdempotencyKeyValue;
use crate::http::overrides::{FanoutName, PublishModeName, StrategyName};
use crate::problem::{FieldProblem, Problem};

/// Header, tags and shared schemas of the document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "chatlab",
        description = "A chat-room backend built as a laboratory for the write path: \
            createChat switches between per-row, batched, unnest and one-statement writes, \
            and every pool and write metric is exposed for measurement.\n\n\
            Changes within v1 (2026-12): every chat endpoint needs a bearer token, and \
            the acting user is its subject, so `creator_id` and `sender_id` left the \
            request bodies (a body naming them is a 400: the one breaking change); \
            the operator endpoints (`/metrics`, `/audit`, `POST /v1/users/bulk`) moved \
            to the operator listener; added: member addition and removal, the \
            ownership hand-over, `owner_id` on a chat, `membership` messages, \
            `Idempotency-Key` on writes, and (2026-12-03) read markers, the caller's \
            chats with unread counts, and the `X-Chatlab-Message-Fanout` override.",
        license(name = "Apache-2.0")
    ),
    components(schemas(
        Problem,
        FieldProblem,
        StrategyName,
        PublishModeName,
        FanoutName,
        IdempotencyKeyValue
    )),
    tags(
        (name = "users", description = "Users, one at a time or in bulk"),
        (name = "chats", description = "Chat rooms and their members"),
        (name = "messages", description = "Messages in a chat"),
        (name = "read state", description = "Read markers, and the caller's chats with their unread counts"),
        (name = "imports", description = "Bulk jobs: many members or messages into one chat, in chunked transactions"),
        (name = "live", description = "Live delivery: the caller's chats' events as Server-Sent Events"),
        (name = "operations", description = "Health, readiness and metrics"),
    )
)]
pub struct ApiDoc;

/// The full document as utoipa's structs (the router's paths and
/// methods are read from it). Serve and commit [`document_value`], which
/// also fixes what utoipa writes wrong.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_app, doc) = App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(crate::routes::configure)
        .split_for_parts();
    let mut doc = doc;
    optional_headers_are_not_null(&mut doc);
    link_created_resources(&mut doc);
    import_ids_are_unique(&mut doc);
    doc
}

/// A member import refuses a user listed twice (422: the repeat would fail
/// its chunk on the primary key half-way through the job), so the spec
/// says `uniqueItems`, as it cannot through utoipa for a `Vec`. (createChat
/// and the member addition collapse repeats instead, and say so.)
fn import_ids_are_unique(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::Schema;

    let field = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("ImportMembersRequest"))
        .and_then(|s| match s {
            RefOr::T(Schema::Object(o)) => o.properties.get_mut("user_ids"),
            _ => None,
        });
    if let Some(RefOr::T(Schema::Array(array))) = field {
        array.unique_items = true;
    }
}

/// The document exactly as the server serves it at `/openapi.json` and
/// as committed. utoipa 5.5 writes a link's fields in snake case
/// (`operation_id`); OpenAPI's are camel case (`operationId`), and a
/// client that reads links (schemathesis's stateful phase) refuses the
/// others. So they are renamed here.
pub fn document_value() -> serde_json::Value {
    render(&document())
}

/// [`document_value`] of a document already built (startup builds one and
/// reads the router's paths from it too).
pub fn render(doc: &utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut value = serde_json::to_value(doc).unwrap_or_default();
    let operations = value
        .get_mut("paths")
        .and_then(serde_json::Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(serde_json::Value::as_object_mut)
        .flat_map(|item| item.values_mut());
    for operation in operations {
        let links = operation
            .get_mut("responses")
            .and_then(serde_json::Value::as_object_mut)
            .into_iter()
            .flat_map(|responses| responses.values_mut())
            .filter_map(|r| {
                r.get_mut("links")
                    .and_then(serde_json::Value::as_object_mut)
            })
            .flat_map(|links| links.values_mut())
            .filter_map(serde_json::Value::as_object_mut);
        for link in links {
            for (snake, camel) in [
                ("operation_id", "operationId"),
                ("operation_ref", "operationRef"),
                ("request_body", "requestBody"),
            ] {
                if let Some(v) = link.remove(snake) {
                    link.insert(camel.to_owned(), v);
                }
            }
        }
    }
    value
}

/// OpenAPI links from what a POST creates to the operations that take its
/// id: a client (or a fuzzer's stateful phase) learns that createChat's
/// `id` is the `{id}` of the chat's endpoints, and createUser's the user's.
/// utoipa's path macro has no syntax for links, so they are added here.
fn link_created_resources(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::link::LinkBuilder;

    let created = [
        (
            "/v1/chats",
            &[
                "get_chat",
                "list_members",
                "list_messages",
                "send_message",
                "add_members",
                "remove_member",
                "transfer_ownership",
                "import_members",
                "import_messages",
            ][..],
        ),
        ("/v1/users", &["get_user"][..]),
    ];
    for (path, targets) in created {
        let Some(RefOr::T(response)) = doc
            .paths
            .paths
            .get_mut(path)
            .and_then(|item| item.post.as_mut())
            .and_then(|op| op.responses.responses.get_mut("201"))
        else {
            continue;
        };
        for target in targets {
            let link = LinkBuilder::new()
                .operation_id(*target)
                .parameter("id", "$response.body#/id")
                .description(format!(
                    "The created resource's `id` is the `{{id}}` of {target}"
                ))
                .build();
            response.links.insert((*target).to_owned(), RefOr::T(link));
        }
    }
}

/// utoipa writes an optional parameter (`Option<T>`) as "T or null". A
/// header is either absent or a string, never null, and a fuzzer reading
/// "or null" sends the text `null`; so an optional header's schema is
/// `T` alone (it stays `required: false`).
fn optional_headers_are_not_null(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::{RefOr, Type};

    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ];
        for op in operations.into_iter().flatten() {
            for param in op.parameters.iter_mut().flatten() {
                if !matches!(param.parameter_in, ParameterIn::Header) {
                    continue;
                }
                let Some(RefOr::T(Schema::OneOf(one_of))) = &param.schema else {
                    continue;
                };
                let not_null: Vec<_> = one_of
                    .items
                    .iter()
                    .filter(|s| {
                        !matches!(s, RefOr::T(Schema::Object(o))
                            if o.schema_type == utoipa::openapi::schema::SchemaType::Type(Type::Null))
                    })
                    .cloned()
                    .collect();
                if let [only] = not_null.as_slice() {
                    param.schema = Some(only.clone());
                }
            }
        }
    }
}

/// The document as pretty JSON with a trailing newline, as committed.
pub fn document_json() -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&document_value()).map(|mut s| {
        s.push('\n');
        s
    })
}

#[cfg(test)]
mod tests {
    use chatlab_domain::Limits;
    use chatlab_domain::import_jobs::MAX_PARALLELISM;
    use chatlab_domain::limits::{
        CHAT_NAME_MAX_CHARS, MESSAGE_BODY_MAX_CHARS, PAGE_LIMIT_MAX, USER_NAME_MAX_CHARS,
    };
    use serde_json::Value;

    fn schema(doc: &Value, name: &str, field: &str) -> Value {
        doc["components"]["schemas"][name]["properties"][field].clone()
    }

    /// The limits the spec states are the ones the server enforces (the
    /// defaults of the configurable ones).
    #[test]
    fn the_document_states_the_servers_limits() {
        let doc = serde_json::to_value(super::document()).unwrap_or_default();
        let limits = Limits::default();
        let cases = [
            (
                "CreateUserRequest",
                "name",
                "maxLength",
                USER_NAME_MAX_CHARS,
            ),
            (
                "CreateChatRequest",
                "name",
                "maxLength",
                CHAT_NAME_MAX_CHARS,
            ),
            (
                "CreateChatRequest",
                "member_ids",
                "maxItems",
                limits.chat_max_members,
            ),
            (
                "SendMessageRequest",
                "body",
                "maxLength",
                MESSAGE_BODY_MAX_CHARS,
            ),
            (
                "ImportedMessageRequest",
                "body",
                "maxLength",
                MESSAGE_BODY_MAX_CHARS,
            ),
            (
                "ImportMembersRequest",
                "user_ids",
                "maxItems",
                limits.import_max_rows,
            ),
            (
                "ImportMessagesRequest",
                "messages",
                "maxItems",
                limits.import_max_rows,
            ),
            (
                "ImportMembersRequest",
                "parallelism",
                "maximum",
                MAX_PARALLELISM,
            ),
        ];
        for (name, field, keyword, expected) in cases {
            let stated = schema(&doc, name, field)[keyword].as_u64();
            assert_eq!(stated, Some(expected as u64), "{name}.{field} {keyword}");
        }
        let limit = &doc["paths"]["/v1/chats/{id}/messages"]["get"]["parameters"];
        let limit = limit
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
            .map(|p| p["schema"]["maximum"].as_u64());
        assert_eq!(limit, Some(Some(u64::from(PAGE_LIMIT_MAX))));
    }
}
