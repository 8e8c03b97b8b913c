//! One reply: the 2.0.4 algorithm (spec §4–§9) over a borrowed `AgentState`, without its bugs.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use as_message::{
    ContentBlock, JsonMap, JsonValue, Msg, PermissionBehavior, PermissionContext, PermissionRule, Role, Source,
    TextOrBlocks, TextOrData, ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, Usage, generate_id,
};
use as_model::{ChatChunk, ChatModel as _, ChatRequest, ChatStream, ResponseHandle, ToolSchema};
use as_state::AgentState;
use as_tools::{DynTool, INTERRUPTED_TEXT, SharedToolState, ToolCallContext, ToolOutput};
use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt as _};
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, ReplyInput, check_input_messages};
use crate::error::{AgentError, Result};
use crate::event::*;
use crate::stream::{EventQueue, ReplyOutcome, ReplyStatus, UnsentOutput};

/// The text of the message returned when a reply parks.
pub const PARKED_MESSAGE: &str = "Waiting for tool calls to be confirmed or executed from outside ...";
/// The text of the message returned when `max_iters` is reached.
pub const MAX_ITERS_MESSAGE: &str = "Executed maximum iterations of reasoning-acting loop without finishing the task.";
/// The summary a context without one gets when compression fell back to truncation (an existing
/// summary is kept as it is, upstream 4a121d874).
pub const TRUNCATION_NOTE: &str = "<system-reminder>Earlier messages were removed from the context because it \
    exceeded the model's window and could not be summarized.</system-reminder>";

fn denied_by_user_text(name: &str) -> String {
    format!("<system-reminder>The execution of tool \"{name}\" is denied by user!</system-reminder>")
}

/// Whether compression ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compressed {
    No,
    Yes,
    Cancelled,
}

enum Reasoned {
    Final(Box<Msg>),
    Acting,
    Interrupted,
}

enum Acted {
    Done,
    Parked,
    Interrupted,
}

/// What a tool-call worker asks the reply loop to do (the loop owns the state).
enum Action {
    Event(AgentEvent),
    Started(AgentEvent, String),
    SetAllowed(String),
    Ask {
        call_id: String,
        suggested: Vec<PermissionRule>,
        event: AgentEvent,
    },
    Submit {
        call_id: String,
        event: AgentEvent,
    },
    /// The call's result, before the result middlewares (see [`Run::finish_result`]).
    Result(Answer),
}

/// A tool call's result on its way to the context.
struct Answer {
    block: ToolResultBlock,
    /// Its output deltas were already emitted: the chunks of a tool run by an agent without
    /// middlewares (nothing can rewrite them, so they stream as they come).
    streamed: bool,
    /// How many middlewares, from the first, rewrite it with `on_tool_result` (innermost first):
    /// all of them, except for an `on_acting` answer, which only those outside the answering one
    /// see (as 2.0.4's `on_acting` onion hands a result outwards).
    hooks: usize,
}

impl Answer {
    /// A result that every middleware sees and whose output was not emitted yet.
    fn new(block: ToolResultBlock) -> Self {
        Self { block, streamed: false, hooks: usize::MAX }
    }
}

/// A middleware's slot in `middle_context`, mutated in place (an absent one starts as `null`), so
/// a reply dropped while the hook runs keeps the entry and every key keeps its place (a new key
/// goes last, as in 2.0.4's dict).
fn slot<'m>(slots: &'m mut as_message::JsonMap, key: &str) -> &'m mut JsonValue {
    slots.entry(key.to_owned()).or_insert(JsonValue::Null)
}

/// After a hook: a `null` slot is no entry.
fn settle(slots: &mut as_message::JsonMap, key: &str) {
    if slots.get(key).is_some_and(JsonValue::is_null) {
        slots.shift_remove(key);
    }
}

/// Owns the `&mut AgentState` of a reply. When the reply future is dropped (or fails) before it
/// finished cleanly, `Drop` leaves the state consistent: tool-state parts written back, the
/// in-flight partial model response saved, and every open (non-parked) tool call closed with an
/// `interrupted` result.
struct Guard<'a> {
    state: &'a mut AgentState,
    name: String,
    inflight: Option<ResponseHandle>,
    tools: Option<SharedToolState>,
    armed: bool,
    /// The reply's event queue, and the calls a `REQUIRE_*` event was queued for: a call whose
    /// event the caller already took stays parked when the reply is dropped (the caller was told,
    /// and may answer it), as if the reply had ended parked.
    queue: EventQueue,
    announced: Vec<String>,
    /// The tool-call ids of the model call under way (see [`CallIds`]).
    call_ids: CallIds,
}

/// Tool-call ids a model response brings, made unique within the reply's message: a model may
/// reuse an id this reply already used (providers that number calls per response, a scripted
/// model). The message then held two calls with one id; the loop, which pairs results with calls
/// by id, took the second as answered and never ran it (and an OpenAI-format history then lacked
/// its result). A colliding id is replaced by a fresh one, the same way in the events and in the
/// saved message; ids that do not collide are kept as the model sent them.
#[derive(Debug, Default)]
struct CallIds {
    /// Call and result ids already in the reply's message when the model call started.
    taken: HashSet<String>,
    /// The model's colliding ids and their replacements.
    renamed: HashMap<String, String>,
}

impl CallIds {
    /// For a model call that extends `state`'s reply message (if the last message is it).
    fn for_reply(state: &AgentState, name: &str) -> Self {
        let taken = last_own(state, name)
            .filter(|m| m.id == state.reply_id)
            .map(|m| {
                m.content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.id.clone()),
                        ContentBlock::ToolResult(r) => Some(r.id.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { taken, renamed: HashMap::new() }
    }

    /// The id to use for the model's call id `id`.
    fn map(&mut self, id: &str) -> String {
        if let Some(new) = self.renamed.get(id) {
            return new.clone();
        }
        if !self.taken.contains(id) {
            return id.to_owned();
        }
        let mut new = generate_id();
        while self.taken.contains(&new) {
            new = generate_id();
        }
        self.taken.insert(new.clone());
        self.renamed.insert(id.to_owned(), new.clone());
        new
    }

    /// `blocks` (a model response's content) with its call ids mapped.
    fn apply(&mut self, mut blocks: Vec<ContentBlock>) -> Vec<ContentBlock> {
        for b in &mut blocks {
            if let ContentBlock::ToolCall(c) = b {
                c.id = self.map(&c.id);
            }
        }
        blocks
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.tools.take() {
            t.write_back(self.state);
        }
        if let Some(h) = self.inflight.take() {
            let r = h.snapshot();
            let content = self.call_ids.apply(drop_audio(r.content));
            let usage = r.usage.map(|u| u.to_usage());
            // No event carries this output (the caller took only what the model call emitted so
            // far): the session runner logs it as saved here.
            self.queue.record_unsent(UnsentOutput { content: content.clone(), usage });
            save_to_context(self.state, &self.name, content, usage);
        }
        if self.armed {
            let told: Vec<String> = std::mem::take(&mut self.announced)
                .into_iter()
                .filter(|id| !self.queue.holds(|e| requires(e, id)))
                .collect();
            close_open_calls_except(self.state, &self.name, &told);
        }
    }
}

/// Whether `event` asks the caller about call `id` (a confirmation or an external execution).
fn requires(event: &AgentEvent, id: &str) -> bool {
    match event {
        AgentEvent::RequireUserConfirm(e) => e.tool_calls.iter().any(|c| c.id == id),
        AgentEvent::RequireExternalExecution(e) => e.tool_calls.iter().any(|c| c.id == id),
        _ => false,
    }
}

pub(crate) struct Run<'a> {
    agent: &'a Agent,
    g: Guard<'a>,
    queue: EventQueue,
    cancel: CancellationToken,
    started: HashSet<String>,
}

impl<'a> Run<'a> {
    pub(crate) fn new(
        agent: &'a Agent,
        state: &'a mut AgentState,
        queue: EventQueue,
        cancel: CancellationToken,
    ) -> Self {
        let name = agent.name.clone();
        Self {
            agent,
            g: Guard {
                state,
                name,
                inflight: None,
                tools: None,
                armed: false,
                queue: queue.clone(),
                announced: Vec::new(),
                call_ids: CallIds::default(),
            },
            queue,
            cancel,
            started: HashSet::new(),
        }
    }

