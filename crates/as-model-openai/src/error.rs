//! Mapping HTTP answers and transport failures to [`ModelError`].

use std::time::Duration;

use as_model::{ModelError, ModelErrorKind};
use serde_json::Value;

use crate::parse::{error_message, truncate};

/// Whether an error message/object says the prompt is too long.
pub(crate) fn is_context_length(message: &str, err: &Value) -> bool {
    let code = err.get("code").and_then(Value::as_str).unwrap_or_default();
    if code == "context_length_exceeded" || code == "string_above_max_length" {
        return true;
    }
    let m = message.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "maximum context",
        "context window",
        "too many tokens",
        "input length",
        "prompt is too long",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The longest wait a `Retry-After` answer can ask for; longer values are clamped to it (a server's
/// number is input, and `Duration::from_secs_f64` panics beyond `Duration::MAX`).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses `retry-after-ms` / `retry-after` (seconds, integer or decimal, or an HTTP date, whose
/// wait is counted from now and is zero once past), clamped to [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    retry_after_at(headers, std::time::SystemTime::now())
}

fn retry_after_at(headers: &reqwest::header::HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    let secs = |v: &str, scale: f64| v.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v / scale);
    let date = |v: &str| {
        let at = httpdate::parse_http_date(v).ok()?;
        Some(at.duration_since(now).unwrap_or(Duration::ZERO).as_secs_f64())
    };
    let max = MAX_RETRY_AFTER.as_secs_f64();
    get("retry-after-ms")
        .and_then(|v| secs(v, 1000.0))
        .or_else(|| get("retry-after").and_then(|v| secs(v, 1.0).or_else(|| date(v))))
        .map(|s| Duration::from_secs_f64(s.min(max)))
}

/// The server's retry hint on an HTTP error answer, read where the `openai` SDK (which 2.0.4 calls)
/// honours it: on the statuses it retries, 408, 409, 429 and 5xx (`_should_retry`), from
/// `retry-after-ms` then `retry-after` (see [`retry_after`], clamped to [`MAX_RETRY_AFTER`]).
/// 429 also carries it in [`ModelErrorKind::RateLimited`].
pub(crate) fn retry_hint(status: u16, headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    matches!(status, 408 | 409 | 429 | 500..=599).then(|| retry_after(headers)).flatten()
}

/// Whether the `openai` SDK's client (which 2.0.4 calls) sends a request again after this HTTP
/// error answer, in the order of its `_should_retry`: an `x-should-retry` header of exactly `true`
/// or `false` decides first (several such header lines are one value joined by `", "` to the SDK,
/// which is neither, so they do not decide); then 408, 409, 429 and every status from 500 are
/// retried, and no other. The SDK's very first step, no retry when `Retry-After` asks for more than
/// two minutes, is left to the provider's retry loop, where a hint beyond
/// [`as_model::RetryPolicy::max_retry_after`] fails the call at once whatever this says.
pub(crate) fn sdk_should_retry(status: u16, headers: &reqwest::header::HeaderMap) -> bool {
    let mut lines = headers.get_all("x-should-retry").iter();
    match (lines.next().map(reqwest::header::HeaderValue::as_bytes), lines.next()) {
        (Some(b"true"), None) => return true,
        (Some(b"false"), None) => return false,
        _ => {}
    }
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// Whether 2.0.4 sends a request again after this HTTP error answer. Two layers retry there: the
/// SDK's client ([`sdk_should_retry`]), and `ChatModelBase.__call__` around it, which retries the
/// SDK's `RateLimitError` (429) and `InternalServerError` (500 and above) whatever the headers said;
/// so a 503 with `x-should-retry: false` is still sent again (by the outer layer), while a 409 or
/// 408 with it, or a 400 without `x-should-retry: true`, is not.
pub(crate) fn should_retry(status: u16, headers: &reqwest::header::HeaderMap) -> bool {
    sdk_should_retry(status, headers) || status == 429 || status >= 500
}

/// Maps a non-success HTTP answer.
pub(crate) fn from_status(
    provider: &'static str,
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &str,
    secret: Option<&str>,
) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let err = parsed.as_ref().and_then(|v| v.get("error").cloned()).or(parsed).unwrap_or(Value::Null);
    let message = if err.is_null() { truncate(body, 500).to_owned() } else { error_message(&err) };
    let message = redact(&message, secret);
    let code = err.get("code").and_then(Value::as_str).unwrap_or_default();
    let kind = kind_of_status(status, code, &message, &err, || retry_after(headers));
    // 429 carries its hint in its kind; 408 and 5xx beside it (`ModelError::retry_after`, which
    // `RetryPolicy::delay_for` reads: the provider's own retry loop waits it).
    let hint = if matches!(kind, ModelErrorKind::RateLimited { .. }) { None } else { retry_hint(status, headers) };
    ModelError::new(kind, provider, message).with_status(status).with_retry_after(hint)
}

