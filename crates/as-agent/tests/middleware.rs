//! Middleware hooks and `middle_context` persistence across a park, a "process restart" and the resume.

#![cfg(test)]

mod common;

use std::sync::Arc;

use as_agent::{Agent, AgentEvent, ConfirmResult, Middleware, ReplyStatus, UserConfirmResultEvent};
use as_message::{JsonValue, Msg, ToolCallBlock};
use as_model::{ChatRequest, ScriptedModel, ScriptedTurn, ToolChoice};
use as_state::AgentState;
use as_tools::Toolkit;
use async_trait::async_trait;
use common::AllowTool;
use serde_json::json;

/// 2.0.4's ReplyBudgetControlMiddleware, reduced: counts tokens per reply in `middle_context`, and once
/// the budget is spent forbids tool calls.
#[derive(Debug)]
struct Budget {
    limit: i64,
}

#[async_trait]
impl Middleware for Budget {
    fn key(&self) -> &str {
        "Budget"
    }

    fn on_system_prompt(&self, prompt: String, _slot: &JsonValue) -> String {
        format!("{prompt}\nBe frugal.")
    }

    async fn on_model_call(&self, request: &mut ChatRequest, slot: &mut JsonValue) -> as_agent::Result<()> {
        let spent: i64 = slot.as_object().and_then(|m| m.values().next()).and_then(JsonValue::as_i64).unwrap_or(0);
        if spent >= self.limit {
            *request = request.clone().with_tool_choice(ToolChoice::none());
        }
        Ok(())
    }

