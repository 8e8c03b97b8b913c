//! [`Agent`]: configuration only. The conversation lives in the [`AgentState`] the caller passes in.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use as_message::{ContentBlock, Msg, Role};
use as_model::{ModelConfig, SharedChatModel};
use as_state::AgentState;
use as_tools::{PermissionEngine, Toolkit};
use tokio_util::sync::CancellationToken;

use crate::config::{ContextConfig, ReActConfig};
use crate::error::{AgentError, Result};
use crate::event::{AgentEvent, ExternalExecutionResultEvent, UserConfirmResultEvent, UserInterruptEvent};
use crate::middleware::CompressRequest;
use crate::middleware::Middleware;
use crate::run::Run;
use crate::stream::{EventQueue, ReplyOutcome, ReplyStream};

/// What a reply is asked to do (2.0.4's `inputs`).
#[derive(Clone, Debug, PartialEq)]
pub enum ReplyInput {
    /// New user messages (possibly none: `reply(None)`), starting a new reply.
    Messages(Vec<Msg>),
    /// The user's decisions on parked confirmations (resumes the parked reply).
    Confirm(UserConfirmResultEvent),
    /// Results of parked external executions (resumes the parked reply).
    External(ExternalExecutionResultEvent),
    /// Close the parked reply (a no-op when nothing is parked).
    Interrupt(UserInterruptEvent),
}

impl ReplyInput {
    /// No input (`reply(None)`): a new reply over the existing context.
    pub fn none() -> Self {
        Self::Messages(Vec::new())
    }

    /// A user text message from `"user"`.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::Messages(vec![Msg::user("user", text)])
    }
}

impl From<Msg> for ReplyInput {
    fn from(m: Msg) -> Self {
        Self::Messages(vec![m])
    }
}

impl From<Vec<Msg>> for ReplyInput {
    fn from(m: Vec<Msg>) -> Self {
        Self::Messages(m)
    }
}

impl From<UserConfirmResultEvent> for ReplyInput {
    fn from(e: UserConfirmResultEvent) -> Self {
        Self::Confirm(e)
    }
}

impl From<ExternalExecutionResultEvent> for ReplyInput {
    fn from(e: ExternalExecutionResultEvent) -> Self {
        Self::External(e)
    }
}

impl From<UserInterruptEvent> for ReplyInput {
    fn from(e: UserInterruptEvent) -> Self {
        Self::Interrupt(e)
    }
}

impl TryFrom<AgentEvent> for ReplyInput {
    type Error = AgentError;

    fn try_from(e: AgentEvent) -> Result<Self> {
        match e {
            AgentEvent::UserConfirmResult(e) => Ok(Self::Confirm(e)),
            AgentEvent::ExternalExecutionResult(e) => Ok(Self::External(e)),
            AgentEvent::UserInterrupt(e) => Ok(Self::Interrupt(e)),
            other => Err(AgentError::InvalidInput(format!(
                "{:?} is not an event a client can send to the agent",
                other.event_type()
            ))),
        }
    }
}

