//! The tables of a Markdown file (a run's `results.md` or `table.md`), as
//! header and rows of cell text.

/// One Markdown table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The header cells.
    pub header: Vec<String>,
    /// The body rows, each as many cells as the header (short rows padded).
    pub rows: Vec<Vec<String>>,
}

/// Every table of `text`, in order: a header row, a separator row of
/// dashes, and the rows that follow it.
pub fn tables(text: &str) -> Vec<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        if is_row(lines[i]) && is_separator(lines[i + 1]) {
            let header = cells(lines[i]);
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && is_row(lines[i]) {
                let mut row = cells(lines[i]);
                row.resize(header.len(), String::new());
                rows.push(row);
                i += 1;
            }
            out.push(Table { header, rows });
        } else {
            i += 1;
        }
    }
    out
}

/// A table as Markdown, one line per row.
pub fn to_markdown(table: &Table) -> String {
    let mut out = format!("| {} |\n", table.header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(table.header.len())));
    for row in &table.rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

fn is_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

fn is_separator(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The cells of a row: split at `|` outside code spans, `\|` kept.
fn cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push_str("\\|");
                chars.next();
            }
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_owned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_table_with_its_rows() {
        let text = "# run\n\nnotes\n\n| a | b |\n|---|---|\n| 1 | `x|y` |\n| 2 |\n\nmore\n\n| c |\n|:--|\n| 3 |\n";
        let t = tables(text);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].header, ["a", "b"]);
        assert_eq!(t[0].rows, [vec!["1", "`x|y`"], vec!["2", ""]]);
        assert_eq!(t[1].rows, [vec!["3"]]);
        assert_eq!(to_markdown(&t[1]), "| c |\n|---|\n| 3 |\n");
    }
}
