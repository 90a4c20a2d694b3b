//! Idempotent writes: a client names a write with an `Idempotency-Key`, and
//! the same key from the same user answers the first response again instead
//! of writing twice.
//!
//! The write's response is known before it runs (every id and timestamp is
//! made by the application), so the key's row carries the response from the
//! start and is written in the write's own transaction: a crash keeps both
//! or neither. Only successful writes keep their key: a write that fails
//! rolls its key back, and a retry runs afresh.

use std::fmt;

use crate::ids::UserId;

/// Longest key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// How long a key is remembered by default: 24 hours.
pub const DEFAULT_KEY_RETENTION_SECS: u64 = 24 * 60 * 60;

/// A client's idempotency key: 1 to 255 visible ASCII characters (a UUID is
/// the usual choice).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks a key as sent.
    pub fn parse(raw: &str) -> Result<Self, InvalidIdempotencyKey> {
        if raw.is_empty() || raw.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(InvalidIdempotencyKey::Length);
        }
        if !raw.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(InvalidIdempotencyKey::Characters);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The key as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of part `n` of a write that commits in several
    /// transactions (an import's chunks): the space in it keeps it apart
    /// from every key a client can send.
    pub fn part(&self, n: usize) -> Self {
        Self(format!("{} chunk {n}", self.0))
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why an `Idempotency-Key` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidIdempotencyKey {
    /// Empty or longer than [`MAX_IDEMPOTENCY_KEY_LEN`].
    #[error("Idempotency-Key must be 1 to 255 characters")]
    Length,
    /// Not visible ASCII.
    #[error("Idempotency-Key must be visible ASCII characters (no spaces or control characters)")]
    Characters,
}

/// A response as stored with its key and replayed to a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// Its HTTP status (a 2xx).
    pub status: u16,
    /// Its body, byte for byte.
    pub body: String,
}

/// A keyed write's claim: who, which key, which request, and the response
/// the write answers when it commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    /// The caller: keys are per user.
    pub user_id: UserId,
    /// The key.
    pub key: IdempotencyKey,
    /// A digest of the request (operation, path and body): the same key
    /// with another request is refused.
    pub fingerprint: Vec<u8>,
    /// The response this write answers.
    pub response: StoredResponse,
}

/// What a write sent with a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keyed<T> {
    /// The write ran (with or without a key).
    Fresh(T),
    /// The key was used before for the same request: nothing was written or
    /// published; this is the first response.
    Replayed(StoredResponse),
}

impl KeyClaim {
    /// The claim of part `n` of a multi-transaction write: same user and
    /// fingerprint, the part's key, and `response` as its stored answer.
    pub fn part(&self, n: usize, response: StoredResponse) -> Self {
        Self {
            user_id: self.user_id,
            key: self.key.part(n),
            fingerprint: self.fingerprint.clone(),
            response,
        }
    }
}

impl<T> Keyed<T> {
    /// The fresh outcome, if the write ran.
    pub fn fresh(self) -> Option<T> {
        match self {
            Self::Fresh(t) => Some(t),
            Self::Replayed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(IdempotencyKey::parse("0190c0de-7f00-7000-8000-000000000001").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_IDEMPOTENCY_KEY_LEN)).is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_IDEMPOTENCY_KEY_LEN + 1)).is_err());
        assert!(IdempotencyKey::parse("a b").is_err());
        assert!(IdempotencyKey::parse("a\u{7f}").is_err());
        assert!(IdempotencyKey::parse("clé").is_err());
    }

    #[test]
    fn a_part_key_is_none_a_client_can_send() {
        let key = IdempotencyKey::parse(&"k".repeat(MAX_IDEMPOTENCY_KEY_LEN)).unwrap();
        let part = key.part(7);
        assert!(IdempotencyKey::parse(part.as_str()).is_err());
        assert_ne!(part, key.part(8));
    }
}
