//! Events: what a write does with its event by publish mode, around COMMIT
//! ([`publishing`]), the outbox relay, the receipt ledger, and what the
//! event audit reads from the database.

pub mod audit;
pub mod outbox_relay;
pub(crate) mod publishing;
pub mod receipt_ledger;
