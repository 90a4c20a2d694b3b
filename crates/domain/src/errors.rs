//! Errors of the domain's ports.
//!
//! Policy: validation failures are [`crate::ValidationErrors`] and are raised
//! before any I/O. Everything a repository can answer is a
//! [`RepositoryError`]: the variants a client can act on carry what it needs
//! (which users are unknown, which resource is missing); infrastructure
//! failures are either `Unavailable` (retry later: pool exhausted, database
//! down) or `Internal` (a bug or an unexpected database answer), and keep
//! their source for the log. The HTTP layer maps each variant to one status.

use std::error::Error as StdError;
use std::fmt;

use uuid::Uuid;

use crate::ids::{ChatId, UserId};

/// A kind of stored resource, for "not found" answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    /// A user.
    User,
    /// A chat.
    Chat,
    /// A message.
    Message,
    /// A chat's member.
    Member,
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::User => "user",
            Self::Chat => "chat",
            Self::Message => "message",
            Self::Member => "member",
        })
    }
}

/// Why storage could not serve the request right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailableReason {
    /// No pooled connection became free within the acquire timeout.
    PoolTimeout,
    /// A connection could not be opened, or broke.
    Connection,
    /// The database cancelled the statement (statement or lock timeout).
    Timeout,
    /// The transaction lost a serialization or deadlock race; retrying helps.
    Contention,
    /// The event broker did not acknowledge in time (`in_tx_await`): the
    /// transaction was rolled back.
    EventBroker,
    /// The same bounded operation (the event audit) is already running;
    /// one at a time keeps its memory bounded.
    AlreadyRunning,
    /// A transaction pooler between the server and PostgreSQL moved the
    /// connection to a backend that does not have its prepared statement
    /// (SQLSTATE 26000), or another client's: the settings do not fit the
    /// pooler.
    Pooler,
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PoolTimeout => "no database connection became free in time",
            Self::Connection => "the database could not be reached",
            Self::Timeout => "the database cancelled a statement that ran too long",
            Self::Contention => "the transaction conflicted with another one",
            Self::EventBroker => "the event broker did not acknowledge; nothing was written",
            Self::AlreadyRunning => "the same operation is already running",
            Self::Pooler => {
                "a transaction pooler in front of the database moved this connection to a \
                 server that lacks its prepared statement; the server's database settings do \
                 not fit the pooler (docs/operations.md, \"PgBouncer\")"
            }
        })
    }
}

/// What a repository answers when it cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    /// The resource does not exist.
    #[error("{entity} {id} not found")]
    NotFound {
        /// Its kind.
        entity: Entity,
        /// Its id.
        id: Uuid,
    },
    /// Some user ids named in the request do not exist; nothing was written.
    #[error("unknown users: {}", list_ids(.0))]
    UnknownUsers(Vec<UserId>),
    /// A user named in the request (an imported message's sender) is not a
    /// member of the chat. The caller's own non-membership is never this:
    /// for a non-member the chat does not exist ([`RepositoryError::NotFound`]).
    #[error("user {user_id} is not a member of chat {chat_id}")]
    NotAMember {
        /// The chat.
        chat_id: ChatId,
        /// The would-be sender.
        user_id: UserId,
    },
    /// The caller is a member of the chat but not its owner, and only the
    /// owner may do this (imports).
    #[error("only the owner of chat {chat_id} may do this; user {user_id} is a member")]
    NotTheOwner {
        /// The chat.
        chat_id: ChatId,
        /// The caller.
        user_id: UserId,
    },
    /// Users named to be added are members already; nothing was written.
    #[error("already members: {}", list_ids(.0))]
    AlreadyMembers(Vec<UserId>),
    /// The owner asked to leave while owning the chat.
    #[error("the owner of chat {0} cannot leave before handing the ownership over")]
    OwnerCannotLeave(ChatId),
    /// The `Idempotency-Key` was used before, by the same user, for another
    /// request (another operation, path or body); nothing was written.
    #[error("the idempotency key was used for another request")]
    IdempotencyKeyReused,
    /// A request with the same `Idempotency-Key` is still being written,
    /// and this one waited for it longer than the lock timeout.
    #[error("a request with the same idempotency key is still in progress")]
    IdempotencyKeyInFlight,
    /// The write collides with an existing row.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Storage cannot serve now; the client may retry.
    #[error("storage unavailable: {reason}")]
    Unavailable {
        /// What ran out or broke.
        reason: UnavailableReason,
        /// The underlying error, for the log.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// Anything else: a bug or an unexpected database answer.
    #[error("internal storage error")]
    Internal(#[source] Box<dyn StdError + Send + Sync>),
}

fn list_ids(ids: &[UserId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
