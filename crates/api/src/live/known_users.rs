//! Whether a token's user exists, before it may hold a stream: a token
//! proves who signed it, not that its user is one of this server's, and a
//! stream holds a connection for hours. One read per user, remembered
//! briefly so that a client reconnecting in a loop costs no more reads.
//!
//! The reads take turns, [`LOOKUPS`] at a time, and a caller that waited
//! looks in what is remembered again before reading: a flood of streams
//! opened at once (with one user's token, or many users') would otherwise
//! send as many reads to the pool together, and every other request would
//! wait behind them for a connection (`make fault-slow-clients` saw a
//! normal POST /v1/users go unanswered for over a second).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chatlab_domain::{RepositoryError, UserId};
use chatlab_persistence::PgStore;
use uuid::Uuid;

/// How long a user found is remembered (users are never deleted).
const FOUND_FOR: Duration = Duration::from_secs(60);

/// How long a user not found is remembered: short, so that a user created
/// meanwhile (by an identity provider's provisioning) gets in soon.
const MISSING_FOR: Duration = Duration::from_secs(5);

/// Users remembered at most; past it, the expired are forgotten, and if
/// none is, everything.
const REMEMBERED: usize = 65_536;

/// Reads of the database in flight at once: one pooled connection at most
/// for stream admissions, whatever the flood.
pub const LOOKUPS: usize = 1;

/// The users looked up lately, and whether each exists.
#[derive(Debug)]
pub struct KnownUsers {
    seen: Mutex<HashMap<Uuid, (bool, Instant)>>,
    lookups: tokio::sync::Semaphore,
}

impl Default for KnownUsers {
    fn default() -> Self {
        Self {
            seen: Mutex::default(),
            lookups: tokio::sync::Semaphore::new(LOOKUPS),
        }
    }
}

impl KnownUsers {
    /// Whether `user` exists: remembered, else read from `store` (and
    /// remembered). A database that cannot answer is the store's error.
    pub async fn exists(&self, store: &PgStore, user: UserId) -> Result<bool, RepositoryError> {
        let id = user.as_uuid();
        if let Some(known) = self.remembered(id, Instant::now()) {
            return Ok(known);
        }
        // Never closed, so the permit always comes.
        let _turn = self.lookups.acquire().await;
        // Whoever read while this caller waited may have read this user.
        if let Some(known) = self.remembered(id, Instant::now()) {
            return Ok(known);
        }
        let exists = match store.get_user(user).await {
            Ok(_) => true,
            Err(RepositoryError::NotFound { .. }) => false,
            Err(e) => return Err(e),
        };
        self.remember(id, exists, Instant::now());
        Ok(exists)
    }

    fn remembered(&self, user: Uuid, now: Instant) -> Option<bool> {
        let seen = self.lock();
        let (exists, until) = seen.get(&user)?;
        (now < *until).then_some(*exists)
    }

    fn remember(&self, user: Uuid, exists: bool, now: Instant) {
        let mut seen = self.lock();
        if seen.len() >= REMEMBERED {
            seen.retain(|_, (_, until)| now < *until);
            if seen.len() >= REMEMBERED {
                seen.clear();
            }
        }
        let ttl = if exists { FOUND_FOR } else { MISSING_FOR };
        seen.insert(user, (exists, now + ttl));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (bool, Instant)>> {
        // A panic while it was held leaves a plain map: use it.
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_remembered_for_a_while_and_a_missing_one_more_briefly() {
        let known = KnownUsers::default();
        let (found, missing) = (Uuid::now_v7(), Uuid::now_v7());
        let now = Instant::now();
        known.remember(found, true, now);
        known.remember(missing, false, now);
        assert_eq!(known.remembered(found, now), Some(true));
        assert_eq!(known.remembered(missing, now), Some(false));
        let later = now + MISSING_FOR;
        assert_eq!(known.remembered(found, later), Some(true));
        assert_eq!(known.remembered(missing, later), None, "asked again");
        assert_eq!(known.remembered(found, now + FOUND_FOR), None);
    }

    #[test]
    fn it_remembers_a_bounded_number_of_users() {
        let known = KnownUsers::default();
        let now = Instant::now();
        for _ in 0..REMEMBERED + 10 {
            known.remember(Uuid::now_v7(), false, now);
        }
        assert!(known.lock().len() <= REMEMBERED);
    }
}
