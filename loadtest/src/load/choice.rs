//! [`Choice`]: a value the harness sends in an override header, or `-`,
//! none, so the server uses its own setting.

use std::fmt;
use std::str::FromStr;

/// `Some(value)` is sent in its override header; `None` (written `-`) sends
/// no header. Ordered as `T` is, `-` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Choice<T>(pub Option<T>);

impl<T> Choice<T> {
    /// The named value, if any.
    pub fn named(self) -> Option<T> {
        self.0
    }
}

impl<T: FromStr> FromStr for Choice<T> {
    type Err = T::Err;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "-" => Ok(Self(None)),
            named => named.parse().map(|v| Self(Some(v))),
        }
    }
}

impl<T: fmt::Display> fmt::Display for Choice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("-"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatlab_domain::{InsertStrategy, PublishMode};

    #[test]
    fn a_dash_is_the_servers_own_and_names_parse_as_their_type() {
        assert_eq!("-".parse::<Choice<PublishMode>>(), Ok(Choice(None)));
        assert_eq!(
            "batch".parse::<Choice<InsertStrategy>>(),
            Ok(Choice(Some(InsertStrategy::Batch)))
        );
        assert!("bulk".parse::<Choice<InsertStrategy>>().is_err());
        assert_eq!(Choice(Some(PublishMode::Outbox)).to_string(), "outbox");
        assert_eq!(Choice::<PublishMode>(None).to_string(), "-");
    }
}
