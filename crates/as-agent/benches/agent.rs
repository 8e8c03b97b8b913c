//! Loop overhead per reasoning-acting iteration with the scripted model (no I/O), and a full chat turn
//! through the session runner on the in-memory store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench harness code

use std::hint::black_box;
use std::sync::Arc;

use as_agent::{Agent, ReActConfig, ReplyInput, ReplyStatus, SessionRunner};
use as_message::Msg;
use as_message::{PermissionContext, PermissionMode};
use as_model::{ConstantModel, ScriptedModel, ScriptedTurn};
use as_state::AgentState;
use as_storage::{InMemoryStorage, SessionConfig, SessionKey, SharedStorage, UpsertSession};
use as_tools::{FunctionTool, ToolError, Toolkit};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const ITERS: u64 = 10;

/// Arguments of echo.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// Text.
    text: String,
}

fn echo() -> FunctionTool {
    FunctionTool::new("echo", "Echo the input.", |a: EchoArgs, _ctx| async move {
        Ok::<_, ToolError>(format!("echo: {}", a.text))
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// `ITERS` rounds of (streamed text + one tool call, tool result), then a streamed answer.
fn turns() -> Vec<ScriptedTurn> {
    let mut t: Vec<ScriptedTurn> = (0..ITERS)
        .map(|i| {
            ScriptedTurn::new()
                .text_chunks(["Calling ", "the tool."])
                .tool_call_chunks(format!("c{i}"), "echo", [r#"{"text": "#, r#""hi"}"#])
                .usage(100, 10)
        })
        .collect();
    t.push(ScriptedTurn::new().text_chunks(["Done", "."]).usage(100, 2));
    t
}

fn loop_overhead(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("agent_loop");
    g.throughput(Throughput::Elements(ITERS + 1));
    g.bench_function("scripted_iteration", |b| {
        b.iter_batched(
            || {
                let model = Arc::new(ScriptedModel::new("scripted", turns()));
                let agent = Agent::builder("Friday", "sys", model)
                    .toolkit(Toolkit::new().with(echo()))
                    .react_config(ReActConfig::default().with_max_iters(ITERS as u32 + 2))
                    .build()
                    .unwrap();
                let permission = PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() };
                (agent, AgentState { permission_context: permission, ..AgentState::default() })
            },
            |(agent, mut state)| {
                let out = rt.block_on(agent.reply_outcome(&mut state, Msg::user("user", "go"))).unwrap();
                assert_eq!(out.status, ReplyStatus::Completed);
                black_box(state)
            },
            BatchSize::SmallInput,
        );
    });
    // One reasoning step, no tools: the fixed cost of a reply (events, context save, final message).
    g.throughput(Throughput::Elements(1));
    g.bench_function("text_only_reply", |b| {
        b.iter_batched(
            || {
                let model =
                    Arc::new(ScriptedModel::new("scripted", [ScriptedTurn::new().text_chunks(["Hi", " there."])]));
                (Agent::builder("Friday", "sys", model).build().unwrap(), AgentState::default())
            },
            |(agent, mut state)| {
                let out = rt.block_on(agent.reply_outcome(&mut state, Msg::user("user", "go"))).unwrap();
                black_box((out, state))
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

fn runner_turn(c: &mut Criterion) {
    let rt = rt();
    let storage: SharedStorage = Arc::new(InMemoryStorage::new());
    rt.block_on(storage.open()).unwrap();
    let fixture = as_agent::testkit::RunnerTurnBench::new(storage).unwrap();
    let mut g = c.benchmark_group("session_runner");
    g.bench_function("turn_in_memory_20_msgs", |b| {
        b.iter_batched(
            || rt.block_on(fixture.reset()).unwrap(),
            |()| black_box(rt.block_on(fixture.turn()).unwrap()),
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

/// A history of `n` messages of ~250 bytes of text (the storage benches' `plain` shape), alternating user and
/// assistant.
fn history(n: usize) -> AgentState {
    let mut s = AgentState::for_session("bench");
    for i in 0..n {
        let text = format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(9));
        s.context.push(if i % 2 == 0 { Msg::user("user", text) } else { Msg::assistant("Friday", text) });
    }
    s
}

/// The runner's own per-turn cost as the history grows (in-memory store): a completed turn (the session and
/// its message log are reset before each), and a turn the agent rejects before changing anything (an invalid
/// input: load, reject, no write).
fn runner_turn_by_size(c: &mut Criterion) {
    let rt = rt();
    let storage: SharedStorage = Arc::new(InMemoryStorage::new());
    rt.block_on(storage.open()).unwrap();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = Agent::builder("Friday", "sys", Arc::new(ConstantModel::new("constant", "Sure."))).build().unwrap();
    let mut g = c.benchmark_group("session_runner_by_size");
    for n in [10usize, 100, 1000] {
        let key = SessionKey::new("u", "a", format!("bench-{n}"));
        let base = AgentState { session_id: key.session_id.clone(), ..history(n) };
        let reset = || {
            rt.block_on(storage.delete_session(&key)).unwrap();
            let req = UpsertSession::new(key.owner(), SessionConfig::new("ws"))
                .with_session_id(key.session_id.clone())
                .with_state(base.clone());
            rt.block_on(storage.upsert_session(req)).unwrap();
        };
        g.bench_function(BenchmarkId::new("turn_in_memory", n), |b| {
            b.iter_batched(
                reset,
                |()| {
                    let t = rt.block_on(runner.run_turn(&agent, &key, ReplyInput::user_text("next?"), &mut |e| {
                        black_box(e);
                    }));
                    black_box(t.unwrap())
                },
                BatchSize::SmallInput,
            );
        });
        reset();
        let invalid = ReplyInput::from(Msg::new("user", as_message::Role::System, vec![]));
        g.bench_function(BenchmarkId::new("rejected_in_memory", n), |b| {
            b.iter(|| {
                let t = rt.block_on(runner.run_turn(&agent, &key, invalid.clone(), &mut |e| {
                    black_box(e);
                }));
                assert!(t.is_err());
            });
        });
    }
    g.finish();
}

criterion_group!(benches, loop_overhead, runner_turn, runner_turn_by_size);
criterion_main!(benches);