/// The kind of an HTTP error answer (`code`: the error object's string code, if any).
fn kind_of_status(
    status: u16,
    code: &str,
    message: &str,
    err: &Value,
    retry_after: impl FnOnce() -> Option<Duration>,
) -> ModelErrorKind {
    match status {
        401 | 403 => ModelErrorKind::Auth,
        429 if code == "insufficient_quota" => ModelErrorKind::Provider,
        429 => ModelErrorKind::RateLimited { retry_after: retry_after() },
        408 => ModelErrorKind::Timeout,
        400 | 413 | 422 if is_context_length(message, err) => ModelErrorKind::ContextLengthExceeded,
        500..=599 => ModelErrorKind::ServerError,
        _ => ModelErrorKind::Provider,
    }
}

/// The kind of an `{"error": ...}` object that came without an HTTP error status (in a `200`
/// body, or as a stream event): a numeric code (`500`, or `"429"` as a string) is read as a
/// status; otherwise the code or type names it (rate limit, throttling, overload, server error).
pub(crate) fn kind_of_error_object(err: &Value, message: &str) -> ModelErrorKind {
    let code = err.get("code");
    let status = code
        .and_then(|c| c.as_u64().or_else(|| c.as_str().and_then(|s| s.trim().parse().ok())))
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (400..600).contains(n));
    let names = ["code", "type"]
        .iter()
        .filter_map(|k| err.get(*k).and_then(Value::as_str))
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(status) = status {
        return kind_of_status(status, code.and_then(Value::as_str).unwrap_or_default(), message, err, || None);
    }
    if is_context_length(message, err) {
        ModelErrorKind::ContextLengthExceeded
    } else if names.contains("insufficient_quota") || names.contains("invalid") {
        ModelErrorKind::Provider
    } else if names.contains("rate_limit") || names.contains("throttl") {
        ModelErrorKind::RateLimited { retry_after: None }
    } else if names.contains("server_error") || names.contains("overloaded") || names.contains("internal") {
        ModelErrorKind::ServerError
    } else {
        ModelErrorKind::Provider
    }
}

