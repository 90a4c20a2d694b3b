//! A misspelt setting must not silently run the default: a variable under
//! one of chatlab's prefixes that chatlab does not read stops startup, with
//! the nearest real name.
//!
//! Two kinds of prefix. `CHATLAB_`, `CHAT_`, `DB_POOL_` and `OUTBOX_` are
//! chatlab's alone: any unknown variable under them is refused. `DB_`,
//! `HTTP_`, `KAFKA_`, `LOG_` and `USERS_` are shared with the rest of the
//! world (`HTTP_PROXY`, a Kafka image's `KAFKA_NODE_ID`): a variable under
//! them is refused only when it is a few edits away from one of chatlab's
//! names, which is what a typo looks like.

/// Prefixes no one else uses: every unknown variable under them is a typo.
const OWN_PREFIXES: &[&str] = &["CHATLAB_", "CHAT_", "DB_POOL_", "OUTBOX_"];

/// Prefixes shared with other programs: only a near miss is a typo.
const SHARED_PREFIXES: &[&str] = &["DB_", "HTTP_", "KAFKA_", "LOG_", "USERS_"];

/// Variables under chatlab's prefixes read by its tests and tools, not by the
/// server: the tests' driver and pool layout, the tools' install folder
/// (`scripts/ensure-tool.sh`), the tests' broker, and the binaries the make
/// targets run (the Makefile exports them, so every server they start sees
/// them).
pub const READ_BY_TOOLS: &[&str] = &[
    "CHATLAB_TEST_DB_DRIVER",
    "CHATLAB_TEST_POOL_LAYOUT",
    "CHATLAB_TOOLS",
    "CHATLAB_BIN",
    "CHATLAB_BIN_DIR",
    "KAFKA_TEST_BROKERS",
];

/// Most edits (insertions, deletions, substitutions, swaps of neighbours)
/// between a typo and the name it misses: two, and one for a name shorter
/// than ten characters, so that `DB_PORT` (someone's port) is not taken for
/// `DB_POOL`.
fn max_edits(name: &str) -> usize {
    (name.len() / 5).min(2)
}

/// The first variable in `names` that looks like a misspelt setting, with
/// the nearest real one (`None` when nothing is near).
pub fn first_unknown<'a, 'k>(
    names: impl IntoIterator<Item = &'a str>,
    known: &[&'k str],
) -> Option<(String, Option<&'k str>)> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.into_iter().find_map(|name| {
        if known.contains(&name) || READ_BY_TOOLS.contains(&name) {
            return None;
        }
        let nearest = nearest(name, known);
        let own = OWN_PREFIXES.iter().any(|p| name.starts_with(p));
        let shared = SHARED_PREFIXES.iter().any(|p| name.starts_with(p));
        match (own, shared, nearest) {
            (true, _, nearest) => Some((name.to_owned(), nearest.map(|(n, _)| n))),
            (false, true, Some((n, edits))) if edits <= max_edits(name) => {
                Some((name.to_owned(), Some(n)))
            }
            _ => None,
        }
    })
}

/// The known name fewest edits away from `name`, with the count; only names
/// within half of `name`'s length count as near.
fn nearest<'k>(name: &str, known: &[&'k str]) -> Option<(&'k str, usize)> {
    known
        .iter()
        .map(|k| (*k, strsim::damerau_levenshtein(name, k)))
        .filter(|(_, edits)| *edits <= name.len() / 2)
        .min_by_key(|(_, edits)| *edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &[
        "DB_STATEMENT_TIMEOUT_MS",
        "DB_POOL_MAX_SIZE",
        "KAFKA_BROKERS",
        "KAFKA_PUBLISH_MODE",
        "HTTP_ADDR",
        "CHAT_MAX_MEMBERS",
    ];

    #[test]
    fn a_typo_under_a_shared_prefix_names_the_nearest_setting() {
        assert_eq!(
            first_unknown(["DB_STATEMNT_TIMEOUT_MS"], KNOWN),
            Some((
                "DB_STATEMNT_TIMEOUT_MS".to_owned(),
                Some("DB_STATEMENT_TIMEOUT_MS")
            ))
        );
        assert_eq!(
            first_unknown(["KAFKA_PUBLISH_MOD"], KNOWN),
            Some(("KAFKA_PUBLISH_MOD".to_owned(), Some("KAFKA_PUBLISH_MODE")))
        );
        assert_eq!(
            first_unknown(["HTTP_ADR"], KNOWN),
            Some(("HTTP_ADR".to_owned(), Some("HTTP_ADDR")))
        );
    }

    #[test]
    fn anything_unknown_under_an_own_prefix_is_refused() {
        assert_eq!(
            first_unknown(["DB_POOL_MAXSIZE"], KNOWN),
            Some(("DB_POOL_MAXSIZE".to_owned(), Some("DB_POOL_MAX_SIZE")))
        );
        assert_eq!(
            first_unknown(["CHATLAB_SOMETHING_ELSE"], KNOWN),
            Some(("CHATLAB_SOMETHING_ELSE".to_owned(), None))
        );
    }

    #[test]
    fn other_programs_variables_and_chatlabs_tools_are_left_alone() {
        let others = [
            "HTTP_PROXY",
            "DB_HOST",
            "KAFKA_NODE_ID",
            "KAFKA_TEST_BROKERS",
            "CHATLAB_TEST_DB_DRIVER",
            "CHATLAB_TOOLS",
            "LOG_LEVEL",
            "PATH",
            "DB_STATEMENT_TIMEOUT_MS",
            "DB_PORT",
        ];
        assert_eq!(
            first_unknown(
                others,
                ["DB_POOL"]
                    .iter()
                    .chain(KNOWN)
                    .copied()
                    .collect::<Vec<_>>()
                    .as_slice()
            ),
            None
        );
    }
}
