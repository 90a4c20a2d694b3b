//! The markers of rendered blocks: an opening comment that names the kind
//! of block and where it comes from, and a closing one. `chatlab-load
//! docs` writes what is between them; the check fails when it is stale.
//!
//! ```text
//! <!-- figures:table run="demo-…" command="make demo" columns="…" -->
//! <!-- figures:compare run="demo-…" a="single" b="unnest" figure="req/s" -->
//! <!-- figures:count run="distance-model-…" column="off" within="5; 10" -->
//! <!-- figures:quote run="demo-…" lines="Verdict; Groups" -->
//! (rendered)
//! <!-- figures:end -->
//! ```
//!
//! Tables: [`super::table_block`]; the rest, conclusions drawn from a
//! run: [`super::conclusion`].

use std::ops::Range;
use std::path::Path;

use super::{conclusion, table_block};

/// Every marker starts with this; the kind follows it.
pub const PREFIX: &str = "<!-- figures:";
/// Closes a block.
pub const CLOSE: &str = "<!-- figures:end -->";
/// The kinds of rendered block.
pub const KINDS: &[&str] = &["table", "compare", "count", "quote"];

/// Whether `line` opens a rendered block.
pub fn opens(line: &str) -> bool {
    line.match_indices(PREFIX)
        .any(|(at, _)| kind_at(&line[at + PREFIX.len()..]).is_some())
}

/// The kind named at the start of `rest` (the text after [`PREFIX`]),
/// when it is one of [`KINDS`] followed by white space.
fn kind_at(rest: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| {
        rest.strip_prefix(k)
            .is_some_and(|after| after.starts_with(char::is_whitespace))
    })
}

/// A marker's attributes, `key="value"` separated by white space, in order.
pub fn attributes(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .ok_or_else(|| format!("expected key=\"value\" at `{rest}`"))?;
        let (value, after) = after
            .split_once('"')
            .ok_or_else(|| format!("unclosed value of `{}`", key.trim()))?;
        out.push((key.trim().to_owned(), value.to_owned()));
        rest = after.trim_start();
    }
    Ok(out)
}

/// `value` split at `;`, each part trimmed, empty ones dropped.
pub fn list(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The byte ranges of `doc`'s fenced code blocks, where a marker is an
/// example, not a block to render.
fn fenced_ranges(doc: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut open = None;
    let mut at = 0;
    for line in doc.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(start) => out.push(start..at + line.len()),
                None => open = Some(at),
            }
        }
        at += line.len();
    }
    if let Some(start) = open {
        out.push(start..doc.len());
    }
    out
}

/// Where in `rest` (a tail of `doc`) the next opening marker outside a
/// fence is, and its kind.
fn next_marker(doc: &str, rest: &str, fences: &[Range<usize>]) -> Option<(usize, &'static str)> {
    let base = doc.len() - rest.len();
    rest.match_indices(PREFIX).find_map(|(at, _)| {
        let kind = kind_at(&rest[at + PREFIX.len()..])?;
        (!fences.iter().any(|f| f.contains(&(base + at)))).then_some((at, kind))
    })
}

/// One block's body from its kind and attributes.
fn render(kind: &str, attributes: &str, root: &Path, to_root: &str) -> Result<String, String> {
    match kind {
        "table" => {
            let spec = table_block::parse_spec(attributes)?;
            table_block::render(&spec, root, to_root)
        }
        _ => conclusion::render(kind, attributes, root, to_root),
    }
}

/// `doc` with every block rendered again. Errors name the line of the
/// marker.
pub fn render_all(doc: &str, root: &Path, to_root: &str) -> Result<String, (usize, String)> {
    let fences = fenced_ranges(doc);
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some((at, kind)) = next_marker(doc, rest, &fences) {
        let line = doc.len() - rest.len() + at;
        let line = doc[..line].matches('\n').count() + 1;
        let (before, marker) = rest.split_at(at);
        out.push_str(before);
        let end_of_open = marker
            .find("-->")
            .ok_or((line, "the marker is not closed with -->".to_owned()))?;
        let attributes = &marker[PREFIX.len() + kind.len()..end_of_open];
        let open = &marker[..end_of_open + 3];
        let after_open = &marker[end_of_open + 3..];
        let close = after_open
            .find(CLOSE)
            .ok_or((line, format!("no {CLOSE} after the marker")))?;
        let body = render(kind, attributes, root, to_root).map_err(|e| (line, e))?;
        out.push_str(open);
        out.push('\n');
        out.push_str(&body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(CLOSE);
        rest = &after_open[close + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_an_opening_marker_from_the_closing_one() {
        assert!(opens("<!-- figures:table run=\"a\" -->"));
        assert!(opens("x <!-- figures:compare run=\"a\" -->"));
        assert!(!opens(CLOSE));
        assert!(!opens("<!-- figures:tables run=\"a\" -->"));
    }

    #[test]
    fn reads_attributes_in_order() {
        let a = attributes(r#" run="x-1" a="single" b="un nest" "#).unwrap();
        assert_eq!(a[2], ("b".to_owned(), "un nest".to_owned()));
        assert!(attributes(r#"run="x"#).is_err());
        assert!(attributes("run").is_err());
        assert_eq!(list(" a; ;b "), ["a", "b"]);
    }
}
