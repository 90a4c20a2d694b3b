//! What a chatlab token says.

use serde::{Deserialize, Serialize};

/// The claims chatlab reads. An identity provider's tokens may carry
/// more; these must be there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The acting user's id (a UUID, as `POST /v1/users` returned it).
    pub sub: String,
    /// Who issued the token; must equal `CHATLAB_JWT_ISSUER`.
    pub iss: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Expires at, seconds since the Unix epoch.
    pub exp: u64,
}
