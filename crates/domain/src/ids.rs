//! Typed ids. All are UUIDv7, made by the application: time-ordered, so id
//! order is creation order and a multi-row INSERT needs no RETURNING.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Uuid);

        impl $name {
            /// A new time-ordered (v7) id.
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID (read from storage or from a request).
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The underlying UUID.
            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type!(
    /// Identifies a user.
    UserId
);
id_type!(
    /// Identifies a chat room.
    ChatId
);
id_type!(
    /// Identifies a message; ordering by it is ordering by creation time.
    MessageId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_time_ordered() {
        let ids: Vec<MessageId> = (0..1000).map(|_| MessageId::generate()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids[0].as_uuid().get_version_num(), 7);
    }

    #[test]
    fn parses_and_prints_round_trip() {
        let id = ChatId::generate();
        let parsed: ChatId = id.to_string().parse().unwrap();
        assert_eq!(parsed, id);
        assert!("not-a-uuid".parse::<ChatId>().is_err());
    }
}