    pub(crate) fn disarm(&mut self) {
        self.g.armed = false;
    }

    fn state(&mut self) -> &mut AgentState {
        self.g.state
    }

    fn reply_id(&self) -> String {
        self.g.state.reply_id.clone()
    }

    fn name(&self) -> &str {
        &self.agent.name
    }

    /// Runs middleware event hooks, queues the event and waits until the caller took it.
    async fn emit(&mut self, event: impl Into<AgentEvent>) -> Result<()> {
        self.emit_announcing(event, None).await
    }

    /// [`Self::emit`]; `announce` is the call a `REQUIRE_*` event asks about, recorded once the
    /// event is queued for the caller (not before: a middleware hook that fails or is dropped
    /// first means the caller was never asked).
    async fn emit_announcing(&mut self, event: impl Into<AgentEvent>, announce: Option<String>) -> Result<()> {
        let event = event.into();
        let agent = self.agent;
        for mw in &agent.middlewares {
            let slots = &mut self.g.state.middle_context;
            let r = mw.on_event(&event, slot(slots, mw.key())).await;
            settle(slots, mw.key());
            r?;
        }
        self.queue.push(event);
        self.g.announced.extend(announce);
        self.queue.drained().await;
        Ok(())
    }

    /// The calls parked before this resume were announced to the caller in an earlier reply: if
    /// this one is dropped, those still waiting for their answer stay parked (a call this resume
    /// already moved on, approved or running, is closed as usual).
    fn keep_parked_if_dropped(&mut self) {
        let waiting: Vec<String> = own_unanswered(self.g.state, &self.agent.name)
            .into_iter()
            .filter(|c| matches!(c.state, ToolCallState::Asking | ToolCallState::Submitted))
            .map(|c| c.id.clone())
            .collect();
        self.g.announced.extend(waiting);
    }

    pub(crate) async fn run(mut self, input: ReplyInput) -> Result<ReplyOutcome> {
        let name = self.agent.name.clone();
        match input {
            ReplyInput::Interrupt(ev) => {
                if !self.g.state.has_awaiting_tool_calls(&name) {
                    return Ok(ReplyOutcome { status: ReplyStatus::NoOp, message: None });
                }
                self.check_reply_id(&ev.reply_id)?;
                self.start();
                self.finish_interrupted().await
            }
            ReplyInput::Confirm(ev) => {
                self.check_confirm(&ev)?;
                self.keep_parked_if_dropped();
                self.start();
                self.handle_confirm(ev).await?;
                self.react_loop().await
            }
            ReplyInput::External(ev) => {
                self.check_external(&ev)?;
                self.keep_parked_if_dropped();
                self.start();
                self.handle_external(ev).await?;
                self.react_loop().await
            }
            ReplyInput::Messages(msgs) => {
                if self.g.state.has_awaiting_tool_calls(&name) {
                    let (confirmations, external) = awaiting_counts(self.g.state, &name);
                    return Err(AgentError::Awaiting { confirmations, external });
                }
                check_input_messages(&msgs)?;
                self.start();
                // A previous reply that could not clean up (process crash mid-reply) left calls without
                // results: answer them now so the history sent to the model is valid.
                repair_unanswered_calls(self.g.state, &name);
                let state = self.state();
                state.context.extend(msgs);
                state.reply_id = generate_id();
                state.cur_iter = 0;
                let (session_id, reply_id) = (state.session_id.clone(), state.reply_id.clone());
                self.emit(ReplyStartEvent::new(session_id, reply_id, name, Role::Assistant)).await?;
                self.react_loop().await
            }
        }
    }

    /// The input passed its checks: from here on the reply changes the state (every error above this point
    /// leaves it untouched). Arms the cleanup guard and sets the stream's start flag, which tells the session
    /// runner that the state must be written.
    fn start(&mut self) {
        self.g.armed = true;
        self.queue.mark_started();
    }

    fn check_reply_id(&self, got: &str) -> Result<()> {
        if got != self.g.state.reply_id {
            return Err(AgentError::ReplyIdMismatch { expected: self.g.state.reply_id.clone(), got: got.to_owned() });
        }
        Ok(())
    }

    fn check_confirm(&self, ev: &UserConfirmResultEvent) -> Result<()> {
        let asking: Vec<&ToolCallBlock> = own_unanswered(self.g.state, self.name())
            .into_iter()
            .filter(|c| c.state == ToolCallState::Asking)
            .collect();
        if asking.is_empty() {
            return Err(AgentError::unexpected(
                "agent is not waiting for user confirmation, but received UserConfirmResultEvent",
            ));
        }
        self.check_reply_id(&ev.reply_id)?;
        let unknown: Vec<&str> = ev
            .confirm_results
            .iter()
            .map(|r| r.tool_call.id.as_str())
            .filter(|id| !asking.iter().any(|c| c.id == *id))
            .collect();
        if !unknown.is_empty() {
            return Err(AgentError::unexpected(format!(
                "received UserConfirmResultEvent with tool call ids {unknown:?} that are not waiting for confirmation"
            )));
        }
        for r in ev.effective_results().into_values() {
            if let Some(parked) = asking.iter().find(|c| c.id == r.tool_call.id)
                && r.confirmed
                && r.tool_call.name != parked.name
            {
                return Err(AgentError::unexpected(format!(
                    "a confirmation cannot change tool call {:?} from {:?} to {:?}",
                    parked.id, parked.name, r.tool_call.name
                )));
            }
        }
        Ok(())
    }

