//! The crate's error type.

use std::fmt;

/// What went wrong, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageErrorKind {
    /// The input is not JSON, or not of the expected shape.
    InvalidJson,
    /// A value violates a rule of the message model (role rules, URL form, ...).
    InvalidValue,
}

impl fmt::Display for MessageErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidJson => "invalid json",
            Self::InvalidValue => "invalid value",
        })
    }
}

/// An error reading or building a wire type.
///
/// `path` is the JSON path of the offending value (`context[2].content[0].source.url`),
/// empty for the document root.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("at {path}: ") })]
pub struct MessageError {
    kind: MessageErrorKind,
    path: String,
    message: String,
}

impl MessageError {
    /// Builds an error.
    pub fn new(kind: MessageErrorKind, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, path: path.into(), message: message.into() }
    }

    /// The kind, to match on.
    pub fn kind(&self) -> MessageErrorKind {
        self.kind
    }

    /// The JSON path of the offending value (empty for the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What was expected or violated.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `Result` with [`MessageError`].
pub type Result<T, E = MessageError> = std::result::Result<T, E>;
