//! The 12 scenarios recorded from AgentScope 2.0.4 (`events_generate.py`), replayed with the
//! scripted model: same event type sequences and final states (ids and timestamps aside), except
//! where spec §15 lists an upstream bug; those tests pin our fixed behaviour and say so.

#![cfg(test)]

mod common;

use std::sync::Arc;

use as_agent::{
    Agent, AgentErrorKind, AgentEvent, ConfirmResult, ContextConfig, ExternalExecutionResultEvent, ReActConfig,
    ReplyStatus, UserConfirmResultEvent, UserInterruptEvent,
};
use as_message::{
    ContentBlock, Msg, PermissionContext, PermissionMode, PermissionRule, TextBlock, ThinkingBlock, ToolCallBlock,
    ToolResultBlock, ToolResultState,
};
use as_model::{ScriptedModel, ScriptedTurn};
use as_state::AgentState;
use as_tools::{ToolGroup, Toolkit};
use common::*;
use futures::StreamExt;

fn text(id: &str, t: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: t.into(), id: id.into() })
}

fn thinking(id: &str, t: &str) -> ContentBlock {
    let mut b = ThinkingBlock::new(t);
    b.id = id.into();
    ContentBlock::Thinking(b)
}

fn call(id: &str, name: &str, input: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCallBlock::new(id, name, input))
}

fn agent(model: ScriptedModel, toolkit: Toolkit) -> Agent {
    Agent::builder("Friday", "sys", Arc::new(model)).toolkit(toolkit).build().unwrap()
}

fn state_with(permission: PermissionContext) -> AgentState {
    AgentState { permission_context: permission, ..AgentState::default() }
}

fn allow_ctx(tool: &str) -> PermissionContext {
    let mut p = PermissionContext::default();
    p.allow_rules.insert(tool.into(), vec![allow_rule(tool)]);
    p
}

/// Checks one phase against the recording: event types and the state after it.
fn check_phase(name: &str, phase: usize, file: &str, events: &[AgentEvent], state: &AgentState) {
    let s = scenario(name);
    assert_eq!(types(events), fixture_types(file), "{name} phase {phase}: event types");
    assert_same(&state_json(state), &s["phases"][phase]["state_after"], &format!("{name} phase {phase}: state"));
}

#[tokio::test]
async fn text_only() {
    let model = ScriptedModel::new(
        "scripted-model",
        [ScriptedTurn::new()
            .chunk(vec![thinking("th1", "The user greets. ")])
            .chunk(vec![thinking("th1", "Reply politely.")])
            .chunk(vec![text("tx1", "Hello")])
            .chunk(vec![text("tx1", " there!")])
            .usage(12, 7)],
    );
    let model = Arc::new(model);
    let agent = Agent::builder("Friday", "You are a helpful assistant.", model.clone()).build().unwrap();
    let s = scenario("text-only");
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    let out = out.unwrap();
    check_phase("text-only", 0, "events-text-only.jsonl", &events, &state);
    assert_eq!(out.status, ReplyStatus::Completed);
    let ret: serde_json::Value = serde_json::to_value(out.message.unwrap()).unwrap();
    assert_same(&ret, &s["phases"][0]["reply_return_value"], "final message");
    // Every event carries the reply id, which is also the context message's id.
    assert!(events.iter().all(|e| e.reply_id() == Some(state.reply_id.as_str())));
    assert_eq!(state.context[1].id, state.reply_id);
    // The model saw [system, user].
    let req = &model.requests()[0];
    assert_eq!(req.messages.len(), 2);
    assert_eq!(req.messages[0].get_text_content("").as_deref(), Some("You are a helpful assistant."));
}