    fn check_external(&self, ev: &ExternalExecutionResultEvent) -> Result<()> {
        let submitted: Vec<&ToolCallBlock> = own_unanswered(self.g.state, self.name())
            .into_iter()
            .filter(|c| c.state == ToolCallState::Submitted)
            .collect();
        if submitted.is_empty() {
            return Err(AgentError::unexpected(
                "agent is not waiting for external execution results, but received ExternalExecutionResultEvent",
            ));
        }
        self.check_reply_id(&ev.reply_id)?;
        let unknown: Vec<&str> = ev
            .execution_results
            .iter()
            .map(|r| r.id.as_str())
            .filter(|id| !submitted.iter().any(|c| c.id == *id))
            .collect();
        if !unknown.is_empty() {
            return Err(AgentError::unexpected(format!(
                "received ExternalExecutionResultEvent with tool call ids {unknown:?} that are not waiting for \
                 external execution results"
            )));
        }
        Ok(())
    }

    async fn handle_confirm(&mut self, ev: UserConfirmResultEvent) -> Result<()> {
        let reply_id = self.reply_id();
        // As 2.0.4: the results by call id (a repeated id: the last one counts), applied in the
        // order the calls were made, each once.
        let by_id = ev.effective_results();
        let results: Vec<ConfirmResult> = own_unanswered(self.g.state, self.name())
            .into_iter()
            .filter(|c| c.state == ToolCallState::Asking)
            .filter_map(|c| by_id.get(c.id.as_str()).map(|r| (*r).clone()))
            .collect();
        for r in results {
            let id = r.tool_call.id.clone();
            if r.confirmed {
                if let Some(c) = call_mut(self.g.state, &self.agent.name, &id) {
                    c.state = ToolCallState::Allowed;
                    c.input.clone_from(&r.tool_call.input);
                }
                for rule in r.rules.unwrap_or_default() {
                    as_tools::PermissionEngine::add_rule(&mut self.g.state.permission_context, rule);
                }
            } else {
                let name = r.tool_call.name.clone();
                let parked_name = call_mut(self.g.state, &self.agent.name, &id).map(|c| c.name.clone()).unwrap_or(name);
                let text = denied_by_user_text(&parked_name);
                self.emit(ToolResultStartEvent::new(reply_id.clone(), id.clone(), parked_name.clone())).await?;
                self.started.insert(id.clone());
                let block = ToolResultBlock::new(id, parked_name, text, ToolResultState::Denied);
                self.finish_result(Answer::new(block), true).await?;
            }
        }
        Ok(())
    }

    async fn handle_external(&mut self, ev: ExternalExecutionResultEvent) -> Result<()> {
        // One result per call: for a repeated id the last one counts, at its first position (as
        // for confirmations). Saving both would leave two results for one call in the context.
        let mut results: Vec<ToolResultBlock> = Vec::with_capacity(ev.execution_results.len());
        for r in ev.execution_results {
            match results.iter_mut().find(|x| x.id == r.id) {
                Some(x) => *x = r,
                None => results.push(r),
            }
        }
        for result in results {
            self.started.insert(result.id.clone());
            self.finish_result(Answer::new(result), false).await?;
        }
        Ok(())
    }

    /// Finishes a tool call with its result: runs the result middlewares (`on_tool_result`,
    /// innermost first, see [`Answer::hooks`]), emits the output deltas (unless the tool's chunks
    /// already streamed them), saves the result (cut to `tool_result_limit` when `truncate`;
    /// external results are kept as given, §7) and finishes its call, then emits `TOOL_RESULT_END`
    /// with the state and metadata the middlewares left. The events, the log the runner rebuilds
    /// from them and the context therefore all carry what the middlewares made of the result (only
    /// the context's copy is truncated, §9.3). The block stays the answer to its call: a middleware
    /// cannot change its id or name. Returns the result's state.
    async fn finish_result(&mut self, answer: Answer, truncate: bool) -> Result<ToolResultState> {
        let Answer { mut block, streamed, hooks } = answer;
        let agent = self.agent;
        let (id, name) = (block.id.clone(), block.name.clone());
        let outer = &agent.middlewares[..hooks.min(agent.middlewares.len())];
        for mw in outer.iter().rev() {
            let slots = &mut self.g.state.middle_context;
            let r = mw.on_tool_result(&mut block, slot(slots, mw.key())).await;
            settle(slots, mw.key());
            r?;
        }
        block.id.clone_from(&id);
        block.name = name;
        let reply_id = self.reply_id();
        if !streamed {
            for e in result_events(&reply_id, &id, &block.output) {
                self.emit(e).await?;
            }
        }
        let (state, metadata) = (block.state, block.metadata.clone());
        let block = if truncate { crate::compress::truncate_tool_result(self.agent, block) } else { block };
        save_to_context(self.g.state, &self.agent.name, vec![ContentBlock::ToolResult(block)], None);
        if let Some(c) = call_mut(self.g.state, &self.agent.name, &id) {
            c.state = ToolCallState::Finished;
        }
        let mut end = ToolResultEndEvent::new(reply_id, id, state);
        end.metadata = metadata;
        self.emit(end).await?;
        Ok(state)
    }

    async fn react_loop(&mut self) -> Result<ReplyOutcome> {
        let max = i64::from(self.agent.react_config.max_iters);
        while self.g.state.cur_iter < max {
            if self.cancel.is_cancelled() {
                return self.finish_interrupted().await;
            }
            match next_action(self.g.state, &self.agent.name) {
                NextAction::Acting => {}
                NextAction::Exit { asking, submitted } => {
                    self.g.armed = false;
                    return Ok(ReplyOutcome {
                        status: ReplyStatus::Parked,
                        message: Some(self.waiting_msg(asking, submitted)),
                    });
                }
                NextAction::Reasoning => {
                    match self.compress().await? {
                        Compressed::Cancelled => return self.finish_interrupted().await,
                        Compressed::No | Compressed::Yes => {}
                    }
                    match self.reasoning().await? {
                        Reasoned::Final(msg) => {
                            let (sid, rid) = (self.g.state.session_id.clone(), self.reply_id());
                            self.emit(ReplyEndEvent::new(sid, rid, ReplyFinishedReason::Completed)).await?;
                            return Ok(ReplyOutcome { status: ReplyStatus::Completed, message: Some(*msg) });
                        }
                        Reasoned::Interrupted => return self.finish_interrupted().await,
                        Reasoned::Acting => {}
                    }
                }
            }
            match self.acting().await? {
                Acted::Interrupted => return self.finish_interrupted().await,
                Acted::Parked => {
                    self.g.armed = false;
                    let mut msg = Msg::assistant(self.agent.name.clone(), PARKED_MESSAGE);
                    msg.id = self.reply_id();
                    return Ok(ReplyOutcome { status: ReplyStatus::Parked, message: Some(msg) });
                }
                Acted::Done => {}
            }
            // Count a round only when it left no call unfinished (upstream fix 662ebaab3).
            if own_unanswered(self.g.state, &self.agent.name).is_empty() {
                self.g.state.cur_iter += 1;
            }
        }
        let (sid, rid, name) = (self.g.state.session_id.clone(), self.reply_id(), self.agent.name.clone());
        // A loop that ends with calls still open (a parked reply resumed at `max_iters`, which a state
        // saved by 2.0.4 can be at) closes them as interrupted, with events: an approval is never
        // dropped without a trace, and the message rebuilt from the events matches the state.
        self.close_open_calls().await?;
        self.g.armed = false;
        self.emit(ExceedMaxItersEvent::new(rid.clone(), name.clone())).await?;
        tracing::warn!(agent = %name, max_iters = max, "exceeded the maximum iterations of the reasoning-acting loop");
        self.emit(ReplyEndEvent::new(sid, rid.clone(), ReplyFinishedReason::ExceedMaxIters)).await?;
        let mut msg = Msg::assistant(name, MAX_ITERS_MESSAGE);
        msg.id = rid;
        Ok(ReplyOutcome { status: ReplyStatus::ExceedMaxIters, message: Some(msg) })
    }

