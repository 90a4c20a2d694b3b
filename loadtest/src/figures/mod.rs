//! Every figure of the docs from its committed run.
//!
//! - Tables of results are rendered into `README.md` and `docs/*.md` from
//!   the run that produced them ([`table_block`]), between markers that
//!   name the run and its command ([`marker`]); `chatlab-load docs`
//!   renders them again. So are the conclusions drawn from a run: a
//!   comparison, a count, the run's verdict ([`conclusion`]).
//! - Figures in prose cite their run with a link, and the numbers in the
//!   link's text must be in that run ([`citations`]); so must the figures
//!   of the sentence around the link ([`prose`]).
//! - A sentence that cites a run carries no comparison of its own
//!   ([`typed`]): the conclusion is rendered, or it is not drawn.
//! - [`check`] finds what is wrong: a typed comparison, a stale block, a mention of a run that
//!   is not committed, a cited number its run does not have, a link to a
//!   doc or heading that is not there ([`anchors`]). The load
//!   tool's tests run it on the repository, so `make test` fails on any.

pub mod anchors;
pub mod citations;
pub mod conclusion;
pub mod markdown_table;
pub mod marker;
pub mod numbers;
pub mod prose;
pub mod table_block;
pub mod typed;

use std::fmt;
use std::path::{Path, PathBuf};

/// One thing wrong with a doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The doc, relative to the repository root.
    pub doc: String,
    /// Its line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.doc, self.line, self.message)
    }
}

/// The docs that carry figures: `README.md`, every `docs/*.md` and every
/// `docs/*/*.md` (the findings, one file an experiment).
pub fn docs(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("README.md")];
    let mut found = Vec::new();
    let mut folders = vec![PathBuf::from("docs")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&folder)) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = folder.join(entry.file_name());
            if entry.file_type().is_ok_and(|t| t.is_dir()) && folder.as_os_str() == "docs" {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    out.extend(found);
    out
}

/// The way back from a doc to the repository root, for its links.
fn to_root(doc: &Path) -> String {
    "../".repeat(doc.components().count().saturating_sub(1))
}

/// Each doc with its tables rendered again: (doc, its text now, rendered).
pub fn render(root: &Path) -> Result<Vec<(PathBuf, String, String)>, Problem> {
    let mut out = Vec::new();
    for doc in docs(root) {
        let text = std::fs::read_to_string(root.join(&doc)).map_err(|e| Problem {
            doc: doc.display().to_string(),
            line: 0,
            message: e.to_string(),
        })?;
        let rendered =
            marker::render_all(&text, root, &to_root(&doc)).map_err(|(line, message)| Problem {
                doc: doc.display().to_string(),
                line,
                message,
            })?;
        out.push((doc, text, rendered));
    }
    Ok(out)
}

/// Everything wrong with the docs under `root`.
pub fn check(root: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut runs = citations::RunNumbers::default();
    for doc in docs(root) {
        let name = doc.display().to_string();
        let problem = |line: usize, message: String| Problem {
            doc: name.clone(),
            line,
            message,
        };
        let text = match std::fs::read_to_string(root.join(&doc)) {
            Ok(t) => t,
            Err(e) => {
                problems.push(problem(0, e.to_string()));
                continue;
            }
        };
        match marker::render_all(&text, root, &to_root(&doc)) {
            Ok(rendered) if rendered != text => {
                let line = first_difference(&text, &rendered);
                problems.push(problem(
                    line,
                    "a rendered block is stale: run `make docs`".to_owned(),
                ));
            }
            Ok(_) => {}
            Err((line, message)) => problems.push(problem(line, message)),
        }
        for (line, run) in citations::mentioned_runs(&text) {
            if runs.of(root, &run).is_none() {
                problems.push(problem(line, format!("results/{run} is not committed")));
            }
        }
        for link in citations::links(&text) {
            if let Some(why) = anchors::broken(root, &doc, &link.target) {
                problems.push(problem(link.line, why));
            }
            let Some(run) = citations::cited_run(&link.target) else {
                continue;
            };
            let Some(numbers) = runs.of(root, run) else {
                problems.push(problem(
                    link.line,
                    format!(
                        "`{}` cites results/{run}, which is not committed",
                        link.target
                    ),
                ));
                continue;
            };
            let missing = citations::missing_figures(&link.text, run, numbers);
            if !missing.is_empty() {
                problems.push(problem(
                    link.line,
                    format!(
                        "{} not in results/{run} (cited by \"{}\")",
                        missing.join(", "),
                        link.text.replace('\n', " ")
                    ),
                ));
            }
        }
        for typed in typed::comparisons(&text) {
            problems.push(problem(
                typed.line,
                format!(
                    "a typed comparison (`{}`) in a sentence that cites a run: render it (figures:compare, count or quote) or withdraw it: \"{}\"",
                    typed.word, typed.sentence
                ),
            ));
        }
        let found = prose::figures(&text);
        for figure in prose::missing(&found, |run, number| {
            runs.of(root, run)
                .map(|numbers| numbers.iter().any(|n| number.is_shown_as(n)))
        }) {
            problems.push(problem(
                figure.line,
                format!(
                    "{} not in {} (in the sentence \"{}\")",
                    figure.number.text,
                    figure
                        .runs
                        .iter()
                        .map(|r| format!("results/{r}"))
                        .collect::<Vec<_>>()
                        .join(" or "),
                    figure.sentence
                ),
            ));
        }
    }
    problems
}

fn first_difference(a: &str, b: &str) -> usize {
    a.lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.lines().count().min(b.lines().count()))
        + 1
}

#[cfg(test)]
pub(crate) mod tempdir {
    //! A scratch repository for the tests, removed on drop.

    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    static NEXT: AtomicU32 = AtomicU32::new(0);

