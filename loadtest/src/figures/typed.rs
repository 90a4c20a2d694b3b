//! Comparisons typed into the docs. A sentence (a list item, a table
//! cell) that cites a run may state its figures, but the conclusion drawn
//! from them — a ratio, a win, a tie, "every", "never", "all 25", "within
//! 5%", a crossing, a ranking — must be rendered from the run
//! ([`super::conclusion`]), so it cannot outrun it. This finds the typed
//! ones: a word or phrase of [`WORDS`] or [`PHRASES`], a ratio (`1.2×`),
//! `all` before a number, or `within` before a percentage, in the prose of
//! a sentence that links to `results/<run>`, link texts included; code
//! spans, comments and rendered blocks are not prose.
//!
//! Typed prose explains (what a strategy sends, why a hold grows): a
//! sentence that cites nothing is left alone.

use super::prose::{self, Masked};

/// Words that draw a conclusion from figures.
pub const WORDS: &[&str] = &[
    "won",
    "win",
    "wins",
    "winner",
    "winners",
    "ahead",
    "behind",
    "level",
    "beat",
    "beats",
    "faster",
    "slower",
    "fastest",
    "slowest",
    "cheaper",
    "costlier",
    "best",
    "worst",
    "never",
    "every",
    "always",
    "tie",
    "ties",
    "tied",
    "crosses",
    "crossed",
    "crossing",
    "crossover",
    "narrows",
    "widens",
    "lead",
    "leads",
    "outruns",
    "ranking",
    "ranked",
];

/// Phrases that do.
pub const PHRASES: &[&str] = &[
    "told apart",
    "more than",
    "less than",
    "fewer than",
    "higher than",
    "lower than",
    "times as",
    "times faster",
    "times slower",
    "times more",
    "times less",
];

/// A typed comparison: where, what gave it away, and its sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    /// The doc's line.
    pub line: usize,
    /// The word, phrase or pattern found.
    pub word: String,
    /// The sentence, on one line.
    pub sentence: String,
}

/// Every sentence of `doc` that cites a run and types a comparison.
pub fn comparisons(doc: &str) -> Vec<Typed> {
    let Masked {
        text,
        cites,
        link_texts,
    } = prose::mask(doc);
    // Prose with the links' texts put back (their targets stay blank).
    let mut words = text.clone();
    for r in &link_texts {
        words[r.clone()].copy_from_slice(&doc.as_bytes()[r.clone()]);
    }
    let masked = String::from_utf8_lossy(&text).into_owned();
    let words = String::from_utf8_lossy(&words).into_owned();
    let mut out = Vec::new();
    for unit in prose::units(&masked) {
        if !cites.iter().any(|(at, _)| unit.contains(at)) {
            continue;
        }
        let Some(body) = words.get(unit.clone()) else {
            continue;
        };
        if let Some((at, word)) = first_comparison(body) {
            out.push(Typed {
                line: doc[..unit.start + at].matches('\n').count() + 1,
                word,
                sentence: body.split_whitespace().collect::<Vec<_>>().join(" "),
            });
        }
    }
    out
}

/// The first comparison in `text`: its byte offset and what it is.
fn first_comparison(text: &str) -> Option<(usize, String)> {
    let lower = text.to_lowercase();
    let tokens = tokens(&lower);
    for (k, &(at, word)) in tokens.iter().enumerate() {
        // The next word, when only white space parts it from this one.
        let next = tokens
            .get(k + 1)
            .and_then(|&(at2, w)| lower[at + word.len()..at2].trim().is_empty().then_some(w));
        let after = &lower[at + word.len()..];
        // A run's name (`crossover-20261207T182357Z`) names, it does not compare.
        if after.starts_with('-') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        // `every 500 ms`: a period, not a conclusion.
        let period =
            word == "every" && next.is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
        if WORDS.contains(&word) && !period {
            return Some((at, word.to_owned()));
        }
        if let Some(phrase) = next.and_then(|n| {
            let two = format!("{word} {n}");
            PHRASES.iter().find(|p| **p == two)
        }) {
            return Some((at, (*phrase).to_owned()));
        }
        let starts_number = word.starts_with(|c: char| c.is_ascii_digit());
        if starts_number && after.starts_with('×') {
            return Some((at, format!("{word}×")));
        }
        if word == "all" && next.is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit())) {
            return Some((at, format!("all {}", next.unwrap_or_default())));
        }
        if word == "within"
            && let Some(n) = next.filter(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        {
            let end = lower[at..].find(n).map_or(at, |i| at + i + n.len());
            if lower[end..].trim_start().starts_with('%') {
                return Some((at, format!("within {n}%")));
            }
        }
    }
    None
}

/// The words of `text` (letters, digits, `.`, `,` and `_` inside a
/// number or name) with their offsets.
fn tokens(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in bytes.iter().enumerate() {
        let inner = matches!(c, '.' | ',' | '_')
            && start.is_some()
            && bytes.get(k + 1).is_some_and(|&(_, n)| n.is_alphanumeric());
        if c.is_alphanumeric() || inner {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            out.push((s, &text[s..i]));
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "demo-20261207T000000Z";

    fn found(doc: &str) -> Vec<(usize, String)> {
        comparisons(doc)
            .into_iter()
            .map(|t| (t.line, t.word))
            .collect()
    }

    #[test]
    fn a_conclusion_beside_a_citation_is_found() {
        let doc = format!(
            "single [1301 req/s](results/{RUN}) wins.\nPipeline is [1.07× single](results/{RUN}).\n\nIn [all 25 cells](results/{RUN}) it held.\nHeld within 5% of it ([run](results/{RUN})).\n\nunnest was [told apart](results/{RUN}) from batch.\n"
        );
        assert_eq!(
            found(&doc),
            [
                (1, "wins".to_owned()),
                (2, "1.07×".to_owned()),
                (4, "all 25".to_owned()),
                (5, "within 5%".to_owned()),
                (7, "told apart".to_owned()),
            ]
        );
    }

    #[test]
    fn explanation_code_and_rendered_blocks_are_left_alone() {
        let doc = format!(
            "Every request takes one round trip, so single is faster.\n\nIt sends `1.5×` as a setting ([crossover-20261207T000000Z](results/{RUN})).\n\n<!-- figures:compare run=\"{RUN}\" a=\"x\" b=\"y\" -->\n**x** over **y**: 1.20× [1.1, 1.3]: told apart ([results/{RUN}](results/{RUN}/results.md))\n<!-- figures:end -->\n\nSingle held [3.8 ms](results/{RUN}) at every distance of 0.2 ms.\n"
        );
        assert_eq!(found(&doc), [(9, "every".to_owned())]);
    }
}
