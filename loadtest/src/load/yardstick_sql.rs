//! The yardstick's SQL: what each strategy sends for one createChat, run
//! by pgbench at the same concurrency against the same database. The
//! ratio of chatlab's throughput to it is the distance to the physical
//! limit of this machine and this PostgreSQL. Every script is derived from
//! the strategy's `WritePlan` (how its statements are sent, how its rows
//! travel), the same plan the server follows, so the two cannot drift.
//!
//! Each script is one createChat transaction: the chat row (`RETURNING id`
//! into a pgbench variable), the member rows as the strategy sends them,
//! the system message, COMMIT. `per_row` and `unnest` run in pgbench's
//! `prepared` protocol mode (chatlab reuses their prepared statements),
//! `batch` in `extended` mode (chatlab parses each multi-row INSERT afresh),
//! `batch_prepared` in `prepared` mode, its power-of-two blocks between
//! `\startpipeline` and `\endpipeline` as chatlab sends them in one flight.
//! `single` is its one statement in autocommit; `pipeline` is unnest's
//! transaction between `\startpipeline` and `\endpipeline` (pgbench's own
//! pipeline mode), its chat id made from a random number, since `\gset`
//! cannot wait for an answer inside a pipeline.
//! Different member sets are mixed, as chatlab's load draws different
//! members for every chat. In the prepared modes they live in one script
//! whose statements pick set `:k` (drawn per transaction) from arrays, so
//! each client prepares the script's statements once, as a chatlab
//! connection does; sixteen scripts would each be prepared by every client,
//! a round trip a statement, which at a distance outweighs the run itself
//! (per_row at 50 members and 5 ms: 16 × 52 prepares, 4.2 s of a client's
//! 3 s). `batch`, parsed afresh anyway, mixes one script per set.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use uuid::Uuid;

use chatlab_domain::write_plan::{block_sizes, rows_per_statement};
use chatlab_domain::{InsertStrategy, RowsBy, Sending};

use crate::error::LoadError;
use crate::load::scenario::{Rng, pick_members};

/// Member sets per baseline: enough that concurrent transactions rarely lock
/// the same user rows, as with chatlab's random windows.
const VARIANTS: usize = 16;

/// One baseline measurement.
#[derive(Debug, Clone)]
pub struct BaselineSpec {
    /// PostgreSQL URL of chatlab's database.
    pub database_url: String,
    /// Whose SQL pgbench sends.
    pub strategy: InsertStrategy,
    /// Members per chat, creator included.
    pub members: usize,
    /// pgbench clients (the VU count).
    pub clients: usize,
    /// How long.
    pub duration: Duration,
    /// Existing user ids to use as members.
    pub users: Vec<Uuid>,
    /// Where to write the scripts.
    pub work_dir: PathBuf,
}

/// How a script names its members: one set written out, or several, the
/// transaction's drawn by pgbench as `:k` (1-based) from arrays.
struct Sets<'a>(&'a [Vec<Uuid>]);

impl Sets<'_> {
    /// The pgbench line that draws the set, if there is a choice.
    fn draw(&self) -> String {
        match self.0.len() {
            0 | 1 => String::new(),
            n => format!("\\set k random(1, {n})\n"),
        }
    }

    /// The `j`-th member (0: the creator) as an SQL expression of type uuid.
    fn member(&self, j: usize) -> String {
        match self.0 {
            [one] => format!("'{}'::uuid", one[j]),
            sets => {
                let column: Vec<Uuid> = sets.iter().map(|set| set[j]).collect();
                format!("('{}'::uuid[])[:k]", uuid_array(&column))
            }
        }
    }

    /// The whole set as an SQL expression of type uuid[].
    fn array(&self) -> String {
        match self.0 {
            [one] => format!("'{}'::uuid[]", uuid_array(one)),
            sets => {
                let rows: Vec<String> = sets.iter().map(|set| uuid_array(set)).collect();
                format!("('{{{}}}'::uuid[])[(:k):(:k)]", rows.join(","))
            }
        }
    }
}

/// Columns of a member row as chatlab writes it (`chat_id`, `user_id`,
/// `joined_at`): what bounds the rows of one multi-row INSERT.
const MEMBER_COLUMNS: usize = 3;

