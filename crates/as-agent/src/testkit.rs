//! Reusable agent-over-storage scenarios (feature `test-utils`), run by `as-agent`'s own tests against
//! the in-memory store and by the workspace `tests/` package against SQLite and Redis.
//!
//! Not covered by semver. Every scenario writes sessions under the owner `("testkit-user", "testkit-agent")`:
//! point it at a disposable store.

use std::sync::Arc;

use as_message::{
    ContentBlock, JsonMap, JsonValue, Msg, Role, TextOrBlocks, ToolCallState, ToolResultBlock, ToolResultState,
};
use as_model::{ScriptedModel, ScriptedTurn};
use as_state::AgentState;
use as_storage::{SessionConfig, SessionKey, SharedStorage, UpsertSession};
use as_tools::{DynTool, PermissionCheckContext, PermissionDecision, ToolCallContext, ToolError, ToolStream, Toolkit};
use async_trait::async_trait;
use futures::StreamExt as _;

use crate::{
    Agent, AgentErrorKind, AgentEvent, ConfirmResult, DEFAULT_INTERRUPTION_MESSAGE, ExternalExecutionResultEvent,
    ReplyStatus, SessionRunner, UserConfirmResultEvent,
};

/// An echo tool (2.0.4's scripted `AllowTool`): ALLOW (or ASK), optionally concurrency-safe, external or blocking.
#[derive(Debug)]
pub struct EchoTool {
    name: String,
    concurrent: bool,
    external: bool,
    ask: bool,
    blocks: bool,
    params: JsonValue,
}

impl EchoTool {
    /// A sequential, allowed echo tool named `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            concurrent: false,
            external: false,
            ask: false,
            blocks: false,
            params: serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        }
    }

    /// Concurrency-safe.
    pub fn concurrent(mut self) -> Self {
        self.concurrent = true;
        self
    }

    /// Executed by the client.
    pub fn external(mut self) -> Self {
        self.external = true;
        self
    }

    /// Asks for confirmation.
    pub fn ask(mut self) -> Self {
        self.ask = true;
        self
    }

    /// Never finishes by itself (cancel it).
    pub fn blocking(mut self) -> Self {
        self.blocks = true;
        self
    }

    /// Erased.
    pub fn arc(self) -> Arc<dyn DynTool> {
        Arc::new(self)
    }
}

#[async_trait]
impl DynTool for EchoTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "Echo the input."
    }
    fn parameters(&self) -> &JsonValue {
        &self.params
    }
    fn is_concurrency_safe(&self) -> bool {
        self.concurrent
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_external(&self) -> bool {
        self.external
    }
    async fn check_permissions(&self, _input: &JsonMap, _ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        if self.ask { PermissionDecision::ask("testkit") } else { PermissionDecision::allow("testkit") }
    }
    async fn call(&self, input: JsonMap, _ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        if self.blocks {
            futures::future::pending::<()>().await;
        }
        tokio::task::yield_now().await;
        let text = input.get("text").and_then(JsonValue::as_str).unwrap_or_default().to_owned();
        Ok(ToolStream::text(format!("echo: {text}")))
    }
}

/// The session-runner benchmark's fixture (crates/as-agent/benches and the workspace `tests/` benches): a
/// constant-model agent and a session reset to a 20-message history before each measured turn.
pub struct RunnerTurnBench {
    storage: SharedStorage,
    runner: SessionRunner,
    agent: Agent,
    key: SessionKey,
    base: AgentState,
}

impl RunnerTurnBench {
    /// The fixture over `storage` (opened by the caller).
    pub fn new(storage: SharedStorage) -> Result<Self, String> {
        let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
        let agent = Agent::builder("Friday", "sys", Arc::new(as_model::ConstantModel::new("constant", "Sure.")))
            .build()
            .map_err(|e| e.to_string())?;
        let mut base = AgentState::for_session("bench");
        for i in 0..10 {
            base.context.push(Msg::user("user", format!("question {i}")));
            base.context.push(Msg::assistant("Friday", format!("answer {i}")));
        }
        Ok(Self { storage, runner, agent, key: SessionKey::new("u", "a", "bench"), base })
    }

    /// Resets the session to the 20-message history (not measured).
    pub async fn reset(&self) -> Result<(), String> {
        let req = UpsertSession::new(self.key.owner(), SessionConfig::new("ws"))
            .with_session_id("bench")
            .with_state(self.base.clone());
        self.storage.upsert_session(req).await.map(drop).map_err(|e| e.to_string())
    }

    /// One measured turn: load, reply "Sure.", conditional write, message log.
    pub async fn turn(&self) -> Result<crate::TurnOutcome, String> {
        let input = crate::ReplyInput::user_text("next?");
        self.runner
            .run_turn(&self.agent, &self.key, input, &mut |e| {
                std::hint::black_box(e);
            })
            .await
            .map_err(|e| e.to_string())
    }
}

