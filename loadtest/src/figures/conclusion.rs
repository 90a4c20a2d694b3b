//! Conclusions rendered from their runs. A doc that compares two cells,
//! counts the cells that meet a bound or repeats a run's verdict does not
//! type it: it marks the place ([`super::marker`]) and `chatlab-load docs`
//! writes the sentence from the run's committed tables, so a tie cannot be
//! written as a win, a count cannot drift, and one round says so.
//!
//! - `compare`: `a`'s `figure` over `b`'s. With a per-round table in the
//!   run, `a` and `b` are its cell labels and the ratio is paired by round
//!   (the geometric mean of the rounds' ratios and its 95% t interval,
//!   [`crate::stats::uncertainty::Interval::of_ratio`]), or as the run's
//!   own table of comparisons has it, from figures not yet rounded; its
//!   interval
//!   holding 1 is a tie, said as "not told apart". This call is one
//!   comparison at 95%; a family of them is the verdict's business (Holm).
//!   With `a` and `b` written as conditions (`strategy=single; members=50`)
//!   on the first table that has `figure`, each names one row: one
//!   figure a side, no interval, and no tie can be called. `names="x; y"`
//!   names the two sides in the sentence.
//! - `count`: of the rows of the first table with `column` (and `where`'s
//!   columns) that meet `where` (said in words by `of`, when given), how many have `column` within ±N% for
//!   each N of `within` (signed percentages, `+4.2%`), or how many of the
//!   cells' intervals hold `holds`, lie above it or below it.
//! - `quote`: the lines of the run's `results.md` that start with one of
//!   `lines`, as the load tool wrote them (its verdict, its groups).

use std::path::Path;

use super::markdown_table::{self, Table};
use super::marker;
use super::table_block::{self, Filter};
use crate::stats::uncertainty::{Call, Interval};

/// The body of a `compare`, `count` or `quote` block.
pub fn render(kind: &str, attributes: &str, root: &Path, to_root: &str) -> Result<String, String> {
    let attributes = marker::attributes(attributes)?;
    let get = |key: &str| {
        attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
    };
    let allowed: &[&str] = match kind {
        "compare" => &["run", "a", "b", "figure", "names"],
        "count" => &["run", "column", "where", "within", "holds", "of"],
        _ => &["run", "lines"],
    };
    if let Some((k, _)) = attributes
        .iter()
        .find(|(k, _)| !allowed.contains(&k.as_str()))
    {
        return Err(format!("unknown attribute `{k}` of figures:{kind}"));
    }
    let run = get("run").filter(|r| !r.is_empty()).ok_or("no `run`")?;
    let path = root.join("results").join(run).join("results.md");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("results/{run}/results.md: {e}"))?;
    let link = format!("[results/{run}]({to_root}results/{run}/results.md)");
    let body = match kind {
        "compare" => compare(
            &text,
            get("a").ok_or("no `a`")?,
            get("b").ok_or("no `b`")?,
            get("figure").unwrap_or("req/s"),
            get("names"),
        )?,
        "count" => count(
            &text,
            get("column").ok_or("no `column`")?,
            get("where").unwrap_or(""),
            (get("within"), get("holds")),
            get("of"),
        )?,
        _ => return quote(&text, get("lines").ok_or("no `lines`")?, &link),
    };
    Ok(format!("{body} ({link})\n"))
}

/// A cell as a number and its interval, when it has one: `1301 [1170,
/// 1431]`, `93% [84, 102]`, `~ 1.07× [0.98, 1.17]`, `+4.2%`, `2,003`; of
/// a pair (`12.99 / 24.84`, a mean and a p95), the first.
pub fn value(cell: &str) -> Option<(f64, Option<(f64, f64)>)> {
    let cell = cell.trim().trim_start_matches('~').trim();
    let cell = cell.split_once(" / ").map_or(cell, |(first, _)| first);
    let (head, interval) = match cell.split_once('[') {
        Some((h, rest)) => (h, Some(rest.trim_end().trim_end_matches(']'))),
        None => (cell, None),
    };
    let interval = match interval {
        Some(i) => {
            let (lo, hi) = i.split_once(", ")?;
            Some((number(lo)?, number(hi)?))
        }
        None => None,
    };
    Some((number(head)?, interval))
}

