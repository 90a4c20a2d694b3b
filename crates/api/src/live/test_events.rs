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
