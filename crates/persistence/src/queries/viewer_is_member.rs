//! The membership test that every read of a chat carries.

use diesel::QueryResult;
use diesel::expression::{
    AppearsOnTable, Expression, SelectableExpression, ValidGrouping, is_aggregate,
};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Bool, Uuid as SqlUuid};
use uuid::Uuid;

/// `EXISTS (SELECT 1 FROM chat_members viewer WHERE viewer.chat_id = $1
/// AND viewer.user_id = $2)`: a boolean expression for a `WHERE` or a
/// `SELECT`, one primary-key probe.
///
/// Uncorrelated and aliased, so it may filter a query of `chat_members`
/// itself (diesel's DSL refuses a subquery on the table it filters).
#[derive(Debug, Clone, Copy, QueryId)]
pub struct ViewerIsMember {
    /// The chat.
    pub chat_id: Uuid,
    /// Who reads.
    pub viewer: Uuid,
}

impl Expression for ViewerIsMember {
    type SqlType = Bool;
}

impl<QS> AppearsOnTable<QS> for ViewerIsMember {}

impl<QS> SelectableExpression<QS> for ViewerIsMember {}

impl<GroupBy> ValidGrouping<GroupBy> for ViewerIsMember {
    type IsAggregate = is_aggregate::Never;
}

impl QueryFragment<Pg> for ViewerIsMember {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("EXISTS (SELECT 1 FROM chat_members viewer WHERE viewer.chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND viewer.user_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.viewer)?;
        out.push_sql(")");
        Ok(())
    }
}
