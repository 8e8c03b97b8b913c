//! Retry and fallback configuration.

use std::fmt;
use std::time::Duration;

use crate::error::ModelError;
use crate::model::SharedChatModel;

/// Provider-level retries (2.0.4's `ChatModelBase(max_retries=3, retry_delay=1.0)`), before any chunk
/// was streamed: how many and how far apart. Which failures are retried is the provider's rule.
/// [`RetryPolicy::delay_for`] retries [`ModelError::is_retryable`] errors; the OpenAI-compatible
/// provider uses it for failures without an answer (connection, timeout), but decides on an HTTP
/// error answer by its status and `x-should-retry` header as 2.0.4 does (408, 409, 429 and 5xx), so
/// some errors whose kind is not retryable are retried too (a 429 `insufficient_quota` is
/// [`crate::ModelErrorKind::Provider`] and is retried).
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay between attempts.
    pub retry_delay: Duration,
    /// Use the server's `Retry-After` hint (capped by `max_retry_after`) instead of `retry_delay` when present.
    pub honor_retry_after: bool,
    /// The longest `Retry-After` that is honoured; a longer one fails the call at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            retry_delay: Duration::from_secs(1),
            honor_retry_after: true,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self { max_retries: 0, ..Self::default() }
    }

    /// `max_retries` retries `retry_delay` apart.
    pub fn new(max_retries: u32, retry_delay: Duration) -> Self {
        Self { max_retries, retry_delay, ..Self::default() }
    }

    /// The delay before retry number `attempt` (1-based) after `err`, or `None` when the call must fail now
    /// (not retryable, retries used up, or a `Retry-After` beyond `max_retry_after`).
    pub fn delay_for(&self, attempt: u32, err: &ModelError) -> Option<Duration> {
        if !err.is_retryable() || attempt > self.max_retries {
            return None;
        }
        match err.retry_after() {
            Some(d) if self.honor_retry_after => (d <= self.max_retry_after).then_some(d),
            _ => Some(self.retry_delay),
        }
    }
}

/// Agent-level model configuration (2.0.4's `ModelConfig`): each model gets `max_retries + 1` attempts on
/// **any** error, then the fallback model gets the same.
#[derive(Clone, Default)]
pub struct ModelConfig {
    /// Retries per model (default 0).
    pub max_retries: u32,
    /// Tried after the primary model's attempts are used up.
    pub fallback_model: Option<SharedChatModel>,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("max_retries", &self.max_retries)
            .field("fallback_model", &self.fallback_model.as_ref().map(|m| m.model_name().to_owned()))
            .finish()
    }
}

impl ModelConfig {
    /// The attempts in order: `(model, attempt index)` for the primary then the fallback, `max_retries + 1` each.
    pub fn attempts(&self, primary: &SharedChatModel) -> Vec<(SharedChatModel, u32)> {
        let mut out = Vec::new();
        let models = std::iter::once(primary).chain(self.fallback_model.as_ref());
        for m in models {
            for i in 0..=self.max_retries {
                out.push((std::sync::Arc::clone(m), i));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ModelErrorKind;

    #[test]
    fn delays() {
        let p = RetryPolicy::new(2, Duration::from_millis(10));
        let transport = ModelError::new(ModelErrorKind::Transport, "t", "");
        assert_eq!(p.delay_for(1, &transport), Some(Duration::from_millis(10)));
        assert_eq!(p.delay_for(2, &transport), Some(Duration::from_millis(10)));
        assert_eq!(p.delay_for(3, &transport), None);
        let auth = ModelError::new(ModelErrorKind::Auth, "t", "");
        assert_eq!(p.delay_for(1, &auth), None);
        let rl = ModelError::new(ModelErrorKind::RateLimited { retry_after: Some(Duration::from_secs(2)) }, "t", "");
        assert_eq!(p.delay_for(1, &rl), Some(Duration::from_secs(2)));
        let long =
            ModelError::new(ModelErrorKind::RateLimited { retry_after: Some(Duration::from_secs(600)) }, "t", "");
        assert_eq!(p.delay_for(1, &long), None);
        assert_eq!(RetryPolicy::none().delay_for(1, &transport), None);
    }

    #[test]
    fn attempts_cover_primary_then_fallback() {
        use crate::{ScriptedModel, SharedChatModel};
        use std::sync::Arc;
        let primary: SharedChatModel = Arc::new(ScriptedModel::new("primary", []));
        let fallback: SharedChatModel = Arc::new(ScriptedModel::new("fallback", []));
        let names = |c: &ModelConfig| -> Vec<(String, u32)> {
            c.attempts(&primary).iter().map(|(m, i)| (m.model_name().to_owned(), *i)).collect()
        };
        assert_eq!(names(&ModelConfig::default()), vec![("primary".to_owned(), 0)]);
        let c = ModelConfig { max_retries: 1, fallback_model: Some(fallback) };
        assert_eq!(
            names(&c),
            vec![("primary".into(), 0), ("primary".into(), 1), ("fallback".into(), 0), ("fallback".into(), 1)]
        );
        assert!(format!("{c:?}").contains("fallback"));
    }
}
