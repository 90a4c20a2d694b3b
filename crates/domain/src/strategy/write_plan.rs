//! What each insert strategy sends, described once: the persistence layer
//! follows a strategy's [`WritePlan`] for every multi-row write
//! (createChat's member rows, added members, an import chunk's messages, a
//! message's inbox rows), so a strategy is one entry here and one way of
//! sending rows there, not an arm in every write.

use crate::strategy::InsertStrategy;

/// PostgreSQL's limit on bind parameters in one statement (a 16-bit count
/// in the wire protocol's Bind message).
pub const MAX_BIND_PARAMS: usize = 65_535;

/// How the rows the application holds travel to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowsBy {
    /// One single-row INSERT per row: a fixed shape, so one cached prepared
    /// statement bound and executed once per row.
    EachRow,
    /// Multi-row `INSERT ... VALUES (..), (..)`, chunked under
    /// [`MAX_BIND_PARAMS`]; its text changes with the row count, so each
    /// is parsed and planned afresh.
    Values,
    /// Multi-row `INSERT ... VALUES` in blocks whose sizes are powers of
    /// two ([`block_sizes`]), so each block size is one cached prepared
    /// statement; the blocks of one write are sent in one flight where the
    /// driver pipelines.
    Blocks,
    /// One `INSERT ... SELECT FROM unnest(...)`: one array parameter per
    /// column for any row count, one cached statement.
    Unnest,
    /// One binary `COPY ... FROM STDIN`: no parameters and no plan; only
    /// the blocking driver can send it.
    Copy,
}

/// How the statements of one write reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sending {
    /// One at a time, each answer awaited: a round trip per statement, in
    /// a transaction of its own.
    OneByOne,
    /// createChat as one statement (data-modifying CTEs): no BEGIN or
    /// COMMIT where nothing else must share its transaction.
    OneStatement,
    /// Every statement sent before the first answer: one flight on a
    /// driver that pipelines (BEGIN and COMMIT in it where nothing else
    /// must share the transaction), one by one on one that does not.
    OneFlight,
}

/// Where a message's recipients, and so its inbox rows, come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// Read by the application (one round trip) and sent back as rows
    /// [`RowsBy`] the plan's way.
    Fetched,
    /// Selected by the server in the INSERT itself (`INSERT ... SELECT
    /// FROM chat_members`): the ids never travel.
    OnServer,
}

/// A strategy's plan: how its rows travel, how its statements are sent,
/// and where its inbox rows' recipients come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritePlan {
    /// How rows the application holds travel.
    pub rows: RowsBy,
    /// How the statements of one write are sent.
    pub sending: Sending,
    /// Where inbox rows' recipients come from.
    pub recipients: Recipients,
}

impl InsertStrategy {
    /// The strategy's plan. Writes that are rows alone (added members, an
    /// import chunk) have nothing to send in one statement or one flight,
    /// so `single` and `pipeline` send them as `unnest` does.
    pub const fn plan(self) -> WritePlan {
        let (rows, sending, recipients) = match self {
            Self::PerRow => (RowsBy::EachRow, Sending::OneByOne, Recipients::Fetched),
            Self::Batch => (RowsBy::Values, Sending::OneByOne, Recipients::Fetched),
            Self::BatchPrepared => (RowsBy::Blocks, Sending::OneByOne, Recipients::Fetched),
            Self::Unnest => (RowsBy::Unnest, Sending::OneByOne, Recipients::Fetched),
            Self::Single => (RowsBy::Unnest, Sending::OneStatement, Recipients::OnServer),
            Self::Pipeline => (RowsBy::Unnest, Sending::OneFlight, Recipients::OnServer),
            Self::Copy => (RowsBy::Copy, Sending::OneByOne, Recipients::Fetched),
        };
        WritePlan {
            rows,
            sending,
            recipients,
        }
    }
}

