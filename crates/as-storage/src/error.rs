//! `StorageError`: one error type for every backend, with a kind to match on.

use std::fmt;

/// What went wrong, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// The session (or message) does not exist under that owner (2.0.4's `KeyError`).
    NotFound,
    /// A create with an id that is already taken.
    AlreadyExists,
    /// A conditional write lost: the stored revision is not the expected one.
    Conflict,
    /// The backend does not support the operation.
    Unsupported,
    /// The backend cannot be reached or did not answer in time; retrying may help.
    Unavailable,
    /// A stored value is not valid (bad JSON, wrong type, not UTF-8).
    Serialization,
    /// An id that could collide in a key layout or break it.
    InvalidKey,
    /// A record over the configured size limit; nothing was written.
    TooLarge,
    /// Bad arguments other than ids.
    InvalidInput,
    /// Any other backend failure.
    Backend,
}

impl fmt::Display for StorageErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotFound => "not found",
            Self::AlreadyExists => "already exists",
            Self::Conflict => "conflict",
            Self::Unsupported => "unsupported",
            Self::Unavailable => "unavailable",
            Self::Serialization => "serialization",
            Self::InvalidKey => "invalid key",
            Self::TooLarge => "too large",
            Self::InvalidInput => "invalid input",
            Self::Backend => "backend",
        })
    }
}

/// A storage error. Backend errors (fred, rusqlite, ...) are mapped into this at the backend's edge
/// and never appear in the trait's signatures.
#[derive(Debug, thiserror::Error)]
#[error("{backend} {operation}: {kind}: {message}")]
pub struct StorageError {
    kind: StorageErrorKind,
    backend: &'static str,
    operation: &'static str,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StorageError {
    /// Builds an error.
    pub fn new(
        kind: StorageErrorKind,
        backend: &'static str,
        operation: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self { kind, backend, operation, message: message.into(), source: None }
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind, to match on.
    pub fn kind(&self) -> StorageErrorKind {
        self.kind
    }

    /// The backend's name (`"memory"`, `"redis"`, `"sqlite"`, ...).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The operation that failed (`"update_session_state"`, ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The human-readable detail.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether retrying the same call may succeed (unavailable backends, lost conditional writes).
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind, StorageErrorKind::Unavailable | StorageErrorKind::Conflict)
    }
}

/// `Result` with [`StorageError`].
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
