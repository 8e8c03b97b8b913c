//! Provider configuration: endpoint, credential, generation parameters, timeouts and retries.

use std::fmt;
use std::time::Duration;

use as_message::JsonMap;
use as_model::{ModelError, ModelErrorKind, RetryPolicy};

/// An API key. `Debug` prints `ApiKey([REDACTED])`; it has no `Display` and no `Serialize`, so it cannot leak into
/// logs, errors, events or state by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Reads a key from the environment variable `var` (`None` when unset or empty).
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).map(Self)
    }

    /// The secret itself (only for building the `Authorization` header).
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

/// The API dialect: where OpenAI and DashScope's compatible mode differ (spec §11.3–§11.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI and generic OpenAI-compatible servers (DeepSeek, Ollama, vLLM): `name` on messages, tool schemas
    /// flattened (`$ref` inlined), `reasoning_effort` when thinking, reasoning read from `reasoning_content` or
    /// `reasoning`.
    OpenAi,
    /// DashScope compatible mode: no `name`, `enable_thinking` always sent, `thinking_budget`/`top_k` in the body,
    /// `tool_choice: "required"` downgraded to `"auto"`, schemas not flattened, only `reasoning_content` read.
    DashScope,
}

/// A known endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// `https://api.openai.com/v1`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`; context 128000.
    OpenAi,
    /// `https://dashscope.aliyuncs.com/compatible-mode/v1`, `DASHSCOPE_API_KEY`, `DASHSCOPE_BASE_URL`; context 131072.
    DashScope,
    /// `https://api.deepseek.com`, `DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL`; context 128000.
    DeepSeek,
    /// `http://localhost:11434/v1` (no key), `OLLAMA_BASE_URL`; context 32768.
    Ollama,
}

impl Preset {
    /// The provider name used in errors and logs.
    pub fn provider(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::DashScope => "dashscope",
            Self::DeepSeek => "deepseek",
            Self::Ollama => "ollama",
        }
    }

    /// The default base URL.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::DashScope => "https://dashscope.aliyuncs.com/compatible-mode/v1",
            Self::DeepSeek => "https://api.deepseek.com",
            Self::Ollama => "http://localhost:11434/v1",
        }
    }

    /// The API key variable (`None`: no key needed).
    pub fn key_var(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some("OPENAI_API_KEY"),
            Self::DashScope => Some("DASHSCOPE_API_KEY"),
            Self::DeepSeek => Some("DEEPSEEK_API_KEY"),
            Self::Ollama => None,
        }
    }

    /// The base URL override variable.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Self::OpenAi => "OPENAI_BASE_URL",
            Self::DashScope => "DASHSCOPE_BASE_URL",
            Self::DeepSeek => "DEEPSEEK_BASE_URL",
            Self::Ollama => "OLLAMA_BASE_URL",
        }
    }

    /// The dialect.
    pub fn flavor(self) -> Flavor {
        match self {
            Self::DashScope => Flavor::DashScope,
            _ => Flavor::OpenAi,
        }
    }

    /// The preset for a 2.0.4 model or credential `type` (`"openai_chat"`, `"dashscope_chat"`,
    /// `"deepseek_chat"`, `"ollama_chat"`, or the `*_credential` names), as stored in a session's
    /// `chat_model_config`.
    pub fn from_model_type(kind: &str) -> Option<Self> {
        let base = kind.strip_suffix("_chat").or_else(|| kind.strip_suffix("_credential")).unwrap_or(kind);
        match base {
            "openai" => Some(Self::OpenAi),
            "dashscope" => Some(Self::DashScope),
            "deepseek" => Some(Self::DeepSeek),
            "ollama" => Some(Self::Ollama),
            _ => None,
        }
    }

    /// The default context size.
    pub fn context_size(self) -> usize {
        match self {
            Self::OpenAi | Self::DeepSeek => 128_000,
            Self::DashScope => 131_072,
            Self::Ollama => 32_768,
        }
    }
}

/// Generation parameters (2.0.4's `OpenAIChatModel`/`DashScopeChatModel` parameters).
///
/// Audio output is not supported: 2.0.4's `voice` parameter (which asks for
/// `audio: {voice, format: "pcm16"}` and `modalities: ["text", "audio"]` and reads the answer's
/// audio and transcript) has no field here, and [`Parameters::from_json`] ignores it with a
/// warning. `audio` or `modalities` put in [`Parameters::extra_body`] are sent as they are, but
/// the answer's audio (and its transcript) is not read.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameters {
    /// `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Enables thinking: OpenAI sends `reasoning_effort`; DashScope sends `enable_thinking: true`.
    pub thinking_enable: bool,
    /// `reasoning_effort` (none|minimal|low|medium|high|xhigh), sent only with thinking (OpenAI flavor).
    pub reasoning_effort: Option<String>,
    /// `thinking_budget` (DashScope).
    pub thinking_budget: Option<u32>,
    /// `temperature` (0–2).
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `top_k` (DashScope).
    pub top_k: Option<u32>,
    /// `parallel_tool_calls`; `false` is sent only when disabled.
    pub parallel_tool_calls: bool,
    /// Extra top-level body keys (2.0.4's `extra_body`), merged last.
    pub extra_body: JsonMap,
}

