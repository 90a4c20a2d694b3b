//! chatlab's domain: what a chat room is, what may be written, and the ports
//! (traits) where a layer takes more than one implementation (see
//! [`ports`] for the rule).
//!
//! This crate does no I/O and depends on no database, HTTP or Kafka crate;
//! `persistence` and `api` depend on it, never the other way round.

pub mod commands;
pub mod entities;
pub mod errors;
pub mod events;
pub mod idempotency;
pub mod ids;
pub mod paging;
pub mod ports;
pub mod read_state;
pub mod strategy;

// The module paths the other crates name, kept stable.
pub use commands::{import_jobs, limits, membership, validation};
pub use events::{audit, publish_mode};
pub use read_state::{fanout, read_marker};
pub use strategy::write_plan;

pub use commands::{CreateChat, NewChat, NewMessage, NewUser, SendMessage};
pub use entities::{Chat, ChatCreated, Member, Message, MessageKind, User};
pub use errors::{Entity, RepositoryError, UnavailableReason};
pub use events::{AckedEvent, Event, EventBody, EventPayload, Receipt};
pub use fanout::{MessageFanout, UnknownFanout};
pub use idempotency::{IdempotencyKey, InvalidIdempotencyKey, KeyClaim, Keyed, StoredResponse};
pub use ids::{ChatId, MessageId, UserId};
pub use import_jobs::{
    ChunkFailure, ChunkRange, Chunking, ImportMembers, ImportMessages, ImportReport,
    ImportedMessage, NewImportedMessage,
};
pub use limits::Limits;
pub use membership::{AddMembers, NewMembers, RemoveMember, TransferOwnership};
pub use paging::{Page, PageRequest};
pub use ports::{EventPublisher, PublishError};
pub use publish_mode::{PublishMode, UnknownPublishMode};
pub use read_marker::{ReadMarkerMode, UnknownReadMarkerMode};
pub use read_state::{ChatSummary, MarkRead, ReadState};
pub use strategy::{InsertStrategy, UnknownStrategy};
pub use validation::{FieldError, ValidationErrors};
pub use write_plan::{Recipients, RowsBy, Sending, WritePlan};