    fn waiting_msg(&self, asking: usize, submitted: usize) -> Msg {
        let mut parts = Vec::new();
        if asking > 0 {
            parts.push(format!("user confirmation for {asking} tool calls"));
        }
        if submitted > 0 {
            parts.push(format!("external execution results for {submitted} tool calls"));
        }
        let mut msg = Msg::assistant(self.agent.name.clone(), format!("I'm waiting for {}.", parts.join(", and ")));
        msg.id = self.reply_id();
        msg
    }

    /// §8: closes every open call of the reply message with an `interrupted` result (with events), then
    /// `REPLY_END(interrupted)`. The interruption message is returned, never stored.
    async fn finish_interrupted(&mut self) -> Result<ReplyOutcome> {
        let (sid, rid) = (self.g.state.session_id.clone(), self.reply_id());
        let end = ReplyEndEvent::new(sid, rid.clone(), ReplyFinishedReason::Interrupted);
        self.close_open_calls().await?;
        self.emit(end).await?;
        self.g.armed = false;
        let mut msg = Msg::assistant(self.agent.name.clone(), self.agent.react_config.interruption_message.clone());
        msg.id = rid;
        Ok(ReplyOutcome { status: ReplyStatus::Interrupted, message: Some(msg) })
    }

    /// Closes every open call of the reply message with an `interrupted` result, with its events.
    async fn close_open_calls(&mut self) -> Result<()> {
        let rid = self.reply_id();
        let open: Vec<ToolCallBlock> = own_unanswered(self.g.state, &self.agent.name).into_iter().cloned().collect();
        for call in open {
            // No second TOOL_RESULT_START for a call whose result already started (upstream fix 698297b4c).
            if !self.started.contains(&call.id) && call.state != ToolCallState::Submitted {
                self.emit(ToolResultStartEvent::new(rid.clone(), call.id.clone(), call.name.clone())).await?;
            }
            self.emit(ToolResultTextDeltaEvent::new(rid.clone(), call.id.clone(), INTERRUPTED_TEXT)).await?;
            let block = ToolResultBlock::new(
                call.id.clone(),
                call.name.clone(),
                INTERRUPTED_TEXT,
                ToolResultState::Interrupted,
            );
            save_to_context(self.g.state, &self.agent.name, vec![ContentBlock::ToolResult(block)], None);
            if let Some(c) = call_mut(self.g.state, &self.agent.name, &call.id) {
                c.state = ToolCallState::Finished;
            }
            self.emit(ToolResultEndEvent::new(rid.clone(), call.id, ToolResultState::Interrupted)).await?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ reasoning

    pub(crate) fn system_prompt(&self) -> String {
        let mut prompt = self.agent.system_prompt.clone();
        for mw in &self.agent.middlewares {
            let slot = self.g.state.middle_context.get(mw.key()).cloned().unwrap_or(JsonValue::Null);
            prompt = mw.on_system_prompt(prompt, &slot);
        }
        prompt
    }

    pub(crate) fn base_messages(&self) -> Vec<Msg> {
        let mut msgs = vec![Msg::system("system", self.system_prompt())];
        match &self.g.state.summary {
            TextOrBlocks::Text(s) if s.is_empty() => {}
            TextOrBlocks::Text(s) => msgs.push(Msg::user("user", s.clone())),
            TextOrBlocks::Blocks(b) if b.is_empty() => {}
            TextOrBlocks::Blocks(b) => msgs.push(Msg::user_blocks("user", b.iter().cloned().map(Into::into).collect())),
        }
        msgs
    }

    pub(crate) fn tool_schemas(&self) -> Vec<ToolSchema> {
        self.agent
            .toolkit
            .schemas(&self.g.state.tool_context.activated_groups)
            .iter()
            .filter_map(|v| ToolSchema::from_function_value(v).ok())
            .collect()
    }

    async fn call_model(&mut self, messages: Vec<Msg>, tools: Vec<ToolSchema>) -> Result<ChatStream> {
        let attempts = self.agent.model_config.attempts(&self.agent.model);
        let mut last_err = None;
        for (model, attempt) in attempts {
            if self.cancel.is_cancelled() {
                return Ok(ChatStream::interrupted());
            }
            let mut request =
                ChatRequest::new(messages.clone()).with_tools(tools.clone()).with_cancel(self.cancel.clone());
            let agent = self.agent;
            for mw in &agent.middlewares {
                let slots = &mut self.g.state.middle_context;
                let r = mw.on_model_call(&mut request, slot(slots, mw.key())).await;
                settle(slots, mw.key());
                r?;
            }
            let cancel = self.cancel.clone();
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(ChatStream::interrupted()),
                r = model.stream(request) => r,
            };
            match result {
                Ok(s) => return Ok(s),
                Err(e) => {
                    tracing::warn!(model = model.model_name(), attempt, error = %e, "model call failed");
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.map_or_else(|| AgentError::config("no model to call"), AgentError::Model))
    }

    async fn reasoning(&mut self) -> Result<Reasoned> {
        let reply_id = self.reply_id();
        let model_name = self.agent.model.model_name().to_owned();
        self.emit(ModelCallStartEvent::new(reply_id.clone(), model_name)).await?;
        let mut messages = self.base_messages();
        messages.extend(self.g.state.context.iter().cloned());
        let tools = self.tool_schemas();
        let mut stream = self.call_model(messages, tools).await?;
        self.g.call_ids = CallIds::for_reply(self.g.state, &self.agent.name);
        self.g.inflight = Some(stream.handle());
        let mut conv = Converter::new(reply_id.clone());
        // The cancel ends the stream here too, not only through the request's token, which a model
        // may not pass on to its stream (a stalled stream would then never end). The response is
        // then not complete, so it reads as interrupted (§8).
        let cancel = self.cancel.clone();
        loop {
            let item = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                item = stream.next() => item,
            };
            let Some(item) = item else { break };
            let chunk = item?;
            for ev in conv.chunk(&chunk, &mut self.g.call_ids) {
                self.emit(ev).await?;
            }
        }
        for ev in conv.finish() {
            self.emit(ev).await?;
        }
        let response = stream.response();
        drop(stream);
        let usage = response.usage.as_ref().map(|u| u.to_usage());
        let (inp, out) = usage.map_or((0, 0), |u| (u.input_tokens, u.output_tokens));
        let reason =
            if response.is_interrupted() { ModelFinishedReason::Interrupted } else { ModelFinishedReason::Completed };
        self.emit(ModelCallEndEvent::new(reply_id.clone(), inp, out, reason)).await?;
        self.g.inflight = None;
        let content = self.g.call_ids.apply(response.content.clone());
        // A call whose arguments hit the output limit: as the context names it (ids may be renamed).
        let cut = match content.last() {
            Some(ContentBlock::ToolCall(c)) if response.finish_reason.is_truncated() => Some(c.clone()),
            _ => None,
        };
        save_to_context(self.g.state, &self.agent.name, drop_audio(content), usage);
        if response.is_interrupted() {
            return Ok(Reasoned::Interrupted);
        }
        if let Some(call) = cut {
            // Answered at once with an error the model can act on, never run: its arguments are a
            // fragment (2.0.4 runs whatever its repairing parser makes of them). Answering it now,
            // before the other calls, also holds across a park: it is never pending.
            let text = truncated_call_text(&call.name, &response.finish_reason);
            let mut actions = error_actions(&reply_id, &call, text, ToolResultState::Error);
            while let Some(action) = actions.next().await {
                self.apply(action).await?;
            }
        }
        if response.tool_calls().next().is_some() {
            return Ok(Reasoned::Acting);
        }
        let mut msg = Msg::new(self.agent.name.clone(), Role::Assistant, response.content);
        msg.id = reply_id;
        msg.usage = last_own(self.g.state, &self.agent.name).and_then(|m| m.usage);
        Ok(Reasoned::Final(Box::new(msg)))
    }

    // ------------------------------------------------------------------ acting

    async fn acting(&mut self) -> Result<Acted> {
        let calls: Vec<ToolCallBlock> = own_unanswered(self.g.state, &self.agent.name)
            .into_iter()
            .filter(|c| matches!(c.state, ToolCallState::Pending | ToolCallState::Allowed))
            .cloned()
            .collect();
        if calls.is_empty() {
            return Ok(Acted::Done);
        }
        // Consecutive calls are grouped: unknown or concurrency-safe tools run concurrently.
        let mut batches: Vec<(bool, Vec<ToolCallBlock>)> = Vec::new();
        for c in calls {
            let concurrent = self.agent.toolkit.get_tool(&c.name).is_none_or(|t| t.is_concurrency_safe());
            match batches.last_mut() {
                Some((k, b)) if *k == concurrent => b.push(c),
                _ => batches.push((concurrent, vec![c])),
            }
        }
        let permission = Arc::new(self.g.state.permission_context.clone());
        let shared = SharedToolState::from_state(self.g.state);
        self.g.tools = Some(shared.clone());
        let mut outcome = Acted::Done;
        for (concurrent, batch) in batches {
            let (parked, interrupted) = if concurrent {
                let workers: Vec<_> =
                    batch.iter().map(|c| self.worker(c.clone(), Arc::clone(&permission), shared.clone())).collect();
                let mut merged = PreferEarliest::new(workers);
                let mut flags = (false, false);
                while let Some(action) = merged.next().await {
                    let f = self.apply(action).await?;
                    flags = (flags.0 || f.0, flags.1 || f.1);
                }
                flags
            } else {
                let mut flags = (false, false);
                for c in batch {
                    let mut w = self.worker(c, Arc::clone(&permission), shared.clone());
                    while let Some(action) = w.next().await {
                        let f = self.apply(action).await?;
                        flags = (flags.0 || f.0, flags.1 || f.1);
                    }
                    if flags.0 || flags.1 {
                        break;
                    }
                }
                flags
            };
            // The tools' view of the state becomes the state's before the next batch.
            shared.write_back(self.g.state);
            if interrupted || self.cancel.is_cancelled() {
                outcome = Acted::Interrupted;
                break;
            }
            if parked {
                outcome = Acted::Parked;
                break;
            }
        }
        if let Some(t) = self.g.tools.take() {
            t.write_back(self.g.state);
        }
        Ok(outcome)
    }

    /// Applies one worker action to the state; returns `(parked, interrupted)`.
    async fn apply(&mut self, action: Action) -> Result<(bool, bool)> {
        match action {
            Action::Event(e) => {
                self.emit(e).await?;
                Ok((false, false))
            }
            Action::Started(e, id) => {
                self.started.insert(id);
                self.emit(e).await?;
                Ok((false, false))
            }
            Action::SetAllowed(id) => {
                if let Some(c) = call_mut(self.g.state, &self.agent.name, &id) {
                    c.state = ToolCallState::Allowed;
                }
                Ok((false, false))
            }
            Action::Ask { call_id, suggested, event } => {
                if let Some(c) = call_mut(self.g.state, &self.agent.name, &call_id) {
                    c.state = ToolCallState::Asking;
                    c.suggested_rules = suggested;
                }
                self.emit_announcing(event, Some(call_id)).await?;
                Ok((true, false))
            }
            Action::Submit { call_id, event } => {
                if let Some(c) = call_mut(self.g.state, &self.agent.name, &call_id) {
                    c.state = ToolCallState::Submitted;
                }
                self.emit_announcing(event, Some(call_id)).await?;
                Ok((true, false))
            }
            Action::Result(answer) => {
                let state = self.finish_result(answer, true).await?;
                Ok((false, state == ToolResultState::Interrupted))
            }
        }
    }

    /// The stream of actions of one tool call (§6.1): availability and input checks, the permission
    /// engine, then asking, submitting, refusing or running the tool.
    fn worker(
        &self,
        call: ToolCallBlock,
        permission: Arc<PermissionContext>,
        shared: SharedToolState,
    ) -> BoxStream<'a, Action> {
        let agent = self.agent;
        let reply_id = self.g.state.reply_id.clone();
        let cancel = self.cancel.child_token();
        let prepare = async move {
            let groups = shared.with(|p| p.tool_context.activated_groups.clone());
            let (tool, input) = match agent.toolkit.prepare(&call.name, &call.input, &groups) {
                Ok(x) => x,
                Err(e) => return error_actions(&reply_id, &call, e.model_text().to_owned(), ToolResultState::Error),
            };
            if call.state != ToolCallState::Allowed {
                let decision = agent.engine.check_permission(&permission, tool.as_ref(), &input).await;
                match decision.behavior {
                    PermissionBehavior::Ask | PermissionBehavior::Passthrough => {
                        let suggested = decision.suggested_rules.unwrap_or_default();
                        let mut asked = call.clone();
                        asked.state = ToolCallState::Asking;
                        asked.suggested_rules.clone_from(&suggested);
                        let event = RequireUserConfirmEvent::new(reply_id.clone(), vec![asked]).into();
                        return stream::iter(vec![Action::Ask { call_id: call.id.clone(), suggested, event }]).boxed();
                    }
                    PermissionBehavior::Deny => {
                        return error_actions(&reply_id, &call, decision.message, ToolResultState::Denied);
                    }
                    PermissionBehavior::Allow => {}
                }
            }
            let start = ToolResultStartEvent::new(reply_id.clone(), call.id.clone(), call.name.clone()).into();
            let head = vec![Action::SetAllowed(call.id.clone()), Action::Started(start, call.id.clone())];
            if tool.is_external() {
                let mut submitted = call.clone();
                submitted.state = ToolCallState::Submitted;
                let event = RequireExternalExecutionEvent::new(reply_id.clone(), vec![submitted]).into();
                let mut actions = head;
                actions.push(Action::Submit { call_id: call.id.clone(), event });
                return stream::iter(actions).boxed();
            }
            for (i, mw) in agent.middlewares.iter().enumerate() {
                match mw.on_acting(&call).await {
                    Ok(Some(mut block)) => {
                        // The answer is this call's, whatever id the middleware's block carried (a
                        // cached result of another call would leave this one open forever).
                        block.id.clone_from(&call.id);
                        block.name.clone_from(&call.name);
                        let mut actions = head;
                        // Only the middlewares outside this one see its answer (2.0.4's onion).
                        actions.push(Action::Result(Answer { hooks: i, ..Answer::new(block) }));
                        return stream::iter(actions).boxed();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        return error_actions(&reply_id, &call, format!("Error: {e}"), ToolResultState::Error);
                    }
                }
            }
            // The permission context goes along: the engine checked only the call's own path, the
            // Glob and Grep walks apply the deny rules to the paths below it.
            let ctx = ToolCallContext::new(call.id.clone(), shared, agent.working_dir.clone())
                .with_cancel(cancel)
                .with_permission(permission);
            let body = run_tool(agent, tool, input, ctx, reply_id, call);
            stream::iter(head).chain(body).boxed()
        };
        stream::once(prepare).flatten().boxed()
    }

    // ------------------------------------------------------------------ compression

    /// Context compression with the agent's settings, after the `on_compress_context` middlewares.
    pub(crate) async fn compress(&mut self) -> Result<Compressed> {
        let agent = self.agent;
        if agent.middlewares.is_empty() {
            // Nothing can change the agent's (validated) settings: no copy of them per step.
            return crate::compress::compress(self, &agent.context_config, None).await;
        }
        let request = crate::middleware::CompressRequest::new(agent.context_config.clone());
        self.compress_with(request).await
    }

    /// Context compression as `request` asks, after the `on_compress_context` middlewares.
    pub(crate) async fn compress_with(
        &mut self,
        mut request: crate::middleware::CompressRequest,
    ) -> Result<Compressed> {
        if request.skip {
            return Ok(Compressed::No);
        }
        let agent = self.agent;
        for mw in &agent.middlewares {
            let slots = &mut self.g.state.middle_context;
            let r = mw.on_compress_context(&mut request, slot(slots, mw.key())).await;
            settle(slots, mw.key());
            r?;
            if request.skip {
                return Ok(Compressed::No);
            }
        }
        request.config.validate()?;
        crate::compress::compress(self, &request.config, request.instructions.as_ref()).await
    }

    pub(crate) fn parts(&mut self) -> (&'a Agent, &mut AgentState, &CancellationToken) {
        (self.agent, self.g.state, &self.cancel)
    }
}

/// The actions of a tool run: its chunks' output deltas as they come, then its result. With a
/// middleware whose `on_tool_result` may rewrite the output ([`crate::Middleware::rewrites_tool_output`]),
/// the chunks are not streamed: the deltas are emitted from the result the middlewares leave (so
/// no event carries output they removed).
fn run_tool(
    agent: &Agent,
    tool: Arc<dyn DynTool>,
    input: JsonMap,
    ctx: ToolCallContext,
    reply_id: String,
    call: ToolCallBlock,
) -> BoxStream<'static, Action> {
    let stream_chunks = !agent.middlewares.iter().any(|m| m.rewrites_tool_output());
    agent
        .toolkit
        .call_tool(tool, input, ctx)
        .flat_map(move |out| {
            let actions: Vec<Action> = match out {
                ToolOutput::Chunk(_) if !stream_chunks => Vec::new(),
                ToolOutput::Chunk(chunk) => chunk
                    .content
                    .iter()
                    .flat_map(|b| output_events(&reply_id, &call.id, b))
                    .map(Action::Event)
                    .collect(),
                ToolOutput::Response(r) => {
                    let block = ToolResultBlock {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        output: TextOrBlocks::Blocks(r.content),
                        state: r.state,
                        metadata: r.metadata,
                    };
                    vec![Action::Result(Answer { streamed: stream_chunks, ..Answer::new(block) })]
                }
            };
            stream::iter(actions)
        })
        .boxed()
}

/// The result of a tool call cut off at the model's output limit.
fn truncated_call_text(name: &str, reason: &as_model::FinishReason) -> String {
    let why = match reason {
        as_model::FinishReason::ContentFilter => "the provider's content filter stopped the output",
        _ => "the output reached the model's token limit",
    };
    format!(
        "ToolCallTruncatedError: The call of tool \"{name}\" was not executed: {why} while its arguments were \
         being written, so they are incomplete. Call it again with complete arguments (shorter ones, or split the \
         work into several calls)."
    )
}

/// `_handle_error_tool_call`: START, then the result (a plain-string output: its text delta and
/// END follow from [`Run::finish_result`]).
fn error_actions(
    reply_id: &str,
    call: &ToolCallBlock,
    text: String,
    state: ToolResultState,
) -> BoxStream<'static, Action> {
    let start = ToolResultStartEvent::new(reply_id, call.id.clone(), call.name.clone()).into();
    let block = ToolResultBlock::new(call.id.clone(), call.name.clone(), text, state);
    stream::iter(vec![Action::Started(start, call.id.clone()), Action::Result(Answer::new(block))]).boxed()
}

