//! Figures in the prose around a citation. A sentence (a list item, a
//! table cell) that cites a run with a link to `results/<run>` vouches for
//! the figures written outside the link too, so those must be in the run
//! like the link's own ([`super::citations`]):
//!
//! ```text
//! per_row [234 against 275 req/s](results/layout-…/results.md), 14 of 15 rounds
//! ```
//!
//! holds `14` and `15` to the layout run as well.
//!
//! Which numbers are figures (a heuristic, tuned on the docs):
//! - a number with a decimal point (`19.1`, `0.115`);
//! - a number followed by a unit of measurement ([`UNITS`]: `ms`, `µs`,
//!   `s`, `req/s`, `rows/s`, `%`, `×`, `times`, `MiB`, …);
//! - a count `N of …` (`40 of 40`, `47 of per_row's 52`: the `N`).
//!
//! Which are not (settings and context, left to the reader):
//! - anything else: member counts, VUs, clients, cores, rounds, seeds,
//!   section numbers, years and dates (`2026-12-06`, `21:14`);
//! - a number right after a word of condition or bound ([`CONDITION_BEFORE`]:
//!   `at 500 req/s`, `at a 50 ms round trip`, `at 1,000`, `under 150 ms`,
//!   `within 1 s`, `a default of 500 ms`): what a figure was measured at
//!   or held to, and the rest of a list it opens (`at 0.2, 0.5 and 1 ms`);
//! - a duration that names a setting ([`SETTING_AFTER`]: `50 ms RTT`,
//!   `1 ms away`, `the 10 s body timeout`, `a 2 s window`);
//! - the seeds' own figures, quoted beside ours: a number with `seed`
//!   shortly before it in its clause (`the seed found 1.69`, `the seed's
//!   98.8%`, `(the seed 004 JVM service: 92 MB`);
//! - code spans (`` `HTTP_BACKLOG=128` ``, `` `50 ms` ``): the escape for
//!   one number that is a setting, not a figure, when no rule above says so;
//! - fenced code, HTML comments, rendered tables (checked against their
//!   run as a whole), and link texts (checked on their own).
//!
//! A unit is a sentence: prose split at `.`, `?` or `!` before white
//! space, at a blank line, at each list item and heading, and at a table's
//! `|`. A figure is accepted when any run the unit cites has it, as
//! written or rounded to its precision (`numbers::Number::is_shown_as`).
//!
//! What it cannot see, and a reader still must: counts in words (`four
//! strategies of five`, `in two of them`), which name a figure belongs to
//! (a run's `134428` called unnest's when it is pipeline's), and claims
//! with no number at all (`closed within the body timeout`).

use std::ops::Range;

use super::citations;
use super::marker;
use super::numbers::{self, Number};

/// Units after which a number is a measurement.
pub const UNITS: &[&str] = &[
    "ms",
    "µs",
    "s",
    "min",
    "req/s",
    "requests/s",
    "rows/s",
    "messages/s",
    "createChats/s",
    "tps",
    "MiB",
    "KiB",
    "GiB",
    "MB",
    "%",
    "×",
    "times",
];

/// Words after a duration that make it a setting, not a measurement.
pub const SETTING_AFTER: &[&str] = &[
    "RTT", "away", "round", "broker", "body", "timeout", "budget", "apart", "injected", "delay",
    "window",
];

/// Words before a number that make it a condition or a bound, not a
/// measurement (the last words before it, lower case).
pub const CONDITION_BEFORE: &[&[&str]] = &[
    &["at"],
    &["at", "a"],
    &["at", "an"],
    &["under"],
    &["below"],
    &["above"],
    &["within"],
    &["up", "to"],
    &["default", "of"],
];

/// A figure in prose and the runs its sentence cites.
#[derive(Debug, Clone, PartialEq)]
pub struct ProseFigure {
    /// The doc's line it is on.
    pub line: usize,
    /// The figure.
    pub number: Number,
    /// The runs the sentence cites.
    pub runs: Vec<String>,
    /// The sentence, on one line, without its links' targets.
    pub sentence: String,
}