/// A three-step reply: streamed thinking, text and two sequential calls; then two concurrent calls; then the
/// answer.
pub fn multi_tool_turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::new()
            .thinking_chunks(["Plan: ", "call tools."])
            .text_chunks(["Let me ", "check."])
            .tool_call_chunks("s1", "seq", [r#"{"text": "#, r#""one"}"#])
            .tool_call("s2", "seq", r#"{"text": "two"}"#)
            .usage(10, 5),
        ScriptedTurn::new().tool_call("c1", "con", r#"{"text": "a"}"#).tool_call("c2", "con", r#"{"text": "b"}"#),
        ScriptedTurn::new().text_chunks(["All ", "done."]).usage(20, 3),
    ]
}

/// The agent of [`multi_tool_turns`] (tools `seq` and `con`).
pub fn multi_tool_agent(model: Arc<ScriptedModel>) -> Result<Agent, String> {
    let toolkit = Toolkit::new().with(EchoTool::new("seq").arc()).with(EchoTool::new("con").concurrent().arc());
    Agent::builder("Friday", "You are a test agent.", model).toolkit(toolkit).build().map_err(|e| e.to_string())
}

/// Checks that a history is valid for a provider: in every assistant message each tool call has exactly one
/// result (and is `finished`), each result has its call, and no result is still `running`.
pub fn check_history(msgs: &[Msg]) -> Result<(), String> {
    for (i, m) in msgs.iter().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        for b in &m.content {
            match b {
                ContentBlock::ToolCall(c) => {
                    let n =
                        m.content.iter().filter(|x| matches!(x, ContentBlock::ToolResult(r) if r.id == c.id)).count();
                    if n != 1 {
                        return Err(format!("message {i}: call {} has {n} results", c.id));
                    }
                    if c.state != ToolCallState::Finished {
                        return Err(format!("message {i}: call {} is {:?}", c.id, c.state));
                    }
                }
                ContentBlock::ToolResult(r) => {
                    if !m.content.iter().any(|x| matches!(x, ContentBlock::ToolCall(c) if c.id == r.id)) {
                        return Err(format!("message {i}: result {} has no call", r.id));
                    }
                    if r.state == ToolResultState::Running {
                        return Err(format!("message {i}: result {} is still running", r.id));
                    }
                }
                ContentBlock::Text(t) if t.text == DEFAULT_INTERRUPTION_MESSAGE => {
                    return Err(format!("message {i}: the interruption message was stored"));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn owner_key(session: &str) -> SessionKey {
    SessionKey::new("testkit-user", "testkit-agent", session)
}

async fn create(storage: &SharedStorage, key: &SessionKey) -> Result<(AgentState, as_storage::Revision), String> {
    let req = UpsertSession::new(key.owner(), SessionConfig::new("testkit"))
        .with_session_id(key.session_id.clone())
        .with_state(AgentState::for_session(key.session_id.clone()));
    let rec = storage.upsert_session(req).await.map_err(|e| e.to_string())?;
    Ok((rec.state.clone(), rec.revision()))
}

/// How [`interrupt_at_every_await_point`] stops the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopBy {
    /// Drop the event stream after `k` events (no closing events).
    Drop,
    /// Cancel the reply's token after `k` events and read the stream to its end.
    Cancel,
}

/// Interrupts the [`multi_tool_turns`] reply after each of its events in turn, saves the state, reloads it from
/// `storage` into a fresh agent and continues. Checks at every point: the state is valid (every call answered,
/// the interruption notice not stored), the partial model output streamed so far is kept, what was saved is
/// what is reloaded, and every history sent to a model is valid. Returns the number of points tested.
pub async fn interrupt_at_every_await_point(storage: SharedStorage, stop: StopBy) -> Result<usize, String> {
    let total = {
        let model = Arc::new(ScriptedModel::new("scripted", multi_tool_turns()));
        let agent = multi_tool_agent(model)?;
        let mut state = AgentState::default();
        let mut n = 0;
        let mut s = agent.reply_stream(&mut state, Msg::user("user", "go"));
        while let Some(e) = s.next().await {
            e.map_err(|e| e.to_string())?;
            n += 1;
        }
        n
    };
    for k in 0..=total {
        let key = owner_key(&format!("interrupt-{stop:?}-{k}").to_lowercase());
        let (mut state, rev) = create(&storage, &key).await?;
        let model = Arc::new(ScriptedModel::new("scripted", multi_tool_turns()));
        let agent = multi_tool_agent(Arc::clone(&model))?;
        let mut deltas = Vec::new();
        let mut last = None;
        {
            let mut stream = agent.reply_stream(&mut state, Msg::user("user", "go"));
            let mut n = 0;
            while let Some(item) = stream.next().await {
                let e = item.map_err(|e| format!("k={k}: {e}"))?;
                if let AgentEvent::TextBlockDelta(d) = &e {
                    deltas.push(d.delta.clone());
                }
                last = Some(e.event_type());
                n += 1;
                if n == k {
                    match stop {
                        StopBy::Drop => break,
                        StopBy::Cancel => stream.cancel(),
                    }
                }
            }
            if stop == StopBy::Cancel && k > 0 && k < total {
                let o = stream.outcome().ok_or(format!("k={k}: no outcome"))?;
                // A cancel after the final model stream completed (its TEXT_BLOCK_END / MODEL_CALL_END)
                // finds the answer whole: the reply completes.
                let allowed = if k + 2 >= total { ReplyStatus::Completed } else { ReplyStatus::Interrupted };
                if o.status != allowed {
                    return Err(format!("k={k}: status {:?} after a cancel", o.status));
                }
                if last != Some(crate::EventType::ReplyEnd) {
                    return Err(format!("k={k}: last event {last:?}"));
                }
            }
        }
        check_history(&state.context).map_err(|e| format!("k={k} ({stop:?}): {e}"))?;
        let all_text: String = state
            .context
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        if !all_text.contains(&deltas.concat()) {
            return Err(format!("k={k}: streamed text {:?} not kept in {all_text:?}", deltas.concat()));
        }
        for (i, r) in model.requests().iter().enumerate() {
            check_history(&r.messages).map_err(|e| format!("k={k}: request {i}: {e}"))?;
        }
        storage.update_session_state(&key, &state, Some(&rev)).await.map_err(|e| e.to_string())?;

        // A fresh process: a new agent and model, the state reloaded from storage.
        let record = storage.get_session(&key).await.map_err(|e| e.to_string())?.ok_or("session vanished")?;
        if record.state != state {
            return Err(format!("k={k}: the reloaded state differs from the saved one"));
        }
        let mut reloaded = record.state;
        let model2 = Arc::new(ScriptedModel::new("scripted", [ScriptedTurn::new().text("Continuing.")]));
        let agent2 = multi_tool_agent(Arc::clone(&model2))?;
        let out =
            agent2.reply_outcome(&mut reloaded, Msg::user("user", "continue")).await.map_err(|e| e.to_string())?;
        if out.status != ReplyStatus::Completed {
            return Err(format!("k={k}: continuation ended {:?}", out.status));
        }
        for r in model2.requests() {
            check_history(&r.messages).map_err(|e| format!("k={k}: continuation request: {e}"))?;
        }
        check_history(&reloaded.context).map_err(|e| format!("k={k}: after continuation: {e}"))?;
        storage.update_session_state(&key, &reloaded, None).await.map_err(|e| e.to_string())?;
    }
    Ok(total + 1)
}

/// Parks a reply on a confirmation and an external execution in one "process" (runner, agent and storage
/// handle from `open`), then resumes it in another (all new, same backing store): a wrong `reply_id` is refused
/// with the stored record untouched, the confirmation and the external result complete the reply, and the
/// message log holds the user message and the whole reply message.
pub async fn park_then_resume_in_new_process<F, Fut>(open: F, session: &str) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStorage>,
{
    let key = owner_key(session);
    let toolkit = || {
        Toolkit::new()
            .with(EchoTool::new("needs_ok").concurrent().ask().arc())
            .with(EchoTool::new("ext").concurrent().external().arc())
    };
    let build = |turns: Vec<ScriptedTurn>| {
        Agent::builder("Friday", "sys", Arc::new(ScriptedModel::new("scripted", turns)))
            .toolkit(toolkit())
            .build()
            .map_err(|e| e.to_string())
    };
    // Process 1: park.
    {
        let storage = open().await;
        let runner = SessionRunner::new(storage, SessionConfig::new("testkit"));
        let agent = build(vec![
            ScriptedTurn::new().text("Need both.").tool_call("ask_1", "needs_ok", r#"{"text": "a"}"#).tool_call(
                "ext_1",
                "ext",
                r#"{"text": "b"}"#,
            ),
        ])?;
        let mut seen = Vec::new();
        let turn = runner
            .run_turn(&agent, &key, crate::ReplyInput::user_text("go"), &mut |e| seen.push(e.event_type()))
            .await
            .map_err(|e| e.to_string())?;
        if turn.status != ReplyStatus::Parked || !turn.created {
            return Err(format!("process 1 ended {:?}", turn.status));
        }
        if !seen.contains(&crate::EventType::RequireUserConfirm)
            || !seen.contains(&crate::EventType::RequireExternalExecution)
        {
            return Err(format!("process 1 events {seen:?}"));
        }
    }
    // Process 2: resume.
    let storage = open().await;
    let record = storage.get_session(&key).await.map_err(|e| e.to_string())?.ok_or("parked session not found")?;
    let reply_id = record.state.reply_id.clone();
    if record.state.session_id != key.session_id {
        return Err("state.session_id differs from the session id".into());
    }
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("testkit"));
    let agent = build(vec![ScriptedTurn::new().text("Both done.")])?;
    let call = record
        .state
        .context
        .last()
        .and_then(|m| {
            m.content.iter().find_map(|b| match b {
                ContentBlock::ToolCall(c) if c.id == "ask_1" => Some(c.clone()),
                _ => None,
            })
        })
        .ok_or("the parked call is not in the stored state")?;
    let wrong = UserConfirmResultEvent::new("not-the-parked-reply", vec![ConfirmResult::approve(call.clone())]);
    let err = runner.run_turn(&agent, &key, wrong.into(), &mut |_| {}).await.err().ok_or("wrong reply_id accepted")?;
    if err.kind() != AgentErrorKind::ReplyIdMismatch {
        return Err(format!("wrong reply_id gave {err}"));
    }
    let after = storage.get_session(&key).await.map_err(|e| e.to_string())?.ok_or("session vanished")?;
    if after.revision() != record.revision() || after.state != record.state {
        return Err("a refused resume changed the stored record".into());
    }
    let confirm = UserConfirmResultEvent::new(reply_id.clone(), vec![ConfirmResult::approve(call)]);
    let turn = runner.run_turn(&agent, &key, confirm.into(), &mut |_| {}).await.map_err(|e| e.to_string())?;
    if turn.status != ReplyStatus::Parked {
        return Err(format!("after the confirmation: {:?} (the external call is still out)", turn.status));
    }
    let result =
        ToolResultBlock::new("ext_1", "ext", TextOrBlocks::Text("ran outside".into()), ToolResultState::Success);
    let ext = ExternalExecutionResultEvent::new(reply_id.clone(), vec![result]);
    let turn = runner.run_turn(&agent, &key, ext.into(), &mut |_| {}).await.map_err(|e| e.to_string())?;
    if turn.status != ReplyStatus::Completed {
        return Err(format!("after the external result: {:?}", turn.status));
    }
    let stored = storage.get_session(&key).await.map_err(|e| e.to_string())?.ok_or("session vanished")?;
    if stored.state != turn.state || stored.state.reply_id != reply_id {
        return Err("the stored state is not the turn's".into());
    }
    check_history(&stored.state.context)?;
    let log = storage.list_messages(&key, 0, 0).await.map_err(|e| e.to_string())?;
    if log.len() != 2 {
        return Err(format!("message log has {} messages", log.len()));
    }
    let reply = &log[1];
    let results = reply.content.iter().filter(|b| matches!(b, ContentBlock::ToolResult(_))).count();
    if reply.id != reply_id || results != 2 || reply.finished_at.is_none() {
        return Err(format!("reply message in the log is incomplete: {}", as_message::to_json(reply)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use as_storage::InMemoryStorage;

    async fn memory() -> SharedStorage {
        let s: SharedStorage = Arc::new(InMemoryStorage::new());
        s.open().await.unwrap();
        s
    }

    #[tokio::test]
    async fn interrupt_at_every_await_point_in_memory_by_drop() {
        let n = interrupt_at_every_await_point(memory().await, StopBy::Drop).await.unwrap();
        assert!(n > 25, "only {n} points");
    }

    #[tokio::test]
    async fn interrupt_at_every_await_point_in_memory_by_cancel() {
        let n = interrupt_at_every_await_point(memory().await, StopBy::Cancel).await.unwrap();
        assert!(n > 25, "only {n} points");
    }

    #[tokio::test]
    async fn park_then_resume_in_memory() {
        // One in-memory store shared by both "processes" (a fresh handle is impossible in memory).
        let shared = memory().await;
        let open = || {
            let s = Arc::clone(&shared);
            async move {
                s.open().await.unwrap();
                s
            }
        };
        park_then_resume_in_new_process(open, "park-resume").await.unwrap();
    }

    #[test]
    fn check_history_catches_unanswered_calls() {
        let mut m = Msg::new(
            "Friday",
            Role::Assistant,
            vec![ContentBlock::ToolCall(as_message::ToolCallBlock::new("c", "t", "{}"))],
        );
        assert!(check_history(std::slice::from_ref(&m)).is_err());
        m.content.push(ContentBlock::ToolResult(ToolResultBlock::new("c", "t", "x", ToolResultState::Success)));
        if let ContentBlock::ToolCall(c) = &mut m.content[0] {
            c.state = ToolCallState::Finished;
        }
        assert!(check_history(std::slice::from_ref(&m)).is_ok());
        m.content.push(ContentBlock::text(DEFAULT_INTERRUPTION_MESSAGE));
        assert!(check_history(&[m]).is_err());
    }
}
