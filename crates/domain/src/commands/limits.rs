//! Limits on what one request may write. They keep every write bounded in
//! size, time and memory; the HTTP layer reads them from the environment.

/// Longest user name, in characters.
pub const USER_NAME_MAX_CHARS: usize = 100;
/// Longest chat name, in characters.
pub const CHAT_NAME_MAX_CHARS: usize = 200;
/// Longest message body, in characters (not bytes).
pub const MESSAGE_BODY_MAX_CHARS: usize = 4000;
/// Body of the system message written with every new chat.
pub const ROOM_CREATED_BODY: &str = "room created";
/// Largest page a list endpoint returns.
pub const PAGE_LIMIT_MAX: u32 = 100;
/// Page size when the client names none.
pub const PAGE_LIMIT_DEFAULT: u32 = 50;

/// HikariCP's formula, `cores × 2 + effective spindles`, with one spindle:
/// enough connections to keep every core busy while others wait on I/O.
/// chatlab's default pool size, and the size its charts mark.
pub fn hikari_pool_size(cores: usize) -> u32 {
    u32::try_from(cores.saturating_mul(2).saturating_add(1)).unwrap_or(u32::MAX)
}

/// Limits that deployments may tune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most members one chat may be created with, creator included
    /// (`CHAT_MAX_MEMBERS`, default 10,000).
    pub chat_max_members: usize,
    /// Most users one bulk request may create (`USERS_BULK_MAX`, default 100,000).
    pub users_bulk_max: usize,
    /// Most rows one import job may write (`CHAT_IMPORT_MAX_ROWS`, default
    /// 100,000).
    pub import_max_rows: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            chat_max_members: 10_000,
            users_bulk_max: 100_000,
            import_max_rows: 100_000,
        }
    }
}
