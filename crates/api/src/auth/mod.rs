//! Who is calling: bearer tokens verified on every `/v1/chats` request
//! (and user reads), with no database lookup.
//!
//! The keys come from the settings ([`keys::from_settings`]); handlers take
//! a [`Caller`], the token's subject, as their first argument, so a request
//! without a valid token is refused before its body is read.

mod caller;
pub mod keys;
pub mod live_ticket;

pub use caller::Caller;
pub use live_ticket::StreamCaller;
