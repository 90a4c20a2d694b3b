use actix_web::{HttpResponse, get, post, web};
use chrono::{DateTime, Utc};

use chatlab_auth::IssueError;

use chatlab_domain::{NewUser, UserId};

use crate::auth::Caller;
use crate::dto::{
    BulkUsersRequest, BulkUsersResponse, CreateUserRequest, CreatedUserResponse, TokenRequest,
    TokenResponse, UserResponse,
};
use crate::http::overrides::INSERT_STRATEGY_HEADER;
use crate::problem::{ApiError, Problem};
use crate::routes::responses::{NotJson, Unauthenticated};
use crate::state::AppState;

/// Creates a user, and answers a bearer token acting as them (when the
/// server holds a signing key).
#[utoipa::path(
    tag = "users",
    request_body = CreateUserRequest,
    responses(
        (status = 201, description = "Created", body = CreatedUserResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        NotJson,
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
    let token = match state.auth.issue(created.id) {
        Ok(t) => Some(t),
        Err(IssueError::NoSigningKey) => None,
        Err(e) => return Err(ApiError::Internal(Box::new(e))),
    };
    Ok(HttpResponse::Created().json(CreatedUserResponse {
        id: created.id.into(),
        name: created.name,
        created_at: created.created_at,
        token_expires_at: token.as_ref().and_then(|t| expiry(t.expires_at)),
        token: token.map(|t| t.token),
    }))
}

/// Creates many users in one transaction through multi-row INSERTs: fast
/// seeding for load tests. All or none are written. Served on the operator
/// listener (`OPS_ADDR`) only: seeding is the operator's, not every
/// caller's.
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

/// Reads a user (any signed-in user may).
#[utoipa::path(
    tag = "users",
    params(("id" = uuid::Uuid, Path, description = "User id")),
    responses(
        (status = 200, description = "The user", body = UserResponse),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 404, description = "No such user", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/users/{id}")]
pub async fn get_user(
    _caller: Caller,
    state: web::Data<AppState>,
    id: web::Path<uuid::Uuid>,
) -> Result<HttpResponse, ApiError> {
    let user = state.store.get_user(UserId::from_uuid(*id)).await?;
    Ok(HttpResponse::Ok().json(UserResponse::from(user)))
}

/// Development mode only (`CHATLAB_DEV_TOKENS=true`): a bearer token for
/// any existing user, no questions asked. Real deployments bring tokens
/// from their identity provider; with the setting off this path does not
/// exist (404).
#[utoipa::path(
    tag = "users",
    request_body = TokenRequest,
    responses(
        (status = 201, description = "Issued", body = TokenResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        NotJson,
        (status = 404, description = "No such user, or development tokens are off", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/tokens")]
pub async fn issue_token(
    state: web::Data<AppState>,
    body: web::Json<TokenRequest>,
) -> Result<HttpResponse, ApiError> {
    if !state.dev_tokens {
        return Err(ApiError::NoRoute(
            "POST /v1/tokens answers only in development mode (CHATLAB_DEV_TOKENS=true)".to_owned(),
        ));
    }
    let user = state
        .store
        .get_user(UserId::from_uuid(body.user_id))
        .await?;
    let issued = state.auth.issue(user.id).map_err(|e| match e {
        IssueError::NoSigningKey => ApiError::NoRoute(
            "this server holds no signing key (CHATLAB_JWT_PRIVATE_KEY_FILE)".to_owned(),
        ),
        e => ApiError::Internal(Box::new(e)),
    })?;
    tracing::warn!(user_id = %user.id, "development token issued (CHATLAB_DEV_TOKENS=true)");
    let expires_at = expiry(issued.expires_at)
        .ok_or_else(|| ApiError::Internal("token expiry out of range".into()))?;
    Ok(HttpResponse::Created().json(TokenResponse {
        token: issued.token,
        token_type: "Bearer".to_owned(),
        expires_at,
    }))
}

/// Seconds since the epoch as a timestamp.
fn expiry(secs: u64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(i64::try_from(secs).ok()?, 0)
}