/// The output deltas of a whole tool result: one text delta for a plain string, else one event
/// per block.
fn result_events(reply_id: &str, call_id: &str, output: &TextOrBlocks) -> Vec<AgentEvent> {
    match output {
        TextOrBlocks::Text(s) => vec![ToolResultTextDeltaEvent::new(reply_id, call_id, s.clone()).into()],
        TextOrBlocks::Blocks(blocks) => blocks.iter().flat_map(|b| output_events(reply_id, call_id, b)).collect(),
    }
}

/// Events of one output block of a tool result (text delta, or a data delta with a fresh block id).
fn output_events(reply_id: &str, call_id: &str, b: &TextOrData) -> Vec<AgentEvent> {
    match b {
        TextOrData::Text(t) => vec![ToolResultTextDeltaEvent::new(reply_id, call_id, t.text.clone()).into()],
        TextOrData::Data(d) => {
            let (media_type, data, url) = match &d.source {
                Source::Base64(s) => (s.media_type.clone(), Some(s.data.clone()), None),
                Source::Url(u) => (u.media_type.clone(), None, Some(u.url.clone())),
            };
            vec![ToolResultDataDeltaEvent::new(reply_id, call_id, generate_id(), media_type, data, url).into()]
        }
    }
}

/// Merges worker streams, always taking from the earliest one that is ready: a worker that never waits runs
/// to its end before the next starts, as asyncio runs gathered tasks.
struct PreferEarliest<'s> {
    streams: Vec<Option<BoxStream<'s, Action>>>,
}

