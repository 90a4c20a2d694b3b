//! What may be written: the commands checked from raw input (chats and
//! messages here, membership changes, import jobs), the limits that bound
//! them and the field-by-field validation failures.
//!
//! Write commands. Each raw input (`New*`) is checked into a command that
//! storage can write as it stands: trimmed, deduplicated, bounded, with its
//! ids and timestamp already chosen by the application.

pub mod import_jobs;
pub mod limits;
pub mod membership;
pub mod validation;

use std::collections::HashSet;

use chrono::{DateTime, SubsecRound, Utc};

use crate::commands::limits::{
    CHAT_NAME_MAX_CHARS, Limits, MESSAGE_BODY_MAX_CHARS, ROOM_CREATED_BODY, USER_NAME_MAX_CHARS,
};
use crate::commands::validation::{Checker, ValidationErrors};
use crate::ids::{ChatId, MessageId, UserId};

/// The most bad names one bulk request's answer lists.
const BULK_NAME_ERRORS_SHOWN: usize = 10;

/// The current time at PostgreSQL's precision (microseconds), so that what
/// a write returns is exactly what a later read returns.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// A user to create, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// The new user's id.
    pub id: UserId,
    /// Trimmed name, 1 to 100 characters.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl NewUser {
    /// Checks one user name.
    pub fn validate(name: &str) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        let name = check.text("name", name, USER_NAME_MAX_CHARS);
        check.finish()?;
        Ok(Self {
            id: UserId::generate(),
            name,
            created_at: now(),
        })
    }

    /// Checks a bulk request: either explicit `names`, or `count` users named
    /// `{prefix}{n}`. Every name is checked; the total is bounded by
    /// `limits.users_bulk_max`.
    pub fn validate_bulk(
        names: Option<&[String]>,
        count: Option<usize>,
        prefix: Option<&str>,
        limits: &Limits,
    ) -> Result<Vec<Self>, ValidationErrors> {
        let mut check = Checker::default();
        let names: Vec<String> = match (names, count) {
            (Some(names), None) => names.to_vec(),
            (None, Some(count)) => {
                let prefix = prefix.unwrap_or("user-");
                if prefix.chars().any(char::is_control) {
                    // Every name made from it would fail the same way.
                    check.fail("name_prefix", "must not contain control characters");
                    return check.finish().map(|()| Vec::new());
                }
                (0..count.min(limits.users_bulk_max.saturating_add(1)))
                    .map(|n| format!("{prefix}{n}"))
                    .collect()
            }
            _ => {
                check.fail("names", "give exactly one of `names` or `count`");
                Vec::new()
            }
        };
        let requested = count.unwrap_or(names.len());
        if requested == 0 && check.is_clean() {
            check.fail("names", "must name at least one user");
        }
        if requested > limits.users_bulk_max {
            check.fail(
                "names",
                format!(
                    "at most {} users per request, got {requested}",
                    limits.users_bulk_max
                ),
            );
        }
        check.finish()?;
        let created_at = now();
        let mut check = Checker::default();
        let users = names
            .iter()
            .map(|name| NewUser {
                id: UserId::generate(),
                name: check.text("names", name, USER_NAME_MAX_CHARS),
                created_at,
            })
            .collect();
        // One bad name or ten thousand: the answer stays small.
        check.cap(BULK_NAME_ERRORS_SHOWN);
        check.finish()?;
        Ok(users)
    }
}

/// A chat to create, as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChat {
    /// Room name.
    pub name: String,
    /// The creator; always made a member.
    pub creator_id: UserId,
    /// Other members; may repeat ids and may contain the creator.
    pub member_ids: Vec<UserId>,
}

/// A checked createChat: the rows the transaction will write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateChat {
    /// The new chat's id.
    pub chat_id: ChatId,
    /// Trimmed room name.
    pub name: String,
    /// The creator.
    pub creator_id: UserId,
    /// Members with duplicates removed, creator first, then in the order the
    /// client first named them. Never empty.
    pub member_ids: Vec<UserId>,
    /// Id of the "room created" system message.
    pub system_message_id: MessageId,
    /// Body of the system message.
    pub system_message_body: &'static str,
    /// One timestamp for the chat, its member rows and the system message.
    pub created_at: DateTime<Utc>,
}

impl CreateChat {
    /// Checks the name and the member count (creator included, after
    /// duplicates collapse) against `limits.chat_max_members`.
    pub fn validate(input: NewChat, limits: &Limits) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        let name = check.text("name", &input.name, CHAT_NAME_MAX_CHARS);
        let member_ids = collapse_members(input.creator_id, &input.member_ids);
        if member_ids.len() > limits.chat_max_members {
            check.fail(
                "member_ids",
                format!(
                    "a chat may have at most {} members (creator included), got {}",
                    limits.chat_max_members,
                    member_ids.len()
                ),
            );
        }
        check.finish()?;
        Ok(Self {
            chat_id: ChatId::generate(),
            name,
            creator_id: input.creator_id,
            member_ids,
            system_message_id: MessageId::generate(),
            system_message_body: ROOM_CREATED_BODY,
            created_at: now(),
        })
    }
}