    async fn on_event(&self, event: &AgentEvent, slot: &mut JsonValue) -> as_agent::Result<()> {
        match event {
            AgentEvent::ReplyStart(e) => *slot = json!({ e.reply_id.clone(): 0 }),
            AgentEvent::ModelCallEnd(e) => {
                if let Some(v) = slot.get_mut(&e.reply_id) {
                    *v = json!(v.as_i64().unwrap_or(0) + e.input_tokens + e.output_tokens);
                }
            }
            AgentEvent::ReplyEnd(e) => {
                if let Some(m) = slot.as_object_mut() {
                    m.remove(&e.reply_id);
                    if m.is_empty() {
                        *slot = JsonValue::Null;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[tokio::test]
async fn middle_context_survives_park_and_restart() {
    let tools = || Toolkit::new().with(AllowTool::new("needs_ok").ask().arc());
    let model1 = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#).usage(70, 40)],
    ));
    let agent1 = Agent::builder("Friday", "sys", model1.clone())
        .toolkit(tools())
        .middleware(Arc::new(Budget { limit: 100 }))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    let out = agent1.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    assert_eq!(state.middle_context["Budget"], json!({ state.reply_id.clone(): 110 }));
    assert_eq!(model1.requests()[0].messages[0].get_text_content("").as_deref(), Some("sys\nBe frugal."));
    assert_eq!(model1.requests()[0].tool_choice, None);

    // "Restart": the state goes through JSON, a new agent resumes it.
    let mut state: AgentState = as_message::from_json(&as_message::to_json(&state)).unwrap();
    let model2 = Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().text("done").usage(1, 1)]));
    let agent2 = Agent::builder("Friday", "sys", model2.clone())
        .toolkit(tools())
        .middleware(Arc::new(Budget { limit: 100 }))
        .build()
        .unwrap();
    let confirm = UserConfirmResultEvent::new(
        state.reply_id.clone(),
        vec![ConfirmResult::approve(ToolCallBlock::new("c1", "needs_ok", r#"{"text": "a"}"#))],
    );
    let out = agent2.reply_outcome(&mut state, confirm).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    // The budget kept across the park was spent, so the resumed call could not use tools.
    assert_eq!(model2.requests()[0].tool_choice, Some(ToolChoice::none()));
    // REPLY_END removed the reply's entry, and the empty slot is dropped.
    assert!(!state.middle_context.contains_key("Budget"));
}

/// Writes its slot on every event, then blocks forever on the model call's end (a hook doing I/O
/// that never finishes, and a client that gives up).
#[derive(Debug, Default)]
struct Stuck {
    blocked: tokio::sync::Notify,
}

#[async_trait]
impl Middleware for Stuck {
    fn key(&self) -> &str {
        "Stuck"
    }

    async fn on_event(&self, event: &AgentEvent, slot: &mut JsonValue) -> as_agent::Result<()> {
        let seen = slot.get("seen").and_then(JsonValue::as_i64).unwrap_or(0);
        *slot = json!({ "seen": seen + 1 });
        if event.event_type() == as_agent::EventType::ModelCallEnd {
            self.blocked.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_reply_dropped_during_a_hook_keeps_the_middlewares_slot_in_place() {
    use futures::StreamExt as _;
    let stuck = Arc::new(Stuck::default());
    let agent = Agent::builder("Friday", "sys", Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().text("Hi.")])))
        .middleware(stuck.clone())
        .build()
        .unwrap();
    let mut state = AgentState::default();
    state.middle_context.insert("Earlier".into(), json!({"kept": true}));
    state.middle_context.insert("Stuck".into(), json!({"seen": 10}));
    state.middle_context.insert("Later".into(), json!(1));
    {
        let mut stream = agent.reply_stream(&mut state, Msg::user("user", "hello"));
        // Events until the hook blocks on MODEL_CALL_END; then the caller gives up.
        loop {
            tokio::select! {
                biased;
                () = stuck.blocked.notified() => break,
                item = stream.next() => assert!(item.is_some(), "the reply ended although its hook blocks"),
            }
        }
    }
    let keys: Vec<&str> = state.middle_context.keys().map(String::as_str).collect();
    assert_eq!(keys, ["Earlier", "Stuck", "Later"], "the slot is kept, in its place");
    let seen = state.middle_context["Stuck"]["seen"].as_i64().unwrap();
    assert!(seen > 10, "the hook's writes are kept: {seen}");
}

/// Answers every call from a cache, with the block it cached for another call (another id), and
/// renames results on the way to the context.
#[derive(Debug)]
struct StaleCache;

#[async_trait]
impl Middleware for StaleCache {
    fn key(&self) -> &str {
        "StaleCache"
    }

    async fn on_acting(&self, _call: &ToolCallBlock) -> as_agent::Result<Option<as_message::ToolResultBlock>> {
        Ok(Some(as_message::ToolResultBlock::new(
            "call_from_last_week",
            "cached_tool",
            "cached output",
            as_message::ToolResultState::Success,
        )))
    }

    async fn on_tool_result(
        &self,
        result: &mut as_message::ToolResultBlock,
        _slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        result.id = "renamed".into();
        Ok(())
    }
}

#[tokio::test]
async fn a_middlewares_answer_always_answers_the_call_it_was_asked_for() {
    let model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#), ScriptedTurn::new().text("Done.")],
    ));
    let agent = Agent::builder("Friday", "sys", model)
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
        .middleware(Arc::new(StaleCache))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    // Before, the call stayed open and the loop answered it again forever (max_iters never reached).
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        agent.reply_outcome(&mut state, Msg::user("user", "go")),
    )
    .await
    .expect("the reply ends")
    .unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    let results: Vec<(String, String, String)> = state
        .context
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            as_message::ContentBlock::ToolResult(r) => Some((r.id.clone(), r.name.clone(), r.output.text())),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![("c1".to_owned(), "echo".to_owned(), "cached output".to_owned())]);
}

/// Fails on the question event, before it reaches the caller.
#[derive(Debug)]
struct FailOnQuestion;

#[async_trait]
impl Middleware for FailOnQuestion {
    fn key(&self) -> &str {
        "FailOnQuestion"
    }