impl<'s> PreferEarliest<'s> {
    fn new(streams: Vec<BoxStream<'s, Action>>) -> Self {
        Self { streams: streams.into_iter().map(Some).collect() }
    }
}

impl Stream for PreferEarliest<'_> {
    type Item = Action;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Action>> {
        let mut live = false;
        for slot in self.streams.iter_mut() {
            let Some(s) = slot.as_mut() else { continue };
            match s.as_mut().poll_next(cx) {
                Poll::Ready(Some(a)) => return Poll::Ready(Some(a)),
                Poll::Ready(None) => *slot = None,
                Poll::Pending => live = true,
            }
        }
        if live { Poll::Pending } else { Poll::Ready(None) }
    }
}

/// §5.5: turns model chunks into block events, with agent-generated block ids for text and thinking.
struct Converter {
    reply_id: String,
    text: Option<String>,
    thinking: Option<String>,
    tools: Vec<String>,
    data: Vec<String>,
}

impl Converter {
    fn new(reply_id: String) -> Self {
        Self { reply_id, text: None, thinking: None, tools: Vec::new(), data: Vec::new() }
    }

    fn chunk(&mut self, chunk: &ChatChunk, ids: &mut CallIds) -> Vec<AgentEvent> {
        let rid = self.reply_id.clone();
        let mut out: Vec<AgentEvent> = Vec::new();
        let has_data = chunk.content.iter().any(|b| matches!(b, ContentBlock::Data(_)));
        let thinking: Vec<&str> = chunk
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Thinking(t) => Some(t.thinking.as_str()),
                _ => None,
            })
            .collect();
        if !thinking.is_empty() {
            let id = match &self.thinking {
                Some(id) => id.clone(),
                None => {
                    let id = generate_id();
                    out.push(ThinkingBlockStartEvent::new(rid.clone(), id.clone()).into());
                    self.thinking = Some(id.clone());
                    id
                }
            };
            out.push(ThinkingBlockDeltaEvent::new(rid.clone(), id, thinking.concat()).into());
        } else if !has_data && let Some(id) = self.thinking.take() {
            out.push(ThinkingBlockEndEvent::new(rid.clone(), id).into());
        }
        let text: Vec<&str> = chunk
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        if !text.is_empty() {
            let id = match &self.text {
                Some(id) => id.clone(),
                None => {
                    let id = generate_id();
                    out.push(TextBlockStartEvent::new(rid.clone(), id.clone()).into());
                    self.text = Some(id.clone());
                    id
                }
            };
            out.push(TextBlockDeltaEvent::new(rid.clone(), id, text.concat()).into());
        } else if !has_data && let Some(id) = self.text.take() {
            out.push(TextBlockEndEvent::new(rid.clone(), id).into());
        }
        let mut in_chunk: Vec<String> = Vec::new();
        for b in &chunk.content {
            if let ContentBlock::ToolCall(c) = b {
                let id = ids.map(&c.id);
                if !self.tools.contains(&id) {
                    out.push(ToolCallStartEvent::new(rid.clone(), id.clone(), c.name.clone()).into());
                    self.tools.push(id.clone());
                }
                out.push(ToolCallDeltaEvent::new(rid.clone(), id.clone(), c.input.clone()).into());
                in_chunk.push(id);
            }
        }
        let (keep, closed): (Vec<String>, Vec<String>) =
            std::mem::take(&mut self.tools).into_iter().partition(|id| in_chunk.contains(id));
        for id in closed {
            out.push(ToolCallEndEvent::new(rid.clone(), id).into());
        }
        self.tools = keep;
        for b in &chunk.content {
            if let ContentBlock::Data(d) = b
                && let Source::Base64(s) = &d.source
            {
                if !self.data.contains(&d.id) {
                    out.push(DataBlockStartEvent::new(rid.clone(), d.id.clone(), s.media_type.clone()).into());
                    self.data.push(d.id.clone());
                }
                out.push(
                    DataBlockDeltaEvent::new(rid.clone(), d.id.clone(), s.data.clone(), s.media_type.clone()).into(),
                );
            }
        }
        out
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        let rid = self.reply_id.clone();
        let mut out: Vec<AgentEvent> = Vec::new();
        if let Some(id) = self.text.take() {
            out.push(TextBlockEndEvent::new(rid.clone(), id).into());
        }
        if let Some(id) = self.thinking.take() {
            out.push(ThinkingBlockEndEvent::new(rid.clone(), id).into());
        }
        for id in std::mem::take(&mut self.tools) {
            out.push(ToolCallEndEvent::new(rid.clone(), id).into());
        }
        for id in std::mem::take(&mut self.data) {
            out.push(DataBlockEndEvent::new(rid.clone(), id).into());
        }
        out
    }
}