/// Every figure of `doc`'s prose that sits in a sentence citing a run.
pub fn figures(doc: &str) -> Vec<ProseFigure> {
    let Masked { text, cites, .. } = mask(doc);
    let text = String::from_utf8(text).unwrap_or_default();
    let mut out = Vec::new();
    for unit in units(&text) {
        let runs: Vec<String> = cites
            .iter()
            .filter(|(at, _)| unit.contains(at))
            .map(|(_, run)| run.clone())
            .fold(Vec::new(), |mut v, r| {
                if !v.contains(&r) {
                    v.push(r);
                }
                v
            });
        if runs.is_empty() {
            continue;
        }
        let body = &text[unit.clone()];
        let sentence = doc
            .get(unit.clone())
            .unwrap_or(body)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let found = numbers::numbers_at(body);
        // `0.2, 0.5 and 1 ms away`: a list a setting closes is settings.
        let mut set = vec![false; found.len()];
        for k in (0..found.len()).rev() {
            set[k] = names_setting(&body[found[k].0.end..])
                || (k + 1 < found.len()
                    && set[k + 1]
                    && joins_list(&body[found[k].0.end..found[k + 1].0.start]));
        }
        let mut after_at = false;
        for (k, (range, number)) in found.iter().enumerate() {
            // `at 0.2, 0.5 and 1 ms`: the list `at` opens is conditions.
            let opens = opens_condition(&body[..range.start]);
            let continues = after_at && k > 0 && joins_list(&body[found[k - 1].0.end..range.start]);
            after_at = opens || continues;
            if after_at || set[k] || !is_figure(body, range, number) {
                continue;
            }
            out.push(ProseFigure {
                line: text[..unit.start + range.start].matches('\n').count() + 1,
                number: number.clone(),
                runs: runs.clone(),
                sentence: sentence.clone(),
            });
        }
    }
    out
}

/// The figures of [`figures`] that none of their sentence's runs has:
/// `has(run, figure)` tells whether a run has a figure, `None` when the
/// run is not committed (reported elsewhere, so not held against it).
pub fn missing(
    found: &[ProseFigure],
    mut has: impl FnMut(&str, &Number) -> Option<bool>,
) -> Vec<&ProseFigure> {
    found
        .iter()
        .filter(|f| {
            let mut any_committed = false;
            for run in &f.runs {
                match has(run, &f.number) {
                    Some(true) => return false,
                    Some(false) => any_committed = true,
                    None => {}
                }
            }
            any_committed
        })
        .collect()
}

fn opens_condition(before: &str) -> bool {
    let words: Vec<String> = before
        .split_whitespace()
        .rev()
        .take(2)
        .map(|w| w.to_lowercase())
        .collect();
    CONDITION_BEFORE.iter().any(|phrase| {
        phrase.len() <= words.len()
            && phrase
                .iter()
                .rev()
                .zip(&words)
                .all(|(p, w)| *p == w.as_str())
    })
}

/// Whether the seed is named in the clause just before a number.
fn quotes_seed(before: &str) -> bool {
    let from = before
        .char_indices()
        .rev()
        .take(40)
        .last()
        .map_or(0, |(i, _)| i);
    let clause = &before[from..];
    let clause = clause.rsplit(['(', ')', ';']).next().unwrap_or(clause);
    clause.contains("seed")
}

/// Whether what lies between two numbers joins them in one list
/// (`, ` or ` and ` or ` to `), with at most a unit in between.
fn joins_list(between: &str) -> bool {
    let mut rest = between.trim();
    if let Some(unit) = UNITS.iter().find(|u| rest.starts_with(**u)) {
        rest = rest[unit.len()..].trim();
    }
    matches!(rest, "," | "and" | ", and" | "or" | "to" | "-" | "–")
}

