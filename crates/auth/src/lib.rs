//! chatlab's bearer tokens.
//!
//! A token is a JWT whose subject (`sub`) is the acting user's id; chatlab
//! also checks its issuer (`iss`), expiry (`exp`) and, when present, its
//! start (`nbf`), and accepts exactly one algorithm, the configured one
//! (HS256 with a shared secret by default; EdDSA or RS256 with a public
//! key). Verifying needs no database: the
//! signature is the proof, so checking who calls adds nothing to a write's
//! round trips.
//!
//! [`TokenKeys`] issues and verifies; [`TokenRejection`] says why a token
//! was refused, in words a client can act on. Reading the key files and
//! the settings that name them is the server's business (`chatlab-api`);
//! the load harness builds an HS256 [`TokenKeys`] from the secret it gives
//! the servers it spawns, and signs for the users it seeds.

mod claims;
mod keys;
mod rejection;

pub use claims::Claims;
pub use keys::{IssueError, IssuedToken, KeyError, KeyMaterial, MIN_SECRET_BYTES, TokenKeys};
pub use rejection::TokenRejection;
