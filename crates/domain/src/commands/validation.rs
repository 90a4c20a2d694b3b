//! Validation failures, field by field, so a client can fix every problem of
//! a request in one go.

use std::fmt;

/// One field that failed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name as the client sent it (`member_ids`, `body`).
    pub field: &'static str,
    /// What is wrong, in words a client can act on.
    pub message: String,
}

/// Every field of a request that failed validation; never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for e in &self.0 {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(f, "{}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

/// Collects field errors while a request is checked.
#[derive(Debug, Default)]
pub(crate) struct Checker(Vec<FieldError>);

impl Checker {
    pub(crate) fn fail(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.push(FieldError {
            field,
            message: message.into(),
        });
    }

    /// Checks a name: its trimmed length in characters, and no control
    /// character at all; returns the trimmed text.
    pub(crate) fn text(&mut self, field: &'static str, value: &str, max_chars: usize) -> String {
        // Length and characters are those sent, before trimming: the
        // bound a client reads in the spec (maxLength, pattern) is the one
        // applied, and a name padded past it or ending in a line break is
        // refused rather than quietly trimmed into shape.
        let trimmed = value.trim();
        let chars = value.chars().count();
        if trimmed.is_empty() {
            self.fail(field, "must not be empty");
        } else if chars > max_chars {
            self.fail(
                field,
                format!("must be at most {max_chars} characters, got {chars}"),
            );
        } else if let Some(c) = value.chars().find(|c| c.is_control()) {
            self.fail(
                field,
                format!(
                    "must not contain control characters (found {})",
                    code_point(c)
                ),
            );
        }
        trimmed.to_owned()
    }

    /// Checks that a message body holds no control character but tab and
    /// line breaks (PostgreSQL refuses NUL in text; the others are never
    /// text a person wrote).
    pub(crate) fn body_chars(&mut self, field: &'static str, body: &str) {
        if let Some(c) = forbidden_in_body(body) {
            self.fail(field, body_control_message(c));
        }
    }

    /// Keeps the first `max` errors and sums up the rest in one more.
    pub(crate) fn cap(&mut self, max: usize) {
        if self.0.len() > max {
            let more = self.0.len() - max;
            let field = self.0[max].field;
            self.0.truncate(max);
            self.fail(field, format!("and {more} more failing the same checks"));
        }
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn finish(self) -> Result<(), ValidationErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors(self.0))
        }
    }
}

/// The first control character of `body` other than tab, line feed and
/// carriage return.
pub(crate) fn forbidden_in_body(body: &str) -> Option<char> {
    body.chars()
        .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// What a client is told of a body's control character `c`.
pub(crate) fn body_control_message(c: char) -> String {
    format!(
        "must not contain control characters other than tab and line breaks (found {})",
        code_point(c)
    )
}

/// `c` as `U+XXXX`.
fn code_point(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}
