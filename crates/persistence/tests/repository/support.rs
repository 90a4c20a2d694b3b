//! Shared helpers: a store on a fresh database, seeded users, row readers.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use prometheus_client::registry::Registry;
use uuid::Uuid;

use chatlab_domain::{ChatCreated, InsertStrategy, Keyed, Message, RepositoryError};
use chatlab_domain::{
    ChatId, CreateChat, Event, EventPublisher, Limits, NewChat, NewMessage, NewUser, PublishError,
    PublishMode, Receipt, SendMessage, UserId,
};
use chatlab_persistence::schema::{chat_members, chats, messages};
use chatlab_persistence::{PgStore, SendRoute};
use chatlab_testdb::TestDb;

pub struct Fixture {
    pub db: TestDb,
    pub store: PgStore,
    pub registry: Registry,
}

/// The publisher of stores whose tests write with `PublishMode::Off`: these
/// tests are about rows, and a call to it means a mode leaked in.
pub struct NoBroker;

#[async_trait::async_trait]
impl EventPublisher for NoBroker {
    async fn publish(&self, _: &Event, mode: PublishMode) -> Result<Receipt, PublishError> {
        Err(PublishError(format!(
            "no broker in this test (mode {mode})"
        )))
    }

    fn enqueue(&self, _: &Event, mode: PublishMode) -> Result<(), PublishError> {
        Err(PublishError(format!(
            "no broker in this test (mode {mode})"
        )))
    }
}

pub async fn fixture() -> Fixture {
    let db = TestDb::new().await;
    let mut registry = Registry::default();
    let store = PgStore::new(&db.config(), &mut registry, std::sync::Arc::new(NoBroker));
    Fixture {
        db,
        store,
        registry,
    }
}

pub async fn seed_users(store: &PgStore, count: usize) -> Vec<UserId> {
    let users = NewUser::validate_bulk(
        None,
        Some(count),
        Some("u"),
        &Limits {
            users_bulk_max: count,
            ..Limits::default()
        },
    )
    .unwrap();
    store.create_users(users).await.unwrap()
}

/// A checked talk message.
pub fn message(chat_id: ChatId, sender_id: UserId, body: &str) -> SendMessage {
    SendMessage::validate(NewMessage {
        chat_id,
        sender_id,
        body: body.to_owned(),
    })
    .unwrap()
}

pub fn command(name: &str, creator: UserId, members: &[UserId]) -> CreateChat {
    CreateChat::validate(
        NewChat {
            name: name.to_owned(),
            creator_id: creator,
            member_ids: members.to_vec(),
        },
        &Limits {
            chat_max_members: 100_000,
            ..Limits::default()
        },
    )
    .unwrap()
}

/// What a createChat wrote, with its own ids left out so that chats written
/// by different strategies compare equal.
#[derive(Debug, PartialEq, Eq)]
pub struct WrittenChat {
    pub name: String,
    pub creator_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub members: Vec<(Uuid, DateTime<Utc>)>,
    pub messages: Vec<(Option<Uuid>, String, String, DateTime<Utc>)>,
}

pub async fn read_chat(conn: &mut AsyncPgConnection, chat_id: Uuid) -> WrittenChat {
    let (name, creator_id, created_at): (String, Uuid, DateTime<Utc>) = chats::table
        .find(chat_id)
        .select((chats::name, chats::creator_id, chats::created_at))
        .first(conn)
        .await
        .unwrap();
    let members = chat_members::table
        .filter(chat_members::chat_id.eq(chat_id))
        .select((chat_members::user_id, chat_members::joined_at))
        .order(chat_members::user_id)
        .load(conn)
        .await
        .unwrap();
    let messages = messages::table
        .filter(messages::chat_id.eq(chat_id))
        .select((
            messages::sender_id,
            messages::kind,
            messages::body,
            messages::created_at,
        ))
        .order(messages::id)
        .load(conn)
        .await
        .unwrap();
    WrittenChat {
        name,
        creator_id,
        created_at,
        members,
        messages,
    }
}

pub async fn row_counts(conn: &mut AsyncPgConnection) -> (i64, i64, i64) {
    let c = chats::table.count().get_result(conn).await.unwrap();
    let m = chat_members::table.count().get_result(conn).await.unwrap();
    let s = messages::table.count().get_result(conn).await.unwrap();
    (c, m, s)
}

/// createChat and sendMessage as most tests call them: no idempotency key,
/// the message alone; a replay is no answer here.
pub(crate) trait Writes {
    async fn create_chat(
        &self,
        command: CreateChat,
        strategy: InsertStrategy,
        mode: PublishMode,
    ) -> Result<ChatCreated, RepositoryError>;

    async fn send_message(
        &self,
        command: SendMessage,
        mode: PublishMode,
    ) -> Result<Message, RepositoryError>;
}

impl Writes for PgStore {
    async fn create_chat(
        &self,
        command: CreateChat,
        strategy: InsertStrategy,
        mode: PublishMode,
    ) -> Result<ChatCreated, RepositoryError> {
        let created = ChatCreated::of(&command);
        match self
            .create_chat_keyed(command, strategy, mode, None)
            .await?
        {
            Keyed::Fresh(()) => Ok(created),
            Keyed::Replayed(_) => panic!("a write without a key was answered as a replay"),
        }
    }

    async fn send_message(
        &self,
        command: SendMessage,
        mode: PublishMode,
    ) -> Result<Message, RepositoryError> {
        let message = Message::sent(&command);
        match self
            .send_message_routed(command, SendRoute::plain(mode), None)
            .await?
        {
            Keyed::Fresh(()) => Ok(message),
            Keyed::Replayed(_) => panic!("a write without a key was answered as a replay"),
        }
    }
}
