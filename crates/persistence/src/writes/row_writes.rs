//! One path for every multi-row write: a set of rows of one table
//! ([`RowSet`]: member rows, inbox rows, an import chunk's messages) sent
//! the way a strategy's plan says ([`RowsBy`], see
//! [`chatlab_domain::WritePlan`]).
//!
//! Each table says how its rows look in each shape; [`write_rows`] is the
//! one place that decides which shape goes, so a new way of sending rows is
//! one arm here and one method per table (which the trait asks of each).

use std::ops::Range;

use diesel::QueryResult;
use diesel::pg::PgConnection;

use chatlab_domain::RowsBy;
use chatlab_domain::write_plan::{block_sizes, rows_per_statement};

use crate::session::{DbSession, Executable};

/// What a write sent: INSERT (or COPY) statements and rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteCount {
    pub statements: u64,
    pub rows: u64,
}

impl WriteCount {
    /// Both counts summed.
    pub(crate) fn add(self, other: WriteCount) -> WriteCount {
        WriteCount {
            statements: self.statements + other.statements,
            rows: self.rows + other.rows,
        }
    }
}

/// Rows of one table, in every shape a strategy may send them.
pub(crate) trait RowSet: Sync {
    /// The table, as a COPY's span names it.
    const TABLE: &'static str;
    /// Columns per row: a VALUES statement carries at most
    /// `65,535 / COLUMNS` rows.
    const COLUMNS: usize;

    /// How many rows.
    fn len(&self) -> usize;
    /// The single-row INSERT of row `i`.
    fn insert_one(&self, i: usize) -> Executable;
    /// One multi-row `INSERT ... VALUES` of the rows in `range`.
    fn insert_values(&self, range: Range<usize>) -> Executable;
    /// [`RowSet::insert_values`] for a block of [`block_sizes`], kept
    /// prepared ([`crate::queries::BlockInsert`]).
    fn insert_block(&self, range: Range<usize>) -> Executable;
    /// Every row in one `INSERT ... SELECT FROM unnest(...)`.
    fn insert_unnest(&self) -> Executable;
    /// Every row by one binary COPY on the blocking driver's connection.
    fn copy(&self, c: &mut PgConnection) -> QueryResult<usize>;
}

/// Writes `rows` by `by` (the caller holds the transaction); nothing is
/// sent for no rows.
pub(crate) async fn write_rows<R: RowSet>(
    s: &mut DbSession,
    rows: &R,
    by: RowsBy,
) -> QueryResult<WriteCount> {
    let n = rows.len();
    let mut count = WriteCount::default();
    if n == 0 {
        return Ok(count);
    }
    let mut written = Vec::new();
    match by {
        // A fixed shape: diesel prepares it once per connection, so each
        // row costs a Bind/Execute round trip, not a parse and plan.
        RowsBy::EachRow => {
            for i in 0..n {
                written.push(s.run(rows.insert_one(i)).await?);
            }
        }
        // Chunked under PostgreSQL's 65,535 bind parameters.
        RowsBy::Values => {
            let per = rows_per_statement(R::COLUMNS);
            for start in (0..n).step_by(per) {
                written.push(s.run(rows.insert_values(start..n.min(start + per))).await?);
            }
        }
        // pgjdbc's rewritten batch: power-of-two blocks, each a prepared
        // statement, all of them in one flight where the driver pipelines.
        RowsBy::Blocks => {
            let mut start = 0;
            let mut blocks = Vec::new();
            for size in block_sizes(n, R::COLUMNS) {
                blocks.push(rows.insert_block(start..start + size));
                start += size;
            }
            written = s.pipelined(blocks).await?.rows;
        }
        RowsBy::Unnest => written.push(s.run(rows.insert_unnest()).await?),
        RowsBy::Copy => written.push(s.copy_in(R::TABLE, |c| rows.copy(c)).await?),
    }
    // The session counted a round trip per statement; a shape's others are
    // counted here.
    s.travelled(written.len() as u64 * extra_round_trips(by, s.on_async_driver()));
    count.statements = written.len() as u64;
    count.rows = written.iter().map(|&w| w as u64).sum();
    Ok(count)
}

/// Round trips a statement of shape `by` costs beyond its own, as a hop
/// counts them on the wire (the repository test `wire`). A VALUES
/// statement's text changes with its row count, so no driver keeps it
/// prepared, and diesel-async prepares it (Parse, Describe) and waits for
/// the answer before it binds and executes: one round trip more; libpq
/// (the blocking driver) sends parse, bind and execute in one flight.
/// Blocks are prepared once per connection and size, as every fixed shape
/// is, and their one flight is counted where it is sent. A
/// COPY waits for the server's go-ahead before its data goes, then for the
/// row count.
fn extra_round_trips(by: RowsBy, on_async_driver: bool) -> u64 {
    match by {
        RowsBy::Values if on_async_driver => 1,
        RowsBy::Copy => 1,
        RowsBy::Values | RowsBy::Blocks | RowsBy::EachRow | RowsBy::Unnest => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let a = WriteCount {
            statements: 2,
            rows: 2,
        };
        let b = WriteCount {
            statements: 1,
            rows: 50,
        };
        assert_eq!(
            a.add(b),
            WriteCount {
                statements: 3,
                rows: 52
            }
        );
    }
}
