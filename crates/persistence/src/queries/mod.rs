//! Hand-built statements that diesel's DSL cannot express, written as
//! `QueryFragment`s with a fixed SQL text and a static `QueryId`: diesel
//! then caches their prepared statement by type, exactly like its own
//! fixed-shape queries. (`diesel::sql_query` would not be cached: diesel
//! marks raw SQL unsafe to cache, since it cannot know the text is fixed.)

mod block_insert;
mod claim_idempotency_key;
mod create_chat_single;
mod insert_inbox;
mod insert_members_unnest;
mod insert_messages_unnest;
mod insert_outbox_row;
mod insert_talk_if_member;
mod read_marker_log;
mod read_state;
mod transaction_control;
mod viewer_is_member;

pub use block_insert::BlockInsert;
pub use claim_idempotency_key::ClaimIdempotencyKey;
pub use create_chat_single::{CreateChatSingle, CreateChatSingleWithOutbox, SingleRows};
pub use insert_inbox::{InsertImportedInbox, InsertInboxFromMembers, InsertInboxUnnest};
pub use insert_members_unnest::InsertMembersUnnest;
pub use insert_messages_unnest::InsertMessagesUnnest;
pub use insert_outbox_row::{InsertOutboxRow, RELAY_LOCK_CLASS, WRITER_LOCK_CLASS, lock_key};
pub use insert_talk_if_member::{InsertTalkIfMember, InsertTalkIfMemberLockingChat};
pub use read_marker_log::{AppendReadMarker, CompactReadMarkerLog, Compacted};
pub use read_state::{
    FLUSH_LOCK_CLASS, FlagInboxRead, FlushReadMarkers, MarkerColumns, MoveReadMarker, MyChatRow,
    MyChatsPage, ReadStateOf,
};
pub use transaction_control::{Begin, Commit, Rollback};
pub use viewer_is_member::ViewerIsMember;
