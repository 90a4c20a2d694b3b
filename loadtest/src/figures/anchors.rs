//! Links between the docs must land: a relative link names a file that
//! exists, and its `#fragment` a heading of that file, as GitHub makes
//! anchors from headings (lower case, spaces to hyphens, punctuation
//! dropped, `-1`, `-2` after repeats).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The anchors of a Markdown file's headings (outside fenced code).
pub fn anchors(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_fence = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug = slug(title.trim());
        let mut candidate = slug.clone();
        let mut n = 0;
        while out.contains(&candidate) {
            n += 1;
            candidate = format!("{slug}-{n}");
        }
        out.insert(candidate);
    }
    out
}

/// GitHub's anchor of a heading.
pub fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Why the link `target` in `doc` (relative to the repository `root`) does
/// not land, if it does not. Links to other sites and to `results/`
/// (checked as citations) pass.
pub fn broken(root: &Path, doc: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        doc.to_path_buf()
    } else {
        normalize(&doc.parent().unwrap_or(Path::new("")).join(path))
    };
    if file.starts_with("results") {
        return None;
    }
    let full = root.join(&file);
    if !full.exists() {
        return Some(format!("`{target}`: {} does not exist", file.display()));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    if full.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&full).ok()?;
    (!anchors(&text).contains(fragment))
        .then(|| format!("`{target}`: {} has no heading #{fragment}", file.display()))
}

/// `docs/../README.md` as `README.md`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::tempdir::TempRepo;

    #[test]
    fn headings_become_github_anchors() {
        let doc = "# What chatlab measured\n## Batching, seed 001's grid (`make loadtest-seed001`)\n```\n# not a heading\n```\n## Repeat\n## Repeat\n#hashtag\n";
        let a = anchors(doc);
        assert!(a.contains("what-chatlab-measured"));
        assert!(a.contains("batching-seed-001s-grid-make-loadtest-seed001"));
        assert!(a.contains("repeat") && a.contains("repeat-1"));
        assert!(!a.contains("not-a-heading") && !a.contains("hashtag"));
        assert_eq!(
            slug("10, 100, 1,000 concurrent connections"),
            "10-100-1000-concurrent-connections"
        );
    }

    #[test]
    fn a_link_lands_on_a_file_and_a_heading_or_is_reported() {
        let repo = TempRepo::new();
        repo.write("README.md", "# chatlab\n## Quick start\n");
        repo.write("docs/api.md", "# The API\n## Errors\n");
        let doc = Path::new("docs/api.md");
        assert_eq!(broken(repo.path(), doc, "../README.md#quick-start"), None);
        assert_eq!(broken(repo.path(), doc, "#errors"), None);
        assert_eq!(broken(repo.path(), doc, "https://example.com/x#y"), None);
        assert_eq!(
            broken(repo.path(), doc, "../results/demo-1/results.md"),
            None
        );
        assert!(
            broken(repo.path(), doc, "#endpoints")
                .unwrap()
                .contains("no heading #endpoints")
        );
        assert!(
            broken(repo.path(), doc, "ops.md")
                .unwrap()
                .contains("docs/ops.md does not exist")
        );
        assert!(broken(repo.path(), Path::new("README.md"), "docs/api.md#the-api").is_none());
    }
}
