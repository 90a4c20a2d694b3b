//! The database client's spans, named after OpenTelemetry's database
//! conventions: the wait for a pooled connection, the time it is held,
//! each transaction, and each statement (`db.query.summary` as its name,
//! the SQL text with placeholders and never a bind value).
//!
//! They are `debug` spans: with no OpenTelemetry layer (and logs at
//! `info`) none is built, and a statement's SQL text is never rendered.

use diesel::pg::{Pg, PgQueryBuilder};
use diesel::query_builder::{QueryBuilder as _, QueryFragment};
use tracing::Span;
use tracing::field::Empty;

use crate::database::pool_metrics::POOL_NAME;

/// From asking for a connection to having one (or giving up).
pub(crate) fn connection_wait(parent: &Span) -> Span {
    connection(parent, "db.client.connection.wait")
}

/// From checkout to the connection's return: what the pool's use-time
/// histogram measures, for this one request, with the round trips it made
/// to PostgreSQL (`chatlab.round_trips`: at a distance, each costs an RTT
/// of this span).
pub(crate) fn connection_use(parent: &Span) -> Span {
    connection(parent, "db.client.connection.use")
}

fn connection(parent: &Span, phase: &'static str) -> Span {
    // The unit runs on another task, where the span filter cannot see that
    // the request is not sampled: it runs in the request's own span, and
    // nothing is built below it.
    if chatlab_telemetry::is_unsampled(parent) {
        return parent.clone();
    }
    tracing::debug_span!(
        parent: parent,
        "db.client.connection",
        otel.name = phase,
        db.system.name = "postgresql",
        db.client.connection.pool.name = POOL_NAME,
        chatlab.round_trips = Empty,
    )
}

/// One transaction, BEGIN to COMMIT or ROLLBACK, with the statements it
/// ran and the rows they touched (recorded as it ends).
pub(crate) fn transaction() -> Span {
    tracing::debug_span!(
        "db.transaction",
        otel.name = "transaction",
        db.system.name = "postgresql",
        chatlab.statements = Empty,
        chatlab.rows = Empty,
        chatlab.outcome = Empty,
    )
}

/// One statement; describe it with [`describe`] before it is entered.
pub(crate) fn statement() -> Span {
    tracing::debug_span!(
        "db statement",
        otel.name = Empty,
        otel.kind = "client",
        otel.status_code = Empty,
        db.system.name = "postgresql",
        db.operation.name = Empty,
        db.collection.name = Empty,
        db.query.summary = Empty,
        db.query.text = Empty,
        db.response.returned_rows = Empty,
        chatlab.rows_affected = Empty,
        error.type = Empty,
    )
}

/// A statement span for `query`. Its SQL is rendered only when the
/// enclosing trace is sampled: an unsampled trace is never exported, so
/// rendering its statements' text would be cost for nothing.
pub(crate) fn statement_for<Q: QueryFragment<Pg> + ?Sized>(query: &Q) -> Span {
    let span = statement();
    if !span.is_disabled()
        && chatlab_telemetry::is_sampled(&Span::current())
        && let Some(sql) = sql_text(query)
    {
        describe(&span, &sql);
    }
    span
}

/// Records on `span` what `sql` is: its operation, its table, its
/// summary (also the span's name) and the text itself.
pub(crate) fn describe(span: &Span, sql: &str) {
    let summary = Summary::of(sql);
    span.record("otel.name", summary.text.as_str());
    span.record("db.query.summary", summary.text.as_str());
    span.record("db.operation.name", summary.operation.as_str());
    if let Some(table) = &summary.collection {
        span.record("db.collection.name", table.as_str());
    }
    span.record("db.query.text", sql);
}

/// Records a statement's outcome on its span.
pub(crate) fn outcome<T>(span: &Span, result: &diesel::QueryResult<T>, rows: impl Fn(&T) -> usize) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(value) => {
            span.record("chatlab.rows_affected", rows(value));
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", error_type(e));
        }
    }
}

/// A statement's outcome when it returned rows.
pub(crate) fn returned<T>(span: &Span, result: &diesel::QueryResult<Vec<T>>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(rows) => {
            span.record("db.response.returned_rows", rows.len());
        }
        Err(_) => outcome(span, result, Vec::len),
    }
}

fn error_type(e: &diesel::result::Error) -> &'static str {
    use diesel::result::{DatabaseErrorKind as K, Error as E};
    match e {
        E::DatabaseError(K::UniqueViolation, _) => "unique_violation",
        E::DatabaseError(K::ForeignKeyViolation, _) => "foreign_key_violation",
        E::DatabaseError(K::CheckViolation, _) => "check_violation",
        E::DatabaseError(K::NotNullViolation, _) => "not_null_violation",
        E::DatabaseError(K::SerializationFailure, _) => "serialization_failure",
        E::DatabaseError(K::ClosedConnection, _) => "closed_connection",
        E::DatabaseError(..) => "database_error",
        E::NotFound => "not_found",
        E::RollbackTransaction => "rollback",
        _ => "client_error",
    }
}

