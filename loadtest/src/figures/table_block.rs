//! Tables of results rendered into the docs from their committed runs.
//!
//! A doc marks a table with an opening comment that says where its figures
//! come from, and a closing one; `chatlab-load docs` writes what is between
//! them, and `chatlab-load docs --check` fails when it is stale:
//!
//! ```text
//! <!-- figures:table run="demo-20261130T204318Z" command="make demo"
//!      columns="strategy; round trips; throughput (req/s) as req/s"
//!      where="mode=off; strategy!=per_row|batch" -->
//! (rendered: the command and the run's folder, then the table)
//! <!-- figures:end -->
//! ```
//!
//! - `run`: one folder under `results/`, or several separated by commas
//!   (their rows one after another, each led by its run's timestamp).
//! - `file`: the run's file to read (default `results.md`, else `table.md`);
//!   the table used is the first in it that has every column named, or the
//!   `table`-th of those (`table="2"`).
//! - `columns`: the run's column headers, `;`-separated, each optionally
//!   renamed with `as`; the cells are copied as the run wrote them. A
//!   header that occurs twice in the run's table is named `p95 ms#2` for
//!   its second occurrence.
//! - `sum`: columns to total in a last row (`;`-separated; the sums of
//!   the rows kept, at the precision of the cells).
//! - `where`: `;`-separated conditions on cells, `column=a|b` or
//!   `column!=a|b`; rows that meet all of them are kept, in the run's order.
//! - `command`: what produced the run (`make demo`), shown with it.

use std::path::Path;

use super::markdown_table::{self, Table};
use super::marker;

/// What a marker asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// The runs, folders under `results/`.
    pub runs: Vec<String>,
    /// The file of each run to read, when not the default.
    pub file: Option<String>,
    /// The command that produced the runs.
    pub command: String,
    /// (the run's header, the header shown).
    pub columns: Vec<(String, String)>,
    /// Conditions on the rows.
    pub filters: Vec<Filter>,
    /// Which of the file's tables with those columns (1-based).
    pub table: usize,
    /// Columns (as the run names them) to total in a last row.
    pub sums: Vec<String>,
}

/// One condition of `where`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The column it reads.
    pub column: String,
    /// The cell must (or, negated, must not) be one of these.
    pub values: Vec<String>,
    /// `!=`.
    pub negated: bool,
}

impl Filter {
    /// Whether a row whose cell in the column is `cell` is kept.
    pub fn keeps(&self, cell: &str) -> bool {
        self.values.iter().any(|v| v == cell) != self.negated
    }
}

/// Reads `where`: `;`-separated `column=a|b` or `column!=a|b`.
pub fn parse_filters(value: &str) -> Result<Vec<Filter>, String> {
    let mut filters = Vec::new();
    for cond in value.split(';').map(str::trim).filter(|c| !c.is_empty()) {
        let (column, values, negated) = match cond.split_once("!=") {
            Some((c, v)) => (c, v, true),
            None => match cond.split_once('=') {
                Some((c, v)) => (c, v, false),
                None => return Err(format!("`{cond}`: expected column=value")),
            },
        };
        filters.push(Filter {
            column: column.trim().to_owned(),
            values: values.split('|').map(|v| v.trim().to_owned()).collect(),
            negated,
        });
    }
    Ok(filters)
}