fn is_figure(text: &str, range: &Range<usize>, number: &Number) -> bool {
    let before = &text[..range.start];
    let after = &text[range.end..];
    // Dates, times, paths and anchors: `2026-12-06`, `21:14`, `/1.1`, `#3`.
    let prev = before.chars().next_back();
    let next = after.chars().next();
    let next2 = after.chars().nth(1);
    if quotes_seed(before)
        || matches!(prev, Some('/' | ':' | '#' | '§'))
        || (prev == Some('-') && before[..before.len() - 1].ends_with(|c: char| c.is_ascii_digit()))
        || (matches!(next, Some(':' | '-')) && next2.is_some_and(|c| c.is_ascii_digit()))
    {
        return false;
    }
    let rest = after.trim_start();
    unit_of(rest).is_some() || number.decimals > 0 || rest.starts_with("of ")
}

/// The unit `rest` starts with, as a word of its own.
fn unit_of(rest: &str) -> Option<&'static str> {
    UNITS.iter().copied().find(|u| {
        rest.starts_with(*u)
            && !rest[u.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
    })
}

/// Whether the text after a number makes it a setting: a unit, then a
/// word of [`SETTING_AFTER`].
fn names_setting(after: &str) -> bool {
    let rest = after.trim_start();
    unit_of(rest).is_some_and(|unit| {
        let next_word = rest[unit.len()..]
            .trim_start()
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("");
        SETTING_AFTER.contains(&next_word)
    })
}

/// A doc with what is not prose blanked, each byte kept in place.
pub(super) struct Masked {
    /// The doc with code, comments, rendered blocks and links blanked.
    pub text: Vec<u8>,
    /// Where each link citing a run was, with its run.
    pub cites: Vec<(usize, String)>,
    /// Where each link's text was (between its brackets).
    pub link_texts: Vec<Range<usize>>,
}

/// `doc` as [`Masked`].
pub(super) fn mask(doc: &str) -> Masked {
    let mut out = doc.as_bytes().to_vec();
    let blank = |out: &mut Vec<u8>, r: Range<usize>| {
        for b in &mut out[r] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut at = 0;
    let mut in_fence = false;
    let mut in_table = false;
    let mut in_comment = false;
    for line in doc.split_inclusive('\n') {
        let span = at..at + line.len();
        at += line.len();
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            blank(&mut out, span);
            continue;
        }
        if marker::opens(line) {
            in_table = true;
        }
        if in_fence || in_table {
            blank(&mut out, span.clone());
        }
        if line.contains(marker::CLOSE) {
            in_table = false;
        }
        if in_fence || in_table {
            continue;
        }
        // Comments and code spans, on their line.
        let mut i = 0;
        let bytes = line.as_bytes();
        while i < bytes.len() {
            if in_comment {
                match line[i..].find("-->") {
                    Some(end) => {
                        blank(&mut out, span.start + i..span.start + i + end + 3);
                        i += end + 3;
                        in_comment = false;
                    }
                    None => {
                        blank(&mut out, span.start + i..span.end);
                        break;
                    }
                }
            } else if bytes[i..].starts_with(b"<!--") {
                in_comment = true;
            } else if bytes[i] == b'`' {
                let end = line[i + 1..]
                    .find('`')
                    .map_or(bytes.len(), |e| i + 1 + e + 1);
                blank(&mut out, span.start + i..span.start + end);
                i = end;
            } else {
                i += 1;
            }
        }
    }
    // Links: blanked whole, their runs kept where they were.
    let mut cites = Vec::new();
    let mut link_texts = Vec::new();
    let mut i = 0;
    while i < out.len() {
        if out[i] != b'[' {
            i += 1;
            continue;
        }
        let Some(close) = citations::matching(&out, i, b'[', b']') else {
            i += 1;
            continue;
        };
        if out.get(close + 1) != Some(&b'(') {
            i += 1;
            continue;
        }
        let Some(end) = citations::matching(&out, close + 1, b'(', b')') else {
            i += 1;
            continue;
        };
        let target = String::from_utf8_lossy(&out[close + 2..end])
            .trim()
            .to_owned();
        if let Some(run) = citations::cited_run(&target) {
            cites.push((i, run.to_owned()));
        }
        link_texts.push(i + 1..close);
        blank(&mut out, i..end + 1);
        i = end + 1;
    }
    Masked {
        text: out,
        cites,
        link_texts,
    }
}