// ---------------------------------------------------------------------- state helpers

fn drop_audio(blocks: Vec<ContentBlock>) -> Vec<ContentBlock> {
    blocks
        .into_iter()
        .filter(|b| match b {
            ContentBlock::Data(d) => {
                let mt = match &d.source {
                    Source::Base64(s) => &s.media_type,
                    Source::Url(u) => &u.media_type,
                };
                !mt.starts_with("audio/")
            }
            _ => true,
        })
        .collect()
}

/// The last message, when it is this agent's assistant message.
pub(crate) fn last_own<'s>(state: &'s AgentState, name: &str) -> Option<&'s Msg> {
    state.context.last().filter(|m| m.role == Role::Assistant && m.name == name)
}

/// §5.8, with one fix: blocks extend the last message only when it is this reply's message (id ==
/// reply_id); otherwise a new message with id = reply_id is created (2.0.4 appended a new reply's
/// output to the previous reply's message).
pub(crate) fn save_to_context(state: &mut AgentState, name: &str, blocks: Vec<ContentBlock>, usage: Option<Usage>) {
    if blocks.is_empty() && usage.is_none() {
        return;
    }
    let reply_id = state.reply_id.clone();
    match state.context.last_mut() {
        // This reply's message; or one still holding unanswered calls, which only a resume can
        // continue: 2.0.4 parks calls in the last own message whatever its id (a `reply(None)`
        // appends to the previous reply's message), and their results must go next to them.
        Some(m) if m.role == Role::Assistant && m.name == name && (m.id == reply_id || !unanswered(m).is_empty()) => {
            m.content.extend(blocks);
            if let Some(u) = usage {
                crate::reply_msg::add_usage(&mut m.usage, u.input_tokens, u.output_tokens);
            }
        }
        _ => {
            let mut m = Msg::new(name, Role::Assistant, blocks);
            m.id = reply_id;
            m.usage = usage;
            state.context.push(m);
        }
    }
}

