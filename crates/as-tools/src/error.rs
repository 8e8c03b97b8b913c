//! `ToolError`: one error type for the crate, with a kind to match on.
//!
//! Every `ToolError` that happens while the model's call is handled is turned into a tool
//! result (an observation for the model) by [`crate::Toolkit::call_tool`] or by the agent;
//! [`ToolError::model_text`] is the exact text the model sees.

use std::fmt;

/// What went wrong, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// No tool of that name is registered in any group.
    NotFound,
    /// The tool exists, but its group is not activated.
    InactiveGroup,
    /// The argument text is not a JSON object, even after repair.
    InvalidJson,
    /// The arguments do not satisfy the tool's input schema.
    InvalidInput,
    /// The tool ran and failed (its message is shown to the model).
    Execution,
    /// The call was cancelled or interrupted.
    Interrupted,
    /// The call ran longer than its timeout.
    Timeout,
    /// A filesystem or process error.
    Io,
    /// Registration problems: a duplicate group, the reserved `basic` group name, a bad schema.
    Registration,
    /// Refused (by the permission engine or by a tool precondition such as "read before edit").
    Denied,
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotFound => "tool not found",
            Self::InactiveGroup => "tool group inactive",
            Self::InvalidJson => "invalid json arguments",
            Self::InvalidInput => "invalid input",
            Self::Execution => "execution failed",
            Self::Interrupted => "interrupted",
            Self::Timeout => "timeout",
            Self::Io => "io",
            Self::Registration => "registration",
            Self::Denied => "denied",
        })
    }
}

/// A tool error. `message` is the text the model sees (see [`ToolError::model_text`]).
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ToolError {
    /// Builds an error whose model-facing text is `message`.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    /// A tool-execution failure (the common case inside a tool's `call`).
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Execution, message)
    }

    /// `ToolNotFoundError: The tool named '{name}' doesn't exist.` (2.0.4's text).
    pub fn not_found(name: &str) -> Self {
        Self::new(ToolErrorKind::NotFound, format!("ToolNotFoundError: The tool named '{name}' doesn't exist."))
    }

    /// The tool exists in `group`, which is not activated. 2.0.4 reports this as "not found";
    /// the port tells the model how to fix it.
    pub fn inactive_group(name: &str, group: &str) -> Self {
        Self::new(
            ToolErrorKind::InactiveGroup,
            format!(
                "ToolInactiveError: The tool named '{name}' belongs to the tool group '{group}', which is not \
                 activated. Call 'reset_tools' with '{group}' set to true to activate it first."
            ),
        )
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind, to match on.
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The message (also the model-facing text).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The exact text the model sees in the tool result.
    pub fn model_text(&self) -> &str {
        &self.message
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        Self::new(ToolErrorKind::Io, e.to_string()).with_source(e)
    }
}

/// `Result` with [`ToolError`] as the default error.
pub type Result<T, E = ToolError> = std::result::Result<T, E>;
