use actix_web::{HttpResponse, get, post, web};

use chatlab_domain::{NewUser, UserId};

use crate::dto::{BulkUsersRequest, BulkUsersResponse, CreateUserRequest, UserResponse};
use crate::overrides::INSERT_STRATEGY_HEADER;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// Creates a user.
#[utoipa::path(
    tag = "users",
    request_body = CreateUserRequest,
    responses(
        (status = 201, description = "Created", body = UserResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid name", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/users")]
pub async fn create_user(
    state: web::Data<AppState>,
    body: web::Json<CreateUserRequest>,
) -> Result<HttpResponse, ApiError> {
    let user = NewUser::validate(&body.name)?;
    let created = state.store.create_user(user).await?;
    Ok(HttpResponse::Created().json(UserResponse::from(created)))
}

/// Creates many users in one transaction through multi-row INSERTs: fast
/// seeding for load tests. All or none are written.
#[utoipa::path(
    tag = "users",
    request_body = BulkUsersRequest,
    responses(
        (status = 201, description = "Created", body = BulkUsersResponse,
            headers(("x-chatlab-insert-strategy" = String, description = "Always `batch`"))),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid names or count", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/users/bulk")]
pub async fn create_users_bulk(
    state: web::Data<AppState>,
    body: web::Json<BulkUsersRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let users = NewUser::validate_bulk(
        body.names.as_deref(),
        body.count,
        body.name_prefix.as_deref(),
        &state.limits,
    )?;
    let ids = state.store.create_users(users).await?;
    Ok(HttpResponse::Created()
        .insert_header((INSERT_STRATEGY_HEADER, "batch"))
        .json(BulkUsersResponse {
            count: ids.len(),
            ids: ids.into_iter().map(Into::into).collect(),
        }))
}

/// Reads a user.
#[utoipa::path(
    tag = "users",
    params(("id" = uuid::Uuid, Path, description = "User id")),
    responses(
        (status = 200, description = "The user", body = UserResponse),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/users/{id}")]
pub async fn get_user(
    state: web::Data<AppState>,
    id: web::Path<uuid::Uuid>,
) -> Result<HttpResponse, ApiError> {
    let user = state.store.get_user(UserId::from_uuid(*id)).await?;
    Ok(HttpResponse::Ok().json(UserResponse::from(user)))
}
