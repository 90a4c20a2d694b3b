//! Bearer tokens for the users the harness seeds.
//!
//! chatlab wants `Authorization: Bearer <JWT>` on every chat endpoint: an
//! HS256 token whose subject is the acting user, signed with the servers'
//! `CHATLAB_JWT_SECRET`. The harness holds that secret (it makes one up for
//! the servers it spawns; it is told the secret of servers someone else
//! runs), signs one token per seeded user before a run, and sends the right
//! user's token with each request, so signing costs the measured path
//! nothing.

use std::time::Duration;

use chatlab_auth::{KeyMaterial, MIN_SECRET_BYTES, TokenKeys};
use chatlab_domain::UserId;
use reqwest::header::HeaderValue;
use uuid::Uuid;

use crate::error::LoadError;

/// How long the harness's tokens live: longer than any run.
pub const TOKEN_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The issuer chatlab expects unless `CHATLAB_JWT_ISSUER` says otherwise.
pub const DEFAULT_ISSUER: &str = "chatlab";

/// Random bytes in a generated secret (hex-encoded, so the secret the
/// servers get is twice as many characters).
const GENERATED_SECRET_BYTES: usize = 32;

/// Signs HS256 tokens with the servers' secret, for their issuer.
pub struct Signer {
    keys: TokenKeys,
    secret: String,
    issuer: String,
}

impl std::fmt::Debug for Signer {
    // Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for servers whose `CHATLAB_JWT_SECRET` is `secret` (its
    /// bytes as written, at least 32) and whose issuer is `issuer`.
    pub fn new(secret: &str, issuer: &str) -> Result<Self, LoadError> {
        let keys = TokenKeys::new(
            KeyMaterial::Secret(secret.as_bytes().to_vec()),
            issuer,
            TOKEN_TTL,
        )
        .map_err(|e| LoadError::Auth(format!("the JWT secret: {e}")))?;
        Ok(Self {
            keys,
            secret: secret.to_owned(),
            issuer: issuer.to_owned(),
        })
    }

    /// A signer with a secret made up now: 64 hex characters from 32
    /// random bytes of the operating system, for the servers the harness
    /// spawns.
    pub fn generate(issuer: &str) -> Result<Self, LoadError> {
        let mut bytes = [0u8; GENERATED_SECRET_BYTES];
        getrandom::fill(&mut bytes)
            .map_err(|e| LoadError::Auth(format!("no random bytes for a JWT secret: {e}")))?;
        let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        debug_assert!(secret.len() >= MIN_SECRET_BYTES);
        Self::new(&secret, issuer)
    }

    /// The secret, as the servers must get it in `CHATLAB_JWT_SECRET`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The issuer, as the servers must get it in `CHATLAB_JWT_ISSUER`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A token for `user`, valid for [`TOKEN_TTL`] from now.
    pub fn token(&self, user: Uuid) -> Result<String, LoadError> {
        self.keys
            .issue(UserId::from_uuid(user))
            .map(|t| t.token)
            .map_err(|e| LoadError::Auth(format!("signing a token for {user}: {e}")))
    }

    /// `Bearer <token>` for `user`, as an `Authorization` header value
    /// (marked sensitive, so it is never logged).
    pub fn bearer(&self, user: Uuid) -> Result<HeaderValue, LoadError> {
        let token = self.token(user)?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| LoadError::Auth(format!("the token of {user} as a header: {e}")))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The user a bearer header speaks for, checked as chatlab checks it.
    pub(crate) fn subject(secret: &str, issuer: &str, header: &HeaderValue) -> Uuid {
        let keys = TokenKeys::new(
            KeyMaterial::Secret(secret.as_bytes().to_vec()),
            issuer,
            Duration::from_secs(60),
        )
        .unwrap();
        let token = header
            .to_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .expect("a bearer token");
        keys.verify(token).expect("a valid token").as_uuid()
    }

    #[test]
    fn generated_secrets_are_64_hex_characters_and_differ() {
        let a = Signer::generate(DEFAULT_ISSUER).unwrap();
        let b = Signer::generate(DEFAULT_ISSUER).unwrap();
        assert_eq!(a.secret().len(), 64);
        assert!(a.secret().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.secret(), b.secret());
        assert!(!format!("{a:?}").contains(a.secret()));
    }

    #[test]
    fn tokens_verify_with_chatlab_auth_for_their_user() {
        let signer = Signer::generate("lab").unwrap();
        let user = Uuid::now_v7();
        let header = signer.bearer(user).unwrap();
        assert!(header.is_sensitive());
        assert_eq!(subject(signer.secret(), "lab", &header), user);
    }

    #[test]
    fn tokens_name_the_issuer_and_outlive_a_run() {
        let signer = Signer::new(&"s".repeat(40), DEFAULT_ISSUER).unwrap();
        let token = signer.token(Uuid::now_v7()).unwrap();
        // Another issuer refuses it; the right one accepts it.
        let other = TokenKeys::new(
            KeyMaterial::Secret("s".repeat(40).into_bytes()),
            "someone-else",
            TOKEN_TTL,
        )
        .unwrap();
        assert!(other.verify(&token).is_err());
        let ours = TokenKeys::new(
            KeyMaterial::Secret("s".repeat(40).into_bytes()),
            DEFAULT_ISSUER,
            TOKEN_TTL,
        )
        .unwrap();
        assert!(ours.verify(&token).is_ok());
        let issued = signer
            .keys
            .issue(UserId::from_uuid(Uuid::now_v7()))
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(issued.expires_at >= now + 23 * 60 * 60);
    }

    #[test]
    fn tokens_built_by_hand_as_the_scripts_do_verify() {
        // HS256 over base64url (unpadded) JSON, as scripts/dashboard-check.py
        // and loadtest/k6/lib/chatlab.js build them (expiring in 2100).
        let token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
            eyJzdWIiOiIwMTkwYjJhNC02YTFlLTdjM2QtOWYwMC0wMTIzNDU2Nzg5YWIiLCJpc3MiOiJjaGF0bGFiIiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjQxMDI0NDQ4MDB9.\
            0Uhb4xr-V1iygWc9L_FpsrR7xDok9tJB7I97V2RDwvI";
        let header = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        let secret = "0123456789abcdef0123456789abcdef-handmade";
        assert_eq!(
            subject(secret, DEFAULT_ISSUER, &header),
            "0190b2a4-6a1e-7c3d-9f00-0123456789ab"
                .parse::<Uuid>()
                .unwrap()
        );
    }

    #[test]
    fn short_secrets_are_refused() {
        let err = Signer::new("too short", DEFAULT_ISSUER).unwrap_err();
        assert!(err.to_string().contains("at least 32"), "{err}");
    }
}
