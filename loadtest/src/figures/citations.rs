//! Figures in prose cite their run: a Markdown link to a folder under
//! `results/` (or a file in it) whose text holds the figures,
//!
//! ```text
//! single costs [399 µs of server CPU per request at 500 req/s](results/cpu-at-500-20261130T205324Z/results.md)
//! ```
//!
//! and every number in that text must be in the run: in one of its
//! Markdown, CSV or text files, as written or rounded to the figure's
//! precision (`numbers::Number::is_shown_as`). Any mention of a run folder,
//! linked or not, must name one that exists.

use std::collections::BTreeMap;
use std::path::Path;

use super::numbers::{self, Number};

/// One link of a doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its text, between the brackets.
    pub text: String,
    /// Its target, between the parentheses.
    pub target: String,
    /// The doc's line it starts on.
    pub line: usize,
}

/// The links of `doc` outside fenced code blocks (images included: their
/// alt text is their text).
pub fn links(doc: &str) -> Vec<Link> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut prose = String::new();
    let mut line_of = Vec::new();
    for (n, line) in doc.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            prose.push_str(line);
            line_of.extend(std::iter::repeat_n(n + 1, line.len()));
        } else {
            // A blank line in place of code, so no link spans a fence.
            prose.push('\n');
            line_of.push(n + 1);
        }
    }
    let bytes = prose.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'[' {
            i += 1;
            continue;
        }
        let Some(close) = matching(bytes, i, b'[', b']') else {
            i += 1;
            continue;
        };
        if bytes.get(close + 1) != Some(&b'(') {
            i += 1;
            continue;
        }
        let Some(end) = matching(bytes, close + 1, b'(', b')') else {
            i += 1;
            continue;
        };
        out.push(Link {
            text: prose[i + 1..close].to_owned(),
            target: prose[close + 2..end].trim().to_owned(),
            line: line_of.get(i).copied().unwrap_or(0),
        });
        // Links inside this link's text (none in practice) are skipped.
        i = end + 1;
    }
    out
}

/// The index of the bracket that closes the one at `open`, on one
/// paragraph (no blank line in between).
pub(super) fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b if b == left => depth += 1,
            b if b == right => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'\n' if bytes.get(i + 1) == Some(&b'\n') => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The run folder a link target names (`../results/demo-…/results.md` →
/// `demo-…`), if it names one.
pub fn cited_run(target: &str) -> Option<&str> {
    let path = target.split(['#', '?']).next()?;
    let mut parts = path.split('/').skip_while(|p| *p == ".." || *p == ".");
    if parts.next()? != "results" {
        return None;
    }
    parts.next().filter(|run| !run.is_empty())
}

/// Every run folder `doc` mentions in any form (`results/<name>-<UTC
/// timestamp>`), with its line.
pub fn mentioned_runs(doc: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("results/") {
            let after = &rest[at + "results/".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.')
                .collect();
            let name = name.trim_end_matches('.').to_owned();
            if is_run_name(&name) {
                out.push((n + 1, name));
            }
            rest = after;
        }
    }
    out
}

/// `<name>-<yyyymmdd>T<hhmmss>Z`, as the load tool names its runs.
pub fn is_run_name(name: &str) -> bool {
    let Some((_, stamp)) = name.rsplit_once('-') else {
        return false;
    };
    let b = stamp.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
}

/// The numbers of a run: of its `.md`, `.csv` and `.txt` files, not of its
/// logs. Read once per run.
#[derive(Debug, Default)]
pub struct RunNumbers {
    runs: BTreeMap<String, Option<Vec<Number>>>,
}

impl RunNumbers {
    /// The numbers of `run` under `root/results/`; `None` when the folder
    /// does not exist.
    pub fn of(&mut self, root: &Path, run: &str) -> Option<&[Number]> {
        self.runs
            .entry(run.to_owned())
            .or_insert_with(|| {
                let dir = root.join("results").join(run);
                dir.is_dir().then(|| {
                    let mut all = Vec::new();
                    collect(&dir, &mut all);
                    all
                })
            })
            .as_deref()
    }
}

fn collect(dir: &Path, into: &mut Vec<Number>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "logs") {
                collect(&path, into);
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "md" || e == "csv" || e == "txt")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            into.extend(numbers::numbers(&text));
        }
    }
}

/// The numbers of a citation's text that its run does not have.
pub fn missing_figures(text: &str, run: &str, run_numbers: &[Number]) -> Vec<String> {
    let text = text.replace(run, " ");
    numbers::numbers(&text)
        .into_iter()
        .filter(|figure| !run_numbers.iter().any(|n| figure.is_shown_as(n)))
        .map(|n| n.text)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_links_outside_code_with_their_lines() {
        let doc = "a [one 1](results/x-20261130T000000Z)\n```\n[no](results/y)\n```\nb ![alt 2](../results/z/c.svg) and [plain](https://example.com)\n[multi\nline](t)\n";
        let l = links(doc);
        assert_eq!(l.len(), 4, "{l:?}");
        assert_eq!((l[0].text.as_str(), l[0].line), ("one 1", 1));
        assert_eq!(
            (l[1].text.as_str(), l[1].target.as_str(), l[1].line),
            ("alt 2", "../results/z/c.svg", 5)
        );
        assert_eq!(l[3].text, "multi\nline");
        assert_eq!(l[3].line, 6);
    }

    #[test]
    fn knows_which_run_a_target_names() {
        assert_eq!(cited_run("../results/demo-1/results.md"), Some("demo-1"));
        assert_eq!(cited_run("results/demo-1"), Some("demo-1"));
        assert_eq!(cited_run("results/demo-1/#x"), Some("demo-1"));
        assert_eq!(cited_run("docs/findings.md#results"), None);
        assert_eq!(cited_run("#results"), None);
    }

    #[test]
    fn finds_run_names_wherever_they_are_mentioned() {
        let doc = "Runs: `results/pool-20261130T040112Z`, and\n(results/fault-db-20261130T134135Z/table.md). results/ alone, results/not-a-run.\n";
        assert_eq!(
            mentioned_runs(doc),
            [
                (1, "pool-20261130T040112Z".to_owned()),
                (2, "fault-db-20261130T134135Z".to_owned())
            ]
        );
    }

    #[test]
    fn a_figure_not_in_its_run_is_reported() {
        let run = numbers::numbers("| single | 399 | 668.0 | 41.99 |");
        let run_name = "cpu-at-500-20261130T205324Z";
        assert!(missing_figures("399 µs at 668 req/s, held 42 ms", run_name, &run).is_empty());
        assert_eq!(
            missing_figures("397 to 420 µs", run_name, &run),
            ["397", "420"]
        );
        assert!(missing_figures("results/cpu-at-500-20261130T205324Z", run_name, &run).is_empty());
    }

    #[test]
    fn an_interval_in_a_link_is_read_like_any_figure() {
        let doc = "single led by [1.27× [1.20, 1.34] unnest](results/demo-20261206T000000Z/results.md), and then";
        let l = links(doc);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(l[0].text, "1.27× [1.20, 1.34] unnest");
        let run = numbers::numbers("| unnest | ~ 1.27× [1.20, 1.34] |");
        assert!(missing_figures(&l[0].text, "demo-20261206T000000Z", &run).is_empty());
        let other = numbers::numbers("| unnest | 1.27× [1.19, 1.34] |");
        assert_eq!(
            missing_figures(&l[0].text, "demo-20261206T000000Z", &other),
            ["1.20"]
        );
    }
}
