//! A reading aid, not a check: measured-looking figures in prose that cite
//! no run (a number with a unit of measurement, outside code, rendered
//! tables and citing links). `chatlab-load docs --uncited` lists them so an
//! editor can cite, rerun or drop each; settings' defaults and the seeds'
//! own figures show up too, which is why nothing fails on it.

use super::citations;
use super::numbers;
use super::table_block;

/// Units after which a number reads as a measurement.
const UNITS: &[&str] = &[
    "ms",
    "µs",
    "req/s",
    "requests/s",
    "requests a second",
    "tps",
    "MiB",
    "KiB",
    "GiB",
    "%",
    "×",
    "times",
    "rows/s",
    "createChats/s",
    "deliveries",
    "min",
];

/// (line, the line's text) of each line with an uncited figure.
pub fn uncited(doc: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut in_table_block = false;
    // Link texts that cite a run, removed before looking.
    let cited: Vec<String> = citations::links(doc)
        .into_iter()
        .filter(|l| citations::cited_run(&l.target).is_some())
        .map(|l| l.text)
        .collect();
    let mut prose = doc.to_owned();
    for text in &cited {
        for part in text.split('\n') {
            prose = prose.replacen(part, &" ".repeat(part.len()), 1);
        }
    }
    for (n, line) in prose.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if line.contains(table_block::OPEN) {
            in_table_block = true;
        }
        if line.contains(table_block::CLOSE) {
            in_table_block = false;
            continue;
        }
        if in_fence || in_table_block {
            continue;
        }
        let plain = without_code_spans(line);
        let bytes = plain.as_bytes();
        let mut hit = false;
        let mut from = 0;
        for number in numbers::numbers(&plain) {
            let Some(at) = plain[from..].find(&first_digits(&number.text)) else {
                continue;
            };
            let end = from + at + written_len(&plain[from + at..]);
            from = end.min(bytes.len());
            let after = plain[from..].trim_start();
            if UNITS.iter().any(|u| after.starts_with(u)) {
                hit = true;
            }
        }
        if hit {
            out.push((n + 1, doc.lines().nth(n).unwrap_or_default().to_owned()));
        }
    }
    out
}

fn first_digits(text: &str) -> String {
    text.chars()
        .take_while(char::is_ascii_digit)
        .take(1)
        .collect()
}

/// The length of the number written at the start of `s` (digits, thousands
/// commas and a decimal part).
fn written_len(s: &str) -> usize {
    s.char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || (c == ',' || c == '.') && s[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        })
        .map_or(s.len(), |(i, _)| i)
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_measurements_outside_citations_code_and_tables() {
        let doc = "held 53.5 ms at 50 ms RTT\n[399 µs](results/a-20261130T000000Z) cited\n`LIVE_FETCH_WAIT_MS` (`50 ms`)\n50 members\n```\n12 ms\n```\n<!-- figures:table run=\"a\" -->\n| 3 ms |\n<!-- figures:end -->\n1,062 req/s\n";
        let lines: Vec<usize> = uncited(doc).into_iter().map(|(n, _)| n).collect();
        assert_eq!(lines, [1, 11]);
    }
}