fn number(text: &str) -> Option<f64> {
    let t = text
        .trim()
        .trim_end_matches(['%', '×'])
        .trim()
        .replace(',', "");
    t.trim_start_matches('+').parse().ok()
}

/// How a ratio reads, e.g. `1.27×`, at a precision that tells 1.00 from
/// 1.004 apart only when asked to.
fn times(x: f64) -> String {
    format!("{x:.2}×")
}

fn compare(
    text: &str,
    a: &str,
    b: &str,
    figure: &str,
    names: Option<&str>,
) -> Result<String, String> {
    let names = names.map(marker::list).unwrap_or_default();
    let head = match names.as_slice() {
        [x, y] => format!("**{x}** over **{y}**, {figure}:"),
        [] => format!("**{a}** over **{b}**, {figure}:"),
        _ => return Err("`names` takes two names, `a`'s; `b`'s".to_owned()),
    };
    if a.contains('=') || b.contains('=') {
        let row = |conditions: &str| one_row(text, figure, conditions);
        let (x, y) = (row(a)?, row(b)?);
        if y == 0.0 {
            return Err(format!("`{b}` has {figure} 0: no ratio"));
        }
        return Ok(format!(
            "{head} {}, one figure a side (no rounds paired): no interval, and no tie can be called",
            times(x / y)
        ));
    }
    let pairs = per_round_pairs(text, a, b, figure)?;
    let interval = match own_comparison(text, a, b, figure) {
        Some(i) => Some(Interval {
            rounds: pairs.len(),
            ..i
        }),
        None => Interval::of_ratio(&pairs),
    };
    match interval {
        None if pairs.len() == 1 && pairs[0].1 != 0.0 => Ok(format!(
            "{head} {} in one round: one measurement, no interval, and no tie can be called",
            times(pairs[0].0 / pairs[0].1)
        )),
        None => Err(format!(
            "`{a}` and `{b}`: no ratio of {figure} in any round"
        )),
        Some(i) => {
            let shown = format!("{} [{:.2}, {:.2}]", times(i.estimate), i.lo, i.hi);
            Ok(match i.call() {
                Call::Tie => format!(
                    "{head} ~ {shown}, paired over {} rounds: not told apart (the interval holds 1)",
                    i.rounds
                ),
                Call::Ahead | Call::Behind => format!(
                    "{head} {shown}, paired over {} rounds: told apart (95%, this comparison alone)",
                    i.rounds
                ),
            })
        }
    }
}

/// `a` over `b` as the run's own table of comparisons has it (`| faster |
/// slower | … | req/s, faster / slower |…`), from its figures before they
/// were rounded for the per-round table; turned over when the run lists
/// `b` first. `None` when the run has no such row.
fn own_comparison(text: &str, a: &str, b: &str, figure: &str) -> Option<Interval> {
    let short = figure.strip_suffix(" ms").unwrap_or(figure);
    let wanted = format!("{short}, faster / slower");
    markdown_table::tables(text).iter().find_map(|t| {
        let faster = table_block::column(t, "faster")?;
        let slower = table_block::column(t, "slower")?;
        let col = table_block::column(t, &wanted)?;
        t.rows.iter().find_map(|r| {
            let (estimate, (lo, hi)) = match value(&r[col])? {
                (e, Some(i)) => (e, i),
                (_, None) => return None,
            };
            let shown = |estimate, lo, hi| Interval {
                estimate,
                lo,
                hi,
                rounds: 0,
            };
            if r[faster] == a && r[slower] == b {
                Some(shown(estimate, lo, hi))
            } else if r[faster] == b && r[slower] == a {
                Some(shown(1.0 / estimate, 1.0 / hi, 1.0 / lo))
            } else {
                None
            }
        })
    })
}

/// The value of `figure` in the one row of the first table with it that
/// meets `conditions`.
fn one_row(text: &str, figure: &str, conditions: &str) -> Result<f64, String> {
    let filters = table_block::parse_filters(conditions)?;
    let (table, rows) = rows_meeting(text, figure, &filters)?;
    let [row] = rows.as_slice() else {
        return Err(format!("`{conditions}` names {} rows, not one", rows.len()));
    };
    let i = table_block::column(&table, figure).unwrap_or_default();
    value(&row[i])
        .map(|(v, _)| v)
        .ok_or_else(|| format!("`{}` is not a number", row[i]))
}