/// The creator first, then each other id once, in first-seen order.
pub fn collapse_members(creator: UserId, members: &[UserId]) -> Vec<UserId> {
    let mut seen = HashSet::with_capacity(members.len() + 1);
    seen.insert(creator);
    let mut out = Vec::with_capacity(members.len() + 1);
    out.push(creator);
    out.extend(members.iter().copied().filter(|id| seen.insert(*id)));
    out
}

/// A message as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The chat to post in.
    pub chat_id: ChatId,
    /// The author; must be a member.
    pub sender_id: UserId,
    /// The text.
    pub body: String,
}

/// A checked message, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMessage {
    /// The new message's id.
    pub id: MessageId,
    /// The chat.
    pub chat_id: ChatId,
    /// The author.
    pub sender_id: UserId,
    /// The text, 1 to 4,000 characters, as sent (not trimmed: whitespace in a
    /// message is the author's).
    pub body: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl SendMessage {
    /// Checks the body: 1 to 4,000 characters, not only whitespace.
    pub fn validate(input: NewMessage) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        let chars = input.body.chars().count();
        if input.body.trim().is_empty() {
            check.fail("body", "must not be empty");
        } else if chars > MESSAGE_BODY_MAX_CHARS {
            check.fail(
                "body",
                format!("must be at most {MESSAGE_BODY_MAX_CHARS} characters, got {chars}"),
            );
        } else {
            check.body_chars("body", &input.body);
        }
        check.finish()?;
        Ok(Self {
            id: MessageId::generate(),
            chat_id: input.chat_id,
            sender_id: input.sender_id,
            body: input.body,
            created_at: now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn user(n: u128) -> UserId {
        UserId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn creator_is_first_and_duplicates_collapse() {
        let ids = collapse_members(user(1), &[user(2), user(1), user(2), user(3)]);
        assert_eq!(ids, vec![user(1), user(2), user(3)]);
    }

    #[test]
    fn too_many_members_is_rejected_after_collapse() {
        let limits = Limits {
            chat_max_members: 3,
            ..Limits::default()
        };
        let ok = NewChat {
            name: "r".into(),
            creator_id: user(1),
            member_ids: vec![user(2), user(3), user(3), user(1)],
        };
        assert_eq!(
            CreateChat::validate(ok.clone(), &limits)
                .unwrap()
                .member_ids
                .len(),
            3
        );
        let too_many = NewChat {
            member_ids: vec![user(2), user(3), user(4)],
            ..ok
        };
        let err = CreateChat::validate(too_many, &limits).unwrap_err();
        assert_eq!(err.0[0].field, "member_ids");
    }

    #[test]
    fn names_and_bodies_are_checked_in_characters() {
        assert!(NewUser::validate("  ").is_err());
        assert!(NewUser::validate(&"é".repeat(100)).is_ok());
        assert!(NewUser::validate(&"é".repeat(101)).is_err());
        let msg = |body: String| NewMessage {
            chat_id: ChatId::generate(),
            sender_id: user(1),
            body,
        };
        assert!(SendMessage::validate(msg("ü".repeat(4000))).is_ok());
        assert!(SendMessage::validate(msg("ü".repeat(4001))).is_err());
        assert!(SendMessage::validate(msg(" \n".into())).is_err());
    }

    fn message(body: &str) -> NewMessage {
        NewMessage {
            chat_id: ChatId::generate(),
            sender_id: user(1),
            body: body.to_owned(),
        }
    }

    #[test]
    fn control_characters_are_refused_but_line_breaks_in_a_body_are_text() {
        for name in ["a\u{0}b", "a\nb", "\u{1b}[31mred"] {
            let err = NewUser::validate(name).unwrap_err();
            assert_eq!(err.0[0].field, "name", "{name:?}");
            assert!(err.0[0].message.contains("control characters"), "{err}");
        }
        let err = SendMessage::validate(message("nul \u{0} inside")).unwrap_err();
        assert_eq!(err.0[0].field, "body");
        assert!(err.0[0].message.contains("U+0000"), "{err}");
        assert!(SendMessage::validate(message("line one\r\nline two\tend")).is_ok());
        let limits = Limits::default();
        let err = NewUser::validate_bulk(None, Some(5), Some("u\u{0}"), &limits).unwrap_err();
        assert_eq!(err.0.len(), 1, "the prefix, not each name: {err}");
        assert_eq!(err.0[0].field, "name_prefix");
    }

    #[test]
    fn a_bulk_answer_lists_at_most_ten_bad_names() {
        let names = vec!["bad\u{0}".to_owned(); 1000];
        let err = NewUser::validate_bulk(Some(&names), None, None, &Limits::default()).unwrap_err();
        assert_eq!(err.0.len(), BULK_NAME_ERRORS_SHOWN + 1);
        assert!(
            err.0[BULK_NAME_ERRORS_SHOWN].message.contains("990 more"),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn any_control_character_but_tab_and_line_breaks_is_refused_in_a_body(
            before in "[a-z ]{0,20}",
            after in "[a-z ]{0,20}",
            c in (0u32..0x20).prop_union(0x7f..0xa0)
                .prop_filter_map("tab and line breaks are text", |n| {
                    char::from_u32(n).filter(|c| !matches!(c, '\t' | '\n' | '\r'))
                }),
        ) {
            let body = format!("x{before}{c}{after}y");
            let err = SendMessage::validate(message(&body)).unwrap_err();
            prop_assert_eq!(err.0[0].field, "body");
            prop_assert!(NewUser::validate(&body).is_err());
        }
    }

    #[test]
    fn bulk_users_need_exactly_one_source_and_a_bound() {
        let limits = Limits {
            users_bulk_max: 10,
            ..Limits::default()
        };
        assert_eq!(
            NewUser::validate_bulk(None, Some(10), None, &limits)
                .unwrap()
                .len(),
            10
        );
        assert!(NewUser::validate_bulk(None, Some(11), None, &limits).is_err());
        assert!(NewUser::validate_bulk(None, Some(0), None, &limits).is_err());
        assert!(NewUser::validate_bulk(None, None, None, &limits).is_err());
        let names = vec!["a".to_owned(), String::new()];
        let err = NewUser::validate_bulk(Some(&names), None, None, &limits).unwrap_err();
        assert_eq!(err.0.len(), 1);
    }

    proptest! {
        #[test]
        fn collapse_keeps_each_id_once_creator_first(
            creator in 0u128..20,
            members in proptest::collection::vec(0u128..20, 0..60),
        ) {
            let members: Vec<UserId> = members.into_iter().map(user).collect();
            let out = collapse_members(user(creator), &members);
            prop_assert_eq!(out[0], user(creator));
            let unique: HashSet<_> = out.iter().copied().collect();
            prop_assert_eq!(unique.len(), out.len());
            let mut expected: HashSet<_> = members.iter().copied().collect();
            expected.insert(user(creator));
            prop_assert_eq!(unique, expected);
        }
    }

    /// The bound and the characters are those sent, as the spec's
    /// maxLength and pattern state them: trimming is not a way past them.
    #[test]
    fn names_are_checked_as_sent_then_trimmed() {
        assert_eq!(NewUser::validate("  ada  ").unwrap().name, "ada");
        let padded = format!("  {}", "a".repeat(USER_NAME_MAX_CHARS));
        assert!(NewUser::validate(&padded).is_err(), "102 characters sent");
        let err = NewUser::validate("ada\n").unwrap_err();
        assert!(err.to_string().contains("U+000A"), "{err}");
        assert!(NewUser::validate("\tada").is_err());
    }

    proptest! {
        /// Whatever a client sends as a name, validation answers (never
        /// panics); what it accepts is trimmed, 1 to the limit characters
        /// long, with no control character.
        #[test]
        fn accepted_user_names_are_trimmed_bounded_and_clean(name in "\\PC{0,120}|.{0,120}") {
            if let Ok(user) = NewUser::validate(&name) {
                prop_assert_eq!(user.name.as_str(), name.trim());
                let chars = user.name.chars().count();
                prop_assert!((1..=USER_NAME_MAX_CHARS).contains(&chars));
                prop_assert!(!user.name.chars().any(char::is_control));
            }
        }

        /// Text that looks like SQL or HTML is text: stored verbatim.
        #[test]
        fn sql_and_html_lookalikes_are_kept_verbatim(
            word in "[a-z]{1,10}",
            wrap in prop::sample::select(vec![
                "'; DROP TABLE users; --{}",
                "<script>alert('{}')</script>",
                "{}\" OR 1=1 --",
                "&lt;{}&gt; %00 \\x00",
            ]),
        ) {
            let text = wrap.replace("{}", &word);
            let user = NewUser::validate(&text);
            prop_assert_eq!(user.map(|u| u.name).ok(), Some(text.clone()));
            let sent = SendMessage::validate(message(&text));
            prop_assert_eq!(sent.map(|m| m.body).ok(), Some(text));
        }

        /// A message body is accepted exactly when it has 1 to the limit
        /// characters and no forbidden control character.
        #[test]
        fn message_bodies_are_bounded_in_characters_not_bytes(len in 0usize..4100, c in "[a-zé€😀]") {
            let body: String = c.repeat(len);
            let ok = SendMessage::validate(message(&body)).is_ok();
            prop_assert_eq!(ok, (1..=MESSAGE_BODY_MAX_CHARS).contains(&len));
        }
    }
}