/// Reads a table marker's attributes ([`marker::attributes`]).
pub fn parse_spec(attributes: &str) -> Result<TableSpec, String> {
    let mut runs = None;
    let mut file = None;
    let mut command = None;
    let mut columns = None;
    let mut filters = Vec::new();
    let mut table = 1;
    let mut sums = Vec::new();
    for (key, value) in marker::attributes(attributes)? {
        let value = value.as_str();
        match key.as_str() {
            "run" => {
                runs = Some(
                    value
                        .split(',')
                        .map(|r| r.trim().to_owned())
                        .filter(|r| !r.is_empty())
                        .collect::<Vec<_>>(),
                );
            }
            "file" => file = Some(value.trim().to_owned()),
            "table" => {
                table = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("table=\"{value}\": expected 1, 2, ..."))?;
            }
            "sum" => {
                sums = marker::list(value);
            }
            "command" => command = Some(value.trim().to_owned()),
            "columns" => {
                columns = Some(
                    marker::list(value)
                        .into_iter()
                        .map(|c| match c.split_once(" as ") {
                            Some((from, to)) => (from.trim().to_owned(), to.trim().to_owned()),
                            None => (c.clone(), c),
                        })
                        .collect::<Vec<_>>(),
                );
            }
            "where" => filters.extend(parse_filters(value)?),
            other => return Err(format!("unknown attribute `{other}`")),
        }
    }
    let runs = runs.filter(|r| !r.is_empty()).ok_or("no `run`")?;
    let command = command.filter(|c| !c.is_empty()).ok_or("no `command`")?;
    let columns = columns.filter(|c| !c.is_empty()).ok_or("no `columns`")?;
    Ok(TableSpec {
        runs,
        file,
        command,
        columns,
        filters,
        table,
        sums,
    })
}

/// The table a spec asks for, from the runs under `root/results/`, led by
/// the command and a link to each run (relative to the doc: `to_root` is
/// the doc's way back to the repository root, `""` or `"../"`).
pub fn render(spec: &TableSpec, root: &Path, to_root: &str) -> Result<String, String> {
    let several = spec.runs.len() > 1;
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".to_owned());
    }
    header.extend(spec.columns.iter().map(|(_, shown)| shown.clone()));
    let mut out = Table {
        header,
        rows: Vec::new(),
    };
    let mut links = Vec::new();
    for run in &spec.runs {
        let dir = root.join("results").join(run);
        let file = match &spec.file {
            Some(f) => f.clone(),
            None if dir.join("results.md").is_file() => "results.md".to_owned(),
            None => "table.md".to_owned(),
        };
        let path = dir.join(&file);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("results/{run}/{file}: {e}"))?;
        let table = source_table(&text, spec).ok_or_else(|| {
            format!(
                "results/{run}/{file} has no table with the columns {}",
                wanted(spec).join("; ")
            )
        })?;
        let before = out.rows.len();
        for row in &table.rows {
            let keep = spec
                .filters
                .iter()
                .all(|f| column(&table, &f.column).is_some_and(|i| f.keeps(&row[i])));
            if !keep {
                continue;
            }
            let mut cells = Vec::new();
            if several {
                cells.push(run.rsplit('-').next().unwrap_or(run).to_owned());
            }
            for (from, _) in &spec.columns {
                let i = column(&table, from).unwrap_or_default();
                cells.push(row[i].clone());
            }
            out.rows.push(cells);
        }
        if out.rows.len() == before {
            return Err(format!("no row of results/{run}/{file} meets `where`"));
        }
        links.push(format!("[results/{run}]({to_root}results/{run}/{file})"));
    }
    if !spec.sums.is_empty() {
        let total = totals(spec, &out, several)?;
        out.rows.push(total);
    }
    Ok(format!(
        "`{}` · {}\n\n{}",
        spec.command,
        links.join(", "),
        markdown_table::to_markdown(&out)
    ))
}

/// The index of `name` in `table`; `name#2` is its second occurrence.
pub fn column(table: &Table, name: &str) -> Option<usize> {
    let (name, nth) = match name.rsplit_once('#') {
        Some((n, k)) if k.parse::<usize>().is_ok_and(|k| k > 0) => (n, k.parse().unwrap_or(1)),
        _ => (name, 1),
    };
    table
        .header
        .iter()
        .enumerate()
        .filter(|(_, h)| *h == name)
        .nth(nth - 1)
        .map(|(i, _)| i)
}