/// The first table with `column` and every filter's column, and its rows
/// that meet the filters.
fn rows_meeting(
    text: &str,
    column: &str,
    filters: &[Filter],
) -> Result<(Table, Vec<Vec<String>>), String> {
    let table = markdown_table::tables(text)
        .into_iter()
        .find(|t| {
            table_block::column(t, column).is_some()
                && filters
                    .iter()
                    .all(|f| table_block::column(t, &f.column).is_some())
        })
        .ok_or_else(|| format!("no table with the column `{column}` and those of `where`"))?;
    let rows = table
        .rows
        .iter()
        .filter(|row| {
            filters
                .iter()
                .all(|f| table_block::column(&table, &f.column).is_some_and(|i| f.keeps(&row[i])))
        })
        .cloned()
        .collect::<Vec<_>>();
    if rows.is_empty() {
        return Err("no row meets `where`".to_owned());
    }
    Ok((table, rows))
}

/// `(a's, b's)` of `figure`, round by round, from the run's per-round
/// table: `| round | cell | figure |…` (a row a round and cell) or
/// `| cell | round 1 figure | round 2 figure |…` (a row a cell).
fn per_round_pairs(text: &str, a: &str, b: &str, figure: &str) -> Result<Vec<(f64, f64)>, String> {
    let tables = markdown_table::tables(text);
    if let Some(t) = tables.iter().find(|t| {
        ["round", "cell", figure]
            .iter()
            .all(|c| table_block::column(t, c).is_some())
    }) {
        let col = |c| table_block::column(t, c).unwrap_or_default();
        let (round, cell, fig) = (col("round"), col("cell"), col(figure));
        let of = |label: &str| -> Vec<(String, f64)> {
            t.rows
                .iter()
                .filter(|r| r[cell] == label)
                .filter_map(|r| Some((r[round].clone(), value(&r[fig])?.0)))
                .collect()
        };
        let (xs, ys) = (of(a), of(b));
        if xs.is_empty() || ys.is_empty() {
            return Err(format!(
                "the per-round table has no cell `{}`",
                if xs.is_empty() { a } else { b }
            ));
        }
        return Ok(xs
            .iter()
            .filter_map(|(r, x)| ys.iter().find(|(s, _)| s == r).map(|(_, y)| (*x, *y)))
            .collect());
    }
    let suffix = format!(" {figure}");
    let t = tables
        .iter()
        .find(|t| {
            table_block::column(t, "cell").is_some()
                && t.header
                    .iter()
                    .any(|h| h.starts_with("round ") && h.ends_with(&suffix))
        })
        .ok_or_else(|| format!("no per-round table of {figure}: name rows with conditions"))?;
    let cell = table_block::column(t, "cell").unwrap_or_default();
    let row = |label: &str| {
        t.rows
            .iter()
            .find(|r| r[cell] == label)
            .ok_or_else(|| format!("the per-round table has no cell `{label}`"))
    };
    let (x, y) = (row(a)?, row(b)?);
    Ok(t.header
        .iter()
        .enumerate()
        .filter(|(_, h)| h.starts_with("round ") && h.ends_with(&suffix))
        .filter_map(|(i, _)| Some((value(&x[i])?.0, value(&y[i])?.0)))
        .collect())
}