/// Maps a reqwest failure (connect, body read). A request that could not even be built (a URL
/// without a usable scheme, a header value with a newline) is `InvalidRequest`: retrying cannot help.
///
/// The message is reqwest's text (the kind of failure and the URL) followed by the text of each
/// error in its source chain (`…: client error (Connect): tcp connect error: Connection refused
/// (os error 111)`), which says why; the URL's credentials and the secret are hidden in all of it.
pub(crate) fn from_transport(provider: &'static str, e: reqwest::Error, secret: Option<&str>) -> ModelError {
    let kind = if e.is_timeout() {
        ModelErrorKind::Timeout
    } else if e.is_builder() {
        ModelErrorKind::InvalidRequest
    } else {
        ModelErrorKind::Transport
    };
    // A gateway key may travel in the query (`?key=…`) or the user info: the URL in the message
    // shows neither, in reqwest's text or in a cause's.
    let (e, unmasked) = match e.url().cloned() {
        Some(mut url) => {
            let original = url.to_string();
            if mask_url(&mut url) {
                let masked = url.to_string();
                (e.with_url(url), Some((original, masked)))
            } else {
                (e, None)
            }
        }
        None => (e, None),
    };
    let mut msg = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let text = c.to_string();
        // A wrapper may repeat its cause's text; say it once.
        if !text.is_empty() && !msg.ends_with(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    if let Some((original, masked)) = unmasked {
        msg = msg.replace(&original, &masked);
    }
    ModelError::new(kind, provider, redact(&msg, secret))
}

/// Hides what in a URL may be a credential: the user name and password become `***`, each query
/// value becomes `***` (names are kept: `?api-version=***&key=***`; a part without `=` is all
/// value), and so does a fragment. Whether anything was hidden.
pub(crate) fn mask_url(url: &mut url::Url) -> bool {
    let mut masked = false;
    if !url.username().is_empty() {
        masked |= url.set_username("***").is_ok();
    }
    if url.password().is_some() {
        masked |= url.set_password(Some("***")).is_ok();
    }
    if let Some(query) = url.query() {
        let parts: Vec<String> = query
            .split('&')
            .map(|part| match part.split_once('=') {
                Some((name, _)) => format!("{name}=***"),
                None => "***".to_owned(),
            })
            .collect();
        url.set_query(Some(&parts.join("&")));
        masked = true;
    }
    if url.fragment().is_some() {
        url.set_fragment(Some("***"));
        masked = true;
    }
    masked
}

/// A configured URL for `Debug` output, masked as [`mask_url`] does; text that is not such a URL
/// is shown only when it has no `@`, `?` or `#` (which could hide a credential).
pub(crate) fn masked_url(text: &str) -> String {
    match url::Url::parse(text.trim()) {
        Ok(mut url) if !url.cannot_be_a_base() => {
            mask_url(&mut url);
            url.to_string()
        }
        // Not a URL, or one with no authority (`user:pw@host` reads as scheme `user`).
        _ if text.contains(['@', '?', '#']) => "***".to_owned(),
        _ => text.to_owned(),
    }
}

/// Replaces any occurrence of the secret.
pub(crate) fn redact(s: &str, secret: Option<&str>) -> String {
    match secret {
        Some(k) if k.len() >= 4 && s.contains(k) => s.replace(k, "[REDACTED]"),
        _ => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn status_mapping() {
        let h = HeaderMap::new();
        let k = |s, b: &str| from_status("p", s, &h, b, Some("sk-secret")).kind();
        assert_eq!(k(401, r#"{"error":{"message":"Incorrect API key sk-secret"}}"#), ModelErrorKind::Auth);
        assert_eq!(
            from_status("p", 401, &h, r#"{"error":{"message":"Incorrect API key sk-secret"}}"#, Some("sk-secret"))
                .message(),
            "Incorrect API key [REDACTED]"
        );
        assert_eq!(k(429, r#"{"error":{"code":"insufficient_quota","message":"pay"}}"#), ModelErrorKind::Provider);
        assert_eq!(k(429, "slow"), ModelErrorKind::RateLimited { retry_after: None });
        assert_eq!(
            k(
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#
            ),
            ModelErrorKind::ContextLengthExceeded
        );
        assert_eq!(
            k(400, r#"{"error":{"message":"Range of input length should be [1, 30720]","code":"InvalidParameter"}}"#),
            ModelErrorKind::ContextLengthExceeded
        );
        assert_eq!(k(400, r#"{"error":{"message":"bad"}}"#), ModelErrorKind::Provider);
        assert_eq!(k(503, "<html>"), ModelErrorKind::ServerError);
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn the_retry_hint_is_read_on_the_statuses_the_sdk_retries() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        for (status, hint) in [
            (408, true),
            (409, true),
            (429, true),
            (500, true),
            (503, true),
            (599, true),
            (400, false),
            (404, false),
            (422, false),
            (200, false),
        ] {
            assert_eq!(retry_hint(status, &h), hint.then_some(Duration::from_secs(2)), "{status}");
        }
        assert_eq!(retry_hint(503, &HeaderMap::new()), None);
    }

    /// The retry decision for every (status, `x-should-retry`) pair in the golden made with the real
    /// 2.0.4 and its openai SDK (tests/goldens/retry_decisions.py): `sdk_should_retry` is the SDK
    /// client's alone (it sent the request again with the model's own retries off), `should_retry`
    /// the two layers' together.
    #[test]
    fn retry_decisions_are_2_0_4s() {
        let path = format!("{}/tests/goldens/retry-decisions.json", env!("CARGO_MANIFEST_DIR"));
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(cases.len() >= 30, "{path}");
        let mut wrong = Vec::new();
        for case in cases {
            let status = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
            let mut h = HeaderMap::new();
            h.insert("retry-after-ms", HeaderValue::from_static("1"));
            for v in case["x_should_retry"].as_array().unwrap() {
                h.append("x-should-retry", HeaderValue::from_str(v.as_str().unwrap()).unwrap());
            }
            let name = format!("{status} x-should-retry: {}", case["x_should_retry"]);
            let sdk = case["sdk_requests"].as_u64().unwrap() > 1;
            if sdk_should_retry(status, &h) != sdk {
                wrong.push(format!("{name}: the SDK retries: {sdk}"));
            }
            let both = case["requests"].as_u64().unwrap() > 1;
            if should_retry(status, &h) != both {
                wrong.push(format!("{name}: 2.0.4 retries: {both}"));
            }
        }
        assert!(wrong.is_empty(), "decided otherwise than by 2.0.4:\n{}", wrong.join("\n"));
    }

    /// The error itself carries the hint on the statuses whose kind is retryable, where
    /// `RetryPolicy::delay_for` (the provider's retry loop, or a caller's own) reads it. The agent's
    /// model retries (`ModelConfig`) retry at once, as 2.0.4's do.
    #[test]
    fn the_mapped_error_carries_the_retry_hint() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        for (status, hint) in [(408, true), (429, true), (500, true), (503, true), (409, false), (400, false)] {
            let e = from_status("openai", status, &h, "{}", None);
            assert_eq!(e.retry_after(), hint.then_some(Duration::from_secs(2)), "{status}: {e}");
        }
    }

    #[test]
    fn urls_are_masked() {
        for (url, masked) in [
            ("https://user:hunter2@gw.example/v1?key=sk-gateway-secret", "https://***:***@gw.example/v1?key=***"),
            ("https://sk-token@gw.example/v1", "https://***@gw.example/v1"),
            ("https://:pw@gw.example/v1", "https://:***@gw.example/v1"),
            (
                "https://gw.example/v1?api-version=2024-10&key=k&sk-bare#tok",
                "https://gw.example/v1?api-version=***&key=***&***#***",
            ),
            ("https://api.openai.com/v1", "https://api.openai.com/v1"),
            ("http://localhost:11434/v1", "http://localhost:11434/v1"),
            ("gw.example/v1", "gw.example/v1"),
            ("user:pw@gw.example/v1", "***"),
            ("gw.example/v1?key=secret", "***"),
            ("localhost:8000/v1", "localhost:8000/v1"),
        ] {
            assert_eq!(masked_url(url), masked, "{url}");
        }
    }

    #[test]
    fn retry_after_as_an_http_date_counts_from_now() {
        let now = httpdate::parse_http_date("Sun, 29 Nov 2026 10:00:00 GMT").unwrap();
        let at = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("retry-after", HeaderValue::from_static(v));
            retry_after_at(&h, now)
        };
        assert_eq!(at("Sun, 29 Nov 2026 10:00:30 GMT"), Some(Duration::from_secs(30)));
        // The obsolete forms HTTP allows.
        assert_eq!(at("Sunday, 29-Nov-26 10:01:00 GMT"), Some(Duration::from_secs(60)));
        assert_eq!(at("Sun Nov 29 10:00:05 2026"), Some(Duration::from_secs(5)));
        // Already past: retry now, not never.
        assert_eq!(at("Sun, 29 Nov 2026 09:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Fri, 31 Dec 9999 23:59:59 GMT"), Some(MAX_RETRY_AFTER));
        assert_eq!(at("tomorrow"), None);
    }

    #[test]
    fn huge_retry_after_is_clamped_not_a_panic() {
        for (name, value) in [("retry-after", "1e20"), ("retry-after-ms", "1e23"), ("retry-after", "1e308")] {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_static(value));
            assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER), "{name}: {value}");
        }
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&h), None);
    }
}