#[tokio::test]
async fn one_tool_call() {
    let model = ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new()
                .chunk(vec![thinking("th1", "Need the weather.")])
                .chunk(vec![text("tx1", "Let me check.")])
                .chunk(vec![call("call_1", "get_weather", r#"{"city": "#)])
                .chunk(vec![call("call_1", "get_weather", r#""Paris"}"#)])
                .usage(100, 20),
            ScriptedTurn::new()
                .chunk(vec![text("tx2", "It is sunny")])
                .chunk(vec![text("tx2", " in Paris.")])
                .usage(150, 8),
        ],
    );
    let agent = Agent::builder("Friday", "You are a helpful assistant.", Arc::new(model))
        .toolkit(Toolkit::new().with(get_weather().read_only(true)))
        .build()
        .unwrap();
    let s = scenario("one-tool-call");
    let mut state = state_with(allow_ctx("get_weather"));
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    check_phase("one-tool-call", 0, "events-one-tool-call.jsonl", &events, &state);
    let ret = serde_json::to_value(out.unwrap().message.unwrap()).unwrap();
    assert_same(&ret, &s["phases"][0]["reply_return_value"], "final message (usage 250/28)");
}

#[tokio::test]
async fn streaming_tool() {
    let model = ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new().chunk(vec![call("call_s", "stream_numbers", r#"{"count": 3}"#)]),
            ScriptedTurn::new().text("Done."),
        ],
    );
    let agent = agent(model, Toolkit::new().with(stream_numbers()));
    let s = scenario("streaming-tool");
    let mut state = state_with(PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() });
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    check_phase("streaming-tool", 0, "events-streaming-tool.jsonl", &events, &state);
}

#[tokio::test]
async fn hitl_confirm() {
    let model = ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new().chunk(vec![call("call_a", "get_weather", r#"{"city": "Oslo"}"#)]),
            ScriptedTurn::new().chunk(vec![text("t", "Oslo is sunny.")]),
            ScriptedTurn::new().chunk(vec![call("call_b", "get_weather", r#"{"city": "Rome"}"#)]),
            ScriptedTurn::new().chunk(vec![text("t2", "Fine, I will not check.")]),
        ],
    );
    let agent = agent(model, Toolkit::new().with(get_weather()));
    let s = scenario("hitl-confirm");
    let mut state = AgentState::default();

    // 1: park on the confirmation.
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    assert_eq!(out.message.unwrap().get_text_content("").as_deref(), Some(as_agent::PARKED_MESSAGE));
    check_phase("hitl-confirm", 0, "events-hitl-confirm-1-park.jsonl", &events, &state);
    let reply_id = state.reply_id.clone();
    let parked = state.clone();

    // 2: a new message while parked is refused, state untouched.
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 1)).await;
    let err = out.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Awaiting);
    assert!(err.to_string().contains("waiting for 1 tool calls and external execution results for 0 tool calls"));
    assert!(events.is_empty());
    assert_eq!(state, parked);
    check_phase("hitl-confirm", 1, "events-hitl-confirm-2-new-msg-while-parked.jsonl", &events, &state);

    // 3: an unknown tool call id is refused, state untouched.
    let unknown = UserConfirmResultEvent::new(
        reply_id.clone(),
        vec![ConfirmResult::approve(ToolCallBlock::new("nope", "get_weather", "{}"))],
    );
    let (events, out) = run(&agent, &mut state, unknown).await;
    assert_eq!(out.unwrap_err().kind(), AgentErrorKind::UnexpectedEvent);
    assert!(events.is_empty());
    check_phase("hitl-confirm", 2, "events-hitl-confirm-3-unknown-id.jsonl", &events, &state);

    // 4. Fixed (§15.4): 2.0.4 accepted reply_id "any-reply-id-is-accepted"; we refuse it, untouched...
    let edited = ToolCallBlock::new("call_a", "get_weather", r#"{"city": "Oslo", "unit": "kelvin"}"#);
    let mut confirm = ConfirmResult::approve(edited.clone());
    confirm.rules =
        Some(vec![PermissionRule::new("other_tool", None, as_message::PermissionBehavior::Allow, "session")]);
    let wrong = UserConfirmResultEvent::new("any-reply-id-is-accepted", vec![confirm.clone()]);
    let (events, out) = run(&agent, &mut state, wrong).await;
    assert_eq!(out.unwrap_err().kind(), AgentErrorKind::ReplyIdMismatch);
    assert!(events.is_empty());
    assert_eq!(state, parked);
    // ... and a confirmation that swaps the tool is refused too (2.0.4 ran the other tool unchecked).
    let mut swap = confirm.clone();
    swap.tool_call.name = "other_tool".into();
    let (_, out) = run(&agent, &mut state, UserConfirmResultEvent::new(reply_id.clone(), vec![swap])).await;
    assert_eq!(out.unwrap_err().kind(), AgentErrorKind::UnexpectedEvent);
    assert_eq!(state, parked);
    // With the parked reply id it resumes exactly as 2.0.4: edited input, rule added, no REPLY_START.
    let (events, out) = run(&agent, &mut state, UserConfirmResultEvent::new(reply_id.clone(), vec![confirm])).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    check_phase("hitl-confirm", 3, "events-hitl-confirm-4-confirm.jsonl", &events, &state);
    assert_eq!(state.reply_id, reply_id);

    // 5: a second reply parks again; 6: the user denies.
    let (events, _) = run(&agent, &mut state, phase_input_msg(&s, 4)).await;
    check_phase("hitl-confirm", 4, "events-hitl-confirm-5-park-again.jsonl", &events, &state);
    let deny = UserConfirmResultEvent::new(
        state.reply_id.clone(),
        vec![ConfirmResult::deny(ToolCallBlock::new("call_b", "get_weather", r#"{"city": "Rome"}"#))],
    );
    let (events, out) = run(&agent, &mut state, deny).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    check_phase("hitl-confirm", 5, "events-hitl-confirm-6-deny.jsonl", &events, &state);
}

#[tokio::test]
async fn hitl_external() {
    let model = ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new()
                .chunk(vec![text("t", "Running it in your browser.")])
                .chunk(vec![call("call_x", "run_in_browser", r#"{"text": "alert(1)"}"#)])
                .chunk(vec![call("call_y", "run_in_browser", r#"{"text": "alert(2)"}"#)]),
            ScriptedTurn::new().chunk(vec![text("t2", "Both ran.")]),
        ],
    );
    let agent = agent(model, Toolkit::new().with(AllowTool::new("run_in_browser").concurrent().external().arc()));
    let s = scenario("hitl-external");
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Parked);
    check_phase("hitl-external", 0, "events-hitl-external-1-park.jsonl", &events, &state);

    let mut r1: ExternalExecutionResultEvent = as_message::from_value(s["phases"][1]["input"].clone()).unwrap();
    r1.reply_id = state.reply_id.clone(); // the recorded event carries the recorded run's reply id
    let (events, out) = run(&agent, &mut state, r1).await;
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    // Fixed (§15.4): 2.0.4 said "I'm waiting for , and external ..." with a fresh id.
    let msg = out.message.unwrap();
    assert_eq!(
        msg.get_text_content("").as_deref(),
        Some("I'm waiting for external execution results for 1 tool calls.")
    );
    assert_eq!(msg.id, state.reply_id);
    check_phase("hitl-external", 1, "events-hitl-external-2-partial-result.jsonl", &events, &state);

    let mut r2: ExternalExecutionResultEvent = as_message::from_value(s["phases"][2]["input"].clone()).unwrap();
    r2.reply_id = state.reply_id.clone();
    let (events, out) = run(&agent, &mut state, r2).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    check_phase("hitl-external", 2, "events-hitl-external-3-rest.jsonl", &events, &state);
}

#[tokio::test]
async fn user_interrupt() {
    let model = ScriptedModel::new(
        "scripted-model",
        [ScriptedTurn::new()
            .chunk(vec![text("t", "Need HITL.")])
            .chunk(vec![call("call_ask", "needs_ok", r#"{"text": "a"}"#)])
            .chunk(vec![call("call_ext", "external_job", r#"{"text": "b"}"#)])],
    );
    let toolkit = Toolkit::new()
        .with(AllowTool::new("needs_ok").concurrent().ask().arc())
        .with(AllowTool::new("external_job").concurrent().external().arc());
    let agent = agent(model, toolkit);
    let s = scenario("user-interrupt");
    let mut state = AgentState::default();
    let (events, _) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    check_phase("user-interrupt", 0, "events-user-interrupt-1-park.jsonl", &events, &state);
    let parked = state.clone();

    // Fixed (§15.4): the recorded interrupt used reply_id "reply-id-is-not-checked"; we refuse it.
    let (events, out) = run(&agent, &mut state, UserInterruptEvent::new("reply-id-is-not-checked")).await;
    assert_eq!(out.unwrap_err().kind(), AgentErrorKind::ReplyIdMismatch);
    assert!(events.is_empty());
    assert_eq!(state, parked);

    let rid = state.reply_id.clone();
    let (events, out) = run(&agent, &mut state, UserInterruptEvent::new(rid)).await;
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::Interrupted);
    assert_eq!(out.message.unwrap().get_text_content("").as_deref(), Some(as_agent::DEFAULT_INTERRUPTION_MESSAGE));
    // Fixed (§15.3, upstream 698297b4c): no second TOOL_RESULT_START for the submitted call.
    let mut expected = fixture_types("events-user-interrupt-2-interrupt.jsonl");
    assert_eq!(expected[3], "TOOL_RESULT_START");
    expected.remove(3);
    assert_eq!(types(&events), expected);
    assert_same(&state_json(&state), &s["phases"][1]["state_after"], "state after interrupt");

    // 3: interrupting an idle agent is a silent no-op.
    let before = state.clone();
    let rid = state.reply_id.clone();
    let (events, out) = run(&agent, &mut state, UserInterruptEvent::new(rid)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::NoOp);
    assert!(events.is_empty());
    assert_eq!(state, before);
    check_phase("user-interrupt", 2, "events-user-interrupt-3-interrupt-idle.jsonl", &events, &state);
    let err = agent.reply(&mut state, UserInterruptEvent::new(before.reply_id.clone())).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::NoFinalMessage);
}

#[tokio::test]
async fn cancel_tool() {
    let model = ScriptedModel::new(
        "scripted-model",
        [ScriptedTurn::new().chunk(vec![
            ContentBlock::text("Calling slow twice."),
            call("call_1", "slow", r#"{"text": "1"}"#),
            call("call_2", "slow", r#"{"text": "2"}"#),
        ])],
    );
    let agent = agent(model, Toolkit::new().with(AllowTool::new("slow").blocking().arc()));
    let s = scenario("cancel-tool");
    let mut state = AgentState::default();
    let mut events = Vec::new();
    let mut stream = agent.reply_stream(&mut state, phase_input_msg(&s, 0));
    while let Some(e) = stream.next().await {
        let e = e.unwrap();
        if matches!(&e, AgentEvent::ToolResultStart(x) if x.tool_call_id == "call_1") {
            stream.cancel(); // the first call is running now
        }
        events.push(e);
    }
    let out = stream.into_outcome().unwrap();
    assert_eq!(out.status, ReplyStatus::Interrupted);
    check_phase("cancel-tool", 0, "events-cancel-tool.jsonl", &events, &state);
}

#[tokio::test]
async fn cancel_model_stream_keeps_partial_output_and_never_runs_the_cut_call() {
    // Fixed (BUG-1, §8/§15.1): 2.0.4 lost this cancellation, executed the truncated call and kept reasoning
    // (events-cancel-model-stream.jsonl). We keep the partial output, close the call as interrupted, stop.
    let model = Arc::new(ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new()
                .chunk(vec![text("t", "Partial answ")])
                .chunk(vec![call("call_p", "echo", r#"{"text": "x"#)])
                .pause()
                .chunk(vec![text("t", "er never arrives")]),
            ScriptedTurn::new().chunk(vec![text("t2", "Second reasoning step.")]),
        ],
    ));
    let gate = model.pause_gate();
    let agent = Agent::builder("Friday", "sys", model.clone())
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
        .build()
        .unwrap();
    let s = scenario("cancel-model-stream");
    let mut state = AgentState::default();
    let stream = agent.reply_stream(&mut state, phase_input_msg(&s, 0));
    let token = stream.cancel_token();
    let (out, ()) = tokio::join!(stream.run_to_end(|_| {}), async {
        gate.wait_paused().await;
        token.cancel();
    });
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::Interrupted);
    assert_eq!(model.remaining_turns(), 1, "no second reasoning step");
    let msg = &state.context[1];
    let blocks: Vec<&ContentBlock> = msg.content.iter().collect();
    assert!(matches!(blocks[0], ContentBlock::Text(t) if t.text == "Partial answ"));
    assert!(
        matches!(blocks[1], ContentBlock::ToolCall(c) if c.input == r#"{"text": "x"# && c.state == as_message::ToolCallState::Finished)
    );
    assert!(matches!(blocks[2], ContentBlock::ToolResult(r) if r.state == ToolResultState::Interrupted
        && r.output == as_message::TextOrBlocks::Text(as_tools::INTERRUPTED_TEXT.into())));
    assert_eq!(blocks.len(), 3, "the interruption message is not stored");
    assert_eq!(state.cur_iter, 0);
}

/// A model that ignores `ChatRequest::cancel`: its stream yields one text chunk, then never
/// yields again (a stalled connection).
#[derive(Debug)]
struct StallsAfterOneChunk;

#[async_trait::async_trait]
impl as_model::ChatModel for StallsAfterOneChunk {
    fn model_name(&self) -> &str {
        "stalls"
    }

    fn provider(&self) -> &'static str {
        "test"
    }

    async fn stream(&self, _request: as_model::ChatRequest) -> as_model::Result<as_model::ChatStream> {
        let chunk = as_model::ChatChunk::new(vec![text("t", "Partial")]);
        let chunks = futures::stream::iter([Ok(chunk)]).chain(futures::stream::pending());
        Ok(as_model::ChatStream::from_stream(chunks))
    }
}

/// §8: a cancel during a model stream ends it, whether or not the model honours the request's
/// token itself: MODEL_CALL_END(interrupted), then REPLY_END(interrupted), the partial text kept.
#[tokio::test]
async fn a_cancel_ends_a_model_stream_that_ignores_the_request_token() {
    use as_agent::{ModelFinishedReason, ReplyFinishedReason};
    let agent = Agent::builder("Friday", "sys", Arc::new(StallsAfterOneChunk)).build().unwrap();
    let mut state = AgentState::default();
    let mut events = Vec::new();
    let outcome = {
        let mut stream = agent.reply_stream(&mut state, Msg::user("user", "hi"));
        // The timeout only turns a hang into a failure.
        let drained = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while let Some(e) = stream.next().await {
                let e = e.unwrap();
                if matches!(e, AgentEvent::TextBlockDelta(_)) {
                    stream.cancel();
                }
                events.push(e);
            }
        })
        .await;
        assert!(drained.is_ok(), "the reply never ended: {:?}", types(&events));
        stream.into_outcome().unwrap()
    };
    assert_eq!(outcome.status, ReplyStatus::Interrupted);
    let n = events.len();
    assert!(n >= 2, "{:?}", types(&events));
    assert!(
        matches!(&events[n - 2], AgentEvent::ModelCallEnd(e) if e.finished_reason == ModelFinishedReason::Interrupted),
        "{:?}",
        types(&events)
    );
    assert!(
        matches!(&events[n - 1], AgentEvent::ReplyEnd(e) if e.finished_reason == ReplyFinishedReason::Interrupted),
        "{:?}",
        types(&events)
    );
    assert_eq!(state.context[1].get_text_content("").as_deref(), Some("Partial"), "the partial output is kept");
}

#[tokio::test]
async fn cancel_model_call_ends_interrupted() {
    // Fixed (BUG-1): 2.0.4 ended this reply COMPLETED with an empty final message (events-cancel-model-call).
    let model = Arc::new(ScriptedModel::new("scripted-model", [ScriptedTurn::new().pause().text("never returned")]));
    let gate = model.pause_gate();
    let agent = Agent::builder("Friday", "sys", model.clone()).build().unwrap();
    let s = scenario("cancel-model-call");
    let mut state = AgentState::default();
    let stream = agent.reply_stream(&mut state, phase_input_msg(&s, 0));
    let token = stream.cancel_token();
    let mut seen = Vec::new();
    let (out, ()) = tokio::join!(stream.run_to_end(|e| seen.push(e)), async {
        gate.wait_paused().await;
        token.cancel();
    });
    assert_eq!(out.unwrap().status, ReplyStatus::Interrupted);
    assert_eq!(types(&seen), ["REPLY_START", "MODEL_CALL_START", "MODEL_CALL_END", "REPLY_END"]);
    assert!(
        matches!(&seen[2], AgentEvent::ModelCallEnd(e) if e.finished_reason == as_agent::ModelFinishedReason::Interrupted)
    );
    assert!(
        matches!(&seen[3], AgentEvent::ReplyEnd(e) if e.finished_reason == as_agent::ReplyFinishedReason::Interrupted)
    );
    // Same state as 2.0.4 recorded: only the user message (an empty response is not saved).
    assert_same(&state_json(&state), &s["phases"][0]["state_after"], "state");
}

#[tokio::test]
async fn exceed_max_iters() {
    let model = ScriptedModel::new(
        "scripted-model",
        (0..2).map(|i| {
            ScriptedTurn::new().chunk(vec![call(&format!("call_{i}"), "echo", &format!(r#"{{"text": "{i}"}}"#))])
        }),
    );
    let agent = Agent::builder("Friday", "sys", Arc::new(model))
        .toolkit(Toolkit::new().with(AllowTool::new("echo").concurrent().arc()))
        .react_config(ReActConfig::default().with_max_iters(2))
        .build()
        .unwrap();
    let s = scenario("exceed-max-iters");
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::ExceedMaxIters);
    assert_eq!(out.message.unwrap().get_text_content("").as_deref(), Some(as_agent::MAX_ITERS_MESSAGE));
    check_phase("exceed-max-iters", 0, "events-exceed-max-iters.jsonl", &events, &state);
}

fn tool_errors_model() -> ScriptedModel {
    ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new().chunk(vec![
                call("c_unknown", "nope", "{}"),
                call("c_badjson", "echo", "[1, 2]"),
                call("c_schema", "echo", r#"{"text": 5}"#),
                call("c_repair", "echo", r#"{"text": "repaired"#),
            ]),
            ScriptedTurn::new().text("ok"),
        ],
    )
}

#[tokio::test]
async fn tool_errors() {
    let agent = agent(tool_errors_model(), Toolkit::new().with(AllowTool::new("echo").concurrent().arc()));
    let s = scenario("tool-errors");
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    check_phase("tool-errors", 0, "events-tool-errors.jsonl", &events, &state);
}

#[tokio::test]
async fn reset_tools_and_tasks() {
    let group = ToolGroup::new("weather", "Weather tools.").instructions("Always state the unit.").tool(get_weather());
    let mut toolkit = Toolkit::new();
    for t in as_tools::task_tools::task_tools() {
        toolkit.register(t);
    }
    toolkit.add_group(group).unwrap();
    let model = Arc::new(ScriptedModel::new(
        "scripted-model",
        [
            ScriptedTurn::new().chunk(vec![call("c1", "get_weather", r#"{"city": "Oslo"}"#)]),
            ScriptedTurn::new().chunk(vec![call("c2", "reset_tools", r#"{"weather": true}"#)]),
            ScriptedTurn::new().chunk(vec![
                call("c3", "get_weather", r#"{"city": "Oslo"}"#),
                call("c4", "TaskCreate", r#"{"subject": "Check weather", "description": "Oslo"}"#),
                call("c5", "TaskCreate", r#"{"subject": "Report", "description": "Tell user"}"#),
            ]),
            ScriptedTurn::new().chunk(vec![
                call("c6", "TaskUpdate", r#"{"task_id": "2", "add_blocked_by": ["1"], "status": "in_progress"}"#),
                call("c7", "TaskList", "{}"),
                call("c8", "TaskGet", r#"{"task_id": "2"}"#),
            ]),
            ScriptedTurn::new().text("Done."),
        ],
    ));
    let agent = Agent::builder("Friday", "sys", model.clone()).toolkit(toolkit).build().unwrap();
    let s = scenario("reset-tools-and-tasks");
    let mut state = state_with(allow_ctx("get_weather"));
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    assert_eq!(types(&events), fixture_types("events-reset-tools-and-tasks.jsonl"));
    // The schemas change on the next reasoning step.
    let names = |i: usize| model.requests()[i].tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    let before: Vec<String> = serde_json::from_value(s["tool_names_before"].clone()).unwrap();
    let after: Vec<String> = serde_json::from_value(s["tool_names_after"].clone()).unwrap();
    assert_eq!(names(0), before);
    assert_eq!(names(2), after);
    // Fixed (§15.5): a tool of an inactive group is reported as such (2.0.4: "doesn't exist"). Everything
    // else of the state is as recorded.
    let mut theirs = s["phases"][0]["state_after"].clone();
    let ours = state_json(&state);
    let c1_ours = ours["context"][1]["content"][1]["output"].clone();
    assert!(c1_ours.as_str().unwrap().contains("weather"), "{c1_ours}");
    assert_eq!(
        theirs["context"][1]["content"][1]["output"],
        "ToolNotFoundError: The tool named 'get_weather' doesn't exist."
    );
    theirs["context"][1]["content"][1]["output"] = c1_ours;
    assert_same(&ours, &theirs, "state");
}

#[tokio::test]
async fn compression() {
    let summary = serde_json::json!({
        "task_overview": "Chat about numbers.",
        "current_state": "Discussed 1..3.",
        "important_discoveries": "None.",
        "next_steps": "Answer the last question.",
        "context_to_preserve": "User likes brevity.",
    });
    let model = Arc::new(
        ScriptedModel::new(
            "scripted-model",
            [
                ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, summary.to_string()),
                ScriptedTurn::new().chunk(vec![text("t", "Short answer.")]),
            ],
        )
        .with_context_size(1500),
    );
    let agent = Agent::builder("Friday", "sys", model.clone())
        .context_config(ContextConfig::default().with_ratios(0.5, 0.2))
        .build()
        .unwrap();
    let long = "x".repeat(400);
    let mut state = AgentState::default();
    for i in 0..6 {
        state.context.push(Msg::user("user", format!("q{i} {long}")));
        state.context.push(Msg::assistant("Friday", format!("a{i} {long}")));
    }
    let s = scenario("compression");
    let (events, out) = run(&agent, &mut state, phase_input_msg(&s, 0)).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    assert_eq!(types(&events), fixture_types("events-compression.jsonl"), "compression emits no event");
    check_phase("compression", 0, "events-compression.jsonl", &events, &state);
    // The summary call saw the compressed part (q0..a4) and the compression prompt.
    let req = &model.requests()[0];
    let recorded = s["model_calls"][0]["structured_output_messages"].as_array().unwrap();
    assert_eq!(req.messages.len(), recorded.len());
    for (ours, theirs) in req.messages.iter().zip(recorded) {
        assert_eq!(
            ours.get_text_content(""),
            theirs["content"][0]["text"]
                .as_str()
                .map(|t| {
                    // our structured-output call appends the "MUST call the tool" reminder to the last user message
                    t.to_owned()
                })
                .map(|t| if ours.content.len() > 1 {
                    format!("{t}{}", as_model::STRUCTURED_OUTPUT_REMINDER)
                } else {
                    t
                })
        );
    }
    // The answer's call saw the summary right after the system prompt.
    let answer_req = &model.requests()[1];
    assert_eq!(
        answer_req.messages[1].get_text_content("").as_deref(),
        s["phases"][0]["state_after"]["summary"].as_str()
    );
}

#[tokio::test]
async fn compression_falls_back_to_truncation_when_the_summary_fails() {
    // Fixed (§15.5, upstream 4a121d874): a failed summary no longer aborts the reply.
    let model = Arc::new(
        ScriptedModel::new(
            "scripted-model",
            [ScriptedTurn::new().text("no tool call here"), ScriptedTurn::new().text("Short answer.")],
        )
        .with_context_size(1500),
    );
    let agent = Agent::builder("Friday", "sys", model.clone())
        .context_config(ContextConfig::default().with_ratios(0.5, 0.2))
        .build()
        .unwrap();
    let long = "x".repeat(400);
    let mut state = AgentState::default();
    for i in 0..6 {
        state.context.push(Msg::user("user", format!("q{i} {long}")));
        state.context.push(Msg::assistant("Friday", format!("a{i} {long}")));
    }
    let out = agent.reply_outcome(&mut state, Msg::user("user", "last?")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    assert_eq!(state.context.len(), 4, "q5, a5, last?, answer");
    assert_eq!(state.summary, as_message::TextOrBlocks::Text(as_agent::TRUNCATION_NOTE.into()));
}

#[tokio::test]
async fn tool_results_are_results_not_errors() {
    // Style §9: unknown tools, bad JSON, schema violations and tool failures are observations.
    let failing = as_tools::FunctionTool::new("fails", "Always fails.", |_a: Count, _ctx| async move {
        Err::<String, _>(as_tools::ToolError::execution("boom"))
    });
    let model = ScriptedModel::new(
        "m",
        [ScriptedTurn::new().tool_call("c1", "fails", r#"{"count": 1}"#), ScriptedTurn::new().text("recovered")],
    );
    let agent = agent(model, Toolkit::new().with(failing));
    let mut state = state_with(PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() });
    let out = agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    let result = state.context[1].content.iter().find_map(|b| match b {
        ContentBlock::ToolResult(r) => Some(r.clone()),
        _ => None,
    });
    let result: ToolResultBlock = result.unwrap();
    assert_eq!(result.state, ToolResultState::Error);
    assert!(result.output.text().contains("boom"));
}

/// A tool call cut off at the output limit (`finish_reason: length`) is answered with an error and
/// never run (2.0.4 runs whatever its repairing parser makes of the fragment); the complete call
/// before it runs; the reply goes on. Also across a park: the cut call is answered before it.
#[tokio::test]
async fn a_tool_call_cut_at_the_output_limit_is_answered_not_run() {
    for ask_first in [false, true] {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let tool = as_tools::FunctionTool::new("count", "Counts.", move |a: Count, _ctx| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, as_tools::ToolError>(format!("counted {}", a.count))
            }
        });
        let model = ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new()
                    .tool_call("c1", "count", r#"{"count": 1}"#)
                    .tool_call("c2", "count", r#"{"count": 12"#)
                    .finish_reason(as_model::FinishReason::Length),
                ScriptedTurn::new().text("done"),
            ],
        );
        let agent = agent(model, Toolkit::new().with(tool));
        let mode = if ask_first { PermissionMode::Default } else { PermissionMode::Bypass };
        let mut state = state_with(PermissionContext { mode, ..PermissionContext::default() });
        let (events, out) = run(&agent, &mut state, Msg::user("user", "go")).await;
        let mut out = out.unwrap();
        if ask_first {
            // c1 asks; c2 is already answered, so nothing of it waits for the resume.
            assert_eq!(out.status, ReplyStatus::Parked);
            let c1 = match &state.context[1].content[0] {
                ContentBlock::ToolCall(c) => c.clone(),
                other => panic!("{other:?}"),
            };
            let confirm = UserConfirmResultEvent::new(state.reply_id.clone(), vec![ConfirmResult::approve(c1)]);
            out = agent.reply_outcome(&mut state, confirm).await.unwrap();
        }
        assert_eq!(out.status, ReplyStatus::Completed, "ask_first={ask_first}");
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1, "only the complete call ran");
        let results: Vec<(String, ToolResultState, String)> = state.context[1]
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult(r) => Some((r.id.clone(), r.state, r.output.text())),
                _ => None,
            })
            .collect();
        let cut = results.iter().find(|r| r.0 == "c2").expect("c2 is answered");
        assert_eq!(cut.1, ToolResultState::Error);
        assert!(cut.2.starts_with("ToolCallTruncatedError:"), "{}", cut.2);
        assert!(results.iter().any(|r| r.0 == "c1" && r.2.contains("counted 1")), "{results:?}");
        as_agent::testkit::check_history(&state.context).unwrap();
        // The events carry the cut call's error result like any other result.
        let ended = events.iter().any(|e| matches!(e, AgentEvent::ToolResultEnd(x) if x.tool_call_id == "c2"));
        assert!(ended, "no TOOL_RESULT_END for c2");
    }
}

/// The reply message the session layer rebuilds from the events (`MsgEventExt::append_event`) has the
/// same blocks as the context message: same order and kinds, same calls and result states.
fn shape(m: &Msg) -> Vec<String> {
    m.content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => format!("text:{}", t.text),
            ContentBlock::Thinking(t) => format!("thinking:{}", t.thinking),
            ContentBlock::ToolCall(c) => format!("call:{}:{}:{}:{:?}", c.id, c.name, c.input, c.state),
            ContentBlock::ToolResult(r) => format!("result:{}:{:?}:{}", r.id, r.state, r.output.text()),
            ContentBlock::Data(d) => format!("data:{}", d.id),
            ContentBlock::Hint(_) => "hint".into(),
        })
        .collect()
}

#[tokio::test]
async fn events_rebuild_the_reply_message() {
    use as_agent::MsgEventExt;
    let model = ScriptedModel::new(
        "m",
        [
            ScriptedTurn::new()
                .thinking_chunks(["a", "b"])
                .text_chunks(["Hel", "lo"])
                .tool_call_chunks("c1", "echo", [r#"{"text": "#, r#""x"}"#])
                .tool_call("c2", "nope", "{}")
                .usage(3, 4),
            ScriptedTurn::new().text("bye").usage(1, 1),
        ],
    );
    let agent = agent(model, Toolkit::new().with(AllowTool::new("echo").arc()));
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, Msg::user("user", "go")).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    let AgentEvent::ReplyStart(start) = &events[0] else { panic!("no REPLY_START") };
    let mut rebuilt = Msg::from_reply_start(start);
    for e in &events[1..] {
        rebuilt.append_event(e);
    }
    let ctx = &state.context[1];
    assert_eq!(shape(&rebuilt), shape(ctx));
    assert_eq!(rebuilt.id, ctx.id);
    assert_eq!(rebuilt.usage, ctx.usage);
    assert!(rebuilt.finished_at.is_some());
    // An event of another reply changes nothing.
    let before = rebuilt.clone();
    assert!(!rebuilt.append_event(&as_agent::TextBlockStartEvent::new("other-reply", "b").into()));
    assert_eq!(rebuilt, before);
}

#[tokio::test]
async fn data_blocks_stream_as_data_events_and_audio_is_not_stored() {
    use as_message::{Base64Source, DataBlock, Source};
    let b64 = |id: &str, data: &str, mt: &str| {
        ContentBlock::Data(DataBlock {
            id: id.into(),
            source: Source::Base64(Base64Source { data: data.into(), media_type: mt.into() }),
            name: None,
        })
    };
    let model = ScriptedModel::new(
        "m",
        [ScriptedTurn::new()
            .chunk(vec![text("t", "Here:")])
            .chunk(vec![b64("img", "aGVs", "image/png")])
            .chunk(vec![b64("img", "bG8=", "image/png")])
            .chunk(vec![b64("aud", "AAAA", "audio/wav")])],
    );
    let agent = agent(model, Toolkit::new());
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, Msg::user("user", "show")).await;
    let out = out.unwrap();
    let t = types(&events);
    let start = t.iter().position(|x| x == "DATA_BLOCK_START").unwrap();
    assert_eq!(t[start..start + 3], ["DATA_BLOCK_START", "DATA_BLOCK_DELTA", "DATA_BLOCK_DELTA"]);
    assert_eq!(t.iter().filter(|x| *x == "DATA_BLOCK_END").count(), 2);
    // Context: text and the image (its base64 accumulated); the audio is dropped. The final message keeps it.
    let kinds: Vec<String> = shape(&state.context[1]);
    assert_eq!(kinds, ["text:Here:", "data:img"]);
    assert_eq!(out.message.unwrap().content.len(), 3);
}

#[tokio::test]
async fn long_tool_results_are_truncated_in_the_context_only() {
    let big = "y".repeat(4000); // 1000 tokens
    let tool = as_tools::FunctionTool::new("big", "Big output.", move |_a: Count, _ctx| {
        let big = big.clone();
        async move { Ok::<_, as_tools::ToolError>(big) }
    });
    let model = ScriptedModel::new(
        "m",
        [ScriptedTurn::new().tool_call("c1", "big", r#"{"count": 1}"#), ScriptedTurn::new().text("ok")],
    );
    let cfg = ContextConfig { tool_result_limit: 100, ..ContextConfig::default() };
    let agent = Agent::builder("Friday", "sys", Arc::new(model))
        .toolkit(Toolkit::new().with(tool))
        .context_config(cfg)
        .build()
        .unwrap();
    let mut state = state_with(PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() });
    let (events, out) = run(&agent, &mut state, Msg::user("user", "go")).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Completed);
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResultTextDelta(d) => Some(d.delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed.len(), 4000, "the events carry the whole output");
    let stored = state.context[1].content.iter().find_map(|b| match b {
        ContentBlock::ToolResult(r) => Some(r.output.text()),
        _ => None,
    });
    let stored = stored.unwrap();
    assert!(stored.ends_with(as_agent::TRUNCATED_MARKER), "{stored}");
    assert!(stored.len() < 600, "{}", stored.len());
}

/// A confirmation that lists a call id twice: the last result counts and the call is handled once
/// (2.0.4 keys the results by id), and the message rebuilt from the events agrees with the state.
#[tokio::test]
async fn a_call_confirmed_twice_is_handled_once_by_its_last_result() {
    let a = || ToolCallBlock::new("call_a", "get_weather", r#"{"city": "Oslo"}"#);
    let with_rule = || {
        let mut r = ConfirmResult::approve(a());
        r.rules =
            Some(vec![PermissionRule::new("get_weather", None, as_message::PermissionBehavior::Allow, "session")]);
        r
    };
    let cases: [(&str, Vec<ConfirmResult>, ToolResultState, usize); 3] = [
        ("deny twice", vec![ConfirmResult::deny(a()), ConfirmResult::deny(a())], ToolResultState::Denied, 0),
        ("approve with a rule, then deny", vec![with_rule(), ConfirmResult::deny(a())], ToolResultState::Denied, 0),
        ("deny, then approve with a rule", vec![ConfirmResult::deny(a()), with_rule()], ToolResultState::Success, 1),
    ];
    for (name, results, want, rules) in cases {
        let model = ScriptedModel::new(
            "scripted-model",
            [
                ScriptedTurn::new().chunk(vec![call("call_a", "get_weather", r#"{"city": "Oslo"}"#)]),
                ScriptedTurn::new().chunk(vec![text("t", "Done.")]),
            ],
        );
        let agent = agent(model, Toolkit::new().with(get_weather()));
        let mut state = AgentState::default();
        let (_, out) = run(&agent, &mut state, Msg::user("user", "Weather in Oslo?")).await;
        assert_eq!(out.unwrap().status, ReplyStatus::Parked, "{name}");
        let reply_id = state.reply_id.clone();
        let (events, out) = run(&agent, &mut state, UserConfirmResultEvent::new(reply_id, results)).await;
        assert_eq!(out.unwrap().status, ReplyStatus::Completed, "{name}");
        let results: Vec<&ToolResultBlock> = state
            .context
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolResult(r) if r.id == "call_a" => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 1, "{name}: one result for the call");
        assert_eq!(results[0].state, want, "{name}");
        let starts = events.iter().filter(|e| e.event_type() == as_agent::EventType::ToolResultStart).count();
        assert_eq!(starts, 1, "{name}: one TOOL_RESULT_START");
        let added: usize = state.permission_context.allow_rules.values().map(Vec::len).sum();
        assert_eq!(added, rules, "{name}: rules of the result that counts only");
    }
}

/// A parked reply resumed when `cur_iter` is already at `max_iters` (a state saved by 2.0.4 can be:
/// it counts acting-only rounds) ends with EXCEED_MAX_ITERS, and the approved call it cannot run is
/// closed with its events, never dropped silently.
#[tokio::test]
async fn an_approval_resumed_at_max_iters_is_closed_with_events() {
    let model = ScriptedModel::new(
        "scripted-model",
        [ScriptedTurn::new().chunk(vec![call("call_a", "get_weather", r#"{"city": "Oslo"}"#)])],
    );
    let agent = Agent::builder("Friday", "sys", Arc::new(model))
        .toolkit(Toolkit::new().with(get_weather()))
        .react_config(ReActConfig::default().with_max_iters(1))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    let (_, out) = run(&agent, &mut state, Msg::user("user", "Weather in Oslo?")).await;
    assert_eq!(out.unwrap().status, ReplyStatus::Parked);
    state.cur_iter = 1;
    let approve = ConfirmResult::approve(ToolCallBlock::new("call_a", "get_weather", r#"{"city": "Oslo"}"#));
    let confirm = UserConfirmResultEvent::new(state.reply_id.clone(), vec![approve]);
    let (events, out) = run(&agent, &mut state, confirm).await;
    assert_eq!(out.unwrap().status, ReplyStatus::ExceedMaxIters);
    let types: Vec<as_agent::EventType> = events.iter().map(AgentEvent::event_type).collect();
    use as_agent::EventType as E;
    assert_eq!(types, [E::ToolResultStart, E::ToolResultTextDelta, E::ToolResultEnd, E::ExceedMaxIters, E::ReplyEnd]);
    let results: Vec<&ToolResultBlock> = state
        .context
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].state, ToolResultState::Interrupted);
}

/// A client that stops reading once it is asked (an SSE connection closed on REQUIRE_USER_CONFIRM or
/// REQUIRE_EXTERNAL_EXECUTION) leaves the call parked and answerable; a stream dropped before the
/// question was taken leaves nothing parked.
#[tokio::test]
async fn dropping_the_stream_after_the_question_keeps_the_park() {
    let tools = || {
        Toolkit::new()
            .with(AllowTool::new("needs_ok").ask().arc())
            .with(AllowTool::new("remote").concurrent().external().arc())
    };
    for (tool, question) in [("needs_ok", "REQUIRE_USER_CONFIRM"), ("remote", "REQUIRE_EXTERNAL_EXECUTION")] {
        let model = ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("c1", tool, r#"{"text": "a"}"#), ScriptedTurn::new().text("done")],
        );
        let agent = agent(model, tools());
        let mut state = AgentState::default();
        {
            let mut stream = agent.reply_stream(&mut state, Msg::user("user", "go"));
            while let Some(ev) = stream.next().await {
                if types(&[ev.unwrap()]) == [question] {
                    break;
                }
            }
        }
        let open: Vec<(String, String)> = state
            .context
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some((c.id.clone(), format!("{:?}", c.state))),
                _ => None,
            })
            .collect();
        let results =
            state.context.iter().flat_map(|m| &m.content).filter(|b| matches!(b, ContentBlock::ToolResult(_))).count();
        assert_eq!(results, 0, "{tool}: the asked call was closed: {open:?}");
        assert!(state.has_awaiting_tool_calls("Friday"), "{tool}: not parked: {open:?}");
        // And it can be answered.
        let call = ToolCallBlock::new("c1", tool, r#"{"text": "a"}"#);
        let out = if tool == "needs_ok" {
            let ev = UserConfirmResultEvent::new(state.reply_id.clone(), vec![ConfirmResult::approve(call)]);
            agent.reply_outcome(&mut state, ev).await.unwrap()
        } else {
            let ev = ExternalExecutionResultEvent::new(
                state.reply_id.clone(),
                vec![ToolResultBlock::new("c1", tool, "ran", ToolResultState::Success)],
            );
            agent.reply_outcome(&mut state, ev).await.unwrap()
        };
        assert_eq!(out.status, ReplyStatus::Completed, "{tool}");
    }
    // Dropped one event earlier (the question never reached the caller): nothing stays parked.
    let model = ScriptedModel::new("m", [ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#)]);
    let agent = agent(model, tools());
    let mut state = AgentState::default();
    {
        let mut stream = agent.reply_stream(&mut state, Msg::user("user", "go"));
        while let Some(ev) = stream.next().await {
            if types(&[ev.unwrap()]) == ["TOOL_CALL_END"] {
                break;
            }
        }
    }
    assert!(!state.has_awaiting_tool_calls("Friday"));
}

/// A resume answering one of two parked calls, dropped after its first event (an SSE client gone):
/// the other call, announced in the earlier reply, stays parked and can still be answered.
#[tokio::test]
async fn dropping_a_resume_keeps_the_other_parked_call() {
    let model = ScriptedModel::new(
        "m",
        [
            ScriptedTurn::new().tool_call("c1", "remote", r#"{"text": "a"}"#).tool_call(
                "c2",
                "remote",
                r#"{"text": "b"}"#,
            ),
            ScriptedTurn::new().text("done"),
        ],
    );
    let agent = agent(model, Toolkit::new().with(AllowTool::new("remote").concurrent().external().arc()));
    let mut state = AgentState::default();
    let out = agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    let only_c1 = ExternalExecutionResultEvent::new(
        state.reply_id.clone(),
        vec![ToolResultBlock::new("c1", "remote", "ran a", ToolResultState::Success)],
    );
    {
        let mut stream = agent.reply_stream(&mut state, only_c1);
        let first = stream.next().await;
        assert!(matches!(first, Some(Ok(_))), "{first:?}");
    }
    assert!(state.has_awaiting_tool_calls("Friday"), "the other call was closed");
    let c2_results = state
        .context
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolResult(r) if r.id == "c2"))
        .count();
    assert_eq!(c2_results, 0);
    // c2 can still be answered (and c1 too, if the drop lost its result).
    let reply_id = state.reply_id.clone();
    let mut results = vec![ToolResultBlock::new("c2", "remote", "ran b", ToolResultState::Success)];
    if !state.context.iter().flat_map(|m| &m.content).any(|b| matches!(b, ContentBlock::ToolResult(r) if r.id == "c1"))
    {
        results.push(ToolResultBlock::new("c1", "remote", "ran a", ToolResultState::Success));
    }
    let out = agent.reply_outcome(&mut state, ExternalExecutionResultEvent::new(reply_id, results)).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
}

/// A reply's usage is summed over its model calls with saturation: a provider reporting a huge
/// count (u64::MAX is read as i64::MAX) and then one more token neither overflows the context
/// message's usage nor the one the log rebuilds from the events.
#[tokio::test]
async fn usage_sums_saturate_instead_of_overflowing() {
    use as_agent::MsgEventExt as _;
    let model = ScriptedModel::new(
        "m",
        [
            ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#).usage(u64::MAX, 0),
            ScriptedTurn::new().text("done").usage(1, 0),
        ],
    );
    let agent = agent(model, Toolkit::new().with(AllowTool::new("echo").arc()));
    let mut state = AgentState::default();
    let (events, out) = run(&agent, &mut state, Msg::user("user", "go")).await;
    let out = out.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    let usage = out.message.unwrap().usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (i64::MAX, 0));
    assert_eq!(state.context[1].usage, Some(usage));
    let AgentEvent::ReplyStart(start) = &events[0] else { panic!("no REPLY_START") };
    let mut rebuilt = Msg::from_reply_start(start);
    for e in &events[1..] {
        rebuilt.append_event(e);
    }
    assert_eq!(rebuilt.usage, Some(usage));
}

/// A failed summary keeps the old summary exactly as it was (upstream 4a121d874): a summary of
/// blocks keeps its data blocks, and no note is flattened into it.
#[tokio::test]
async fn a_failed_compression_keeps_a_block_summary_with_its_data() {
    use as_message::{Base64Source, DataBlock, Source, TextOrBlocks, TextOrData};
    let model = Arc::new(
        ScriptedModel::new("scripted-model", [ScriptedTurn::new().text("no tool call here")]).with_context_size(6000),
    );
    // The summary's data block counts 2000 tokens: the room kept must exceed it for messages to stay.
    let agent = Agent::builder("Friday", "sys", model.clone())
        .context_config(ContextConfig::default().with_ratios(0.5, 0.4))
        .build()
        .unwrap();
    let summary = TextOrBlocks::Blocks(vec![
        TextOrData::Text(TextBlock { text: "Earlier: the user sent a chart.".into(), id: "s1".into() }),
        TextOrData::Data(DataBlock {
            id: "chart".into(),
            source: Source::Base64(Base64Source { data: "aGVsbG8=".into(), media_type: "image/png".into() }),
            name: None,
        }),
    ]);
    let long = "x".repeat(400);
    let mut state = AgentState { summary: summary.clone(), ..AgentState::default() };
    for i in 0..6 {
        state.context.push(Msg::user("user", format!("q{i} {long}")));
        state.context.push(Msg::assistant("Friday", format!("a{i} {long}")));
    }
    assert!(agent.compress_context(&mut state).await.unwrap(), "the context was cut");
    assert!(!state.context.is_empty() && state.context.len() < 12, "{} messages kept", state.context.len());
    assert_eq!(state.summary, summary, "the old summary is kept as it was");
}

fn numbers_summary() -> serde_json::Value {
    serde_json::json!({
        "task_overview": "Numbers.", "current_state": "1..3.", "important_discoveries": "None.",
        "next_steps": "Answer.", "context_to_preserve": "Brevity.",
    })
}

/// `n` messages of 100 tokens each, user and assistant in turn.
fn hundred_token_messages(n: usize) -> Vec<Msg> {
    (0..n)
        .map(|i| {
            let text = format!("{i:04}{}", "x".repeat(396));
            if i % 2 == 0 { Msg::user("user", text) } else { Msg::assistant("Friday", text) }
        })
        .collect()
}

/// 2.0.4 counts the tool schemas when it splits the context for compression
/// (`_split_context_for_compression(budget, tools)`): a large schema leaves room for fewer
/// reserved messages. The split is checked against 2.0.4's walk, which here differs from a
/// split that leaves the schemas out.
#[tokio::test]
async fn the_compression_split_counts_the_tool_schemas() {
    use as_model::{ChatModel as _, ToolSchema};
    let model = Arc::new(
        ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, numbers_summary().to_string())],
        )
        .with_context_size(4000),
    );
    let big = as_tools::FunctionTool::new("lookup", "d".repeat(2400), |a: Count, _ctx| async move {
        Ok::<_, as_tools::ToolError>(a.count.to_string())
    });
    let agent = Agent::builder("Friday", "sys", model.clone())
        .toolkit(Toolkit::new().with(big))
        .context_config(ContextConfig::default().with_ratios(0.5, 0.25))
        .build()
        .unwrap();
    let mut state = AgentState { context: hundred_token_messages(20), ..AgentState::default() };
    let context = state.context.clone();
    let tools: Vec<ToolSchema> = agent
        .toolkit()
        .schemas(&state.tool_context.activated_groups)
        .iter()
        .map(|v| ToolSchema::from_function_value(v).unwrap())
        .collect();
    // 2.0.4's walk back from the newest message: the first whose suffix reaches the budget
    // (0.25 × 4000) is the boundary; with one block it is compressed whole.
    let reserved = |tools: &[ToolSchema]| {
        let boundary = (0..context.len())
            .rev()
            .find(|&i| {
                let mut msgs = vec![Msg::system("system", "sys")];
                msgs.extend_from_slice(&context[i..]);
                model.count_tokens(&msgs, tools) >= 1000
            })
            .unwrap();
        context.len() - boundary - 1
    };
    let expected = reserved(&tools);
    assert!(expected < reserved(&[]), "the schema must change the split for this test to tell");
    assert!(agent.compress_context(&mut state).await.unwrap());
    let ids = |msgs: &[Msg]| msgs.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&state.context), ids(&context[context.len() - expected..]), "the newest {expected} are reserved");
    assert_eq!(state.context, context[context.len() - expected..]);
}

/// After a failed summary of an overflowing input, 2.0.4 retries once without the oldest messages:
/// at least one, and as many as it takes for the input, counted with the structured-output tool,
/// to fall below `trigger_ratio × context_size`.
#[tokio::test]
async fn an_overflowing_compression_retry_counts_the_structured_output_tool() {
    use as_model::{ChatModel as _, ToolSchema};
    let model = Arc::new(
        ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().text("no tool call here"),
                ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, numbers_summary().to_string()),
            ],
        )
        .with_context_size(4000),
    );
    // A summary schema of about 1300 tokens: the compression input overflows only with it.
    let mut schema = as_agent::summary_schema();
    schema["description"] = serde_json::json!("d".repeat(4000));
    let cfg = ContextConfig { summary_schema: schema.clone(), ..ContextConfig::default().with_ratios(0.5, 0.25) };
    let agent = Agent::builder("Friday", "sys", model.clone()).context_config(cfg.clone()).build().unwrap();
    let mut state = AgentState { context: hundred_token_messages(40), ..AgentState::default() };
    assert!(agent.compress_context(&mut state).await.unwrap());
    assert!(state.summary.text().contains("Numbers."), "the retry's summary is used");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one call, one retry");
    let first = &requests[0].messages;
    let compressed = &first[1..first.len() - 1];
    let tool = ToolSchema::new(as_model::STRUCTURED_OUTPUT_TOOL, as_model::STRUCTURED_OUTPUT_TOOL_DESCRIPTION, schema);
    let input = |i: usize| {
        let mut msgs = vec![first[0].clone()];
        msgs.extend_from_slice(&compressed[i..]);
        msgs.push(Msg::user("user", cfg.compression_prompt.clone()));
        msgs
    };
    let limit = 0.5 * 4000.0;
    assert!(model.count_tokens(&input(0), std::slice::from_ref(&tool)) > 4000, "the input overflows");
    // 2.0.4: `for i in range(1, len + 1)`, stopping at the first input below the limit.
    let dropped = (1..=compressed.len())
        .find(|&i| (model.count_tokens(&input(i), std::slice::from_ref(&tool)) as f64) < limit)
        .unwrap_or(compressed.len());
    let without_tool = (0..=compressed.len()).find(|&i| (model.count_tokens(&input(i), &[]) as f64) < limit);
    assert_ne!(Some(dropped), without_tool, "counting the tool must matter for this test to tell");
    assert!(dropped < compressed.len(), "some messages are kept");
    let retry = &requests[1].messages;
    assert_eq!(retry.len(), first.len() - dropped, "dropped {} messages", first.len() - retry.len());
    assert_eq!(retry[1], compressed[dropped], "the oldest kept message");
}

/// A data delta's URL lands in the rebuilt message normalised, as 2.0.4's `URLSource` stores it;
/// one that is not a URL adds no block (neither side could read it back).
#[test]
fn data_delta_urls_are_normalised_when_a_message_is_rebuilt() {
    use as_agent::{MsgEventExt as _, ToolResultDataDeltaEvent};
    use as_message::{Role, Source, TextOrBlocks, TextOrData, ToolResultBlock, ToolResultState};
    let mut m = Msg::new(
        "Friday",
        Role::Assistant,
        vec![ContentBlock::ToolResult(ToolResultBlock::new("c1", "t", "", ToolResultState::Running))],
    );
    let delta = |url: &str| -> AgentEvent {
        ToolResultDataDeltaEvent::new(m.id.clone(), "c1", "b1", "image/png", None, Some(url.to_owned())).into()
    };
    let (good, bad) = (delta("HTTP://Example.COM:80/x"), delta("relative/path"));
    assert!(m.append_event(&good));
    assert!(!m.append_event(&bad));
    let ContentBlock::ToolResult(r) = &m.content[0] else { panic!("no result") };
    let TextOrBlocks::Blocks(blocks) = &r.output else { panic!("no blocks: {:?}", r.output) };
    assert_eq!(blocks.len(), 1);
    let TextOrData::Data(d) = &blocks[0] else { panic!("not data") };
    let Source::Url(u) = &d.source else { panic!("not a URL source") };
    assert_eq!(u.url, "http://example.com/x");
}

/// A model whose structured output skips the schema's checks: its summary lacks `next_steps`.
#[derive(Debug)]
struct IncompleteSummary(ScriptedModel);

#[async_trait::async_trait]
impl as_model::ChatModel for IncompleteSummary {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }
    fn provider(&self) -> &'static str {
        self.0.provider()
    }
    fn context_size(&self) -> usize {
        self.0.context_size()
    }
    async fn stream(&self, request: as_model::ChatRequest) -> as_model::Result<as_model::ChatStream> {
        self.0.stream(request).await
    }
    async fn generate_structured_output(
        &self,
        _request: as_model::StructuredOutputRequest,
    ) -> as_model::Result<as_model::StructuredResponse> {
        let mut content: as_message::JsonMap = serde_json::from_value(numbers_summary()).unwrap();
        content.remove("next_steps");
        Ok(as_model::StructuredResponse::new(content, "so".into(), None, as_model::FinishReason::ToolCalls))
    }
}

/// A `summary_template` that cannot render every valid summary (an unclosed or a single brace, a
/// field the schema does not require) is a configuration mistake, not an unusable model answer:
/// building the agent, or compressing with such settings, fails with a `Config` error, and nothing
/// of the history is dropped for the truncation note. A summary that does not render at run time
/// (a model that skips the schema's checks) fails the reply and leaves the history and the summary
/// as they were.
#[tokio::test]
async fn a_summary_template_that_cannot_render_is_an_error_never_a_truncation() {
    let history = {
        let long = "x".repeat(400);
        let mut state = AgentState::default();
        for i in 0..6 {
            state.context.push(Msg::user("user", format!("q{i} {long}")));
            state.context.push(Msg::assistant("Friday", format!("a{i} {long}")));
        }
        state
    };
    let summarizes = || {
        ScriptedModel::new(
            "m",
            [ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, numbers_summary().to_string())],
        )
        .with_context_size(1500)
    };
    let ratios = ContextConfig::default().with_ratios(0.5, 0.2);
    let required = "{task_overview}{current_state}{important_discoveries}{next_steps}{context_to_preserve}";
    for template in ["{task_overview", "{no_such_field}", "{}", "a } b", "{task{overview}", "{task_overview!r}"] {
        let bad = ContextConfig { summary_template: template.into(), ..ratios.clone() };
        let built = Agent::builder("Friday", "sys", Arc::new(summarizes())).context_config(bad.clone()).build();
        assert_eq!(built.map(|_| ()).map_err(|e| e.kind()), Err(AgentErrorKind::Config), "{template:?}");
        let agent = Agent::builder("Friday", "sys", Arc::new(summarizes())).context_config(ratios.clone()).build();
        let mut state = history.clone();
        let r = agent.unwrap().compress_context_with(&mut state, as_agent::CompressRequest::new(bad)).await;
        assert_eq!(r.map_err(|e| e.kind()), Err(AgentErrorKind::Config), "{template:?}");
        assert!(state == history, "{template:?}: nothing compressed");
    }
    for good in [as_agent::DEFAULT_SUMMARY_TEMPLATE, required, "{{literal}} {next_steps} }}{{"] {
        let ok = ContextConfig { summary_template: good.into(), ..ratios.clone() };
        assert!(ok.validate().is_ok(), "{good:?}");
    }
    // At run time: the reply fails, and the context (with the new input) and summary stay.
    let model =
        IncompleteSummary(ScriptedModel::new("m", [ScriptedTurn::new().text("Short answer.")]).with_context_size(1500));
    let agent = Agent::builder("Friday", "sys", Arc::new(model)).context_config(ratios).build().unwrap();
    let mut state = history.clone();
    let r = agent.reply_outcome(&mut state, Msg::user("user", "last?")).await;
    assert_eq!(r.map(|o| o.status).map_err(|e| e.kind()), Err(AgentErrorKind::Compression));
    assert_eq!(state.context.len(), 13, "the history and the input are kept");
    assert!(state.context[..12] == history.context[..], "the history is kept");
    assert!(state.summary.is_empty(), "{:?}", state.summary);
}