impl Parameters {
    /// Reads 2.0.4's free-form `parameters` object (`max_tokens`, `thinking_enable`, `reasoning_effort`,
    /// `thinking_budget`, `temperature`, `top_p`, `top_k`, `parallel_tool_calls`, `extra_body`). Unknown keys are
    /// ignored; a known key with the wrong type is [`ModelErrorKind::InvalidRequest`]. `voice` (audio output,
    /// not supported) is ignored with a warning.
    pub fn from_json(map: &JsonMap) -> Result<Self, ModelError> {
        use serde_json::Value;
        if map.get("voice").is_some_and(|v| !v.is_null()) {
            tracing::warn!("the \"voice\" parameter is ignored: audio output is not supported");
        }
        let bad = |k: &str, want: &str| {
            ModelError::new(
                ModelErrorKind::InvalidRequest,
                "as-model-openai",
                format!("parameter {k:?} must be {want}"),
            )
        };
        let uint = |k: &str| -> Result<Option<u32>, ModelError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| bad(k, "a non-negative integer")),
            }
        };
        let float = |k: &str| -> Result<Option<f64>, ModelError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| bad(k, "a number")),
            }
        };
        let boolean = |k: &str, default: bool| -> Result<bool, ModelError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v.as_bool().ok_or_else(|| bad(k, "a boolean")),
            }
        };
        let reasoning_effort = match map.get("reasoning_effort") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("reasoning_effort", "a string")),
        };
        let extra_body = match map.get("extra_body") {
            None | Some(Value::Null) => JsonMap::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(bad("extra_body", "an object")),
        };
        Ok(Self {
            max_tokens: uint("max_tokens")?,
            thinking_enable: boolean("thinking_enable", false)?,
            reasoning_effort,
            thinking_budget: uint("thinking_budget")?,
            temperature: float("temperature")?,
            top_p: float("top_p")?,
            top_k: uint("top_k")?,
            parallel_tool_calls: boolean("parallel_tool_calls", true)?,
            extra_body,
        })
    }
}

impl Default for Parameters {
    fn default() -> Self {
        Self {
            max_tokens: None,
            thinking_enable: false,
            reasoning_effort: None,
            thinking_budget: None,
            temperature: None,
            top_p: None,
            top_k: None,
            parallel_tool_calls: true,
            extra_body: JsonMap::new(),
        }
    }
}

/// The default [`OpenAiCompatibleConfig::finish_grace`]: the usage chunk follows the finish reason at
/// once on a working server.
pub const DEFAULT_FINISH_GRACE: Duration = Duration::from_secs(2);

/// Everything an [`crate::OpenAiCompatibleModel`] needs. `Debug` shows no credential: the key is
/// redacted, and so are the user info, query values and fragment of the base URL (a gateway may take
/// its key there).
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiCompatibleConfig {
    /// Provider name for errors and logs.
    pub provider: &'static str,
    /// The dialect.
    pub flavor: Flavor,
    /// Base URL; `/chat/completions` is appended.
    pub base_url: String,
    /// The key (`None`: no `Authorization` header, e.g. Ollama).
    pub api_key: Option<ApiKey>,
    /// `OpenAI-Organization` header.
    pub organization: Option<String>,
    /// The model name.
    pub model: String,
    /// Stream (SSE) or not.
    pub stream: bool,
    /// Generation parameters.
    pub parameters: Parameters,
    /// Send thinking back as `reasoning_content` (default: on for DashScope with thinking enabled).
    pub send_reasoning_content: bool,
    /// Context window in tokens.
    pub context_size: usize,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Time allowed until the response headers (and, non-streaming, the whole body) arrive
    /// (default 600 s, the `openai` SDK's: a reasoning model may think for minutes first).
    pub request_timeout: Duration,
    /// Longest silence allowed between two stream reads (default 600 s, as above: some providers
    /// send nothing while the model reasons).
    pub idle_timeout: Duration,
    /// Longest wait, once a stream has sent its finish reason, for the usage chunk and `[DONE]`
    /// (default 2 s; the idle timeout when that is shorter). A server that then goes silent without
    /// closing the stream has still answered: the stream ends successfully when the usage chunk
    /// arrives or this grace period passes, instead of waiting out the idle timeout and failing.
    pub finish_grace: Duration,
    /// Provider-level retries, before the first chunk: of an HTTP error answer when 2.0.4 sends the
    /// request again after it (by its status and `x-should-retry` header: 408, 409, 429 and 5xx,
    /// unless `x-should-retry: false` on a 408 or 409, and any status with `x-should-retry: true`),
    /// of a failure without an answer (connection, timeout) when its kind is retryable.
    pub retry: RetryPolicy,
    /// The largest response body accepted, in bytes (default 64 MiB), streamed or not; more is an
    /// [`ModelErrorKind::InvalidResponse`]. Each event of a stream is also bounded by
    /// [`crate::DEFAULT_MAX_EVENT_BYTES`].
    pub max_response_bytes: usize,
    /// The directory whose files `file://` media URLs in messages may name (read and sent inline);
    /// `None` (default) reads none. See [`crate::FormatterOptions::local_files`].
    pub local_files: Option<std::path::PathBuf>,
}