/// The last row: "total" under the first column, the sum of each column
/// in `sum` (at the most decimals its cells have), the others empty.
fn totals(spec: &TableSpec, out: &Table, several: bool) -> Result<Vec<String>, String> {
    let offset = usize::from(several);
    let mut row = vec![String::new(); out.header.len()];
    for name in &spec.sums {
        let i = spec
            .columns
            .iter()
            .position(|(from, _)| from == name)
            .ok_or_else(|| format!("sum of `{name}`, which `columns` does not name"))?
            + offset;
        let mut total = 0.0;
        let mut decimals = 0;
        for r in &out.rows {
            let cell = r[i].replace(',', "");
            let value: f64 = cell
                .trim()
                .parse()
                .map_err(|_| format!("sum of `{name}`: `{}` is not a number", r[i]))?;
            decimals = decimals.max(cell.split_once('.').map_or(0, |(_, d)| d.len()));
            total += value;
        }
        row[i] = format!("{total:.decimals$}");
    }
    if row[0].is_empty() {
        row[0] = "total".to_owned();
    } else {
        return Err("the first column cannot be summed: it says \"total\"".to_owned());
    }
    Ok(row)
}

fn wanted(spec: &TableSpec) -> Vec<&str> {
    spec.columns
        .iter()
        .map(|(from, _)| from.as_str())
        .chain(spec.filters.iter().map(|f| f.column.as_str()))
        .collect()
}

