//! The ports: what the API needs from storage. `persistence` implements them
//! on PostgreSQL; the transaction boundary of each write is inside the
//! implementation, so one call is one atomic write.

use async_trait::async_trait;

use crate::commands::{CreateChat, NewUser, SendMessage};
use crate::entities::{Chat, ChatCreated, Member, Message, User};
use crate::errors::RepositoryError;
use crate::events::{Event, Receipt};
use crate::ids::{ChatId, MessageId, UserId};
use crate::import_jobs::{ImportMembers, ImportMessages, ImportReport};
use crate::paging::{Page, PageRequest};
use crate::publish_mode::PublishMode;
use crate::strategy::InsertStrategy;

/// Users.
#[async_trait]
pub trait UserRepository: Send + Sync {
    /// Writes one user.
    async fn create_user(&self, user: NewUser) -> Result<User, RepositoryError>;

    /// Writes many users in one transaction through multi-row INSERTs (the
    /// batch path, for seeding load tests). All or none are written.
    async fn create_users(&self, users: Vec<NewUser>) -> Result<Vec<UserId>, RepositoryError>;

    /// Reads one user; `NotFound` if absent.
    async fn get_user(&self, id: UserId) -> Result<User, RepositoryError>;
}

/// Bulk import jobs (see [`crate::imports`]).
#[async_trait]
pub trait ImportRepository: Send + Sync {
    /// Adds the users to the chat, chunk by chunk, with `strategy` inside
    /// each chunk. `Err` means nothing was written (no such chat, or the
    /// database could not be reached before the first chunk); a failure
    /// after that is reported in the report, with the committed chunks.
    async fn import_members(
        &self,
        job: ImportMembers,
        strategy: InsertStrategy,
    ) -> Result<ImportReport, RepositoryError>;

    /// Imports the messages, chunk by chunk, with `strategy` inside each
    /// chunk. Every sender must be a member (checked before the first
    /// chunk, `NotAMember` naming one that is not). Imported messages
    /// publish no events: an import is a data migration, not chat traffic.
    async fn import_messages(
        &self,
        job: ImportMessages,
        strategy: InsertStrategy,
    ) -> Result<ImportReport, RepositoryError>;
}

/// Chats and their members.
#[async_trait]
pub trait ChatRepository: Send + Sync {
    /// createChat: the chat row, its member rows (by `strategy`) and the
    /// "room created" system message, in one transaction, with its
    /// `chat.created` event published by `mode`. Unknown member ids answer
    /// `UnknownUsers` listing every one of them, and nothing is written.
    async fn create_chat(
        &self,
        command: CreateChat,
        strategy: InsertStrategy,
        mode: PublishMode,
    ) -> Result<ChatCreated, RepositoryError>;

    /// Reads a chat with its member count; `NotFound` if absent.
    async fn get_chat(&self, id: ChatId) -> Result<Chat, RepositoryError>;

    /// Members ordered by user id, after the cursor; `NotFound` if the chat
    /// does not exist.
    async fn list_members(
        &self,
        chat_id: ChatId,
        page: PageRequest<UserId>,
    ) -> Result<Page<Member, UserId>, RepositoryError>;
}

/// Messages.
#[async_trait]
pub trait MessageRepository: Send + Sync {
    /// Writes a talk message with its `message.sent` event published by
    /// `mode`. `NotFound` if the chat does not exist, `NotAMember` if the
    /// sender is not one of its members.
    async fn send_message(
        &self,
        command: SendMessage,
        mode: PublishMode,
    ) -> Result<Message, RepositoryError>;

    /// Messages newest first, strictly older than the cursor; `NotFound` if
    /// the chat does not exist.
    async fn list_messages(
        &self,
        chat_id: ChatId,
        page: PageRequest<MessageId>,
    ) -> Result<Page<Message, MessageId>, RepositoryError>;
}

/// Readiness of the storage behind the ports.
#[async_trait]
pub trait HealthCheck: Send + Sync {
    /// Succeeds when a pooled connection answers a query.
    async fn ping(&self) -> Result<(), RepositoryError>;
}

/// Why an event was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event not published: {0}")]
pub struct PublishError(pub String);

/// The event broker. Implementations bound every wait by their send
/// timeout, so no mode can hold a database connection forever.
#[async_trait]
pub trait EventPublisher: Send + Sync {
    /// Produces the event and waits for the broker's acknowledgement;
    /// answers where the broker says it stored the event. `mode` labels the
    /// metrics.
    async fn publish(&self, event: &Event, mode: PublishMode) -> Result<Receipt, PublishError>;

    /// Hands the event to the producer's queue and returns at once; the
    /// delivery outcome is only counted. Fails only when the queue refuses
    /// the record (full, or the producer is closed).
    fn enqueue(&self, event: &Event, mode: PublishMode) -> Result<(), PublishError>;
}
