//! Who opens a write's transaction, and whether it has one: decided here
//! once, for createChat and sendMessage alike ([`Transaction::of`]).
//!
//! A write's own statements may commit without the store's BEGIN when they
//! are one statement (autocommit) or one flight that carries its own BEGIN
//! and COMMIT, and nothing else must share their transaction. What must
//! share it ([`Shared`]): an idempotency key's claim, a step before COMMIT
//! that is not SQL (`in_tx_await`'s send, `in_tx_enqueue`'s hand-over), and
//! an outbox row the statements cannot carry. Statements sent one by one
//! always take the store's transaction.

use chatlab_domain::Sending;

/// What a write must keep in its transaction besides its own statements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shared {
    /// An idempotency key's claim, made before the statements.
    pub key: bool,
    /// A step between the statements and COMMIT that is not SQL.
    pub step_before_commit: bool,
    /// The event's outbox row as a statement of its own (sendMessage's
    /// guarded insert cannot carry it; createChat's statements can).
    pub outbox_statement: bool,
}

impl Shared {
    fn any(self) -> bool {
        self.key || self.step_before_commit || self.outbox_statement
    }
}

/// How a write's statements travel and who opens their transaction.
#[derive(Debug)]
pub(crate) enum Transaction {
    /// The store sends BEGIN, then the shared work and the statements sent
    /// this way (one by one, as one statement, or as one flight without
    /// BEGIN and COMMIT of its own), then COMMIT.
    OpenedByStore(Sending),
    /// The statements alone, with no BEGIN from the store.
    OnTheirOwn(OnTheirOwn),
}

/// A write whose statements need no BEGIN from the store; they carry the
/// event's outbox row when the mode writes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnTheirOwn {
    /// One statement: no transaction but its own (autocommit).
    OneStatement,
    /// One flight that carries its own BEGIN and COMMIT.
    OneFlight,
}

impl Transaction {
    /// The transaction of a write whose statements are sent `sending`,
    /// with `shared` work.
    pub(crate) fn of(sending: Sending, shared: Shared) -> Self {
        match (sending, shared.any()) {
            (Sending::OneByOne, _) | (_, true) => Self::OpenedByStore(sending),
            (Sending::OneStatement, false) => Self::OnTheirOwn(OnTheirOwn::OneStatement),
            (Sending::OneFlight, false) => Self::OnTheirOwn(OnTheirOwn::OneFlight),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(t: &Transaction) -> bool {
        matches!(t, Transaction::OpenedByStore(_))
    }

    #[test]
    fn one_by_one_is_always_the_store_s_and_sharing_makes_any_write_so() {
        let nothing = Shared::default();
        assert!(opened(&Transaction::of(Sending::OneByOne, nothing)));
        assert!(matches!(
            Transaction::of(Sending::OneStatement, nothing),
            Transaction::OnTheirOwn(OnTheirOwn::OneStatement)
        ));
        assert!(matches!(
            Transaction::of(Sending::OneFlight, nothing),
            Transaction::OnTheirOwn(OnTheirOwn::OneFlight)
        ));
        for shared in [
            Shared {
                key: true,
                ..nothing
            },
            Shared {
                step_before_commit: true,
                ..nothing
            },
            Shared {
                outbox_statement: true,
                ..nothing
            },
        ] {
            for sending in [Sending::OneByOne, Sending::OneStatement, Sending::OneFlight] {
                assert!(
                    opened(&Transaction::of(sending, shared)),
                    "{shared:?} {sending:?}"
                );
            }
        }
    }
}