/// The pgbench script of one createChat whose members (creator first) are
/// one of `sets`, all of one size, sent as `strategy`'s
/// [`WritePlan`](chatlab_domain::WritePlan) says:
/// its statements one by one, as one statement or in one flight, and its
/// member rows one a statement, in multi-row VALUES or by unnest. Rows by
/// COPY have none: a pgbench script cannot send COPY data (their direct
/// baseline is `chatlab-load crossover`); multi-row VALUES take one set
/// (their scripts are mixed instead).
pub fn script(strategy: InsertStrategy, sets: &[Vec<Uuid>]) -> Result<String, String> {
    let size = sets.first().map_or(0, Vec::len);
    if size == 0 || sets.iter().any(|set| set.len() != size) {
        return Err("a chat needs at least its creator, and every set the same size".to_owned());
    }
    let plan = strategy.plan();
    match plan.rows {
        RowsBy::Copy => {
            return Err(format!(
                "{strategy} has no pgbench baseline: a pgbench script cannot send COPY data \
                 (see `chatlab-load crossover`)"
            ));
        }
        RowsBy::Values if sets.len() > 1 => {
            return Err(format!("{strategy}'s script takes one member set"));
        }
        RowsBy::Blocks if sets.len() > 1 && !draws_fit(size) => {
            return Err(format!(
                "{strategy}'s script takes one member set at {size} members (a block of \
                 more than {MAX_DRAWN_ROWS} rows would pass pgbench's 255 variables)"
            ));
        }
        RowsBy::EachRow | RowsBy::Values | RowsBy::Blocks | RowsBy::Unnest => {}
    }
    let sets = Sets(sets);
    match plan.sending {
        Sending::OneStatement => Ok(single_script(&sets)),
        Sending::OneFlight => Ok(pipeline_script(&sets)),
        Sending::OneByOne => Ok(one_by_one_script(plan.rows, &sets, size)),
    }
}

/// A transaction whose statements are sent one by one: the chat row
/// (`RETURNING id` into `:chat_id`), the member rows `rows`' way, the
/// system message, COMMIT.
fn one_by_one_script(rows: RowsBy, sets: &Sets<'_>, size: usize) -> String {
    let mut s = sets.draw();
    s.push_str("BEGIN;\n");
    let _ = writeln!(
        s,
        "INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
         VALUES (gen_random_uuid(), 'pgbench', {}, now(), 'off') RETURNING id AS chat_id \\gset",
        sets.member(0)
    );
    match rows {
        RowsBy::EachRow => {
            for j in 0..size {
                let _ = writeln!(
                    s,
                    "INSERT INTO chat_members (chat_id, user_id, joined_at) VALUES ((:chat_id)::uuid, {}, now());",
                    sets.member(j)
                );
            }
        }
        // Multi-row VALUES lists, parsed and planned afresh as chatlab's
        // are, chunked as chatlab chunks them.
        RowsBy::Values => {
            let members: Vec<usize> = (0..size).collect();
            for chunk in members.chunks(rows_per_statement(MEMBER_COLUMNS)) {
                values_insert(&mut s, sets, chunk);
            }
        }
        // The same lists in chatlab's power-of-two blocks, prepared (the
        // protocol), all blocks in one pipeline as chatlab sends them.
        RowsBy::Blocks => {
            s.push_str("\\startpipeline\n");
            let mut start = 0;
            for block in block_sizes(size, MEMBER_COLUMNS) {
                let members: Vec<usize> = (start..start + block).collect();
                values_insert(&mut s, sets, &members);
                start += block;
            }
            s.push_str("\\endpipeline\n");
        }
        RowsBy::Unnest | RowsBy::Copy => {
            let _ = writeln!(
                s,
                "INSERT INTO chat_members (chat_id, user_id, joined_at) \
                 SELECT (:chat_id)::uuid, u.user_id, now() FROM unnest({}) AS u(user_id);",
                sets.array()
            );
        }
    }
    s.push_str(
        "INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
         VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');\n",
    );
    s.push_str("COMMIT;\n");
    s
}

/// Rows a statement may draw from several member sets: each drawn member
/// is one variable reference (`:k`), the chat id another, and pgbench
/// allows 255 a statement.
const MAX_DRAWN_ROWS: usize = 254;

/// Whether every block of `size` members can draw its members from
/// several sets in one statement.
fn draws_fit(size: usize) -> bool {
    block_sizes(size, MEMBER_COLUMNS)
        .first()
        .is_none_or(|&largest| largest <= MAX_DRAWN_ROWS)
}

