//! Keyset pagination: a page is "the next `limit` rows after this key", so a
//! page costs the same however deep the client has read.

use crate::ValidationErrors;
use crate::commands::limits::{PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX};
use crate::commands::validation::Checker;

/// A request for one page, after (or before) a cursor key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest<K> {
    /// Rows strictly past this key; `None` starts at the beginning.
    pub cursor: Option<K>,
    /// Rows to return, 1 to 100.
    pub limit: u32,
}

impl<K> PageRequest<K> {
    /// Checks the limit (1 to 100, default 50).
    pub fn new(cursor: Option<K>, limit: Option<u32>) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        let limit = limit.unwrap_or(PAGE_LIMIT_DEFAULT);
        if !(1..=PAGE_LIMIT_MAX).contains(&limit) {
            check.fail(
                "limit",
                format!("must be between 1 and {PAGE_LIMIT_MAX}, got {limit}"),
            );
        }
        check.finish()?;
        Ok(Self { cursor, limit })
    }
}

/// One page of rows and the cursor for the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, K> {
    /// The rows, in the listing's order.
    pub items: Vec<T>,
    /// Pass this as the cursor to get the next page; `None` on the last page.
    pub next_cursor: Option<K>,
}

impl<T, K> Page<T, K> {
    /// Builds a page from up to `limit + 1` fetched rows: the extra row, if
    /// present, only proves that another page exists and is dropped.
    pub fn from_overfetch(mut rows: Vec<T>, limit: u32, key: impl Fn(&T) -> K) -> Self {
        let limit = limit as usize;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_cursor = if more { rows.last().map(key) } else { None };
        Self {
            items: rows,
            next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_bounds() {
        assert!(PageRequest::<u32>::new(None, Some(0)).is_err());
        assert!(PageRequest::<u32>::new(None, Some(101)).is_err());
        assert_eq!(PageRequest::<u32>::new(None, None).unwrap().limit, 50);
        assert_eq!(
            PageRequest::<u32>::new(Some(3), Some(100)).unwrap().limit,
            100
        );
    }

    #[test]
    fn overfetch_sets_cursor_only_when_more_rows_exist() {
        let page = Page::from_overfetch(vec![1, 2, 3], 2, |x| *x);
        assert_eq!(page.items, vec![1, 2]);
        assert_eq!(page.next_cursor, Some(2));
        let last = Page::from_overfetch(vec![1, 2], 2, |x| *x);
        assert_eq!(last.next_cursor, None);
        let empty = Page::<u32, u32>::from_overfetch(vec![], 2, |x| *x);
        assert!(empty.items.is_empty() && empty.next_cursor.is_none());
    }
}
