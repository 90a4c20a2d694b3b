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

    /// Checks a trimmed text's length in characters; returns the trimmed text.
    pub(crate) fn text(&mut self, field: &'static str, value: &str, max_chars: usize) -> String {
        let trimmed = value.trim();
        let chars = trimmed.chars().count();
        if chars == 0 {
            self.fail(field, "must not be empty");
        } else if chars > max_chars {
            self.fail(
                field,
                format!("must be at most {max_chars} characters, got {chars}"),
            );
        }
        trimmed.to_owned()
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