/// The stateless ReAct agent (2.0.4's `Agent`): a name, a system prompt, a model (and a fallback), tools,
/// middlewares and configs. It holds **no conversation**: every reply takes the session's [`AgentState`].
///
/// # Why `&mut AgentState`
/// A reply borrows the state mutably instead of taking it by value and handing it back. The caller always
/// keeps ownership, so whatever way the reply ends (completed, parked, interrupted, max iterations, an error,
/// or the reply future/stream dropped half-way) the state, with everything accumulated so far, is still in the
/// caller's hands to persist. By value, a dropped or failed reply would lose the state together with the
/// future; 2.0.4's peers lose state exactly there.
///
/// An `Agent` is cheap to build per turn and `Sync`: several sessions may reply through one agent
/// concurrently, each with its own state.
#[derive(Clone)]
pub struct Agent {
    pub(crate) name: String,
    pub(crate) system_prompt: String,
    pub(crate) model: SharedChatModel,
    pub(crate) model_config: ModelConfig,
    pub(crate) toolkit: Arc<Toolkit>,
    pub(crate) engine: PermissionEngine,
    pub(crate) middlewares: Vec<Arc<dyn Middleware>>,
    pub(crate) react_config: ReActConfig,
    pub(crate) context_config: ContextConfig,
    pub(crate) working_dir: PathBuf,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("model", &self.model.model_name())
            .field("model_config", &self.model_config)
            .field("middlewares", &self.middlewares)
            .field("react_config", &self.react_config)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`] ([`Agent::builder`]).
#[derive(Clone)]
pub struct AgentBuilder {
    agent: Agent,
}

impl fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.agent.fmt(f)
    }
}

impl AgentBuilder {
    /// The tools (default: none).
    pub fn toolkit(mut self, toolkit: impl Into<Arc<Toolkit>>) -> Self {
        self.agent.toolkit = toolkit.into();
        self
    }

    /// Adds a middleware (the first added is the outermost).
    pub fn middleware(mut self, m: Arc<dyn Middleware>) -> Self {
        self.agent.middlewares.push(m);
        self
    }

    /// Retries per model and the fallback model.
    pub fn model_config(mut self, c: ModelConfig) -> Self {
        self.agent.model_config = c;
        self
    }

    /// Sets the fallback model (shorthand for a [`ModelConfig`] field).
    pub fn fallback_model(mut self, m: SharedChatModel) -> Self {
        self.agent.model_config.fallback_model = Some(m);
        self
    }

    /// Loop bounds and the interruption message.
    pub fn react_config(mut self, c: ReActConfig) -> Self {
        self.agent.react_config = c;
        self
    }

    /// Compression and truncation settings.
    pub fn context_config(mut self, c: ContextConfig) -> Self {
        self.agent.context_config = c;
        self
    }

    /// The working directory tools and the permission engine resolve paths against (default: the process's).
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.agent.engine = PermissionEngine::new(dir.clone());
        self.agent.working_dir = dir;
        self
    }

    /// Checks the configs and builds the agent.
    pub fn build(self) -> Result<Agent> {
        self.agent.react_config.validate()?;
        self.agent.context_config.validate()?;
        if self.agent.name.is_empty() {
            return Err(AgentError::config("the agent name must not be empty"));
        }
        Ok(self.agent)
    }
}

impl Agent {
    /// Starts building an agent.
    pub fn builder(name: impl Into<String>, system_prompt: impl Into<String>, model: SharedChatModel) -> AgentBuilder {
        let engine = PermissionEngine::current_dir();
        let working_dir = engine.cwd().to_path_buf();
        AgentBuilder {
            agent: Agent {
                name: name.into(),
                system_prompt: system_prompt.into(),
                model,
                model_config: ModelConfig::default(),
                toolkit: Arc::new(Toolkit::new()),
                engine,
                middlewares: Vec::new(),
                react_config: ReActConfig::default(),
                context_config: ContextConfig::default(),
                working_dir,
            },
        }
    }

    /// The agent's name (the `name` of its messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The system prompt (before middlewares).
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The primary model.
    pub fn model(&self) -> &SharedChatModel {
        &self.model
    }

    /// The tools.
    pub fn toolkit(&self) -> &Toolkit {
        &self.toolkit
    }

    /// The loop config.
    pub fn react_config(&self) -> &ReActConfig {
        &self.react_config
    }

    /// The context config.
    pub fn context_config(&self) -> &ContextConfig {
        &self.context_config
    }

    /// Runs a reply, streaming its events (2.0.4's `reply_stream`).
    ///
    /// `state` is borrowed for the whole reply. However the stream ends (exhausted, cancelled through
    /// [`ReplyStream::cancel_token`], an error, or simply dropped), `state` is left consistent and resumable:
    /// the partial model output is kept, every tool call has a result (`interrupted` if it did not finish)
    /// except the calls of a reply that ended parked (waiting for a confirmation or an external result), and
    /// the interruption notice is never stored. A stream dropped before its end closes every open call except
    /// one whose `REQUIRE_USER_CONFIRM` / `REQUIRE_EXTERNAL_EXECUTION` event the caller already took: that
    /// call stays parked, as if the reply had ended parked (the caller was told and may answer it; an SSE
    /// client that closes on that event is the usual case). Nothing is left parked that the caller was never
    /// told about. Persist the state afterwards in every case (the [`crate::SessionRunner`] does).
    pub fn reply_stream<'a>(&'a self, state: &'a mut AgentState, input: impl Into<ReplyInput>) -> ReplyStream<'a> {
        self.reply_stream_with_cancel(state, input, CancellationToken::new())
    }

    /// [`Agent::reply_stream`] interrupted by `cancel` (for example a child of a server-wide token).
    pub fn reply_stream_with_cancel<'a>(
        &'a self,
        state: &'a mut AgentState,
        input: impl Into<ReplyInput>,
        cancel: CancellationToken,
    ) -> ReplyStream<'a> {
        let queue = EventQueue::default();
        let run = Run::new(self, state, queue.clone(), cancel.clone());
        let input = input.into();
        ReplyStream::new(Box::pin(run.run(input)), queue, cancel)
    }

    /// Runs a reply to its end and returns the final message (2.0.4's `reply`): the answer, or the waiting,
    /// interruption or max-iterations notice. [`crate::AgentErrorKind::NoFinalMessage`] when nothing was
    /// produced (an interrupt sent while nothing is parked).
    pub async fn reply(&self, state: &mut AgentState, input: impl Into<ReplyInput>) -> Result<Msg> {
        let outcome = self.reply_stream(state, input).run_to_end(|_| {}).await?;
        outcome.message.ok_or(AgentError::NoFinalMessage)
    }

    /// Runs a reply to its end and returns the whole outcome.
    pub async fn reply_outcome(&self, state: &mut AgentState, input: impl Into<ReplyInput>) -> Result<ReplyOutcome> {
        self.reply_stream(state, input).run_to_end(|_| {}).await
    }

    /// Appends messages to the context without replying (2.0.4's `observe`), with the reply-input checks.
    /// Unlike 2.0.4 it refuses while calls are parked: an observed message would hide them and leave them
    /// unanswered forever.
    pub fn observe(&self, state: &mut AgentState, msgs: Vec<Msg>) -> Result<()> {
        if state.has_awaiting_tool_calls(&self.name) {
            let (confirmations, external) = crate::run::awaiting_counts(state, &self.name);
            return Err(AgentError::Awaiting { confirmations, external });
        }
        check_input_messages(&msgs)?;
        state.context.extend(msgs);
        Ok(())
    }

    /// Runs context compression now (if the context is over the trigger); returns whether it compressed.
    /// Refused while calls are parked (like [`Agent::observe`]): compression could fold the message
    /// holding them into the summary, and the parked question could then never be answered.
    pub async fn compress_context(&self, state: &mut AgentState) -> Result<bool> {
        self.compress_context_with(state, CompressRequest::new(self.context_config.clone())).await
    }

    /// [`Agent::compress_context`] with other settings or instructions for the summarizing model
    /// (2.0.4's `compress_context(context_config, instructions)`); the `on_compress_context`
    /// middlewares see `request` first. An invalid config fails with [`AgentError::Config`].
    pub async fn compress_context_with(&self, state: &mut AgentState, request: CompressRequest) -> Result<bool> {
        if state.has_awaiting_tool_calls(&self.name) {
            let (confirmations, external) = crate::run::awaiting_counts(state, &self.name);
            return Err(AgentError::Awaiting { confirmations, external });
        }
        let queue = EventQueue::default();
        let mut run = Run::new(self, state, queue, CancellationToken::new());
        let done = run.compress_with(request).await?;
        run.disarm();
        Ok(done == crate::run::Compressed::Yes)
    }

    /// The status a finished reply reports (helper for runners and tests).
    pub fn is_parked(&self, state: &AgentState) -> bool {
        state.has_awaiting_tool_calls(&self.name)
    }
}

/// 2.0.4's input checks: no system messages, no tool calls, tool results or thinking in inputs.
pub(crate) fn check_input_messages(msgs: &[Msg]) -> Result<()> {
    for (i, m) in msgs.iter().enumerate() {
        if m.role == Role::System {
            return Err(AgentError::InvalidInput(format!("input message {i} has role system")));
        }
        if m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_) | ContentBlock::ToolResult(_) | ContentBlock::Thinking(_)))
        {
            return Err(AgentError::InvalidInput(format!(
                "input message {i} contains tool_call, tool_result or thinking blocks"
            )));
        }
        m.check_role().map_err(|e| AgentError::InvalidInput(format!("input message {i}: {e}")))?;
    }
    Ok(())
}
