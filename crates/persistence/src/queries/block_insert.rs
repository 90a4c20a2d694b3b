//! A multi-row INSERT of a fixed row count, kept prepared.

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};

/// A multi-row `INSERT ... VALUES` built by diesel's DSL whose row count is
/// one of a few fixed block sizes ([`chatlab_domain::write_plan::block_sizes`]),
/// marked safe to cache.
///
/// diesel marks every multi-row INSERT of a `Vec` unsafe to cache: its
/// text changes with the row count, so one entry per count could grow the
/// cache without bound. A block's count is a power of two, so its text is
/// one of at most 15 per table, and diesel caches it by that text (this
/// type has no static `QueryId`, so the cache key is the SQL itself, and
/// two different texts never share a statement). The rows' Insertable
/// must write every column (`treat_none_as_default_value = false`), so the
/// text depends on the count alone, not on which values are NULL.
#[derive(Debug, Clone)]
pub struct BlockInsert<Q>(pub Q);

impl<Q> QueryId for BlockInsert<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: QueryFragment<Pg>> QueryFragment<Pg> for BlockInsert<Q> {
    fn walk_ast<'b>(&'b self, out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.0.walk_ast(out)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &Pg) -> QueryResult<bool> {
        Ok(true)
    }
}
