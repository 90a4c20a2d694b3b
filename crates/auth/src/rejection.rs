//! Why a bearer token was refused.

use jsonwebtoken::errors::ErrorKind;

/// Why a request's credentials were refused: each answers 401 with
/// `WWW-Authenticate: Bearer`, and the problem's detail names the reason
/// (never the token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenRejection {
    /// No `Authorization` header.
    #[error("this endpoint needs a bearer token (Authorization: Bearer <token>)")]
    Missing,
    /// An `Authorization` header that is not `Bearer <token>`.
    #[error("the Authorization header must be `Bearer <token>`")]
    NotBearer,
    /// Not a JWT: not three base64url parts, or not JSON inside.
    #[error("the bearer token is not a well-formed JWT")]
    Malformed,
    /// Signed with another algorithm than the server's (`alg: none`
    /// included).
    #[error("the token's algorithm is not the one this server accepts")]
    WrongAlgorithm,
    /// The signature does not verify with the server's key.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// Past its `exp`.
    #[error("the token has expired")]
    Expired,
    /// Before its `nbf` (not before), beyond the clock-skew leeway.
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    /// `iss` is missing or not the server's issuer.
    #[error("the token was not issued for this server (iss)")]
    WrongIssuer,
    /// A required claim (`sub`, `iss`, `exp`) is missing or of the wrong type.
    #[error("the token lacks a required claim (sub, iss, exp)")]
    MissingClaim,
    /// `sub` is not a user id.
    #[error("the token's subject (sub) is not a user id")]
    BadSubject,
    /// `sub` names no user of this server (checked where a token holds
    /// something for long: a live stream).
    #[error("the token's user (sub) does not exist on this server")]
    UnknownUser,
    /// A live ticket (`?ticket=`) that is not one this server issued and
    /// nobody has used: unknown, used already, expired, or its user gone.
    #[error(
        "the live ticket is unknown, used already or expired; ask for a new one (POST /v1/live/tickets)"
    )]
    BadTicket,
    /// A live ticket and a bearer token of different users on one request.
    #[error("the live ticket belongs to another user than the bearer token")]
    TicketOfAnotherUser,
}

impl TokenRejection {
    /// The RFC 6750 error code for `WWW-Authenticate`: `None` when no
    /// credentials came at all (the RFC says to add no code then).
    pub fn error_code(self) -> Option<&'static str> {
        match self {
            Self::Missing => None,
            Self::NotBearer => Some("invalid_request"),
            _ => Some("invalid_token"),
        }
    }
}

impl From<&jsonwebtoken::errors::Error> for TokenRejection {
    fn from(e: &jsonwebtoken::errors::Error) -> Self {
        match e.kind() {
            ErrorKind::ExpiredSignature => Self::Expired,
            ErrorKind::ImmatureSignature => Self::NotYetValid,
            ErrorKind::InvalidSignature => Self::BadSignature,
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Self::WrongAlgorithm,
            ErrorKind::InvalidIssuer => Self::WrongIssuer,
            ErrorKind::MissingRequiredClaim(_) => Self::MissingClaim,
            ErrorKind::InvalidSubject => Self::BadSubject,
            _ => Self::Malformed,
        }
    }
}