/// One multi-row INSERT of the `members`-th members of the set. The chat
/// id comes from one variable, the rows from a VALUES list: pgbench allows
/// 255 variable references a statement, and a chat of 1,000 members would
/// need one a row.
fn values_insert(s: &mut String, sets: &Sets<'_>, members: &[usize]) {
    let values: Vec<String> = members
        .iter()
        .map(|&j| format!("({})", sets.member(j)))
        .collect();
    let _ = writeln!(
        s,
        "INSERT INTO chat_members (chat_id, user_id, joined_at) \
         SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES {}) AS v(user_id);",
        values.join(", ")
    );
}

/// A PostgreSQL array literal of `ids`: `{a,b,c}`.
pub(crate) fn uuid_array(ids: &[Uuid]) -> String {
    let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    format!("{{{}}}", ids.join(","))
}

/// `single`'s one statement, in autocommit: no BEGIN, no COMMIT.
fn single_script(sets: &Sets<'_>) -> String {
    format!(
        "{draw}WITH new_chat AS (INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
         VALUES (gen_random_uuid(), 'pgbench', {creator}, now(), 'off') RETURNING id), \
         new_members AS (INSERT INTO chat_members (chat_id, user_id, joined_at) \
         SELECT c.id, u.user_id, now() FROM new_chat c, unnest({ids}) AS u(user_id)) \
         INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
         SELECT gen_random_uuid(), c.id, NULL, 'system', 'room created', now(), 'off' FROM new_chat c;\n",
        draw = sets.draw(),
        creator = sets.member(0),
        ids = sets.array()
    )
}

/// `pipeline`'s transaction: unnest's statements in pgbench's pipeline
/// mode, BEGIN to COMMIT sent before any answer is read. The chat id is
/// the md5 of a random number, as no statement may wait for another's
/// `RETURNING` inside a pipeline.
fn pipeline_script(sets: &Sets<'_>) -> String {
    let chat = "md5((:chat_seed)::text)::uuid";
    format!(
        "{draw}\\set chat_seed random(1, 9223372036854775807)\n\
         \\startpipeline\n\
         BEGIN;\n\
         INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
         VALUES ({chat}, 'pgbench', {creator}, now(), 'off');\n\
         INSERT INTO chat_members (chat_id, user_id, joined_at) \
         SELECT {chat}, u.user_id, now() FROM unnest({ids}) AS u(user_id);\n\
         INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
         VALUES (gen_random_uuid(), {chat}, NULL, 'system', 'room created', now(), 'off');\n\
         COMMIT;\n\
         \\endpipeline\n",
        draw = sets.draw(),
        creator = sets.member(0),
        ids = sets.array()
    )
}

/// pgbench's protocol mode matching what chatlab sends for `strategy`:
/// `extended` where its multi-row VALUES are parsed afresh for each write,
/// `prepared` where its statements keep one shape.
pub fn protocol(strategy: InsertStrategy) -> &'static str {
    match strategy.plan().rows {
        RowsBy::Values => "extended",
        RowsBy::EachRow | RowsBy::Blocks | RowsBy::Unnest | RowsBy::Copy => "prepared",
    }
}

