//! Reliability, faults of the model server, through `SessionRunner` with the OpenAI-compatible provider against
//! as-model-openai's local test server: a stream dropped mid-reply, 500s (retried as configured, then a typed
//! error), a server that hangs (typed timeout, bounded in time). In every case the state is saved by the runner,
//! the history is valid, and the next turn resumes the session.
//!
//! The storage faults are proven by existing tests that `cargo xtask reliability` runs and reports:
//! as-storage-redis `tests/faults.rs` (Redis killed/paused/restarted during a write loop) and as-storage-sqlite
//! `tests/processes.rs` (a writer killed with SIGKILL).

// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reliability;

use std::sync::Arc;
use std::time::{Duration, Instant};

use as_agent::testkit::check_history;
use as_agent::{Agent, AgentError, AgentErrorKind, ReplyInput, ReplyStatus, SessionRunner, TurnOutcome};
use as_model::ModelErrorKind;
use as_model::RetryPolicy;
use as_model_openai::test_server::{MockReply, MockServer, SseStep, chunk};
use as_model_openai::{ApiKey, OpenAiCompatibleConfig, OpenAiCompatibleModel, Preset};
use as_storage::{SessionConfig, SessionKey, SharedStorage};
use reliability::figure;

const KEY: &str = "sk-reliability-faults-0123456789";

fn agent(server: &MockServer, retries: u32, idle: Duration) -> Agent {
    let cfg = OpenAiCompatibleConfig::preset(Preset::OpenAi, "gpt-test")
        .with_base_url(server.base_url())
        .with_api_key(ApiKey::new(KEY))
        .with_retry(RetryPolicy::new(retries, Duration::from_millis(5)))
        .with_timeouts(Duration::from_secs(2), Duration::from_secs(5), idle);
    Agent::builder("Friday", "sys", Arc::new(OpenAiCompatibleModel::new(cfg).unwrap())).build().unwrap()
}

/// After a faulty turn: the stored state is valid, holds the user's input, and the next turn completes. `Err` says
/// which of these failed.
async fn saved_and_resumable(
    storage: &SharedStorage,
    server: &MockServer,
    key: &SessionKey,
    input: &str,
) -> Result<(), String> {
    let rec = storage.get_session(key).await.map_err(|e| e.to_string())?.ok_or("the faulty turn was not saved")?;
    check_history(&rec.state.context)?;
    if !rec.state.context.iter().any(|m| m.get_text_content("").is_some_and(|t| t == input)) {
        return Err("the input of the failed turn is not stored".into());
    }
    if format!("{rec:?}").contains(KEY) {
        return Err("the stored record holds the API key".into());
    }
    server.push(MockReply::sse([chunk::text("back again"), chunk::finish("stop")]));
    let runner = SessionRunner::new(Arc::clone(storage), SessionConfig::new("ws"));
    let fresh = agent(server, 0, Duration::from_secs(5));
    let out = runner
        .run_turn(&fresh, key, ReplyInput::user_text("are you there?"), &mut |_| {})
        .await
        .map_err(|e| format!("the next turn failed: {e}"))?;
    if out.status != ReplyStatus::Completed {
        return Err(format!("the next turn ended {:?}", out.status));
    }
    check_history(&out.state.context)?;
    match out.message.and_then(|m| m.get_text_content("")) {
        Some(t) if t == "back again" => Ok(()),
        t => Err(format!("the next turn answered {t:?}")),
    }
}

/// The model error of a turn that must have failed with one (its kind, for the pinned outcome).
fn model_error_kind(r: Result<TurnOutcome, AgentError>) -> ModelErrorKind {
    match r {
        Err(AgentError::Model(e)) => e.kind(),
        Err(e) => panic!("not a model error: {e}"),
        Ok(out) => panic!("the turn did not fail: {:?}", out.status),
    }
}