/// Tool calls of `msg` with no result in `msg`, in block order.
pub(crate) fn unanswered(msg: &Msg) -> Vec<&ToolCallBlock> {
    let results: HashSet<&str> = msg.tool_result_ids().collect();
    msg.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if !results.contains(c.id.as_str()) => Some(c),
            _ => None,
        })
        .collect()
}

pub(crate) fn own_unanswered<'s>(state: &'s AgentState, name: &str) -> Vec<&'s ToolCallBlock> {
    last_own(state, name).map(unanswered).unwrap_or_default()
}

/// `(asking, submitted without result)` in the last own message.
pub(crate) fn awaiting_counts(state: &AgentState, name: &str) -> (usize, usize) {
    let open = own_unanswered(state, name);
    let asking = open.iter().filter(|c| c.state == ToolCallState::Asking).count();
    let submitted = open.iter().filter(|c| c.state == ToolCallState::Submitted).count();
    (asking, submitted)
}

fn call_mut<'s>(state: &'s mut AgentState, name: &str, id: &str) -> Option<&'s mut ToolCallBlock> {
    let last = state.context.last_mut().filter(|m| m.role == Role::Assistant && m.name == name)?;
    last.content.iter_mut().find_map(|b| match b {
        ContentBlock::ToolCall(c) if c.id == id => Some(c),
        _ => None,
    })
}

enum NextAction {
    Reasoning,
    Acting,
    Exit { asking: usize, submitted: usize },
}

fn next_action(state: &AgentState, name: &str) -> NextAction {
    let open = own_unanswered(state, name);
    if open.iter().any(|c| matches!(c.state, ToolCallState::Pending | ToolCallState::Allowed)) {
        return NextAction::Acting;
    }
    let (asking, submitted) = awaiting_counts(state, name);
    if asking + submitted > 0 {
        return NextAction::Exit { asking, submitted };
    }
    NextAction::Reasoning
}

fn interrupted_result(call: &ToolCallBlock) -> ContentBlock {
    ContentBlock::ToolResult(ToolResultBlock::new(
        call.id.clone(),
        call.name.clone(),
        INTERRUPTED_TEXT,
        ToolResultState::Interrupted,
    ))
}

/// Closes every unanswered call of the last own message with an `interrupted` result, silently.
/// Closes every open call of the last own message (no events), leaving the parked (`asking`/`submitted`) calls of `parked` open.
fn close_open_calls_except(state: &mut AgentState, name: &str, parked: &[String]) {
    let Some(last) = state.context.last_mut().filter(|m| m.role == Role::Assistant && m.name == name) else {
        return;
    };
    close_in_msg_except(last, parked);
}

fn close_in_msg(msg: &mut Msg) {
    close_in_msg_except(msg, &[]);
}

fn close_in_msg_except(msg: &mut Msg, parked: &[String]) {
    let open: Vec<ToolCallBlock> = unanswered(msg)
        .into_iter()
        .filter(|c| !(parked.contains(&c.id) && matches!(c.state, ToolCallState::Asking | ToolCallState::Submitted)))
        .cloned()
        .collect();
    for call in &open {
        msg.content.push(interrupted_result(call));
    }
    for b in &mut msg.content {
        if let ContentBlock::ToolCall(c) = b
            && open.iter().any(|o| o.id == c.id)
        {
            c.state = ToolCallState::Finished;
        }
    }
}

/// Answers every unanswered call in any of the agent's messages (a reply cut short without cleanup).
pub(crate) fn repair_unanswered_calls(state: &mut AgentState, name: &str) {
    for m in state.context.iter_mut().filter(|m| m.role == Role::Assistant && m.name == name) {
        close_in_msg(m);
    }
}

#[cfg(test)]
mod tests {
    use as_message::{PermissionMode, ToolResultBlock};
    use as_model::{ScriptedModel, ScriptedTurn};
    use as_tools::{IntoDynTool as _, Toolkit, builtin::GrepTool};

    use super::*;

    /// A directory removed on drop.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The engine allows a Grep of the home directory (bypass mode); the deny rule on `.ssh/**`
    /// below it reaches the walk only through the call's context, so the key stays out.
    #[tokio::test]
    async fn a_tool_call_gets_the_session_permission_context() {
        let dir = TempDir(std::env::temp_dir().join(format!("as-agent-walk-deny-{}", generate_id())));
        let home = &dir.0;
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
        std::fs::write(home.join("notes.txt"), "BEGIN notes\n").unwrap();
        let input = serde_json::json!({"pattern": "BEGIN", "path": home, "output_mode": "content"}).to_string();
        let model = ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("c1", "Grep", &input), ScriptedTurn::new().text("done")],
        );
        let agent = Agent::builder("Friday", "sys", Arc::new(model))
            .toolkit(Toolkit::new().with(GrepTool.into_dyn_tool()))
            .working_dir(home.clone())
            .build()
            .unwrap();
        let mut state = AgentState::default();
        state.permission_context.mode = PermissionMode::Bypass;
        let rule = format!("{}/.ssh/**", home.display());
        as_tools::PermissionEngine::add_rule(
            &mut state.permission_context,
            PermissionRule::new("Read", Some(rule), PermissionBehavior::Deny, "userSettings"),
        );
        agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
        let result: Option<ToolResultBlock> = state.context.iter().flat_map(|m| &m.content).find_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r.clone()),
            _ => None,
        });
        let text = result.unwrap().output.text();
        assert_eq!(
            text,
            format!("{}:1:BEGIN notes\n\n[1 path skipped by deny rules]", home.join("notes.txt").display())
        );
    }
}
