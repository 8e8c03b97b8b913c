//! The chat model contract of agentscope-rs (AgentScope 2.0.4's `ChatModelBase`, without BUG-1).
//!
//! A model is an `Arc<dyn` [`ChatModel`]`>` ([`SharedChatModel`]). One call is a [`ChatRequest`] (messages, tool
//! schemas, tool choice, cancellation token) and its answer is a [`ChatStream`]:
//!
//! * a [`futures::Stream`] of [`ChatChunk`] deltas (text, thinking, tool-call argument fragments, data; each with a
//!   stable block id), which the agent turns into events;
//! * an accumulator: [`ChatStream::response`] is the [`ChatResponse`] so far (content blocks, [`ChatUsage`],
//!   [`FinishReason`]).
//!
//! # Cancellation and partial responses (BUG-1)
//! A response counts as complete only when the provider finished it. Until then, and whenever the stream was
//! cancelled (the request's token fired), failed mid-stream or was dropped, the response reads as
//! [`FinishReason::Interrupted`], keeps the partial text, thinking and tool calls (to be saved to context), and
//! [`ChatResponse::executable_tool_calls`] is empty: a half-streamed tool call is never presented as complete.
//! A [`ResponseHandle`] taken from the stream keeps reading the partial response after the stream is dropped (e.g.
//! when the agent's future is cancelled by `tokio::select!`). A call cancelled before its stream starts returns an
//! empty interrupted stream ([`ChatStream::interrupted`]), as 2.0.4 intended.
//!
//! ```
//! use as_message::Msg;
//! use as_model::{ChatModel, ChatRequest, FinishReason, ScriptedModel, ScriptedTurn};
//! use futures::StreamExt;
//! use tokio_util::sync::CancellationToken;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = ScriptedModel::new("qwen-plus", [
//!     ScriptedTurn::new()
//!         .thinking("The user wants the weather.")
//!         .tool_call_chunks("call_1", "get_weather", [r#"{"city": "#, r#""Paris"}"#])
//!         .usage(100, 20),
//!     ScriptedTurn::new().text("Sun").pause().text("ny."),
//! ]);
//!
//! // A complete streamed call.
//! let mut stream = model.stream(ChatRequest::new(vec![Msg::user("user", "Weather in Paris?")])).await?;
//! while let Some(chunk) = stream.next().await {
//!     let chunk = chunk?; // deltas, to turn into TEXT/THINKING/TOOL_CALL events
//!     assert!(stream.response().is_interrupted(), "not complete before the provider finished");
//!     # let _ = chunk;
//! }
//! let done = stream.response();
//! assert_eq!(done.finish_reason, FinishReason::ToolCalls);
//! assert_eq!(done.executable_tool_calls()[0].input, r#"{"city": "Paris"}"#);
//! assert_eq!(done.usage.as_ref().map(|u| u.input_tokens), Some(100));
//!
//! // A call cancelled mid-stream: the partial response is kept, marked interrupted.
//! let cancel = CancellationToken::new();
//! let gate = model.pause_gate();
//! let request = ChatRequest::new(vec![Msg::user("user", "And now?")]).with_cancel(cancel.clone());
//! let (partial, ()) = tokio::join!(model.call(request), async {
//!     gate.wait_paused().await;
//!     cancel.cancel();
//! });
//! let partial = partial?;
//! assert!(partial.is_interrupted());
//! assert_eq!(partial.text(), "Sun");
//! # Ok::<(), as_model::ModelError>(()) }).unwrap();
//! ```
//!
//! # Implementing a provider
//! 1. Implement [`ChatModel::stream`]: validate the tools with [`ChatRequest::effective_tools`], send the request
//!    (retrying before the first chunk per a [`RetryPolicy`], by your provider's rule: [`ModelError::is_retryable`]
//!    errors, or as the OpenAI-compatible provider does, by HTTP status as 2.0.4 does), and on
//!    cancellation before the stream starts return [`ChatStream::interrupted`].
//! 2. Wrap the provider's deltas with [`ChatStream::new`]`(stream, request.cancel.clone())`. Give every delta block a
//!    stable id (one per text/thinking block, the call id for tool calls), put the finish reason and usage on the
//!    chunks that carry them, and end the inner stream (`None`) **only** when the provider finished the response:
//!    a cut or malformed stream must yield an `Err`.
//! 3. Map every failure into [`ModelError`] with the right [`ModelErrorKind`] (HTTP 401/403 → `Auth`, 429 →
//!    usually `RateLimited` with `Retry-After`, context overflow → `ContextLengthExceeded`, 5xx → `ServerError`, ...) and keep
//!    credentials out of `Debug` and messages.
//! 4. Test it against a local server (see `as-model-openai`'s `test_server`) and snapshot the request bodies.
//!
//! Also here: [`ToolSchema`] / [`ToolChoice`], structured output ([`ChatModel::generate_structured_output`]),
//! token counting ([`TokenCounter`], the 2.0.4 heuristic [`HeuristicTokenCounter`]), provider retries
//! ([`RetryPolicy`]) and the agent's retry/fallback config ([`ModelConfig`]), typed errors ([`ModelError`] with a
//! [`ModelErrorKind`]), and, with feature `test-utils`, [`ScriptedModel`] and
//! [`ConstantModel`].

mod config;
#[cfg(any(test, feature = "test-utils"))]
pub mod conformance;
#[cfg(any(test, feature = "test-utils"))]
mod constant;
mod error;
mod model;
mod request;
mod response;
#[cfg(any(test, feature = "test-utils"))]
mod scripted;
mod stream;
mod tokens;

pub use config::{ModelConfig, RetryPolicy};
#[cfg(any(test, feature = "test-utils"))]
pub use constant::ConstantModel;
pub use error::{ModelError, ModelErrorKind, Result};
pub use model::{
    ChatModel, STRUCTURED_OUTPUT_REMINDER, STRUCTURED_OUTPUT_TOOL, STRUCTURED_OUTPUT_TOOL_DESCRIPTION, SharedChatModel,
    parse_structured_output, structured_output_request,
};
pub use request::{ChatRequest, StructuredOutputRequest, ToolChoice, ToolChoiceMode, ToolSchema};
pub use response::{ChatChunk, ChatResponse, ChatUsage, FinishReason, StructuredResponse};
#[cfg(any(test, feature = "test-utils"))]
pub use scripted::{PauseGate, ScriptedModel, ScriptedTurn};
pub use stream::{ChatStream, ResponseHandle, StreamStatus};
pub use tokens::{DATA_BLOCK_TOKENS, HeuristicTokenCounter, TokenCounter, python_json_dumps};

/// Re-exported: the cancellation token type of [`ChatRequest::cancel`].
pub use tokio_util::sync::CancellationToken;
