//! `AgentError`: what stops a reply (tool failures never do: they become results for the model).

use as_message::Msg;
use as_model::ModelError;
use as_state::AgentState;
use as_storage::{Revision, StorageError, StorageErrorKind};

/// What went wrong, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AgentErrorKind {
    /// A reply input is not acceptable (a system message, tool blocks in an input, ...). Nothing was changed.
    InvalidInput,
    /// A new message (or none) arrived while the agent waits for confirmations or external results.
    /// Nothing was changed.
    Awaiting,
    /// A confirm/external result that does not match what is parked (nothing parked, unknown ids, or a
    /// confirmation that renames the tool). Nothing was changed.
    UnexpectedEvent,
    /// A resume or interrupt event whose `reply_id` is not the parked reply's. Nothing was changed.
    ReplyIdMismatch,
    /// `reply()` ended without a final message (an interrupt sent to an idle agent).
    NoFinalMessage,
    /// The model failed (after the configured retries and the fallback).
    Model,
    /// Storage failed.
    Storage,
    /// A conditional write lost: someone else updated the session since it was loaded.
    Conflict,
    /// Context compression could not run (the system prompt and summary alone exceed the window).
    Compression,
    /// A configuration value is out of range.
    Config,
    /// The session lock could not be taken.
    Lock,
    /// A middleware failed.
    Middleware,
    /// A tool raised a developer error (a bug in the tool, not an observation for the model).
    Tool,
    /// The turn was cancelled before it began (while it waited for the session lock): nothing
    /// was loaded, run or written.
    Interrupted,
}

/// An agent error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// See [`AgentErrorKind::InvalidInput`].
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// See [`AgentErrorKind::Awaiting`].
    #[error(
        "agent is waiting for {confirmations} tool calls and external execution results for {external} tool calls, \
         but received no event"
    )]
    Awaiting {
        /// Calls waiting for the user's confirmation.
        confirmations: usize,
        /// Calls waiting for an external result.
        external: usize,
    },
    /// See [`AgentErrorKind::UnexpectedEvent`].
    #[error("unexpected event: {0}")]
    UnexpectedEvent(String),
    /// See [`AgentErrorKind::ReplyIdMismatch`].
    #[error("the event is for reply {got:?} but the parked reply is {expected:?}")]
    ReplyIdMismatch {
        /// `state.reply_id`.
        expected: String,
        /// The event's `reply_id`.
        got: String,
    },
    /// See [`AgentErrorKind::NoFinalMessage`].
    #[error("agent did not produce a final message")]
    NoFinalMessage,
    /// See [`AgentErrorKind::Model`].
    #[error(transparent)]
    Model(#[from] ModelError),
    /// See [`AgentErrorKind::Storage`] and [`AgentErrorKind::Conflict`].
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// See [`AgentErrorKind::Compression`].
    #[error("compression failed: {0}")]
    Compression(String),
    /// See [`AgentErrorKind::Config`].
    #[error("invalid config: {0}")]
    Config(String),
    /// See [`AgentErrorKind::Lock`].
    #[error("session lock: {0}")]
    Lock(String),
    /// See [`AgentErrorKind::Middleware`].
    #[error("middleware: {0}")]
    Middleware(String),
    /// See [`AgentErrorKind::Tool`].
    #[error("tool: {0}")]
    Tool(String),
    /// See [`AgentErrorKind::Interrupted`].
    #[error("interrupted before the turn began (waiting for the session lock); nothing was written")]
    Interrupted,
    /// The turn ran (its events were streamed, its tools ran) but its final write failed: kind
    /// [`AgentErrorKind::Storage`], or [`AgentErrorKind::Conflict`] when another writer moved the
    /// session on. The turn is not lost: [`UnsavedTurn`] holds what was to be written, and
    /// [`crate::SessionRunner::save_unsaved`] tries the write again.
    #[error("the turn was not saved: {}", .0.error)]
    Unsaved(Box<UnsavedTurn>),
}

/// What a turn whose final write failed was to write (see [`AgentError::Unsaved`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct UnsavedTurn {
    /// Why the write failed.
    pub error: StorageError,
    /// The state after the turn.
    pub state: AgentState,
    /// The revision the turn loaded (its conditional write expects it).
    pub revision: Revision,
    /// The messages for the log: the turn's inputs, then its reply message.
    pub messages: Vec<Msg>,
}

impl AgentError {
    /// The kind, to match on.
    pub fn kind(&self) -> AgentErrorKind {
        match self {
            Self::InvalidInput(_) => AgentErrorKind::InvalidInput,
            Self::Awaiting { .. } => AgentErrorKind::Awaiting,
            Self::UnexpectedEvent(_) => AgentErrorKind::UnexpectedEvent,
            Self::ReplyIdMismatch { .. } => AgentErrorKind::ReplyIdMismatch,
            Self::NoFinalMessage => AgentErrorKind::NoFinalMessage,
            Self::Model(_) => AgentErrorKind::Model,
            Self::Storage(e) if e.kind() == StorageErrorKind::Conflict => AgentErrorKind::Conflict,
            Self::Storage(_) => AgentErrorKind::Storage,
            Self::Compression(_) => AgentErrorKind::Compression,
            Self::Config(_) => AgentErrorKind::Config,
            Self::Lock(_) => AgentErrorKind::Lock,
            Self::Middleware(_) => AgentErrorKind::Middleware,
            Self::Tool(_) => AgentErrorKind::Tool,
            Self::Interrupted => AgentErrorKind::Interrupted,
            Self::Unsaved(u) if u.error.kind() == StorageErrorKind::Conflict => AgentErrorKind::Conflict,
            Self::Unsaved(_) => AgentErrorKind::Storage,
        }
    }

    /// The storage error behind a [`AgentErrorKind::Storage`] or [`AgentErrorKind::Conflict`] error.
    pub fn storage_error(&self) -> Option<&StorageError> {
        match self {
            Self::Storage(e) => Some(e),
            Self::Unsaved(u) => Some(&u.error),
            _ => None,
        }
    }

    pub(crate) fn config(msg: impl Into<String>) -> Self {
        Self::Config(msg.into())
    }

    pub(crate) fn compression(msg: impl Into<String>) -> Self {
        Self::Compression(msg.into())
    }

    pub(crate) fn unexpected(msg: impl Into<String>) -> Self {
        Self::UnexpectedEvent(msg.into())
    }
}

/// `Result` with [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;