impl fmt::Debug for OpenAiCompatibleConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            provider,
            flavor,
            base_url,
            api_key,
            organization,
            model,
            stream,
            parameters,
            send_reasoning_content,
            context_size,
            connect_timeout,
            request_timeout,
            idle_timeout,
            finish_grace,
            retry,
            max_response_bytes,
            local_files,
        } = self;
        f.debug_struct("OpenAiCompatibleConfig")
            .field("provider", provider)
            .field("flavor", flavor)
            .field("base_url", &crate::error::masked_url(base_url))
            .field("api_key", api_key)
            .field("organization", organization)
            .field("model", model)
            .field("stream", stream)
            .field("parameters", parameters)
            .field("send_reasoning_content", send_reasoning_content)
            .field("context_size", context_size)
            .field("connect_timeout", connect_timeout)
            .field("request_timeout", request_timeout)
            .field("idle_timeout", idle_timeout)
            .field("finish_grace", finish_grace)
            .field("retry", retry)
            .field("max_response_bytes", max_response_bytes)
            .field("local_files", local_files)
            .finish()
    }
}

impl OpenAiCompatibleConfig {
    /// A config for `preset` and `model` with the preset's defaults and no key.
    pub fn preset(preset: Preset, model: impl Into<String>) -> Self {
        Self {
            provider: preset.provider(),
            flavor: preset.flavor(),
            base_url: preset.default_base_url().to_owned(),
            api_key: None,
            organization: None,
            model: model.into(),
            stream: true,
            parameters: Parameters::default(),
            send_reasoning_content: false,
            context_size: preset.context_size(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(600),
            finish_grace: DEFAULT_FINISH_GRACE,
            retry: RetryPolicy::default(),
            max_response_bytes: 4 * crate::DEFAULT_MAX_EVENT_BYTES,
            local_files: None,
        }
    }

    /// A config for any OpenAI-compatible endpoint (vLLM, LM Studio, a proxy, ...): OpenAI flavor, no key.
    pub fn custom(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: "openai-compatible",
            base_url: base_url.into(),
            context_size: 32_768,
            ..Self::preset(Preset::OpenAi, model)
        }
    }

    /// A config for `preset` reading the key and base URL from the environment. Fails with
    /// [`ModelErrorKind::Auth`] when the preset needs a key and its variable is unset.
    pub fn from_env(preset: Preset, model: impl Into<String>) -> Result<Self, ModelError> {
        let mut c = Self::preset(preset, model);
        if let Some(var) = preset.key_var() {
            c.api_key = Some(ApiKey::from_env(var).ok_or_else(|| {
                ModelError::new(ModelErrorKind::Auth, preset.provider(), format!("{var} is not set"))
            })?);
        }
        if let Ok(url) = std::env::var(preset.base_url_var())
            && !url.trim().is_empty()
        {
            c.base_url = url.trim().to_owned();
        }
        if preset == Preset::OpenAi {
            c.organization = std::env::var("OPENAI_ORG_ID").ok().filter(|o| !o.is_empty());
        }
        Ok(c)
    }

    /// Sets the key.
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets the base URL.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Streams or not.
    pub fn with_stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Sets the generation parameters.
    pub fn with_parameters(mut self, p: Parameters) -> Self {
        if self.flavor == Flavor::DashScope && p.thinking_enable {
            self.send_reasoning_content = true;
        }
        self.parameters = p;
        self
    }

    /// Sends thinking back as `reasoning_content` or not.
    pub fn with_reasoning_content(mut self, on: bool) -> Self {
        self.send_reasoning_content = on;
        self
    }

    /// Sets the context size.
    pub fn with_context_size(mut self, n: usize) -> Self {
        self.context_size = n;
        self
    }

    /// Sets the three timeouts (connect, until headers, between stream reads).
    pub fn with_timeouts(mut self, connect: Duration, request: Duration, idle: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self.idle_timeout = idle;
        self
    }