#[tokio::test]
async fn model_server_faults_end_typed_and_the_session_resumes() {
    let server = MockServer::start().await.unwrap();
    let storage = reliability::memory().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let mut faults = 0;
    // Each faulty turn is checked saved and resumable; the ones that are not are counted.
    let mut unsaved = Vec::new();

    // 1. The stream is dropped mid-reply (after some text and half a tool call).
    let partial = format!("data: {}", chunk::tool_call(0, Some("call_x"), Some("get_weather"), r#"{"city"#));
    server.push(MockReply::sse_steps([
        SseStep::Data(chunk::text("Looking it up").to_string()),
        SseStep::Raw(partial.as_bytes()[..partial.len() - 8].to_vec()),
        SseStep::Delay(Duration::from_millis(50)),
        SseStep::Cut,
    ]));
    let key = SessionKey::new("u", "a", "cut");
    let a = agent(&server, 2, Duration::from_secs(5));
    let mut events = Vec::new();
    let r = runner.run_turn(&a, &key, ReplyInput::user_text("weather?"), &mut |e| events.push(format!("{e:?}"))).await;
    // The provider turns a body that ends mid-event into a Transport error item (as-model-openai's Driver::step),
    // and the agent's reasoning propagates a stream error as it comes (`item?`): the turn ends in that error,
    // never in an `Ok` outcome (retries apply only before a stream starts).
    assert_eq!(model_error_kind(r), ModelErrorKind::Transport);
    assert!(events.iter().all(|e| !e.contains(KEY)));
    faults += 1;
    if let Err(e) = saved_and_resumable(&storage, &server, &key, "weather?").await {
        unsaved.push(format!("weather?: {e}"));
    }
    let stored = storage.get_session(&key).await.unwrap().unwrap();
    assert!(
        stored.state.context.iter().any(|m| m.get_text_content("").is_some_and(|t| t.contains("Looking it up"))),
        "the partial reply streamed before the cut is kept"
    );

    // 2. 500s: one is retried (same turn completes), then more than the retries allow end in a typed error.
    let key = SessionKey::new("u", "a", "fivehundred");
    server.push(MockReply::error(500, "upstream exploded", None));
    server.push(MockReply::sse([chunk::text("recovered"), chunk::finish("stop")]));
    let before = server.requests().len();
    let out = runner.run_turn(&a, &key, ReplyInput::user_text("hi"), &mut |_| {}).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    assert_eq!(server.requests().len() - before, 2, "one retry as configured");
    faults += 1;
    for _ in 0..3 {
        server.push(MockReply::error(500, "still down", None));
        faults += 1;
    }
    let before = server.requests().len();
    let e = runner.run_turn(&a, &key, ReplyInput::user_text("again"), &mut |_| {}).await.unwrap_err();
    assert_eq!(e.kind(), AgentErrorKind::Model, "{e}");
    assert!(!e.to_string().contains(KEY));
    assert_eq!(server.requests().len() - before, 3, "1 attempt + 2 retries");
    if let Err(e) = saved_and_resumable(&storage, &server, &key, "again").await {
        unsaved.push(format!("again: {e}"));
    }

    // 3. A server that hangs mid-stream: the idle timeout ends the reply, bounded in time.
    let key = SessionKey::new("u", "a", "hang");
    server.push(MockReply::sse_steps([SseStep::Data(chunk::text("thinking...").to_string()), SseStep::Hang]));
    let slow = agent(&server, 0, Duration::from_millis(300));
    let t = Instant::now();
    let r = runner.run_turn(&slow, &key, ReplyInput::user_text("hang?"), &mut |_| {}).await;
    let took = t.elapsed();
    // The idle timeout is a Timeout error item of the stream, which ends the turn as above.
    assert_eq!(model_error_kind(r), ModelErrorKind::Timeout);
    assert!(took < Duration::from_secs(5), "a hung server is cut off by the idle timeout ({took:?})");
    faults += 1;
    if let Err(e) = saved_and_resumable(&storage, &server, &key, "hang?").await {
        unsaved.push(format!("hang?: {e}"));
    }

    // Headers never come: the request timeout (not retried here) ends it too.
    let key = SessionKey::new("u", "a", "nohead");
    server.push(MockReply::sse([chunk::text("late")]).delayed(Duration::from_secs(3)));
    let cfg = OpenAiCompatibleConfig::preset(Preset::OpenAi, "gpt-test")
        .with_base_url(server.base_url())
        .with_api_key(ApiKey::new(KEY))
        .with_retry(RetryPolicy::new(0, Duration::from_millis(1)))
        .with_timeouts(Duration::from_secs(1), Duration::from_millis(300), Duration::from_millis(300));
    let a2 = Agent::builder("Friday", "sys", Arc::new(OpenAiCompatibleModel::new(cfg).unwrap())).build().unwrap();
    let t = Instant::now();
    let e = runner.run_turn(&a2, &key, ReplyInput::user_text("late?"), &mut |_| {}).await.unwrap_err();
    assert_eq!(e.kind(), AgentErrorKind::Model, "{e}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    faults += 1;
    if let Err(e) = saved_and_resumable(&storage, &server, &key, "late?").await {
        unsaved.push(format!("late?: {e}"));
    }

    figure("faults.model.injected", faults);
    figure("faults.model.unsaved_or_unresumable", unsaved.len());
    assert!(unsaved.is_empty(), "{unsaved:?}");
}
