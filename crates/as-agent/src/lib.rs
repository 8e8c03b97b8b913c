//! The stateless AgentScope ReAct agent, wire-compatible with AgentScope Python 2.0.4.
//!
//! * [`Agent`]: name, system prompt, model (+ fallback), toolkit, middlewares and configs. It holds no
//!   conversation: [`Agent::reply_stream`] / [`Agent::reply`] take the session's [`as_state::AgentState`].
//! * [`AgentEvent`]: the closed set of 2.0.4 events, byte-compatible on the wire.
//! * Human in the loop: a reply parks on tool confirmations (`REQUIRE_USER_CONFIRM`) and external executions
//!   (`REQUIRE_EXTERNAL_EXECUTION`) and resumes with [`UserConfirmResultEvent`] / [`ExternalExecutionResultEvent`]
//!   carrying the parked `reply_id` (checked, unlike 2.0.4).
//! * Interrupts: [`ReplyStream::cancel`], dropping the stream, or a [`UserInterruptEvent`]; the state stays
//!   consistent and resumable (no 2.0.4 BUG-1).
//! * [`SessionRunner`]: one chat turn over any `Arc<dyn StorageBase>`, persisting the state whatever way the
//!   reply ends; a final write that fails hands the turn back ([`AgentError::Unsaved`], then
//!   [`SessionRunner::save_unsaved`]) instead of losing it.
//!
//! ```
//! use std::sync::Arc;
//! use as_agent::{Agent, ReplyStatus};
//! use as_model::{ScriptedModel, ScriptedTurn};
//! use as_state::AgentState;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = Arc::new(ScriptedModel::new("scripted", [ScriptedTurn::new().text("Hello!")]));
//! let agent = Agent::builder("Friday", "You are helpful.", model).build()?;
//! let mut state = AgentState::default();
//! let outcome = agent.reply_outcome(&mut state, as_message::Msg::user("user", "Hi")).await?;
//! assert_eq!(outcome.status, ReplyStatus::Completed);
//! assert_eq!(outcome.message.unwrap().get_text_content("").as_deref(), Some("Hello!"));
//! assert_eq!(state.context.len(), 2);
//! # Ok::<(), as_agent::AgentError>(()) }).unwrap();
//! ```
#![warn(missing_docs)]

mod agent;
mod compress;
mod config;
mod error;
mod event;
mod middleware;
mod reply_msg;
mod run;
mod runner;
mod stream;
#[cfg(any(test, feature = "test-utils"))]
pub mod testkit;

pub use agent::{Agent, AgentBuilder, ReplyInput};
pub use compress::TRUNCATED_MARKER;
pub use config::{
    ContextConfig, DEFAULT_COMPRESSION_PROMPT, DEFAULT_INTERRUPTION_MESSAGE, DEFAULT_SUMMARY_TEMPLATE, ReActConfig,
    summary_schema,
};
pub use error::{AgentError, AgentErrorKind, Result, UnsavedTurn};
pub use event::{
    AgentEvent, ConfirmResult, CustomEvent, DataBlockDeltaEvent, DataBlockEndEvent, DataBlockStartEvent, EventTag,
    EventType, ExceedMaxItersEvent, ExternalExecutionResultEvent, HintBlockEvent, ModelCallEndEvent,
    ModelCallStartEvent, ModelFinishedReason, ReplyEndEvent, ReplyFinishedReason, ReplyStartEvent,
    RequireExternalExecutionEvent, RequireUserConfirmEvent, TextBlockDeltaEvent, TextBlockEndEvent,
    TextBlockStartEvent, ThinkingBlockDeltaEvent, ThinkingBlockEndEvent, ThinkingBlockStartEvent, ToolCallDeltaEvent,
    ToolCallEndEvent, ToolCallStartEvent, ToolResultDataDeltaEvent, ToolResultEndEvent, ToolResultStartEvent,
    ToolResultTextDeltaEvent, TypeTag, UserConfirmResultEvent, UserInterruptEvent,
};
pub use middleware::{CompressRequest, Middleware};
pub use reply_msg::MsgEventExt;
pub use run::{MAX_ITERS_MESSAGE, PARKED_MESSAGE, TRUNCATION_NOTE};
pub use runner::{LockGuard, PENDING_WRITE_WAIT, SessionLock, SessionRunner, TurnOutcome};
pub use stream::{ReplyOutcome, ReplyStatus, ReplyStream};

/// Re-exported: the model-side retry/fallback config used by [`AgentBuilder::model_config`].
pub use as_model::ModelConfig;