    /// Sets the longest wait after a stream's finish reason (see [`Self::finish_grace`]).
    pub fn with_finish_grace(mut self, grace: Duration) -> Self {
        self.finish_grace = grace;
        self
    }

    /// Sets the largest response body accepted, streamed or not (at least 1 KiB).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes.max(1024);
        self
    }

    /// Lets `file://` media URLs name files inside `dir` (see [`crate::FormatterOptions::local_files`]).
    pub fn with_local_files(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.local_files = Some(dir.into());
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The chat completions URL: `/chat/completions` appended to the base URL's path, its query
    /// (a gateway's `?api-version=…`) kept after it.
    pub fn endpoint(&self) -> String {
        match url::Url::parse(self.base_url.trim()) {
            Ok(mut url) if !url.cannot_be_a_base() => {
                let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
                url.set_path(&path);
                url.to_string()
            }
            // Not a URL: the request fails with a clear error naming it.
            _ => format!("{}/chat/completions", self.base_url.trim_end_matches('/')),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_redacted_everywhere() {
        let c =
            OpenAiCompatibleConfig::preset(Preset::DashScope, "qwen-plus").with_api_key(ApiKey::new("sk-very-secret"));
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("sk-very-secret"), "{dbg}");
        assert!(dbg.contains("ApiKey([REDACTED])"));
        assert_eq!(c.endpoint(), "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions");
    }

    #[test]
    fn debug_masks_credentials_in_the_base_url() {
        for (base, shown) in [
            ("https://user:hunter2@gw.example/v1?key=sk-gateway-secret", "\"https://***:***@gw.example/v1?key=***\""),
            ("https://gw.example/v1?api-version=2024-10&key=sk-q", "\"https://gw.example/v1?api-version=***&key=***\""),
            ("https://api.openai.com/v1", "\"https://api.openai.com/v1\""),
        ] {
            let c = OpenAiCompatibleConfig::custom(base, "m").with_api_key(ApiKey::new("sk-very-secret"));
            for dbg in [format!("{c:?}"), format!("{c:#?}")] {
                for secret in ["hunter2", "sk-gateway-secret", "sk-q", "2024-10", "sk-very-secret", "user:"] {
                    assert!(!dbg.contains(secret), "{secret} in {dbg}");
                }
                assert!(dbg.contains(shown), "{dbg}");
                assert!(dbg.contains("ApiKey([REDACTED])") && dbg.contains("model: \"m\""), "{dbg}");
            }
            // The config itself is untouched: the request goes to the real URL.
            assert_eq!(c.base_url, base);
        }
    }

    #[test]
    fn parameters_from_json() {
        let m: JsonMap = serde_json::from_str(
            r#"{"max_tokens": 100, "thinking_enable": true, "temperature": 0.5, "parallel_tool_calls": false,
                "extra_body": {"seed": 1}, "unknown": "ignored"}"#,
        )
        .unwrap();
        let p = Parameters::from_json(&m).unwrap();
        assert_eq!(p.max_tokens, Some(100));
        assert!(p.thinking_enable && !p.parallel_tool_calls);
        assert_eq!(p.temperature, Some(0.5));
        assert_eq!(p.extra_body.len(), 1);
        let bad: JsonMap = serde_json::from_str(r#"{"max_tokens": "many"}"#).unwrap();
        assert_eq!(Parameters::from_json(&bad).unwrap_err().kind(), ModelErrorKind::InvalidRequest);
        assert_eq!(Parameters::from_json(&JsonMap::new()).unwrap(), Parameters::default());
        assert_eq!(Preset::from_model_type("dashscope_chat"), Some(Preset::DashScope));
        assert_eq!(Preset::from_model_type("openai_credential"), Some(Preset::OpenAi));
        assert_eq!(Preset::from_model_type("anthropic_chat"), None);
    }

    #[test]
    fn custom_and_presets() {
        let c = OpenAiCompatibleConfig::custom("http://127.0.0.1:8000/v1/", "llama");
        assert_eq!(c.endpoint(), "http://127.0.0.1:8000/v1/chat/completions");
        for (base, endpoint) in [
            (
                "https://gw.example/v1?api-version=2024-10&key=k",
                "https://gw.example/v1/chat/completions?api-version=2024-10&key=k",
            ),
            ("https://gw.example/v1/?x=1#f", "https://gw.example/v1/chat/completions?x=1#f"),
            ("https://api.deepseek.com", "https://api.deepseek.com/chat/completions"),
            ("https://api.deepseek.com/", "https://api.deepseek.com/chat/completions"),
        ] {
            assert_eq!(OpenAiCompatibleConfig::custom(base, "m").endpoint(), endpoint, "{base}");
        }
        assert_eq!(c.flavor, Flavor::OpenAi);
        assert!(Preset::Ollama.key_var().is_none());
        assert_eq!(Preset::DeepSeek.default_base_url(), "https://api.deepseek.com");
    }
}
