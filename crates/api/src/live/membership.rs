//! Which chats a user receives across a run of events whose start state is
//! not known, only the state read from the database somewhere near its
//! end: a catch-up's range, or the events fanned out while a new
//! connection read its chats.
//!
//! The first membership change of a chat in the run says where the user
//! stood before it (an addition: not in the chat; a removal: in it), so it
//! wins over what the database said; chats the run does not change are as
//! the database said.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use chatlab_domain::{Event, EventPayload};

/// `Some(true)` if the event adds `user` to its chat (a new chat's member,
/// a user added), `Some(false)` if it removes them.
pub fn change_of(user: Uuid, event: &Event) -> Option<bool> {
    match event.payload {
        EventPayload::MemberRemoved { user_id, .. } if user_id == user => Some(false),
        _ => event.joining().contains(&user).then_some(true),
    }
}

/// The chats a user receives, walked event by event through a run.
#[derive(Debug)]
pub struct Membership {
    chats: HashSet<Uuid>,
}

impl Membership {
    /// Where the user stood before the run: `chats_now` (read from the
    /// database), corrected by the first change of each chat in the run
    /// (`changes`, in order, as `(chat, joined)`).
    pub fn before(
        chats_now: impl IntoIterator<Item = Uuid>,
        changes: impl IntoIterator<Item = (Uuid, bool)>,
    ) -> Self {
        let mut first: HashMap<Uuid, bool> = HashMap::new();
        for (chat, joined) in changes {
            first.entry(chat).or_insert(joined);
        }
        let mut chats: HashSet<Uuid> = chats_now
            .into_iter()
            .filter(|c| first.get(c) != Some(&true))
            .collect();
        chats.extend(first.iter().filter(|(_, j)| !**j).map(|(c, _)| *c));
        Self { chats }
    }

    /// Walks one event of `chat` that changes the user's membership as
    /// `change` says; whether the user receives it. An addition is
    /// received, and so is a removal, the last event of its chat.
    pub fn step(&mut self, chat: Uuid, change: Option<bool>) -> bool {
        if change == Some(true) {
            self.chats.insert(chat);
        }
        let receives = self.chats.contains(&chat);
        if change == Some(false) {
            self.chats.remove(&chat);
        }
        receives
    }

    /// The chats the user receives after the events walked.
    pub fn into_chats(self) -> HashSet<Uuid> {
        self.chats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_change_in_the_run_says_where_the_user_stood() {
        let (kept, left, joined, rejoined) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        // The database already shows the addition to `joined`, and not yet
        // the removal from `left`; `rejoined` was left and joined again.
        let now = [kept, left, joined, rejoined];
        let changes = [
            (left, false),
            (joined, true),
            (rejoined, false),
            (rejoined, true),
        ];
        let mut walk = Membership::before(now, changes);
        assert!(walk.step(kept, None));
        assert!(walk.step(left, None));
        assert!(walk.step(left, Some(false)), "the removal is received");
        assert!(!walk.step(left, None));
        assert!(!walk.step(joined, None), "before the addition");
        assert!(walk.step(joined, Some(true)));
        assert!(walk.step(rejoined, Some(false)));
        assert!(!walk.step(rejoined, None));
        assert!(walk.step(rejoined, Some(true)));
        let after = walk.into_chats();
        assert_eq!(after, [kept, joined, rejoined].into_iter().collect());
    }
}