/// The `tps = …` figure of pgbench's report.
pub fn parse_tps(output: &str) -> Option<f64> {
    output
        .lines()
        .find(|l| l.trim_start().starts_with("tps = "))
        .and_then(|l| l.trim_start()["tps = ".len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Runs pgbench; blocking (call from `spawn_blocking`). Answers its tps.
pub fn run(spec: &BaselineSpec) -> Result<f64, LoadError> {
    std::fs::create_dir_all(&spec.work_dir).map_err(|e| LoadError::file(&spec.work_dir, e))?;
    let mut rng = Rng::new(0xBA5E);
    let sets: Vec<Vec<Uuid>> = (0..VARIANTS)
        .map(|_| pick_members(&spec.users, spec.members, &mut rng))
        .collect();
    // batch mixes a script a set; the prepared modes draw the set inside
    // one, but for blocks too large to draw from (see `draws_fit`).
    let one_script = protocol(spec.strategy) == "prepared"
        && (spec.strategy.plan().rows != RowsBy::Blocks || draws_fit(spec.members));
    let scripts: Vec<&[Vec<Uuid>]> = if one_script {
        vec![&sets[..]]
    } else {
        sets.chunks(1).collect()
    };
    let mut files = Vec::new();
    for (i, sets) in scripts.into_iter().enumerate() {
        let path = spec.work_dir.join(format!(
            "createchat-{}-{}-{i}.sql",
            spec.strategy, spec.members
        ));
        let script = script(spec.strategy, sets).map_err(LoadError::Usage)?;
        std::fs::write(&path, script).map_err(|e| LoadError::file(&path, e))?;
        files.push(path);
    }
    let mut cmd = Command::new("pgbench");
    cmd.arg("-n")
        .arg("-M")
        .arg(protocol(spec.strategy))
        .arg("-c")
        .arg(spec.clients.to_string())
        .arg("-j")
        .arg(spec.clients.clamp(1, 2).to_string())
        .arg("-T")
        .arg(spec.duration.as_secs().max(1).to_string());
    for f in &files {
        cmd.arg("-f").arg(f);
    }
    cmd.arg(&spec.database_url);
    let out = cmd
        .output()
        .map_err(|e| LoadError::program("pgbench", format!("{e} (install postgresql-client)")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(LoadError::program(
            "pgbench",
            format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
        ));
    }
    parse_tps(&stdout)
        .ok_or_else(|| LoadError::program("pgbench", format!("no tps in its output:\n{stdout}")))
}

/// Where scripts go by default.
pub fn default_work_dir(results: &Path) -> PathBuf {
    results.join("pgbench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_send_the_strategy_s_statements() {
        let members: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        let one = std::slice::from_ref(&members);
        let per_row = script(InsertStrategy::PerRow, one).unwrap();
        assert_eq!(per_row.matches("INSERT INTO chat_members").count(), 3);
        let batch = script(InsertStrategy::Batch, one).unwrap();
        assert_eq!(batch.matches("INSERT INTO chat_members").count(), 1);
        assert_eq!(
            batch.matches("::uuid)").count(),
            3,
            "a VALUES row per member"
        );
        // One variable reference for any member count (pgbench's limit
        // is 255 a statement).
        let many: Vec<Uuid> = (0..1000).map(|_| Uuid::now_v7()).collect();
        let big = script(InsertStrategy::Batch, std::slice::from_ref(&many)).unwrap();
        assert_eq!(
            big.matches("(:chat_id)::uuid").count(),
            2,
            "{}",
            &big[..200]
        );
        // Blocks: 50 members as 32, 16 and 2 rows in one pipeline, drawn
        // from several sets while every block fits pgbench's variables.
        let sets: Vec<Vec<Uuid>> = (0..4)
            .map(|_| (0..50).map(|_| Uuid::now_v7()).collect())
            .collect();
        let blocks = script(InsertStrategy::BatchPrepared, &sets).unwrap();
        let inserts: Vec<&str> = blocks
            .lines()
            .filter(|l| l.starts_with("INSERT INTO chat_members"))
            .collect();
        let rows: Vec<usize> = inserts.iter().map(|l| l.matches("[:k]").count()).collect();
        assert_eq!(rows, vec![32, 16, 2], "{blocks}");
        let start = blocks.find("\\startpipeline").unwrap();
        let end = blocks.find("\\endpipeline").unwrap();
        assert!(
            blocks
                .find("INSERT INTO chat_members")
                .is_some_and(|i| start < i && i < end)
        );
        assert!(
            blocks
                .rfind("INSERT INTO chat_members")
                .is_some_and(|i| i < end)
        );
        let wide: Vec<Vec<Uuid>> = vec![many.clone(), many.clone()];
        assert!(script(InsertStrategy::BatchPrepared, &wide).is_err());
        let wide = script(InsertStrategy::BatchPrepared, std::slice::from_ref(&many)).unwrap();
        assert_eq!(
            wide.matches("INSERT INTO chat_members").count(),
            6,
            "512+256+128+64+32+8"
        );
        let unnest = script(InsertStrategy::Unnest, one).unwrap();
        assert!(unnest.contains("unnest('{"));
        for s in [&per_row, &batch, &unnest] {
            assert!(s.starts_with("BEGIN;") && s.ends_with("COMMIT;\n"));
            assert!(s.contains("\\gset") && s.contains("'room created'"));
        }
        let single = script(InsertStrategy::Single, one).unwrap();
        assert_eq!(single.matches(';').count(), 1, "one statement: {single}");
        assert!(!single.contains("BEGIN") && !single.contains("COMMIT"));
        assert!(single.contains("unnest('{") && single.contains("'room created'"));
        let pipeline = script(InsertStrategy::Pipeline, one).unwrap();
        let lines: Vec<&str> = pipeline.lines().collect();
        assert_eq!(lines[1], "\\startpipeline");
        assert_eq!(lines[2], "BEGIN;");
        assert_eq!(lines[lines.len() - 2], "COMMIT;");
        assert_eq!(lines[lines.len() - 1], "\\endpipeline");
        assert!(
            !pipeline.contains("\\gset"),
            "no answer is awaited in a pipeline"
        );
        assert_eq!(pipeline.matches("md5((:chat_seed)::text)::uuid").count(), 3);
        assert!(script(InsertStrategy::Batch, &[]).is_err());
        assert_eq!(protocol(InsertStrategy::Batch), "extended");
        assert_eq!(protocol(InsertStrategy::PerRow), "prepared");
    }

    #[test]
    fn prepared_scripts_draw_their_members_from_every_set() {
        let sets: Vec<Vec<Uuid>> = (0..3)
            .map(|_| (0..2).map(|_| Uuid::now_v7()).collect())
            .collect();
        for strategy in [
            InsertStrategy::PerRow,
            InsertStrategy::Unnest,
            InsertStrategy::Single,
            InsertStrategy::Pipeline,
        ] {
            let s = script(strategy, &sets).unwrap();
            assert!(s.starts_with("\\set k random(1, 3)\n"), "{s}");
            for id in sets.iter().flatten() {
                assert!(s.contains(&id.to_string()), "{strategy}: {id} missing");
            }
        }
        let per_row = script(InsertStrategy::PerRow, &sets).unwrap();
        assert_eq!(
            per_row.matches("[:k]").count(),
            1 + 2,
            "creator and each member"
        );
        let unnest = script(InsertStrategy::Unnest, &sets).unwrap();
        assert!(unnest.contains("::uuid[])[(:k):(:k)]"));
        // Sets of unequal size cannot share an array; batch takes one.
        let ragged = vec![sets[0].clone(), sets[1][..1].to_vec()];
        assert!(script(InsertStrategy::Unnest, &ragged).is_err());
        assert!(script(InsertStrategy::Batch, &sets).is_err());
    }

    #[test]
    fn every_script_sends_what_its_strategy_s_plan_says() {
        for members in [1, 3, 50] {
            let set: Vec<Uuid> = (0..members).map(|_| Uuid::now_v7()).collect();
            let one = std::slice::from_ref(&set);
            for strategy in InsertStrategy::ALL {
                let plan = strategy.plan();
                let Ok(s) = script(strategy, one) else {
                    assert_eq!(plan.rows, RowsBy::Copy, "{strategy} has a script");
                    continue;
                };
                let member_inserts = s.matches("INSERT INTO chat_members").count() as u64;
                let expected = match plan.sending {
                    Sending::OneByOne => plan.rows.statements(members, MEMBER_COLUMNS),
                    Sending::OneStatement | Sending::OneFlight => 1,
                };
                assert_eq!(member_inserts, expected, "{strategy}, {members} members");
                assert_eq!(
                    s.contains("unnest("),
                    plan.rows == RowsBy::Unnest,
                    "{strategy}"
                );
                assert_eq!(
                    s.contains("FROM (VALUES "),
                    matches!(plan.rows, RowsBy::Values | RowsBy::Blocks),
                    "{strategy}"
                );
                assert_eq!(
                    s.contains("BEGIN;"),
                    plan.sending != Sending::OneStatement,
                    "{strategy}"
                );
                assert_eq!(
                    s.contains("\\startpipeline"),
                    plan.sending == Sending::OneFlight || plan.rows == RowsBy::Blocks,
                    "{strategy}"
                );
                let prepared = protocol(strategy) == "prepared";
                assert_eq!(prepared, plan.rows != RowsBy::Values, "{strategy}");
            }
        }
    }

    #[test]
    fn reads_tps_from_pgbench_output() {
        let out = "number of failed transactions: 0 (0.000%)\nlatency average = 8.1 ms\ninitial connection time = 5.2 ms\ntps = 1234.567890 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(1234.56789));
        assert_eq!(parse_tps("nothing"), None);
    }
}
