//! What live streams may take of an instance: a stream holds its
//! connection for as long as its client listens, so streams get a budget
//! of their own, per user and for the instance, below the connections the
//! workers take, and can never starve the API.

/// The most streams the hub admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamBudget {
    /// Per user (`LIVE_MAX_STREAMS_PER_USER`): a person has a few devices.
    pub per_user: usize,
    /// For the instance, all users together (`LIVE_MAX_STREAMS`).
    pub total: usize,
}

impl Default for StreamBudget {
    /// No limit (the hub's unit tests).
    fn default() -> Self {
        Self {
            per_user: usize::MAX,
            total: usize::MAX,
        }
    }
}

/// Why a stream was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its user holds as many streams as one may.
    #[error(
        "this user holds {limit} live streams on this server already, as many as one may \
         (LIVE_MAX_STREAMS_PER_USER); close one, or retry after Retry-After"
    )]
    User {
        /// The per-user limit.
        limit: usize,
    },
    /// The instance holds as many streams as it takes.
    #[error(
        "this server holds {limit} live streams already, as many as it takes \
         (LIVE_MAX_STREAMS); retry after Retry-After"
    )]
    Instance {
        /// The instance's limit.
        limit: usize,
    },
}

impl Refusal {
    /// Its label on `chatlab_live_refused_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::User { .. } => "user",
            Self::Instance { .. } => "instance",
        }
    }
}

impl StreamBudget {
    /// Whether one more stream fits beside `of_user` streams of its user
    /// and `open` in all.
    pub fn admits(&self, of_user: usize, open: usize) -> Result<(), Refusal> {
        if open >= self.total {
            return Err(Refusal::Instance { limit: self.total });
        }
        if of_user >= self.per_user {
            return Err(Refusal::User {
                limit: self.per_user,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_refuses_the_stream_past_it() {
        let budget = StreamBudget {
            per_user: 2,
            total: 3,
        };
        assert_eq!(budget.admits(1, 2), Ok(()));
        assert_eq!(budget.admits(2, 2), Err(Refusal::User { limit: 2 }));
        assert_eq!(budget.admits(0, 3), Err(Refusal::Instance { limit: 3 }));
        assert_eq!(StreamBudget::default().admits(1 << 20, 1 << 30), Ok(()));
    }
}
