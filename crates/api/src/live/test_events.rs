//! Events for the live modules' unit tests.

use chatlab_domain::{ChatId, Event, EventBody, MessageId, PublishMode, SendMessage, UserId};
use uuid::Uuid;

/// A `message.sent` of `chat` by a user of its own.
pub(crate) fn message_in(chat: Uuid) -> Event {
    Event::message_sent(
        &SendMessage {
            id: MessageId::generate(),
            chat_id: ChatId::from_uuid(chat),
            sender_id: UserId::from_uuid(Uuid::now_v7()),
            body: "hi".into(),
            created_at: chrono::Utc::now(),
        },
        PublishMode::Outbox,
        EventBody::Carried,
    )
}

/// A `chat.created` of `chat` whose members (creator first) are `members`.
pub(crate) fn created(chat: Uuid, members: &[Uuid]) -> Event {
    Event {
        event_id: Uuid::now_v7(),
        occurred_at: chrono::Utc::now(),
        schema_version: chatlab_domain::events::EVENT_SCHEMA_VERSION,
        publish_mode: PublishMode::Outbox.to_string(),
        payload: chatlab_domain::EventPayload::ChatCreated {
            chat_id: chat,
            name: "new".into(),
            creator_id: members.first().copied().unwrap_or_default(),
            member_count: members.len(),
            system_message_id: Uuid::now_v7(),
            member_ids: members.to_vec(),
        },
        trace_parent: None,
    }
}