/// The SQL diesel sends for `query`: placeholders (`$1`), never values.
pub(crate) fn sql_text<Q: QueryFragment<Pg> + ?Sized>(query: &Q) -> Option<String> {
    let mut out = PgQueryBuilder::default();
    query.to_sql(&mut out, &Pg).ok()?;
    Some(out.finish())
}

/// A statement's low-cardinality description: `INSERT chat_members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The first keyword, upper case (`INSERT`, `SELECT`, `BEGIN`, ...).
    pub operation: String,
    /// The table written or read first, unquoted, without its schema.
    pub collection: Option<String>,
    /// `operation` and `collection`, space-separated.
    pub text: String,
}

impl Summary {
    /// Reads `sql`'s operation and first table: the word after `INTO`
    /// (insert), `UPDATE`, or the first `FROM` (select, delete).
    pub(crate) fn of(sql: &str) -> Self {
        let words: Vec<&str> = sql.split_whitespace().collect();
        let operation = words
            .first()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_ascii_alphabetic())
                    .to_ascii_uppercase()
            })
            .unwrap_or_default();
        let after = |keyword: &str| {
            words
                .iter()
                .position(|w| w.eq_ignore_ascii_case(keyword))
                .and_then(|i| words.get(i + 1))
        };
        // A WITH statement is named after the first statement its CTEs
        // write with (chatlab's single-statement createChat inserts in
        // its first CTE), else after its SELECT.
        let keyword = |w: &&str| {
            w.trim_start_matches('(')
                .to_ascii_uppercase()
                .parse::<Keyword>()
                .ok()
        };
        let operation = match operation.as_str() {
            "WITH" => words
                .iter()
                .filter_map(keyword)
                .find(|k| *k != Keyword::Select)
                .map_or("SELECT".to_owned(), |k| k.as_str().to_owned()),
            _ => operation,
        };
        let table = match operation.as_str() {
            "INSERT" => after("INTO"),
            "UPDATE" => words
                .iter()
                .position(|w| keyword(w) == Some(Keyword::Update))
                .and_then(|i| words.get(i + 1)),
            "SELECT" | "DELETE" => after("FROM"),
            _ => None,
        };
        let collection = table.map(|t| unquote(t)).filter(|t| !t.is_empty());
        let text = match &collection {
            Some(table) => format!("{operation} {table}"),
            None => operation.clone(),
        };
        Self {
            operation,
            collection,
            text,
        }
    }
}

/// The statements a summary is named after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    Insert,
    Update,
    Delete,
    Select,
}

impl Keyword {
    fn as_str(self) -> &'static str {
        match self {
            Self::Insert => "INSERT",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Select => "SELECT",
        }
    }
}

impl std::str::FromStr for Keyword {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "INSERT" => Ok(Self::Insert),
            "UPDATE" => Ok(Self::Update),
            "DELETE" => Ok(Self::Delete),
            "SELECT" => Ok(Self::Select),
            _ => Err(()),
        }
    }
}

/// `"public"."chats"(` → `chats`.
fn unquote(token: &str) -> String {
    let token = token.split('(').next().unwrap_or(token);
    let last = token.rsplit('.').next().unwrap_or(token);
    last.trim_matches(|c: char| c == '"' || c == ',' || c == ';')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn summaries_name_the_operation_and_the_first_table() {
        let cases = [
            (
                r#"INSERT INTO "chat_members" ("chat_id", "user_id") VALUES ($1, $2)"#,
                "INSERT chat_members",
            ),
            (
                "INSERT INTO chat_members (chat_id, user_id) SELECT $1, u FROM unnest($2::uuid[]) u",
                "INSERT chat_members",
            ),
            (
                r#"SELECT "chats"."id" FROM "public"."chats" WHERE "chats"."id" = $1"#,
                "SELECT chats",
            ),
            (r#"UPDATE "outbox" SET "sent_at" = $1"#, "UPDATE outbox"),
            ("DELETE FROM outbox WHERE id = ANY($1)", "DELETE outbox"),
            (
                "WITH new_chat AS (INSERT INTO chats (id) VALUES ($1) RETURNING id) \
                 SELECT x FROM unnest($2) x",
                "INSERT chats",
            ),
            ("WITH t AS (SELECT 1) SELECT * FROM outbox", "SELECT outbox"),
            ("BEGIN", "BEGIN"),
            ("  commit", "COMMIT"),
        ];
        for (sql, want) in cases {
            assert_eq!(Summary::of(sql).text, want, "{sql}");
        }
        assert_eq!(Summary::of("").text, "");
    }
}
