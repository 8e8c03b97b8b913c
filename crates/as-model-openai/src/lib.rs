//! An OpenAI-compatible chat model provider for agentscope-rs: OpenAI, DashScope (compatible mode), DeepSeek,
//! Ollama, vLLM and any other `/chat/completions` endpoint.
//!
//! * [`OpenAiCompatibleModel`] implements [`as_model::ChatModel`]; presets [`OpenAiChatModel`],
//!   [`DashScopeChatModel`], [`DeepSeekChatModel`], [`OllamaChatModel`] read keys from the environment
//!   (`OPENAI_API_KEY`/`OPENAI_BASE_URL`, `DASHSCOPE_API_KEY`, `DEEPSEEK_API_KEY`, none for Ollama), and
//!   [`OpenAiCompatibleConfig::custom`] takes any base URL.
//! * [`ChatFormatter`] maps `Msg` blocks to chat messages exactly as 2.0.4's `OpenAIChatFormatter` and
//!   `DashScopeChatFormatter` (the golden files are reproduced byte for byte), thinking as `reasoning_content`
//!   both ways; except that `file://` media are read only under [`FormatterOptions`]`::local_files` (skipped
//!   otherwise) and the OpenAI flavor skips remote audio URLs (2.0.4 downloads them).
//! * Streaming parses SSE incrementally, accumulates tool-call argument deltas by `index`, maps usage
//!   (`prompt_tokens`, `completion_tokens`, `cached_tokens`) and finish reasons. A stream that breaks, is cut
//!   mid-event, sends a malformed event or goes silent longer than the idle timeout yields a typed error and its
//!   partial response reads as interrupted (see `as_model`'s crate docs). Once the finish reason has come, the
//!   answer is whole: the stream ends at the usage chunk after it, or when the server then stays silent for
//!   [`OpenAiCompatibleConfig::finish_grace`], without waiting for `[DONE]` or the connection's close.
//! * Credentials: [`ApiKey`] never prints (`Debug` is redacted, no `Display`/`Serialize`); error messages echoing
//!   the key are redacted; the key is never part of a request body, a response or state.
//!
//! # Why not `async-openai`
//! The workspace pins `async-openai` 0.43, but this crate talks HTTP with `reqwest` (the client `async-openai`
//! itself uses) and parses with its own serde types, because in 0.43:
//! * the default client wraps every call in a retry layer that retries 429 and 5xx itself with exponential
//!   backoff, so `Retry-After`, our [`as_model::RetryPolicy`] and cancellation between attempts cannot be honoured;
//! * its error type keeps the status but drops the response headers (no `Retry-After`);
//! * its chat types have no `reasoning_content`/`reasoning` (thinking both ways) nor DashScope's
//!   `enable_thinking`, and its request structs cannot reproduce 2.0.4's exact message JSON (key order, `name`,
//!   `content: null`);
//! * (checked, not a blocker) its chat types do deserialize under the workspace's `serde_json/arbitrary_precision`:
//!   stream chunks with text, tool calls and usage, whole completions and requests were verified with a scratch
//!   crate on 0.43.0. Our own wire types are plain structs with optional fields, so they cannot regress there either.
//!
//! ```no_run
//! use as_message::Msg;
//! use as_model::{ChatModel, ChatRequest};
//! use as_model_openai::{DashScopeChatModel, OpenAiCompatibleModel};
//!
//! # async fn demo() -> Result<(), as_model::ModelError> {
//! let model = DashScopeChatModel::from_env("qwen-plus")?; // DASHSCOPE_API_KEY
//! let reply = model.call(ChatRequest::new(vec![Msg::user("user", "Hello!")])).await?;
//! println!("{}", reply.text());
//!
//! // Any OpenAI-compatible server (vLLM, Ollama, a proxy):
//! let local = OpenAiCompatibleModel::new(as_model_openai::OpenAiCompatibleConfig::custom(
//!     "http://127.0.0.1:8000/v1",
//!     "Qwen/Qwen3-8B",
//! ))?;
//! # let _ = local; Ok(()) }
//! ```

mod config;
mod error;
mod format;
mod parse;
mod provider;
mod sse;
#[cfg(feature = "test-utils")]
pub mod test_server;

pub use config::{ApiKey, DEFAULT_FINISH_GRACE, Flavor, OpenAiCompatibleConfig, Parameters, Preset};
pub use format::{ChatFormatter, FormatterOptions, MAX_LOCAL_FILE_BYTES, MediaIdFactory, shortuuid};
pub use parse::{ReasoningField, StreamState};
pub use provider::{
    DashScopeChatModel, DeepSeekChatModel, MAX_INLINE_DEPTH, MAX_INLINED_VALUES, OllamaChatModel, OpenAiChatModel,
    OpenAiCompatibleModel, inline_refs,
};
pub use sse::{DEFAULT_MAX_EVENT_BYTES, SseError, SseParser};
