//! Where a live client is in the topic: the `id:` of every event frame,
//! and what it sends back as `Last-Event-ID` to resume.
//!
//! A cursor names, for every partition of the topic, the offset from which
//! the client has not yet been given what concerns it (`0:15,1:7,2:33`).
//! Offsets are the broker's, so a cursor from one instance means the same
//! on any other, and the catch-up after it is exact: no gap, no repeat.
//!
//! Offsets mean something only in one life of the topic: the embedded
//! broker's topic starts again at offset 0 with every server start. So a
//! cursor of such a topic also names its life, after an `@`
//! (`0:15,1:7,2:33@1764590400123`, the broker's start in milliseconds
//! since the epoch), and a cursor of another life cannot be mistaken for
//! one of this one. A topic of an outside broker has no life the server
//! can tell; its cursors name none.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Most partitions a cursor may name.
pub const MAX_PARTITIONS: usize = 1024;

/// A position in every partition of the topic, in one life of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    positions: BTreeMap<i32, i64>,
    life: Option<u64>,
}

/// Why a `Last-Event-ID` is not a cursor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Last-Event-ID must be `partition:offset` pairs separated by commas, as sent in `id:`: {0}"
)]
pub struct CursorError(&'static str);

impl Cursor {
    /// The cursor of `positions`, naming no life.
    pub fn of(positions: &HashMap<i32, i64>) -> Self {
        Self {
            positions: positions.iter().map(|(p, o)| (*p, *o)).collect(),
            life: None,
        }
    }

    /// The same positions in the topic's life `life`.
    pub fn in_life(mut self, life: Option<u64>) -> Self {
        self.life = life;
        self
    }

    /// The life of the topic it names, if any.
    pub fn life(&self) -> Option<u64> {
        self.life
    }

    /// Parses the `id:` form.
    pub fn parse(text: &str) -> Result<Self, CursorError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(CursorError("it is empty"));
        }
        let (text, life) = match text.split_once('@') {
            Some((pairs, life)) => (
                pairs,
                Some(
                    life.parse::<u64>()
                        .map_err(|_| CursorError("what follows `@` is not a number"))?,
                ),
            ),
            None => (text, None),
        };
        let mut positions = BTreeMap::new();
        for pair in text.split(',') {
            let (partition, offset) = pair
                .split_once(':')
                .ok_or(CursorError("a pair has no `:`"))?;
            let partition: i32 = partition
                .parse()
                .map_err(|_| CursorError("a partition is not a number"))?;
            let offset: i64 = offset
                .parse()
                .map_err(|_| CursorError("an offset is not a number"))?;
            if partition < 0 || offset < 0 {
                return Err(CursorError("a partition or offset is negative"));
            }
            if positions.insert(partition, offset).is_some() {
                return Err(CursorError("a partition is named twice"));
            }
            if positions.len() > MAX_PARTITIONS {
                return Err(CursorError("it names too many partitions"));
            }
        }
        Ok(Self { positions, life })
    }

    /// The positions, by partition.
    pub fn positions(&self) -> HashMap<i32, i64> {
        self.positions.iter().map(|(p, o)| (*p, *o)).collect()
    }

    /// The position in `partition`, if named.
    pub fn get(&self, partition: i32) -> Option<i64> {
        self.positions.get(&partition).copied()
    }

    /// Whether it names no partition.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Moves `partition` to `next` (never back).
    pub fn advance(&mut self, partition: i32, next: i64) {
        let at = self.positions.entry(partition).or_insert(next);
        *at = (*at).max(next);
    }

    /// Each partition at the later of the two positions, in `self`'s life.
    pub fn max(&self, other: &Cursor) -> Cursor {
        let mut out = self.clone();
        for (p, o) in &other.positions {
            out.advance(*p, *o);
        }
        out
    }

    /// Whether every partition of `self` is at or past `other`'s position.
    pub fn covers(&self, other: &Cursor) -> bool {
        other
            .positions
            .iter()
            .all(|(p, o)| self.positions.get(p).is_some_and(|at| at >= o))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (p, o) in &self.positions {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{p}:{o}")?;
        }
        match self.life {
            Some(life) => write!(f, "@{life}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_id_form_reads_back() {
        let c = Cursor::parse("0:15,2:33,1:7").unwrap();
        assert_eq!(c.to_string(), "0:15,1:7,2:33");
        assert_eq!(Cursor::parse(&c.to_string()).unwrap(), c);
        assert_eq!(c.life(), None);
        let lived = Cursor::parse("0:15,1:7@1764590400123").unwrap();
        assert_eq!(lived.life(), Some(1_764_590_400_123));
        assert_eq!(lived.to_string(), "0:15,1:7@1764590400123");
        assert_ne!(lived, Cursor::parse("0:15,1:7").unwrap(), "another life");
    }

    #[test]
    fn what_is_no_cursor_is_refused() {
        for bad in [
            "",
            "0",
            "0:",
            ":1",
            "a:1",
            "0:-1",
            "-1:0",
            "0:1,0:2",
            "0:1;1:2",
            "0:1@",
            "0:1@x",
            "0:1@-3",
            "@5",
            "0:1@2@3",
            "0190b5c8-6b7e-7cc0-a2a3-8d8f3b8b5a11",
        ] {
            assert!(Cursor::parse(bad).is_err(), "{bad:?}");
        }
        let too_many = (0..=MAX_PARTITIONS)
            .map(|p| format!("{p}:0"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(Cursor::parse(&too_many).is_err());
    }

    #[test]
    fn positions_only_move_forward() {
        let mut c = Cursor::parse("0:10,1:5").unwrap();
        c.advance(0, 4);
        c.advance(1, 9);
        c.advance(2, 1);
        assert_eq!(c.to_string(), "0:10,1:9,2:1");
        let other = Cursor::parse("0:12,1:1").unwrap();
        assert_eq!(c.max(&other).to_string(), "0:12,1:9,2:1");
        assert!(c.max(&other).covers(&c) && !c.covers(&other));
    }

    proptest! {
        #[test]
        fn any_text_is_answered_without_a_panic(text in ".{0,64}") {
            let _ = Cursor::parse(&text);
        }

        #[test]
        fn every_cursor_reads_back(
            positions in prop::collection::btree_map(0i32..64, 0i64..i64::MAX, 1..8),
            life in prop::option::of(0u64..u64::MAX),
        ) {
            let c = Cursor { positions, life };
            prop_assert_eq!(Cursor::parse(&c.to_string()).unwrap(), c);
        }
    }
}