fn count(
    text: &str,
    column: &str,
    conditions: &str,
    (within, holds): (Option<&str>, Option<&str>),
    of: Option<&str>,
) -> Result<String, String> {
    let filters = table_block::parse_filters(conditions)?;
    let (table, rows) = rows_meeting(text, column, &filters)?;
    let i = table_block::column(&table, column).unwrap_or_default();
    let cells = rows
        .iter()
        .map(|r| value(&r[i]).ok_or_else(|| format!("`{}` is not a number", r[i])))
        .collect::<Result<Vec<_>, _>>()?;
    let n = cells.len();
    let scope = match of {
        Some(rows) => format!("of its {n} rows ({rows})"),
        None if conditions.is_empty() => format!("of its {n} rows"),
        None => format!("of its {n} rows where {}", conditions.replace("!=", " ≠ ")),
    };
    match (within, holds) {
        (Some(bounds), None) => {
            let mut parts = Vec::new();
            for bound in marker::list(bounds) {
                let b = number(&bound).ok_or_else(|| format!("within `{bound}`: not a number"))?;
                let k = cells.iter().filter(|(v, _)| v.abs() <= b).count();
                parts.push(format!("within ±{bound}% in {k}"));
            }
            Ok(format!("`{column}`, {scope}: {}", parts.join(", ")))
        }
        (None, Some(target)) => {
            let t = number(target).ok_or_else(|| format!("holds `{target}`: not a number"))?;
            let (mut inside, mut above, mut below, mut bare) = (0, 0, 0, 0);
            for (_, interval) in &cells {
                match interval {
                    Some((lo, _)) if *lo > t => above += 1,
                    Some((_, hi)) if *hi < t => below += 1,
                    Some(_) => inside += 1,
                    None => bare += 1,
                }
            }
            let mut out = format!(
                "`{column}`, {scope}: the interval holds {target} in {inside}, lies above it in {above} and below it in {below}"
            );
            if bare > 0 {
                out.push_str(&format!("; {bare} have no interval (one round)"));
            }
            Ok(out)
        }
        _ => Err("a count takes one of `within` or `holds`".to_owned()),
    }
}