impl RowsBy {
    /// Statements that carry `rows` rows of `columns` columns (none for no
    /// rows).
    pub const fn statements(self, rows: usize, columns: usize) -> u64 {
        if rows == 0 {
            return 0;
        }
        match self {
            Self::EachRow => rows as u64,
            Self::Values => rows.div_ceil(rows_per_statement(columns)) as u64,
            Self::Blocks => {
                let largest = largest_block(columns);
                (rows / largest + (rows % largest).count_ones() as usize) as u64
            }
            Self::Unnest | Self::Copy => 1,
        }
    }

    /// Whether only the blocking driver can send rows this way.
    pub const fn needs_blocking_driver(self) -> bool {
        matches!(self, Self::Copy)
    }
}

/// Most rows one multi-row `INSERT ... VALUES` of `columns` columns may
/// carry.
pub const fn rows_per_statement(columns: usize) -> usize {
    MAX_BIND_PARAMS / columns
}

/// The largest block of rows of `columns` columns: the largest power of
/// two a multi-row `INSERT ... VALUES` may carry (16,384 rows of three
/// columns).
pub const fn largest_block(columns: usize) -> usize {
    let most = rows_per_statement(columns);
    if most == 0 { 1 } else { 1 << most.ilog2() }
}

/// The blocks `rows` rows of `columns` columns travel in by
/// [`RowsBy::Blocks`], largest first: as many of the largest block as fit,
/// then the rest by its binary digits (50 rows: 32, 16, 2). A block size
/// is a statement's shape, so a connection prepares at most one statement
/// per power of two, 15 for three columns, whatever the row counts.
pub fn block_sizes(rows: usize, columns: usize) -> Vec<usize> {
    let largest = largest_block(columns);
    let mut sizes = vec![largest; rows / largest];
    let rest = rows % largest;
    sizes.extend(
        (0..usize::BITS)
            .rev()
            .map(|bit| 1usize << bit)
            .filter(|block| rest & block != 0),
    );
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_per_row_count() {
        // Members have three columns: 21,845 rows per VALUES statement.
        assert_eq!(RowsBy::EachRow.statements(50, 3), 50);
        assert_eq!(RowsBy::Values.statements(50, 3), 1);
        assert_eq!(RowsBy::Values.statements(21_845, 3), 1);
        assert_eq!(RowsBy::Values.statements(21_846, 3), 2);
        assert_eq!(RowsBy::Blocks.statements(50, 3), 3);
        assert_eq!(RowsBy::Blocks.statements(64, 3), 1);
        assert_eq!(RowsBy::Blocks.statements(16_384 * 2 + 3, 3), 4);
        assert_eq!(RowsBy::Unnest.statements(25_000, 3), 1);
        assert_eq!(RowsBy::Copy.statements(25_000, 3), 1);
        for by in [
            RowsBy::EachRow,
            RowsBy::Values,
            RowsBy::Blocks,
            RowsBy::Unnest,
            RowsBy::Copy,
        ] {
            assert_eq!(by.statements(0, 3), 0, "{by:?}");
        }
    }

    #[test]
    fn blocks_are_powers_of_two_that_add_up() {
        assert_eq!(block_sizes(50, 3), vec![32, 16, 2]);
        assert_eq!(block_sizes(1, 3), vec![1]);
        assert_eq!(block_sizes(0, 3), Vec::<usize>::new());
        assert_eq!(largest_block(3), 16_384);
        assert_eq!(
            block_sizes(40_000, 3),
            vec![16_384, 16_384, 4_096, 2_048, 1_024, 64]
        );
        for rows in 0..3_000 {
            let sizes = block_sizes(rows, 7);
            assert_eq!(sizes.iter().sum::<usize>(), rows);
            assert!(
                sizes
                    .iter()
                    .all(|b| b.is_power_of_two() && *b * 7 <= MAX_BIND_PARAMS)
            );
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "largest first");
            assert_eq!(sizes.len() as u64, RowsBy::Blocks.statements(rows, 7));
        }
    }

    #[test]
    fn only_single_and_pipeline_send_without_a_round_trip_per_statement() {
        for strategy in InsertStrategy::ALL {
            let alone = matches!(strategy, InsertStrategy::Single | InsertStrategy::Pipeline);
            assert_eq!(
                strategy.plan().sending != Sending::OneByOne,
                alone,
                "{strategy}"
            );
        }
    }
}
