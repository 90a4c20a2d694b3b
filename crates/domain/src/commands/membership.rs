//! Changing who is in a chat: adding members, removing one (or leaving),
//! and handing the ownership over.
//!
//! The rules: the creator owns a chat until they hand it over; only the
//! owner adds or removes others; anyone may leave; the owner cannot leave
//! while they own it. Each change writes a `membership` message into the
//! chat's timeline (its sender is who made the change) and publishes an
//! event about it, whose subject is that message, so the audit matches the
//! event to a committed row like any other.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::commands::limits::Limits;
use crate::commands::now;
use crate::commands::validation::{Checker, ValidationErrors};
use crate::ids::{ChatId, MessageId, UserId};

/// Members added to a chat, as the client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMembers {
    /// The chat.
    pub chat_id: ChatId,
    /// Who asks: must be the owner.
    pub actor_id: UserId,
    /// Who to add.
    pub user_ids: Vec<UserId>,
}

/// A checked addition, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddMembers {
    /// The chat.
    pub chat_id: ChatId,
    /// The owner, who adds.
    pub actor_id: UserId,
    /// Who to add: distinct, in first-seen order, never empty.
    pub user_ids: Vec<UserId>,
    /// The `membership` message that records the change.
    pub message_id: MessageId,
    /// One timestamp for the member rows and the message.
    pub created_at: DateTime<Utc>,
}

impl AddMembers {
    /// At least one id, at most `limits.chat_max_members` after duplicates
    /// collapse.
    pub fn validate(input: NewMembers, limits: &Limits) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        let mut seen = HashSet::with_capacity(input.user_ids.len());
        let user_ids: Vec<UserId> = input
            .user_ids
            .iter()
            .copied()
            .filter(|id| seen.insert(*id))
            .collect();
        if user_ids.is_empty() {
            check.fail("user_ids", "must name at least one user");
        } else if user_ids.len() > limits.chat_max_members {
            check.fail(
                "user_ids",
                format!(
                    "at most {} users may be added at once, got {}",
                    limits.chat_max_members,
                    user_ids.len()
                ),
            );
        }
        check.finish()?;
        Ok(Self {
            chat_id: input.chat_id,
            actor_id: input.actor_id,
            user_ids,
            message_id: MessageId::generate(),
            created_at: now(),
        })
    }

    /// The membership message's text.
    pub fn message_body(&self) -> String {
        match self.user_ids.as_slice() {
            [one] => format!("added {one}"),
            many => format!("added {} members", many.len()),
        }
    }
}

/// One member leaving or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveMember {
    /// The chat.
    pub chat_id: ChatId,
    /// Who asks: the member themself, or the owner.
    pub actor_id: UserId,
    /// Who goes.
    pub user_id: UserId,
    /// The `membership` message that records the change.
    pub message_id: MessageId,
    /// When.
    pub created_at: DateTime<Utc>,
}

impl RemoveMember {
    /// `actor` removes `user` (themself: leaves).
    pub fn new(chat_id: ChatId, actor_id: UserId, user_id: UserId) -> Self {
        Self {
            chat_id,
            actor_id,
            user_id,
            message_id: MessageId::generate(),
            created_at: now(),
        }
    }

    /// Whether the member leaves of their own accord.
    pub fn is_leaving(&self) -> bool {
        self.actor_id == self.user_id
    }

    /// The membership message's text.
    pub fn message_body(&self) -> String {
        if self.is_leaving() {
            "left".to_owned()
        } else {
            format!("removed {}", self.user_id)
        }
    }
}

/// The owner hands the chat over to another member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferOwnership {
    /// The chat.
    pub chat_id: ChatId,
    /// The owner, who hands over.
    pub actor_id: UserId,
    /// The new owner: must be a member.
    pub owner_id: UserId,
    /// The `membership` message that records the change.
    pub message_id: MessageId,
    /// When.
    pub created_at: DateTime<Utc>,
}

impl TransferOwnership {
    /// `actor` makes `owner` the owner.
    pub fn new(chat_id: ChatId, actor_id: UserId, owner_id: UserId) -> Self {
        Self {
            chat_id,
            actor_id,
            owner_id,
            message_id: MessageId::generate(),
            created_at: now(),
        }
    }

    /// The membership message's text.
    pub fn message_body(&self) -> String {
        format!("made {} the owner", self.owner_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn user(n: u128) -> UserId {
        UserId::from_uuid(Uuid::from_u128(n))
    }

    fn chat() -> ChatId {
        ChatId::from_uuid(Uuid::from_u128(99))
    }

    #[test]
    fn additions_collapse_duplicates_and_need_one_to_limit() {
        let limits = Limits {
            chat_max_members: 2,
            ..Limits::default()
        };
        let add = |ids: Vec<UserId>| {
            AddMembers::validate(
                NewMembers {
                    chat_id: chat(),
                    actor_id: user(1),
                    user_ids: ids,
                },
                &limits,
            )
        };
        let ok = add(vec![user(2), user(3), user(2)]).unwrap();
        assert_eq!(ok.user_ids, vec![user(2), user(3)]);
        assert_eq!(ok.message_body(), "added 2 members");
        assert!(add(vec![]).is_err());
        assert!(add(vec![user(2), user(3), user(4)]).is_err());
    }

    #[test]
    fn leaving_is_removing_oneself() {
        let leave = RemoveMember::new(chat(), user(2), user(2));
        assert!(leave.is_leaving());
        assert_eq!(leave.message_body(), "left");
        let kick = RemoveMember::new(chat(), user(1), user(2));
        assert!(!kick.is_leaving());
        assert!(kick.message_body().starts_with("removed "));
    }
}