/// The sentences of masked prose, as byte ranges.
pub(super) fn units(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let cut = |out: &mut Vec<Range<usize>>, start: &mut usize, end: usize| {
        if end > *start {
            out.push(*start..end);
        }
        *start = end;
    };
    for i in 0..bytes.len() {
        match bytes[i] {
            b'\n' => {
                let next = text[i + 1..].split('\n').next().unwrap_or("");
                let t = next.trim_start();
                let item = t.starts_with("- ")
                    || t.starts_with("* ")
                    || t.starts_with('#')
                    || t.is_empty()
                    || t.split_once(". ").is_some_and(|(n, _)| {
                        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
                    });
                if item {
                    cut(&mut out, &mut start, i + 1);
                }
            }
            b'|' => cut(&mut out, &mut start, i + 1),
            b'.' | b'?' | b'!' if bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace()) => {
                cut(&mut out, &mut start, i + 1)
            }
            _ => {}
        }
    }
    cut(&mut out, &mut start, bytes.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "layout-20261203T124054Z";

    fn run_has(run: &str, figure: &Number) -> Option<bool> {
        (run == RUN).then(|| {
            numbers::numbers("| per_row | 112.1 | 114.7 | 49 | 54 | 5 |")
                .iter()
                .any(|n| figure.is_shown_as(n))
        })
    }

    fn missing_texts(doc: &str) -> Vec<(usize, String)> {
        let found = figures(doc);
        missing(&found, run_has)
            .into_iter()
            .map(|f| (f.line, f.number.text.clone()))
            .collect()
    }

    #[test]
    fn a_figure_beside_a_citation_must_be_in_its_run() {
        let doc = format!(
            "Batching took 47 of per_row's\n[54 round trips](results/{RUN}/results.md) away,\nin 112.0 ms.\n"
        );
        assert_eq!(
            missing_texts(&doc),
            [(1, "47".to_owned()), (3, "112.0".to_owned())]
        );
        let right = format!(
            "Batching took 49 of per_row's [54 round trips](results/{RUN}/results.md) away, in 112.1 ms.\n"
        );
        assert_eq!(missing_texts(&right), []);
    }

    #[test]
    fn settings_and_context_are_no_figures() {
        let doc = format!(
            "At 50 members and 20 VUs on 2 cores, at 500 req/s and at a 50 ms round trip, \
             0.2, 0.5 and 1 ms away (2026-12-06 21:14, `HTTP_BACKLOG=128`, seed 004, \
             the 10 s body timeout, at 0.2, 0.3 and 0.7 ms, under 150 ms, a 2 s window, \
             a default of 500 ms, the seed found 1.69), per_row held \
             [114.7 ms](../results/{RUN}/results.md), less than the seed's 98.8%.\n"
        );
        assert_eq!(missing_texts(&doc), []);
    }

    #[test]
    fn a_sentence_without_a_run_and_other_sentences_are_left_alone() {
        let doc = format!(
            "Uncited: 3.5 ms. Cited: [114.7 ms](results/{RUN}). Next: 9.9 ms.\n\n- item 8.8%\n- item [5](results/{RUN}) at 7.7 ms, with 6.6%\n| a 1.1 ms | [5](results/{RUN}) |\n```\n4.4 ms [5](results/{RUN})\n```\n"
        );
        assert_eq!(missing_texts(&doc), [(4, "6.6".to_owned())]);
    }

    #[test]
    fn a_figure_in_any_run_the_sentence_cites_will_do() {
        let doc = format!(
            "[a](results/other-20261203T000000Z) and [b](results/{RUN}): 112.1 ms, 3.3 ms.\n"
        );
        // `other-…` is not committed; its figures are not held against it.
        assert_eq!(missing_texts(&doc), [(1, "3.3".to_owned())]);
    }
}