fn source_table(text: &str, spec: &TableSpec) -> Option<Table> {
    let names = wanted(spec);
    markdown_table::tables(text)
        .into_iter()
        .filter(|t| names.iter().all(|n| column(t, n).is_some()))
        .nth(spec.table - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::tempdir;

    #[test]
    fn reads_every_attribute() {
        let spec = parse_spec(
            r#"run="a-1, b-2" command="make demo" columns="strategy; throughput (req/s) as req/s" where="mode=off; strategy!=per_row|batch" file="table.md""#,
        )
        .unwrap();
        assert_eq!(spec.runs, ["a-1", "b-2"]);
        assert_eq!(spec.command, "make demo");
        assert_eq!(spec.file.as_deref(), Some("table.md"));
        assert_eq!(
            spec.columns,
            [
                ("strategy".to_owned(), "strategy".to_owned()),
                ("throughput (req/s)".to_owned(), "req/s".to_owned())
            ]
        );
        assert_eq!(spec.filters.len(), 2);
        assert!(spec.filters[1].negated);
        assert_eq!(spec.filters[1].values, ["per_row", "batch"]);
        assert!(
            parse_spec(r#"run="a" columns="x""#)
                .unwrap_err()
                .contains("command")
        );
        assert!(parse_spec(r#"run="a" command="c" columns="x" colour="red""#).is_err());
    }

    fn repo() -> tempdir::TempRepo {
        let repo = tempdir::TempRepo::new();
        repo.write(
            "results/demo-20261130T000000Z/results.md",
            "# demo\n\n| strategy | mode | req/s | p95 ms |\n|---|---|---|---|\n| per_row | off | 121 | 196.2 |\n| single | off | 668 | 39.0 |\n",
        );
        repo.write(
            "results/demo-20261201T000000Z/results.md",
            "| strategy | mode | req/s | p95 ms |\n|---|---|---|---|\n| single | off | 700 | 38.0 |\n",
        );
        repo
    }

    #[test]
    fn renders_the_columns_and_rows_asked_for_with_their_run() {
        let repo = repo();
        let spec = parse_spec(
            r#"run="demo-20261130T000000Z" command="make demo" columns="strategy; req/s as throughput" where="strategy!=per_row""#,
        )
        .unwrap();
        let md = render(&spec, repo.path(), "../").unwrap();
        assert_eq!(
            md,
            "`make demo` · [results/demo-20261130T000000Z](../results/demo-20261130T000000Z/results.md)\n\n| strategy | throughput |\n|---|---|\n| single | 668 |\n"
        );
        let both = parse_spec(
            r#"run="demo-20261130T000000Z,demo-20261201T000000Z" command="make demo" columns="req/s" where="strategy=single""#,
        )
        .unwrap();
        let md = render(&both, repo.path(), "").unwrap();
        assert!(md.contains("| run | req/s |\n|---|---|\n| 20261130T000000Z | 668 |\n| 20261201T000000Z | 700 |\n"), "{md}");
    }

    #[test]
    fn picks_the_nth_table_a_repeated_column_and_totals() {
        let repo = tempdir::TempRepo::new();
        repo.write(
            "results/check-20261130T000000Z/results.md",
            "## memory\n\n| round | acked | p95 ms | p95 ms |\n|---|---|---|---|\n| 1 | 500 | 1.5 | 9.0 |\n| 2 | 1,000 | 2.25 | 8.0 |\n\n## sqlite\n\n| round | acked | p95 ms | p95 ms |\n|---|---|---|---|\n| 1 | 7 | 1 | 1 |\n",
        );
        let spec = parse_spec(
            r#"run="check-20261130T000000Z" command="c" columns="round; acked; p95 ms; p95 ms#2 as delivery p95" sum="acked; p95 ms""#,
        )
        .unwrap();
        let md = render(&spec, repo.path(), "").unwrap();
        assert!(md.ends_with("| round | acked | p95 ms | delivery p95 |\n|---|---|---|---|\n| 1 | 500 | 1.5 | 9.0 |\n| 2 | 1,000 | 2.25 | 8.0 |\n| total | 1500 | 3.75 |  |\n"), "{md}");
        let second =
            parse_spec(r#"run="check-20261130T000000Z" command="c" columns="acked" table="2""#)
                .unwrap();
        assert!(
            render(&second, repo.path(), "")
                .unwrap()
                .ends_with("| acked |\n|---|\n| 7 |\n")
        );
        let third =
            parse_spec(r#"run="check-20261130T000000Z" command="c" columns="acked" table="3""#)
                .unwrap();
        assert!(render(&third, repo.path(), "").is_err());
        let bad =
            parse_spec(r#"run="check-20261130T000000Z" command="c" columns="round" sum="round""#)
                .unwrap();
        assert!(
            render(&bad, repo.path(), "")
                .unwrap_err()
                .contains("first column")
        );
    }

    #[test]
    fn a_missing_run_column_or_row_is_an_error() {
        let repo = repo();
        let spec = |attrs: &str| parse_spec(attrs).unwrap();
        let err = render(
            &spec(r#"run="demo-x" command="c" columns="req/s""#),
            repo.path(),
            "",
        )
        .unwrap_err();
        assert!(err.contains("results/demo-x/table.md"), "{err}");
        let err = render(
            &spec(r#"run="demo-20261130T000000Z" command="c" columns="rps""#),
            repo.path(),
            "",
        )
        .unwrap_err();
        assert!(err.contains("no table with the columns rps"), "{err}");
        let err = render(
            &spec(r#"run="demo-20261130T000000Z" command="c" columns="req/s" where="mode=on""#),
            repo.path(),
            "",
        )
        .unwrap_err();
        assert!(err.contains("no row"), "{err}");
    }

    #[test]
    fn rendering_replaces_only_what_is_between_the_markers() {
        let repo = repo();
        let doc = "intro\n<!-- figures:table run=\"demo-20261130T000000Z\" command=\"make demo\" columns=\"req/s\" where=\"strategy=single\" -->\nstale\n<!-- figures:end -->\nafter\n";
        let out = marker::render_all(doc, repo.path(), "").unwrap();
        assert!(out.starts_with("intro\n<!-- figures:table"));
        assert!(out.contains("-->\n`make demo` · [results/demo-20261130T000000Z](results/demo-20261130T000000Z/results.md)\n\n| req/s |\n|---|\n| 668 |\n<!-- figures:end -->\nafter\n"), "{out}");
        assert!(!out.contains("stale"));
        assert_eq!(marker::render_all(&out, repo.path(), "").unwrap(), out);
        let example =
            "```text\n<!-- figures:table run=\"nowhere\" -->\n<!-- figures:end -->\n```\n";
        assert_eq!(
            marker::render_all(example, repo.path(), "").unwrap(),
            example
        );
        let (line, err) = marker::render_all(
            "a\nb\n<!-- figures:table run=\"x\" -->\n<!-- figures:end -->\n",
            repo.path(),
            "",
        )
        .unwrap_err();
        assert_eq!(line, 3);
        assert!(err.contains("command"), "{err}");
    }
}
