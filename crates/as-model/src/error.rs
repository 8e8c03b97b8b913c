//! `ModelError`: one error type for every provider, with a kind to match on.

use std::fmt;
use std::time::Duration;

/// What went wrong, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The credential was rejected (HTTP 401/403) or is missing.
    Auth,
    /// The provider throttled the call (HTTP 429). `retry_after` is the server's hint, when it sent one.
    RateLimited {
        /// The `Retry-After` (or `retry-after-ms`) delay the server asked for.
        retry_after: Option<Duration>,
    },
    /// The prompt does not fit the model's context window.
    ContextLengthExceeded,
    /// The connection failed or broke (connect error, reset, a stream cut mid-response).
    Transport,
    /// The provider answered something that is not a valid response (bad JSON, malformed SSE, ...).
    InvalidResponse,
    /// The provider failed on its side (HTTP 5xx); retrying may help.
    ServerError,
    /// The provider rejected the request for another reason (HTTP 4xx other than the above).
    Provider,
    /// The request was invalid before it was sent (unknown tool in a tool choice, bad config, ...).
    InvalidRequest,
    /// No answer within the configured timeout.
    Timeout,
    /// The call was cancelled and no partial response can stand for it.
    Cancelled,
}

impl fmt::Display for ModelErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auth => f.write_str("authentication failed"),
            Self::RateLimited { retry_after: Some(d) } => {
                write!(f, "rate limited (retry after {:.3}s)", d.as_secs_f64())
            }
            Self::RateLimited { retry_after: None } => f.write_str("rate limited"),
            Self::ContextLengthExceeded => f.write_str("context length exceeded"),
            Self::Transport => f.write_str("transport error"),
            Self::InvalidResponse => f.write_str("invalid response"),
            Self::ServerError => f.write_str("server error"),
            Self::Provider => f.write_str("provider error"),
            Self::InvalidRequest => f.write_str("invalid request"),
            Self::Timeout => f.write_str("timeout"),
            Self::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// A model error. Provider SDK errors are mapped into this at the provider's edge and never appear in the
/// trait's signatures. Messages never contain credentials.
#[derive(Debug, thiserror::Error)]
#[error("{provider}: {kind}{}: {message}", status.map(|s| format!(" (http {s})")).unwrap_or_default())]
pub struct ModelError {
    kind: ModelErrorKind,
    provider: &'static str,
    status: Option<u16>,
    message: String,
    /// The server's retry hint on an error of another kind than `RateLimited` (e.g. a 503).
    retry_hint: Option<Duration>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ModelError {
    /// Builds an error.
    pub fn new(kind: ModelErrorKind, provider: &'static str, message: impl Into<String>) -> Self {
        Self { kind, provider, status: None, message: message.into(), retry_hint: None, source: None }
    }

    /// Records the server's retry hint (`Retry-After`) on an error that is not
    /// [`ModelErrorKind::RateLimited`] (which carries its own), e.g. a 503 or a 408. The hint is
    /// kept only on a retryable error ([`ModelError::is_retryable`]).
    pub fn with_retry_after(mut self, hint: Option<Duration>) -> Self {
        self.retry_hint = hint.filter(|_| self.is_retryable());
        self
    }

    /// Records the HTTP status the provider answered with.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind, to match on.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// The provider's name (`"openai"`, `"dashscope"`, `"scripted"`, ...).
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// The HTTP status, when the error came from an HTTP answer.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The human-readable detail.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The server's retry hint: [`ModelErrorKind::RateLimited`]'s, or one recorded with
    /// [`ModelError::with_retry_after`] on another retryable error.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ModelErrorKind::RateLimited { retry_after } => retry_after,
            _ => self.retry_hint,
        }
    }

    /// Whether the same call may succeed when retried: rate limits, transport failures, timeouts and
    /// server errors (2.0.4 retries `APIConnectionError`, `APITimeoutError`, `RateLimitError` and
    /// `InternalServerError`).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ModelErrorKind::RateLimited { .. }
                | ModelErrorKind::Transport
                | ModelErrorKind::Timeout
                | ModelErrorKind::ServerError
        )
    }
}

/// `Result` with [`ModelError`].
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_retryable() {
        let e = ModelError::new(
            ModelErrorKind::RateLimited { retry_after: Some(Duration::from_millis(1500)) },
            "openai",
            "slow down",
        )
        .with_status(429);
        assert_eq!(e.to_string(), "openai: rate limited (retry after 1.500s) (http 429): slow down");
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
        let e = ModelError::new(ModelErrorKind::Auth, "openai", "bad key").with_status(401);
        assert!(!e.is_retryable());
        assert_eq!(e.retry_after(), None);
        assert!(ModelError::new(ModelErrorKind::ServerError, "x", "").is_retryable());
        assert!(!ModelError::new(ModelErrorKind::ContextLengthExceeded, "x", "").is_retryable());
    }

    #[test]
    fn a_retry_hint_rides_on_retryable_errors_only() {
        let two = Some(Duration::from_secs(2));
        for (kind, kept) in [
            (ModelErrorKind::ServerError, true),
            (ModelErrorKind::Timeout, true),
            (ModelErrorKind::Transport, true),
            (ModelErrorKind::Provider, false),
            (ModelErrorKind::Auth, false),
        ] {
            let e = ModelError::new(kind, "x", "").with_retry_after(two);
            assert_eq!(e.retry_after(), if kept { two } else { None }, "{kind}");
        }
        // RateLimited's own hint wins over a recorded one.
        let e = ModelError::new(ModelErrorKind::RateLimited { retry_after: None }, "x", "").with_retry_after(two);
        assert_eq!(e.retry_after(), None);
    }
}