    /// A folder of its own under the system's temporary folder.
    pub struct TempRepo(PathBuf);

    impl TempRepo {
        pub fn new() -> Self {
            let dir = std::env::temp_dir().join(format!(
                "chatlab-figures-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }

        pub fn write(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        pub fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.0.join(rel)).unwrap()
        }
    }

    impl Drop for TempRepo {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tempdir::TempRepo;
    use super::*;

    /// The repository this crate is in.
    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn every_figure_of_the_committed_docs_is_in_its_run() {
        let problems = check(&repository());
        let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            list.is_empty(),
            "run `make docs`, then fix:\n{}",
            list.join("\n")
        );
    }

    /// A copy of the docs and the runs they cite, in a scratch folder.
    fn copy_of_the_docs() -> TempRepo {
        let root = repository();
        let copy = TempRepo::new();
        for doc in docs(&root) {
            let text = std::fs::read_to_string(root.join(&doc)).unwrap();
            copy.write(&doc.display().to_string(), &text);
            for (_, run) in citations::mentioned_runs(&text) {
                copy_dir(
                    &root.join("results").join(&run),
                    &copy.path().join("results").join(&run),
                );
            }
        }
        // What the docs show beside the runs: the images in docs/.
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && path.extension().is_some_and(|e| e != "md") {
                let to = copy.path().join("docs").join(path.file_name().unwrap());
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&path, to).unwrap();
            }
        }
        copy
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if path.is_dir() {
                copy_dir(&path, &to.join(entry.file_name()));
            } else {
                std::fs::copy(&path, to.join(entry.file_name())).unwrap();
            }
        }
    }

    #[test]
    fn one_number_changed_in_a_copy_fails_the_check() {
        let copy = copy_of_the_docs();
        assert!(check(copy.path()).is_empty(), "{:?}", check(copy.path()));
        // The first figure the docs cite, one more than it was.
        let doc = docs(copy.path())
            .into_iter()
            .map(|d| d.display().to_string())
            .find(|d| {
                citations::links(&copy.read(d)).iter().any(|l| {
                    citations::cited_run(&l.target).is_some()
                        && !numbers::numbers(&l.text).is_empty()
                })
            })
            .expect("the docs cite a figure");
        let text = copy.read(&doc);
        let link = citations::links(&text)
            .into_iter()
            .find(|l| {
                citations::cited_run(&l.target).is_some() && !numbers::numbers(&l.text).is_empty()
            })
            .unwrap();
        let figure = numbers::numbers(&link.text).remove(0);
        let changed_text = link
            .text
            .replacen(&figure.text, &format!("{}9", figure.text), 1);
        let changed = text.replacen(
            &format!("[{}]({})", link.text, link.target),
            &format!("[{}]({})", changed_text, link.target),
            1,
        );
        assert_ne!(changed, text);
        copy.write(&doc, &changed);
        let problems = check(copy.path());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].message.contains(&format!("{}9", figure.text)),
            "{:?}",
            problems[0]
        );
    }

    #[test]
    fn a_table_edited_by_hand_or_a_run_taken_away_fails_the_check() {
        let copy = copy_of_the_docs();
        // The findings render their tables (other docs may only show the
        // marker as an example).
        let doc = "docs/findings/round-trips.md".to_owned();
        let text = copy.read(&doc);
        assert!(
            text.contains("<!-- figures:table "),
            "the findings render a table"
        );
        // A cell of the first rendered table, changed by hand.
        let at = text.find("<!-- figures:table ").unwrap();
        let row = text[at..].find("\n| ").map(|r| at + r + 1).unwrap();
        let row = text[row..].find("\n| ").map(|r| row + r + 1).unwrap();
        let mut edited = text.clone();
        edited.insert(row + 2, 'x');
        copy.write(&doc, &edited);
        let problems = check(copy.path());
        assert!(
            problems
                .iter()
                .any(|p| p.doc == doc && p.message.contains("stale")),
            "{problems:?}"
        );
        copy.write(&doc, &text);
        assert!(check(copy.path()).is_empty());

        let run = citations::mentioned_runs(&text).remove(0).1;
        std::fs::remove_dir_all(copy.path().join("results").join(&run)).unwrap();
        let problems = check(copy.path());
        assert!(
            problems
                .iter()
                .any(|p| p.message.contains(&format!("results/{run}"))),
            "{problems:?}"
        );
    }

    #[test]
    fn render_writes_what_check_then_accepts() {
        let repo = TempRepo::new();
        repo.write(
            "results/demo-20261130T000000Z/results.md",
            "| strategy | req/s |\n|---|---|\n| single | 668 |\n",
        );
        repo.write(
            "README.md",
            "single: [668 req/s](results/demo-20261130T000000Z/results.md).\n<!-- figures:table run=\"demo-20261130T000000Z\" command=\"make demo\" columns=\"strategy; req/s\" -->\n<!-- figures:end -->\n",
        );
        repo.write("docs/findings.md", "[all](../results/demo-20261130T000000Z/results.md), [670 req/s](../results/demo-20261130T000000Z/)\n");
        let problems = check(repo.path());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].message.contains("stale"));
        assert_eq!(
            (problems[1].doc.as_str(), problems[1].line),
            ("docs/findings.md", 1)
        );
        assert!(
            problems[1].message.starts_with("670 not in"),
            "{:?}",
            problems[1]
        );
        for (doc, _, rendered) in render(repo.path()).unwrap() {
            repo.write(&doc.display().to_string(), &rendered);
        }
        repo.write(
            "docs/findings.md",
            "[all](../results/demo-20261130T000000Z/results.md)\n",
        );
        assert!(check(repo.path()).is_empty(), "{:?}", check(repo.path()));
    }
}