    async fn on_event(&self, event: &AgentEvent, _slot: &mut JsonValue) -> as_agent::Result<()> {
        if matches!(event, AgentEvent::RequireUserConfirm(_)) {
            return Err(as_agent::AgentError::Middleware("audit log unavailable".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_question_that_never_reached_the_caller_parks_nothing() {
    let model =
        Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#)]));
    let agent = Agent::builder("Friday", "sys", model)
        .toolkit(Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()))
        .middleware(Arc::new(FailOnQuestion))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    let e = agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap_err();
    assert_eq!(e.kind(), as_agent::AgentErrorKind::Middleware, "{e}");
    assert!(!state.has_awaiting_tool_calls("Friday"), "parked on a question nobody was asked");
}

/// Marks every result as checked and turns it into an error.
#[derive(Debug)]
struct Auditor;

#[async_trait]
impl Middleware for Auditor {
    fn key(&self) -> &str {
        "auditor"
    }

    async fn on_tool_result(
        &self,
        result: &mut as_message::ToolResultBlock,
        _slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        result.state = as_message::ToolResultState::Error;
        result.metadata.insert("audited".into(), json!(true));
        Ok(())
    }
}

/// What `on_tool_result` makes of a result is what its `TOOL_RESULT_END` event says, so the
/// message rebuilt from the events (the log) and the context agree.
#[tokio::test]
async fn the_end_event_carries_what_on_tool_result_made_of_the_result() {
    use as_agent::MsgEventExt as _;
    let model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#), ScriptedTurn::new().text("Done.")],
    ));
    let agent = Agent::builder("Friday", "sys", model)
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
        .middleware(Arc::new(Auditor))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    let mut events = Vec::new();
    agent.reply_stream(&mut state, Msg::user("user", "go")).run_to_end(|e| events.push(e.clone())).await.unwrap();
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResultEnd(e) => Some(e.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(end.state, as_message::ToolResultState::Error);
    assert_eq!(end.metadata.get("audited"), Some(&json!(true)));
    // The log's message, rebuilt from the events, holds the same result as the context.
    let mut rebuilt: Option<Msg> = None;
    for e in &events {
        if let AgentEvent::ReplyStart(s) = e {
            rebuilt = Some(Msg::from_reply_start(s));
        } else if let Some(m) = rebuilt.as_mut() {
            m.append_event(e);
        }
    }
    let result_of = |m: &Msg| {
        m.content.iter().find_map(|b| match b {
            as_message::ContentBlock::ToolResult(r) => Some((r.state, r.metadata.clone())),
            _ => None,
        })
    };
    assert_eq!(result_of(&rebuilt.unwrap()), result_of(state.context.last().unwrap()));
}

/// 2.0.4's `on_compress_context`: a middleware that skips compression until it has seen `after`
/// checks, then compresses with a lower trigger and its own instructions, counting in its slot.
#[derive(Debug)]
struct CompressPolicy {
    after: i64,
}

#[async_trait]
impl Middleware for CompressPolicy {
    fn key(&self) -> &str {
        "CompressPolicy"
    }

    async fn on_compress_context(
        &self,
        request: &mut as_agent::CompressRequest,
        slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        let seen = slot.as_i64().unwrap_or(0) + 1;
        *slot = json!(seen);
        if seen <= self.after {
            request.skip = true;
            return Ok(());
        }
        request.config = request.config.clone().with_ratios(0.3, 0.1);
        request.instructions = Some(as_message::HintBlock {
            hint: as_message::TextOrBlocks::Text("Keep the numbers.".into()),
            id: "hint-1".into(),
            source: None,
        });
        Ok(())
    }
}

/// Counts the calls it gets: it must never run after a middleware that skipped.
#[derive(Debug, Default)]
struct Inner(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Middleware for Inner {
    fn key(&self) -> &str {
        "Inner"
    }

    async fn on_compress_context(&self, _: &mut as_agent::CompressRequest, _: &mut JsonValue) -> as_agent::Result<()> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn on_compress_context_can_skip_or_reshape_a_compression() {
    let summary = json!({
        "task_overview": "Numbers.", "current_state": "1..3.", "important_discoveries": "None.",
        "next_steps": "Answer.", "context_to_preserve": "Brevity.",
    });
    let model = Arc::new(
        ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().text("first"),
                ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, summary.to_string()),
                ScriptedTurn::new().text("second"),
            ],
        )
        .with_context_size(3000),
    );
    let inner = Arc::new(Inner::default());
    // The agent's own trigger (0.8 of 3000 tokens) is never reached by this context.
    let agent = Agent::builder("Friday", "sys", model.clone())
        .middleware(Arc::new(CompressPolicy { after: 1 }))
        .middleware(inner.clone())
        .build()
        .unwrap();
    let mut state = AgentState::default();
    for i in 0..6 {
        state.context.push(Msg::user("user", format!("q{i} {}", "x".repeat(400))));
        state.context.push(Msg::assistant("Friday", format!("a{i} {}", "y".repeat(400))));
    }
    // First reply: the middleware skips, so nothing is compressed and the inner one is not asked.
    let out = agent.reply_outcome(&mut state, Msg::user("user", "one?")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    assert_eq!(state.context.len(), 14);
    assert_eq!(inner.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(state.middle_context["CompressPolicy"], json!(1), "the hook's slot is saved with the state");
    // Second reply: its lower trigger compresses, and the summary call carries its instructions
    // as an assistant hint right before the compression prompt.
    let out = agent.reply_outcome(&mut state, Msg::user("user", "two?")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    assert_eq!(inner.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(state.context.len() < 14, "compressed: {} messages", state.context.len());
    assert!(state.summary.text().contains("Numbers."), "{:?}", state.summary);
    let call = &model.requests()[1];
    let n = call.messages.len();
    let hint = &call.messages[n - 2];
    assert_eq!((hint.name.as_str(), hint.role), ("Friday", as_message::Role::Assistant));
    assert!(
        matches!(&hint.content[..], [as_message::ContentBlock::Hint(h)] if h.hint.text() == "Keep the numbers."),
        "{hint:?}"
    );
    // An invalid config from a caller (that no middleware replaced) is refused before anything runs.
    let plain = Agent::builder("Friday", "sys", model.clone()).build().unwrap();
    let bad = as_agent::CompressRequest::new(as_agent::ContextConfig::default().with_ratios(2.0, 0.1));
    let e = plain.compress_context_with(&mut state, bad).await.unwrap_err();
    assert_eq!(e.kind(), as_agent::AgentErrorKind::Config);
}

/// Streams its output in two chunks that spell a secret.
#[derive(Debug)]
struct Leaky {
    params: JsonValue,
}

#[async_trait]
impl as_tools::DynTool for Leaky {
    fn name(&self) -> &str {
        "leaky"
    }
    fn description(&self) -> &str {
        "Streams a secret."
    }
    fn parameters(&self) -> &JsonValue {
        &self.params
    }
    fn is_concurrency_safe(&self) -> bool {
        false
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_external(&self) -> bool {
        false
    }
    async fn check_permissions(
        &self,
        _input: &as_message::JsonMap,
        _ctx: &as_tools::PermissionCheckContext<'_>,
    ) -> as_tools::PermissionDecision {
        as_tools::PermissionDecision::allow("test")
    }
    async fn call(
        &self,
        _input: as_message::JsonMap,
        _ctx: as_tools::ToolCallContext,
    ) -> Result<as_tools::ToolStream, as_tools::ToolError> {
        Ok(as_tools::ToolStream::from_chunks(vec![
            as_tools::ToolChunk::text("secret-"),
            as_tools::ToolChunk::text("2"),
        ]))
    }
}

/// Replaces every tool result's output.
#[derive(Debug)]
struct Redact;

#[async_trait]
impl Middleware for Redact {
    fn key(&self) -> &str {
        "Redact"
    }

    async fn on_tool_result(
        &self,
        result: &mut as_message::ToolResultBlock,
        _slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        result.output = as_message::TextOrBlocks::Text("REDACTED".into());
        Ok(())
    }
}

/// What `on_tool_result` makes of a result's output is what every copy of it carries: the
/// `TOOL_RESULT_*` events, the message log the runner rebuilds from them, and the context. A
/// redacted output shows nowhere raw: not for a tool run (streamed in chunks), nor an external
/// result, nor an error result.
#[tokio::test]
async fn a_redacted_tool_result_shows_nowhere_raw() {
    use as_message::ContentBlock;
    use as_storage::{InMemoryStorage, SessionConfig, SessionKey, SharedStorage};
    let storage: SharedStorage = Arc::new(InMemoryStorage::new());
    storage.open().await.unwrap();
    let runner = as_agent::SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedTurn::new()
                .tool_call("c1", "echo", r#"{"text": "secret-1"}"#)
                .tool_call("c2", "leaky", "{}")
                .tool_call("c3", "ext", r#"{"text": "x"}"#)
                .tool_call("c4", "nope", "{}"),
            ScriptedTurn::new().text("Done."),
        ],
    ));
    let toolkit = Toolkit::new()
        .with(AllowTool::new("echo").arc())
        .with(Arc::new(Leaky { params: json!({"type": "object", "properties": {}}) }) as Arc<dyn as_tools::DynTool>)
        .with(AllowTool::new("ext").external().arc());
    let agent = Agent::builder("Friday", "sys", model).toolkit(toolkit).middleware(Arc::new(Redact)).build().unwrap();
    let key = SessionKey::new("u1", "a1", "redact");
    let mut events: Vec<AgentEvent> = Vec::new();
    let parked = runner
        .run_turn(&agent, &key, as_agent::ReplyInput::user_text("go"), &mut |e| events.push(e.clone()))
        .await
        .unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let result = as_message::ToolResultBlock::new("c3", "ext", "secret-3", as_message::ToolResultState::Success);
    let external = as_agent::ExternalExecutionResultEvent::new(parked.state.reply_id.clone(), vec![result]);
    let done = runner.run_turn(&agent, &key, external.into(), &mut |e| events.push(e.clone())).await.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);

    // The events: every output delta is the redacted text, and no result event holds the raw one.
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResultTextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["REDACTED"; 4], "one delta per result, redacted");
    for e in &events {
        let result_event = matches!(
            e,
            AgentEvent::ToolResultStart(_)
                | AgentEvent::ToolResultTextDelta(_)
                | AgentEvent::ToolResultDataDelta(_)
                | AgentEvent::ToolResultEnd(_)
        );
        let json = serde_json::to_string(e).unwrap();
        assert!(!result_event || !json.contains("secret"), "{json}");
    }
    // The log and the context hold the same results, all redacted.
    let results = |m: &Msg| -> Vec<(String, String, String, as_message::ToolResultState, as_message::JsonMap)> {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult(r) => {
                    Some((r.id.clone(), r.name.clone(), r.output.text(), r.state, r.metadata.clone()))
                }
                _ => None,
            })
            .collect()
    };
    let log = storage.list_messages(&key, 0, 0).await.unwrap();
    for m in &log {
        assert!(results(m).iter().all(|r| r.2 == "REDACTED"), "{:?}", results(m));
    }
    let logged = log.iter().find(|m| m.id == done.state.reply_id).unwrap();
    let in_context = done.state.context.iter().find(|m| m.id == done.state.reply_id).unwrap();
    assert_eq!(results(logged).len(), 4);
    assert_eq!(results(logged), results(in_context));
}

/// Appends `|name` to every result's output; optionally answers every call itself.
#[derive(Debug)]
struct Tag {
    name: &'static str,
    answers: bool,
}

#[async_trait]
impl Middleware for Tag {
    fn key(&self) -> &str {
        self.name
    }

    async fn on_acting(&self, _call: &ToolCallBlock) -> as_agent::Result<Option<as_message::ToolResultBlock>> {
        Ok(self
            .answers
            .then(|| as_message::ToolResultBlock::new("any", "any", "cached", as_message::ToolResultState::Success)))
    }

    async fn on_tool_result(
        &self,
        result: &mut as_message::ToolResultBlock,
        _slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        result.output = as_message::TextOrBlocks::Text(format!("{}|{}", result.output.text(), self.name));
        Ok(())
    }
}

/// 2.0.4's `on_acting` is an onion whose first middleware is the outermost: a tool's response
/// passes the innermost middleware first, and an answer given by a middleware passes only the
/// middlewares outside it.
#[tokio::test]
async fn result_middlewares_run_innermost_first_as_the_onion() {
    let result_text = |answering_b: bool| async move {
        let model = Arc::new(ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#), ScriptedTurn::new().text("Done.")],
        ));
        let agent = Agent::builder("Friday", "sys", model)
            .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
            .middleware(Arc::new(Tag { name: "A", answers: false }))
            .middleware(Arc::new(Tag { name: "B", answers: answering_b }))
            .middleware(Arc::new(Tag { name: "C", answers: false }))
            .build()
            .unwrap();
        let mut state = AgentState::default();
        agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
        state
            .context
            .iter()
            .flat_map(|m| &m.content)
            .find_map(|b| match b {
                as_message::ContentBlock::ToolResult(r) => Some(r.output.text()),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(result_text(false).await, "echo: a|C|B|A");
    assert_eq!(result_text(true).await, "cached|A");
}

/// Only observes results (changes their metadata, never their output).
#[derive(Debug)]
struct Observer {
    rewrites: bool,
}

#[async_trait]
impl Middleware for Observer {
    fn key(&self) -> &str {
        "Observer"
    }

    async fn on_tool_result(
        &self,
        result: &mut as_message::ToolResultBlock,
        _slot: &mut JsonValue,
    ) -> as_agent::Result<()> {
        result.metadata.insert("seen".into(), json!(true));
        Ok(())
    }

    fn rewrites_tool_output(&self) -> bool {
        self.rewrites
    }
}

/// A tool's output streams chunk by chunk unless a middleware may rewrite it: an agent whose
/// middlewares all say they leave the output alone streams the chunks as they come.
#[tokio::test]
async fn tool_output_streams_in_chunks_unless_a_middleware_may_rewrite_it() {
    for (rewrites, want) in [(false, vec!["secret-", "2"]), (true, vec!["secret-2"])] {
        let model = Arc::new(ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("c1", "leaky", "{}"), ScriptedTurn::new().text("Done.")],
        ));
        let toolkit =
            Toolkit::new()
                .with(Arc::new(Leaky { params: json!({"type": "object", "properties": {}}) })
                    as Arc<dyn as_tools::DynTool>);
        let agent = Agent::builder("Friday", "sys", model)
            .toolkit(toolkit)
            .middleware(Arc::new(Observer { rewrites }))
            .build()
            .unwrap();
        let mut state = as_state::AgentState::default();
        let mut events: Vec<AgentEvent> = Vec::new();
        agent.reply_stream(&mut state, Msg::user("user", "go")).run_to_end(|e| events.push(e.clone())).await.unwrap();
        let deltas: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolResultTextDelta(d) => Some(d.delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, want, "rewrites_tool_output = {rewrites}");
        let end = events.iter().find_map(|e| match e {
            AgentEvent::ToolResultEnd(end) => Some(end),
            _ => None,
        });
        assert_eq!(end.unwrap().metadata.get("seen"), Some(&json!(true)));
    }
}