fn quote(text: &str, prefixes: &str, link: &str) -> Result<String, String> {
    let prefixes = marker::list(prefixes);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p.as_str())))
        .collect();
    if lines.is_empty() {
        return Err(format!(
            "no line of the run starts with {}",
            prefixes.join(" or ")
        ));
    }
    let quoted: Vec<String> = lines.iter().map(|l| format!("> {l}")).collect();
    Ok(format!("{}\n>\n> — {link}\n", quoted.join("\n>\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::tempdir::TempRepo;

    const LONG: &str = "# demo\n\nVerdict (3 rounds): single ahead.\nGroups: single a, unnest b.\n\n| round | cell | req/s | p95 ms |\n|---|---|---|---|\n| 1 | single | 1300 | 20 |\n| 1 | unnest | 1000 | 30 |\n| 1 | pipeline | 1290 | 21 |\n| 2 | single | 1330 | 20 |\n| 2 | unnest | 1010 | 30 |\n| 2 | pipeline | 1200 | 21 |\n| 3 | single | 1280 | 20 |\n| 3 | unnest | 990 | 30 |\n| 3 | pipeline | 1350 | 21 |\n";

    fn repo(text: &str) -> TempRepo {
        let repo = TempRepo::new();
        repo.write("results/demo-20261207T000000Z/results.md", text);
        repo
    }

    fn block(repo: &TempRepo, kind: &str, attributes: &str) -> Result<String, String> {
        render(
            kind,
            &format!("run=\"demo-20261207T000000Z\" {attributes}"),
            repo.path(),
            "",
        )
    }

    #[test]
    fn a_difference_is_told_apart_and_a_tie_is_never_a_win() {
        let repo = repo(LONG);
        let apart = block(&repo, "compare", r#"a="single" b="unnest""#).unwrap();
        assert!(
            apart.starts_with("**single** over **unnest**, req/s: 1.30× ["),
            "{apart}"
        );
        assert!(
            apart.contains("paired over 3 rounds: told apart"),
            "{apart}"
        );
        let tie = block(&repo, "compare", r#"a="single" b="pipeline""#).unwrap();
        assert!(tie.contains(": ~ 1.02× ["), "{tie}");
        assert!(tie.contains("not told apart"), "{tie}");
        assert!(!tie.contains(": told apart"), "{tie}");
        let p95 = block(&repo, "compare", r#"a="unnest" b="single" figure="p95 ms""#).unwrap();
        assert!(p95.contains("1.50× [1.50, 1.50]"), "{p95}");
        assert!(block(&repo, "compare", r#"a="single" b="batch""#).is_err());
        // The run's own comparison, from unrounded figures, wins over the
        // per-round table's rounded ones, either way round.
        let own = format!(
            "{LONG}\n| faster | slower | differing in | req/s, faster / slower |\n|---|---|---|---|\n| single | unnest | strategy | 1.25× [1.20, 1.30] |\n"
        );
        let repo = self::repo(&own);
        let r = block(&repo, "compare", r#"a="unnest" b="single""#).unwrap();
        assert!(
            r.contains(": 0.80× [0.77, 0.83], paired over 3 rounds: told apart"),
            "{r}"
        );
    }

    #[test]
    fn one_round_is_one_measurement() {
        let repo = repo(
            "| strategy | members | throughput (req/s) |\n|---|---|---|\n| single | 50 | 1,300 |\n| unnest | 50 | 1000 |\n| single | 1 | 2000 |\n",
        );
        let one = block(
            &repo,
            "compare",
            r#"a="strategy=single; members=50" b="strategy=unnest" figure="throughput (req/s)" names="single; unnest""#,
        )
        .unwrap();
        assert!(
            one.starts_with(
                "**single** over **unnest**, throughput (req/s): 1.30×, one figure a side (no rounds paired): no interval, and no tie can be called ("
            ),
            "{one}"
        );
        let two_rows = block(
            &repo,
            "compare",
            r#"a="strategy=single" b="strategy=unnest" figure="throughput (req/s)""#,
        );
        assert!(two_rows.unwrap_err().contains("2 rows, not one"));
        let wide = repo.path().join("results/demo-20261207T000000Z/results.md");
        std::fs::write(
            &wide,
            "| cell | round 1 req/s |\n|---|---|\n| a | 10 |\n| b | 5 |\n",
        )
        .unwrap();
        let one = block(&repo, "compare", r#"a="a" b="b""#).unwrap();
        assert!(one.contains("2.00× in one round"), "{one}");
    }

    #[test]
    fn counts_bounds_and_intervals_row_by_row() {
        let repo = repo(
            "| RTT | off | of pgbench |\n|---|---|---|\n| 0 | +1.0% | 93% [84, 102] |\n| 1 | -4.9% | 117% [103, 140] |\n| 1 | +8.3% | 85% [75, 96] |\n| 2 | -12.0% | 100% |\n",
        );
        let within = block(&repo, "count", r#"column="off" within="5; 10""#).unwrap();
        assert!(
            within.starts_with("`off`, of its 4 rows: within ±5% in 2, within ±10% in 3 ("),
            "{within}"
        );
        let holds = block(
            &repo,
            "count",
            r#"column="of pgbench" holds="100" where="RTT!=0""#,
        )
        .unwrap();
        assert!(
            holds.starts_with("`of pgbench`, of its 3 rows where RTT ≠ 0: the interval holds 100 in 0, lies above it in 1 and below it in 1; 1 have no interval (one round)"),
            "{holds}"
        );
        assert!(block(&repo, "count", r#"column="off""#).is_err());
        let named = block(
            &repo,
            "count",
            r#"column="off" within="5" where="RTT=1|2" of="at 1 and 2 ms""#,
        )
        .unwrap();
        assert!(
            named.starts_with("`off`, of its 3 rows (at 1 and 2 ms): within ±5% in 1 ("),
            "{named}"
        );
    }

    #[test]
    fn quotes_the_run_s_own_lines_and_nothing_else() {
        let repo = repo(LONG);
        let q = block(&repo, "quote", r#"lines="Verdict; Groups""#).unwrap();
        assert_eq!(
            q,
            "> Verdict (3 rounds): single ahead.\n>\n> Groups: single a, unnest b.\n>\n> — [results/demo-20261207T000000Z](results/demo-20261207T000000Z/results.md)\n"
        );
        assert!(block(&repo, "quote", r#"lines="Winner""#).is_err());
        assert!(block(&repo, "quote", r#"lines="Verdict" colour="red""#).is_err());
    }

    #[test]
    fn reads_cells_as_the_runs_write_them() {
        assert_eq!(
            value("1301 [1170, 1431]"),
            Some((1301.0, Some((1170.0, 1431.0))))
        );
        assert_eq!(
            value("~ 1.07× [0.98, 1.17]"),
            Some((1.07, Some((0.98, 1.17))))
        );
        assert_eq!(value("+4.2%"), Some((4.2, None)));
        assert_eq!(value("2,003"), Some((2003.0, None)));
        assert_eq!(value("12.99 / 24.84"), Some((12.99, None)));
        assert_eq!(value("-"), None);
    }
}
