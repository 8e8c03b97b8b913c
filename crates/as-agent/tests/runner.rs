//! The session runner over the in-memory store: load-or-create, session id sync, persistence on every
//! outcome, conditional writes, the message log and the lock hook.

#![cfg(test)]

mod common;

use std::sync::{Arc, Mutex};

use as_agent::{
    Agent, AgentErrorKind, AgentEvent, LockGuard, ReActConfig, ReplyInput, ReplyStatus, SessionLock, SessionRunner,
    UserConfirmResultEvent,
};
use as_message::{ContentBlock, Msg};
use as_model::{ChatModel, ChatRequest, ChatStream, ModelError, ModelErrorKind, ScriptedModel, ScriptedTurn};
use as_state::AgentState;
use as_storage::{InMemoryStorage, SessionConfig, SessionKey, SharedStorage, UpsertSession};
use as_tools::Toolkit;
use async_trait::async_trait;
use common::AllowTool;

async fn store() -> SharedStorage {
    let s: SharedStorage = Arc::new(InMemoryStorage::new());
    s.open().await.unwrap();
    s
}

fn key(s: &str) -> SessionKey {
    SessionKey::new("u1", "a1", s)
}

fn agent_with(turns: Vec<ScriptedTurn>, toolkit: Toolkit) -> Agent {
    Agent::builder("Friday", "sys", Arc::new(ScriptedModel::new("m", turns))).toolkit(toolkit).build().unwrap()
}

async fn turn(
    runner: &SessionRunner,
    agent: &Agent,
    key: &SessionKey,
    input: impl Into<ReplyInput>,
) -> (Vec<AgentEvent>, as_agent::Result<as_agent::TurnOutcome>) {
    let mut events = Vec::new();
    let r = runner.run_turn(agent, key, input.into(), &mut |e| events.push(e.clone())).await;
    (events, r)
}

#[tokio::test]
async fn creates_on_first_use_then_loads_and_keeps_the_session_id() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let k = key("s1");
    let agent = agent_with(vec![ScriptedTurn::new().text("one"), ScriptedTurn::new().text("two")], Toolkit::new());
    let (events, r) = turn(&runner, &agent, &k, Msg::user("user", "hi")).await;
    let t1 = r.unwrap();
    assert!(t1.created);
    assert_eq!(t1.state.session_id, "s1");
    assert!(matches!(&events[0], AgentEvent::ReplyStart(e) if e.session_id == "s1"));
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "again")).await;
    let t2 = r.unwrap();
    assert!(!t2.created);
    assert!(t2.revision > t1.revision);
    assert_eq!(t2.state.context.len(), 4);
    let stored = storage.get_session(&k).await.unwrap().unwrap();
    assert_eq!(stored.state, t2.state);
    assert_eq!(stored.revision(), t2.revision);
    // The message log: both user messages and both replies, replies rebuilt from the events.
    let log = storage.list_messages(&k, 0, 0).await.unwrap();
    assert_eq!(log.len(), 4);
    assert_eq!(log[1].id, t1.state.context[1].id);
    assert_eq!(log[1].get_text_content(""), Some("one".into()));
    assert!(log[1].finished_at.is_some());
}

#[tokio::test]
async fn a_record_with_a_foreign_session_id_in_its_state_is_corrected() {
    let storage = store().await;
    let k = key("s2");
    let mut foreign = AgentState::for_session("some-other-session");
    foreign.context.push(Msg::user("user", "earlier"));
    storage
        .upsert_session(
            UpsertSession::new(k.owner(), SessionConfig::new("ws")).with_session_id("s2").with_state(foreign),
        )
        .await
        .unwrap();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("ok")], Toolkit::new());
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "hi")).await;
    let t = r.unwrap();
    assert_eq!(t.state.session_id, "s2");
    assert_eq!(storage.get_session(&k).await.unwrap().unwrap().state.session_id, "s2");
}

#[tokio::test]
async fn persists_on_park_max_iters_interrupt_and_error() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));

    // Park.
    let k = key("park");
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#)],
        Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()),
    );
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "go")).await;
    let t = r.unwrap();
    assert_eq!(t.status, ReplyStatus::Parked);
    assert_eq!(storage.get_session(&k).await.unwrap().unwrap().state, t.state);
    assert!(t.state.has_awaiting_tool_calls("Friday"));

    // A wrong reply_id is refused and nothing is written.
    let before = storage.get_session(&k).await.unwrap().unwrap();
    let call = as_message::ToolCallBlock::new("c1", "needs_ok", r#"{"text": "a"}"#);
    let bad = UserConfirmResultEvent::new("wrong", vec![as_agent::ConfirmResult::approve(call.clone())]);
    let (events, r) = turn(&runner, &agent, &k, bad).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::ReplyIdMismatch);
    assert!(events.is_empty());
    assert_eq!(storage.get_session(&k).await.unwrap().unwrap().revision(), before.revision());

    // Interrupt the parked reply: persisted, calls closed.
    let (_, r) = turn(&runner, &agent, &k, as_agent::UserInterruptEvent::new(t.state.reply_id.clone())).await;
    let t = r.unwrap();
    assert_eq!(t.status, ReplyStatus::Interrupted);
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert!(!stored.has_awaiting_tool_calls("Friday"));
    assert_eq!(stored, t.state);

    // Max iterations.
    let k = key("max");
    let agent = Agent::builder(
        "Friday",
        "sys",
        Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#)])),
    )
    .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
    .react_config(ReActConfig::default().with_max_iters(1))
    .build()
    .unwrap();
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "go")).await;
    let t = r.unwrap();
    assert_eq!(t.status, ReplyStatus::ExceedMaxIters);
    assert_eq!(storage.get_session(&k).await.unwrap().unwrap().state.cur_iter, 1);

    // A model error: the error is returned after the state (with the user message) was persisted.
    let k = key("err");
    let agent = agent_with(
        vec![ScriptedTurn::error(ModelError::new(ModelErrorKind::Auth, "scripted", "no key"))],
        Toolkit::new(),
    );
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "go")).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::Model);
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert_eq!(stored.context.len(), 1);
    assert_eq!(stored.context[0].get_text_content(""), Some("go".into()));
}

#[tokio::test]
async fn cancelled_turn_is_persisted_interrupted() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let k = key("cancel");
    let model = Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().text("Partial").pause().text(" rest")]));
    let gate = model.pause_gate();
    let agent = Agent::builder("Friday", "sys", model).build().unwrap();
    let cancel = as_model::CancellationToken::new();
    let mut sink = |_: &AgentEvent| {};
    let (r, ()) = tokio::join!(
        runner.run_turn_with_cancel(&agent, &k, ReplyInput::user_text("go"), &mut sink, cancel.clone()),
        async {
            gate.wait_paused().await;
            cancel.cancel();
        }
    );
    let t = r.unwrap();
    assert_eq!(t.status, ReplyStatus::Interrupted);
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert_eq!(stored.context[1].get_text_content(""), Some("Partial".into()), "partial output kept and saved");
    let log = storage.list_messages(&k, 0, 0).await.unwrap();
    assert_eq!(log[1].get_text_content(""), Some("Partial".into()));
}

/// A model that, when called, makes another writer update the session first.
#[derive(Debug)]
struct Interloper {
    storage: SharedStorage,
    key: SessionKey,
    inner: ScriptedModel,
}

#[async_trait]
impl ChatModel for Interloper {
    fn model_name(&self) -> &str {
        "interloper"
    }
    fn provider(&self) -> &'static str {
        "test"
    }
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let other = AgentState::for_session(self.key.session_id.clone());
        self.storage.update_session_state(&self.key, &other, None).await.unwrap();
        self.inner.stream(request).await
    }
}

#[tokio::test]
async fn a_concurrent_writer_gives_a_typed_conflict_never_an_overwrite() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let k = key("conflict");
    let first = agent_with(vec![ScriptedTurn::new().text("one")], Toolkit::new());
    turn(&runner, &first, &k, Msg::user("user", "hi")).await.1.unwrap();
    let model = Interloper {
        storage: Arc::clone(&storage),
        key: k.clone(),
        inner: ScriptedModel::new("m", [ScriptedTurn::new().text("two")]),
    };
    let agent = Agent::builder("Friday", "sys", Arc::new(model)).build().unwrap();
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "again")).await;
    let err = r.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Conflict, "{err}");
    // The other writer's state is intact.
    assert!(storage.get_session(&k).await.unwrap().unwrap().state.context.is_empty());
}

#[derive(Debug, Default)]
struct RecordingLock {
    log: Arc<Mutex<Vec<String>>>,
}

struct RecordingGuard(Arc<Mutex<Vec<String>>>, String);

#[async_trait]
impl LockGuard for RecordingGuard {
    async fn release(self: Box<Self>) -> as_agent::Result<()> {
        self.0.lock().unwrap().push(format!("release {}", self.1));
        Ok(())
    }
}

#[async_trait]
impl SessionLock for RecordingLock {
    async fn acquire(&self, key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        self.log.lock().unwrap().push(format!("acquire {}", key.session_id));
        Ok(Box::new(RecordingGuard(Arc::clone(&self.log), key.session_id.clone())))
    }
}

#[tokio::test]
async fn the_lock_hook_wraps_every_turn_even_failed_ones() {
    let storage = store().await;
    let lock = Arc::new(RecordingLock::default());
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(lock.clone());
    let agent = agent_with(vec![ScriptedTurn::new().text("ok")], Toolkit::new());
    turn(&runner, &agent, &key("l1"), Msg::user("user", "hi")).await.1.unwrap();
    // Rejected by the agent after the load (nothing is parked): the lock is released all the same.
    let stray = UserConfirmResultEvent::new("no-such-reply", Vec::new());
    let (_, r) = turn(&runner, &agent, &key("l1"), stray).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::UnexpectedEvent);
    assert_eq!(*lock.log.lock().unwrap(), ["acquire l1", "release l1", "acquire l1", "release l1"]);
    // An invalid session id never reaches the lock or the store.
    let (_, r) = turn(&runner, &agent, &key("bad:id"), Msg::user("user", "hi")).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::Storage);
    assert_eq!(lock.log.lock().unwrap().len(), 4);
}

/// A lock the test takes away: `lost` (a watch channel) turns true; `expired` makes every guard
/// report itself lost without ever signalling it (a lease that ran out unnoticed).
#[derive(Debug)]
struct LosableLock {
    lost: tokio::sync::watch::Receiver<bool>,
    expired: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl LosableLock {
    fn new(expired: bool) -> (Arc<Self>, tokio::sync::watch::Sender<bool>) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (Arc::new(Self { lost: rx, expired, log: Arc::default() }), tx)
    }
}

struct LosableGuard {
    lost: tokio::sync::watch::Receiver<bool>,
    expired: bool,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl LockGuard for LosableGuard {
    async fn release(self: Box<Self>) -> as_agent::Result<()> {
        self.log.lock().unwrap().push("release".into());
        Ok(())
    }

    fn is_lost(&self) -> bool {
        self.expired || *self.lost.borrow()
    }

    async fn lost(&self) {
        let mut rx = self.lost.clone();
        let _ = rx.wait_for(|lost| *lost).await;
    }
}

#[async_trait]
impl SessionLock for LosableLock {
    async fn acquire(&self, _key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        self.log.lock().unwrap().push("acquire".into());
        Ok(Box::new(LosableGuard { lost: self.lost.clone(), expired: self.expired, log: Arc::clone(&self.log) }))
    }
}

#[tokio::test]
async fn a_turn_whose_lock_is_lost_is_interrupted_and_not_written() {
    let storage = store().await;
    let (lock, lose) = LosableLock::new(false);
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(lock.clone());
    let k = key("lost");
    let model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::new().text("Working").pause().tool_call("c1", "echo", r#"{"text": "x"}"#)],
    ));
    let gate = model.pause_gate();
    let agent = Agent::builder("Friday", "sys", model)
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
        .build()
        .unwrap();
    let mut events = Vec::new();
    let mut sink = |e: &AgentEvent| events.push(e.clone());
    let cancel = tokio_util::sync::CancellationToken::new();
    // Bounded: a runner that ignores the lost lock would wait on the paused model forever.
    let both = async {
        let run = runner.run_turn_with_cancel(&agent, &k, ReplyInput::user_text("go"), &mut sink, cancel.clone());
        tokio::join!(run, async {
            gate.wait_paused().await;
            lose.send(true).unwrap();
        })
    };
    let (r, ()) =
        tokio::time::timeout(std::time::Duration::from_secs(30), both).await.expect("the lost lock ends the turn");
    let err = r.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("lock"), "{err}");
    let as_agent::AgentError::Unsaved(unsaved) = err else { panic!("not an unsaved turn") };
    // Interrupted where the lock went: the partial text is kept, the call never came.
    let reply = unsaved.state.context.last().unwrap();
    assert_eq!(reply.get_text_content(""), Some("Working".into()));
    assert!(!reply.content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))));
    assert!(matches!(events.last(), Some(AgentEvent::ReplyEnd(_))), "the reply closed: {:?}", events.last());
    assert!(!cancel.is_cancelled(), "the caller's token is the caller's");
    // Nothing written (the session is as the turn created it), and the lock was released.
    let stored = storage.get_session(&k).await.unwrap().unwrap();
    assert!(stored.state.context.is_empty());
    assert!(storage.list_messages(&k, 0, 0).await.unwrap().is_empty());
    assert_eq!(*lock.log.lock().unwrap(), ["acquire", "release"]);
    // Under the lock again, the turn can still be saved.
    lose.send(false).unwrap();
    runner.save_unsaved(&k, *unsaved).await.unwrap();
    let stored = storage.get_session(&k).await.unwrap().unwrap();
    assert_eq!(stored.state.context.len(), 2);
    assert_eq!(storage.list_messages(&k, 0, 0).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_lock_lost_unnoticed_is_checked_before_the_write() {
    let storage = store().await;
    let (lock, _lose) = LosableLock::new(true);
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(lock.clone());
    let k = key("expired");
    let agent = agent_with(vec![ScriptedTurn::new().text("done")], Toolkit::new());
    let (_, r) = turn(&runner, &agent, &k, Msg::user("user", "hi")).await;
    let err = r.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Conflict, "{err}");
    assert!(storage.get_session(&k).await.unwrap().unwrap().state.context.is_empty());
    assert_eq!(*lock.log.lock().unwrap(), ["acquire", "release"]);
    // save_unsaved checks it too: a lock that is lost at once writes nothing.
    let as_agent::AgentError::Unsaved(unsaved) = err else { panic!("not an unsaved turn") };
    let again = runner.save_unsaved(&k, *unsaved).await.unwrap_err();
    assert_eq!(again.kind(), AgentErrorKind::Conflict);
    assert!(storage.get_session(&k).await.unwrap().unwrap().state.context.is_empty());
}

#[tokio::test]
async fn a_message_the_agent_rejects_creates_no_session_and_takes_no_lock() {
    let storage = store().await;
    let lock = Arc::new(RecordingLock::default());
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(lock.clone());
    let agent = agent_with(vec![ScriptedTurn::new().text("never")], Toolkit::new());
    let k = key("never-made");
    let bad = Msg::new("user", as_message::Role::System, vec![ContentBlock::text("no")]);
    let (events, r) = turn(&runner, &agent, &k, bad).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::InvalidInput);
    assert!(events.is_empty());
    assert!(storage.get_session(&k).await.unwrap().is_none(), "a rejected turn created a session");
    assert!(lock.log.lock().unwrap().is_empty());
}

/// An agent whose first reply streams "Partial" and the start of an `echo` call, then pauses
/// (its model's gate: [`drop_turn_midway`]), and whose model then plays `then`.
fn pausing_agent(then: Vec<ScriptedTurn>) -> (Agent, as_model::PauseGate) {
    let first = ScriptedTurn::new().text("Partial").tool_call("c1", "echo", r#"{"text": "#).pause().text(" rest");
    let model = Arc::new(ScriptedModel::new("m", std::iter::once(first).chain(then)));
    let gate = model.pause_gate();
    let agent = Agent::builder("Friday", "sys", model)
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()))
        .build()
        .unwrap();
    (agent, gate)
}

/// Runs a turn of `text` on a [`pausing_agent`] and drops its future once the model paused
/// mid-stream (the turn's write then goes on in the background).
async fn drop_turn_midway(
    runner: &SessionRunner,
    (agent, gate): &(Agent, as_model::PauseGate),
    k: &SessionKey,
    text: &str,
) {
    let mut sink = |_: &AgentEvent| {};
    let fut = runner.run_turn(agent, k, ReplyInput::user_text(text), &mut sink);
    tokio::pin!(fut);
    tokio::select! {
        _ = &mut fut => panic!("the turn cannot finish while the model is paused"),
        () = gate.wait_paused() => {}
    }
}

#[tokio::test]
async fn a_dropped_turn_future_is_still_persisted() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let k = key("dropped");
    let paused = pausing_agent(vec![]);
    drop_turn_midway(&runner, &paused, &k, "go").await;
    assert_eq!(runner.wait_background_writes().await, 1);
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert_eq!(stored.context.len(), 2);
    let reply = &stored.context[1];
    assert_eq!(reply.get_text_content(""), Some("Partial".into()), "partial output kept");
    let calls = reply.content.iter().filter(|b| matches!(b, ContentBlock::ToolCall(_))).count();
    let results = reply
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::ToolResult(r) if r.state == as_message::ToolResultState::Interrupted))
        .count();
    assert_eq!((calls, results), (1, 1), "the cut call is closed as interrupted");
    assert_eq!(storage.list_messages(&k, 0, 0).await.unwrap().len(), 2, "user message and partial reply logged");
    assert_logged_reply_is_the_states(&storage, &k, "dropped mid-stream").await;
}

/// What the reply message `m` holds, block kind by block kind: its calls (id, state, input), its
/// results (id, state, output text), its text, its thinking and its usage. Block ids and the
/// output's form (a string or text blocks) aside, the log's copy of a reply and the state's agree
/// on all of it (the tool outputs of these tests are short: the context's copy is not truncated;
/// no usage is zero usage: a model call without usage adds zeros to the log's copy only).
fn reply_shape(m: &Msg) -> (Vec<String>, Vec<String>, String, String, as_message::Usage) {
    let (mut calls, mut results, mut text, mut thinking) = (Vec::new(), Vec::new(), String::new(), String::new());
    for b in &m.content {
        match b {
            ContentBlock::ToolCall(c) => calls.push(format!("{} {:?} {}", c.id, c.state, c.input)),
            ContentBlock::ToolResult(r) => results.push(format!("{} {:?} {}", r.id, r.state, r.output.text())),
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::Thinking(t) => thinking.push_str(&t.thinking),
            _ => {}
        }
    }
    (calls, results, text, thinking, m.usage.unwrap_or_default())
}

/// The message log's copy of `k`'s reply message is the state's: the same calls, results, text,
/// thinking and usage, and (unless calls are parked) a valid history.
async fn assert_logged_reply_is_the_states(storage: &SharedStorage, k: &SessionKey, label: &str) {
    let state = storage.get_session(k).await.unwrap().unwrap().state;
    let logged = storage.get_message(k, &state.reply_id).await.unwrap();
    let Some(current) = state.context.iter().rev().find(|m| m.id == state.reply_id) else {
        assert!(logged.is_none_or(|m| m.content.is_empty()), "{label}: a reply the state does not have was logged");
        return;
    };
    let logged = logged.unwrap_or_else(|| panic!("{label}: the reply is not logged"));
    assert_eq!(reply_shape(&logged), reply_shape(current), "{label}: the log's reply against the state's");
    if !state.has_awaiting_tool_calls("Friday") {
        as_agent::testkit::check_history(std::slice::from_ref(&logged)).unwrap_or_else(|e| panic!("{label}: {e}"));
    }
}

/// Stalls the reply for good in its `on_event` hook at the `at`-th event (from 1), before the
/// caller gets that event, and says so through `stalled` (a hook doing I/O that never ends, and a
/// client that gives up).
#[derive(Debug)]
struct StallAt {
    at: std::sync::atomic::AtomicUsize,
    seen: std::sync::atomic::AtomicUsize,
    stalled: tokio::sync::Notify,
}

impl StallAt {
    fn new(at: usize) -> Arc<Self> {
        let (at, seen) = (std::sync::atomic::AtomicUsize::new(at), std::sync::atomic::AtomicUsize::new(0));
        Arc::new(Self { at, seen, stalled: tokio::sync::Notify::new() })
    }

    /// Stalls at the `at`-th event from now on.
    fn arm(&self, at: usize) {
        self.seen.store(0, std::sync::atomic::Ordering::SeqCst);
        self.at.store(at, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait]
impl as_agent::Middleware for StallAt {
    fn key(&self) -> &str {
        "StallAt"
    }

    fn rewrites_tool_output(&self) -> bool {
        false
    }

    async fn on_event(&self, _event: &AgentEvent, _slot: &mut as_message::JsonValue) -> as_agent::Result<()> {
        if self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
            == self.at.load(std::sync::atomic::Ordering::SeqCst)
        {
            self.stalled.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// Runs `input` as a turn of `agent` (whose [`StallAt`] is `stall`) and drops the turn's future
/// once the reply stalled; the turn's write then runs in the background.
async fn drop_turn_at_stall(
    runner: &SessionRunner,
    agent: &Agent,
    stall: &StallAt,
    k: &SessionKey,
    input: impl Into<ReplyInput>,
) {
    let mut sink = |_: &AgentEvent| {};
    let fut = runner.run_turn(agent, k, input.into(), &mut sink);
    tokio::pin!(fut);
    tokio::select! {
        r = &mut fut => panic!("the turn cannot finish while its hook stalls: {r:?}"),
        () = stall.stalled.notified() => {}
    }
}

/// A turn dropped at any event of a three-round reply (thinking, text, two sequential then two
/// concurrent calls, the answer) logs the reply message the state saved: the events the caller
/// took built only part of it, the rest (the partial model output of the chunk under way, the
/// interrupted results of the open calls) was done to the state without events.
#[tokio::test]
async fn a_turn_dropped_at_any_event_logs_the_reply_the_state_saved() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let build = |stall: &Arc<StallAt>| {
        let model = Arc::new(ScriptedModel::new("m", as_agent::testkit::multi_tool_turns()));
        let toolkit = Toolkit::new().with(AllowTool::new("seq").arc()).with(AllowTool::new("con").concurrent().arc());
        let mw: Arc<dyn as_agent::Middleware> = stall.clone();
        Agent::builder("Friday", "sys", model).toolkit(toolkit).middleware(mw).build().unwrap()
    };
    let whole = StallAt::new(usize::MAX);
    let (events, done) = turn(&runner, &build(&whole), &key("whole"), Msg::user("user", "go")).await;
    assert_eq!(done.unwrap().status, ReplyStatus::Completed);
    assert_logged_reply_is_the_states(&storage, &key("whole"), "not dropped").await;
    for at in 1..=events.len() {
        let k = key(&format!("drop-at-{at}"));
        let stall = StallAt::new(at);
        drop_turn_at_stall(&runner, &build(&stall), &stall, &k, Msg::user("user", "go")).await;
        assert_eq!(runner.wait_background_writes().await, 1);
        let label = format!("dropped at event {at} ({:?})", events[at - 1].event_type());
        assert_logged_reply_is_the_states(&storage, &k, &label).await;
    }
}

/// A resume dropped right after its confirmation (the approved call had not started, or its tool
/// was running): the call is closed as interrupted in the state, and so in the log, which showed
/// it `allowed` without a result, or with a result still running, for good.
#[tokio::test]
async fn a_resume_dropped_after_its_confirmation_logs_the_call_closed() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let input = r#"{"text": "a"}"#;
    for blocking in [false, true] {
        let k = key(&format!("dropped-confirm-{blocking}"));
        let tool =
            if blocking { AllowTool::new("needs_ok").ask().blocking() } else { AllowTool::new("needs_ok").ask() };
        let stall = StallAt::new(usize::MAX);
        let mw: Arc<dyn as_agent::Middleware> = stall.clone();
        let turns = vec![ScriptedTurn::new().tool_call("c1", "needs_ok", input), ScriptedTurn::new().text("done")];
        let agent = Agent::builder("Friday", "sys", Arc::new(ScriptedModel::new("m", turns)))
            .toolkit(Toolkit::new().with(tool.arc()))
            .middleware(mw)
            .build()
            .unwrap();
        let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
        assert_eq!(parked.status, ReplyStatus::Parked);
        let approve = UserConfirmResultEvent::new(
            parked.state.reply_id.clone(),
            vec![as_agent::ConfirmResult::approve(as_message::ToolCallBlock::new("c1", "needs_ok", input))],
        );
        if blocking {
            // The tool's TOOL_RESULT_START reaches the caller, then the tool runs for good.
            let started = tokio::sync::Notify::new();
            let mut sink = |e: &AgentEvent| {
                if matches!(e, AgentEvent::ToolResultStart(_)) {
                    started.notify_one();
                }
            };
            let fut = runner.run_turn(&agent, &k, approve.into(), &mut sink);
            tokio::pin!(fut);
            tokio::select! {
                r = &mut fut => panic!("the turn cannot finish while its tool runs: {r:?}"),
                () = started.notified() => {}
            }
        } else {
            stall.arm(1);
            drop_turn_at_stall(&runner, &agent, &stall, &k, approve).await;
        }
        assert_eq!(runner.wait_background_writes().await, 1);
        let stored = storage.get_session(&k).await.unwrap().unwrap().state;
        assert!(!stored.has_awaiting_tool_calls("Friday"), "blocking={blocking}: the approved call was closed");
        assert_logged_reply_is_the_states(&storage, &k, &format!("blocking={blocking}")).await;
    }
}

/// The stored revision and message-log length of `k`.
async fn footprint(storage: &SharedStorage, k: &SessionKey) -> (as_storage::Revision, usize) {
    let rec = storage.get_session(k).await.unwrap().unwrap();
    (rec.revision(), storage.list_messages(k, 0, 0).await.unwrap().len())
}

#[tokio::test]
async fn rejected_and_no_op_turns_write_nothing() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#), ScriptedTurn::new().text("done")],
        Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()),
    );

    // A parked session: every resume that does not fit is refused before it changes anything.
    let k = key("rejects");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let before = footprint(&storage, &k).await;
    let call = as_message::ToolCallBlock::new("c1", "needs_ok", r#"{"text": "a"}"#);
    let rid = parked.state.reply_id.clone();
    let external = as_agent::ExternalExecutionResultEvent::new(
        rid.clone(),
        vec![as_message::ToolResultBlock::new("c1", "needs_ok", "ran", as_message::ToolResultState::Success)],
    );
    let renamed = as_message::ToolCallBlock::new("c1", "other_tool", r#"{"text": "a"}"#);
    let rejected: Vec<(ReplyInput, AgentErrorKind)> = vec![
        (Msg::user("user", "a new message while parked").into(), AgentErrorKind::Awaiting),
        (
            UserConfirmResultEvent::new("wrong", vec![as_agent::ConfirmResult::approve(call.clone())]).into(),
            AgentErrorKind::ReplyIdMismatch,
        ),
        (as_agent::UserInterruptEvent::new("wrong").into(), AgentErrorKind::ReplyIdMismatch),
        (external.into(), AgentErrorKind::UnexpectedEvent),
        (
            UserConfirmResultEvent::new(rid.clone(), vec![as_agent::ConfirmResult::approve(renamed)]).into(),
            AgentErrorKind::UnexpectedEvent,
        ),
    ];
    for (input, kind) in rejected {
        let label = format!("{input:?}");
        let (events, r) = turn(&runner, &agent, &k, input).await;
        assert_eq!(r.unwrap_err().kind(), kind, "{label}");
        assert!(events.is_empty(), "{label}");
        assert_eq!(footprint(&storage, &k).await, before, "{label}: nothing written");
    }
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert_eq!(stored, parked.state, "the parked state is intact");

    // An idle session: an invalid input is refused, an interrupt is a no-op; neither writes.
    let k = key("idle");
    let idle_agent = agent_with(vec![ScriptedTurn::new().text("hi")], Toolkit::new());
    let done = turn(&runner, &idle_agent, &k, Msg::user("user", "hello")).await.1.unwrap();
    let before = footprint(&storage, &k).await;
    assert_eq!(before.0, done.revision);
    let system = Msg::new("user", as_message::Role::System, vec![ContentBlock::text("no")]);
    let (_, r) = turn(&runner, &idle_agent, &k, system).await;
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::InvalidInput);
    assert_eq!(footprint(&storage, &k).await, before, "invalid input: nothing written");
    let (events, r) =
        turn(&runner, &idle_agent, &k, as_agent::UserInterruptEvent::new(done.state.reply_id.clone())).await;
    let noop = r.unwrap();
    assert_eq!(noop.status, ReplyStatus::NoOp);
    assert!(events.is_empty());
    assert_eq!(noop.revision, done.revision, "the outcome reports the unchanged revision");
    assert_eq!(noop.state, done.state);
    assert_eq!(footprint(&storage, &k).await, before, "no-op: nothing written");

    // None of these left a write behind for the background.
    assert_eq!(runner.wait_background_writes().await, 0);
}

/// 2.0.4's chat service skips a run with no input (a wake-up) while the agent is parked (spec
/// §14.6 step 3): a no-op that writes nothing, and the parked reply resumes as usual afterwards.
#[tokio::test]
async fn a_run_with_no_input_while_parked_is_a_no_op() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "a"}"#), ScriptedTurn::new().text("done")],
        Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()),
    );
    let k = key("wake-up");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let before = footprint(&storage, &k).await;
    let (events, r) = turn(&runner, &agent, &k, ReplyInput::none()).await;
    let noop = r.unwrap();
    assert_eq!(noop.status, ReplyStatus::NoOp);
    assert_eq!(noop.message, None);
    assert!(events.is_empty());
    assert!(!noop.created);
    assert_eq!(noop.revision, parked.revision, "the outcome reports the unchanged revision");
    assert_eq!(noop.state, parked.state);
    assert_eq!(footprint(&storage, &k).await, before, "no-op: nothing written");
    assert_eq!(runner.wait_background_writes().await, 0);
    // The parked reply is still there to resume.
    let call = as_message::ToolCallBlock::new("c1", "needs_ok", r#"{"text": "a"}"#);
    let confirm =
        UserConfirmResultEvent::new(parked.state.reply_id.clone(), vec![as_agent::ConfirmResult::approve(call)]);
    let done = turn(&runner, &agent, &k, confirm.clone()).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    // The same answer again (another process that saw the call parked, and lost the race): a
    // conflict, not an invalid input, and nothing written.
    let before = footprint(&storage, &k).await;
    let (_, late) = turn(&runner, &agent, &k, confirm).await;
    assert_eq!(late.unwrap_err().kind(), AgentErrorKind::Conflict);
    assert_eq!(footprint(&storage, &k).await, before);
}

/// Fails `on_event` with `error()` at each event of type `at` (by then the reply has changed the state).
#[derive(Debug)]
struct FailAt {
    at: as_agent::EventType,
    error: fn() -> as_agent::AgentError,
}

#[async_trait]
impl as_agent::Middleware for FailAt {
    fn key(&self) -> &str {
        "FailAt"
    }

    async fn on_event(&self, event: &AgentEvent, slot: &mut as_message::JsonValue) -> as_agent::Result<()> {
        *slot = serde_json::json!({ "seen": slot.get("seen").and_then(|v| v.as_i64()).unwrap_or(0) + 1 });
        if event.event_type() == self.at { Err((self.error)()) } else { Ok(()) }
    }
}

#[tokio::test]
async fn an_error_after_the_reply_changed_the_state_still_saves_it_whatever_its_kind() {
    use as_agent::{AgentError, EventType};
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    // The kinds a rejection uses, raised by a middleware once the reply has started: they must not be taken
    // for a rejection.
    let errors: [(fn() -> AgentError, AgentErrorKind); 4] = [
        (|| AgentError::InvalidInput("middleware says no".into()), AgentErrorKind::InvalidInput),
        (|| AgentError::Awaiting { confirmations: 1, external: 0 }, AgentErrorKind::Awaiting),
        (|| AgentError::UnexpectedEvent("middleware".into()), AgentErrorKind::UnexpectedEvent),
        (|| AgentError::ReplyIdMismatch { expected: "a".into(), got: "b".into() }, AgentErrorKind::ReplyIdMismatch),
    ];
    for (i, (error, kind)) in errors.into_iter().enumerate() {
        for at in [EventType::ReplyStart, EventType::TextBlockEnd] {
            let k = key(&format!("late-{i}-{at:?}"));
            // A first, clean turn so that the failing one starts from a stored revision.
            let agent =
                agent_with(vec![ScriptedTurn::new().text("one"), ScriptedTurn::new().text("two")], Toolkit::new());
            let first = turn(&runner, &agent, &k, Msg::user("user", "hi")).await.1.unwrap();
            let failing = Agent::builder(
                "Friday",
                "sys",
                Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().text("partial answer")])),
            )
            .middleware(Arc::new(FailAt { at, error }))
            .build()
            .unwrap();
            let (_, r) = turn(&runner, &failing, &k, Msg::user("user", "again")).await;
            assert_eq!(r.unwrap_err().kind(), kind, "{kind:?} at {at:?}");
            let stored = storage.get_session(&k).await.unwrap().unwrap();
            assert!(stored.revision() > first.revision, "{kind:?} at {at:?}: the changed state was written");
            assert_ne!(stored.state.reply_id, first.state.reply_id, "{kind:?} at {at:?}: the new reply's id");
            assert_eq!(stored.state.context[2].get_text_content(""), Some("again".into()), "{kind:?} at {at:?}");
            assert!(stored.state.middle_context.contains_key("FailAt"), "{kind:?} at {at:?}: middleware data kept");
            if at == EventType::TextBlockEnd {
                assert_eq!(stored.state.context.len(), 4, "{kind:?} at {at:?}");
                assert_eq!(stored.state.context[3].get_text_content(""), Some("partial answer".into()));
            }
            let log = storage.list_messages(&k, 0, 0).await.unwrap();
            assert_eq!(log[2].get_text_content(""), Some("again".into()), "{kind:?} at {at:?}: the input is logged");
        }
    }
}

/// The in-memory store with switchable faults, logging the writes that reach it.
#[derive(Debug, Default)]
struct Faulty {
    inner: InMemoryStorage,
    log: Arc<Mutex<Vec<String>>>,
    /// `update_session_state` announces itself on `entered`, then waits for `proceed`.
    gate_update: std::sync::atomic::AtomicBool,
    entered: tokio::sync::Notify,
    proceed: tokio::sync::Notify,
    /// The next `get_session` finds nothing, and another runner creates the session right after.
    create_behind_the_next_get: std::sync::atomic::AtomicBool,
    fail_messages: std::sync::atomic::AtomicBool,
    /// The next `update_session_state` fails with `Unavailable` (Redis restarting).
    fail_next_update: std::sync::atomic::AtomicBool,
    /// The next `update_session_state` panics (a backend bug).
    panic_next_update: std::sync::atomic::AtomicBool,
    /// The next `update_session_state` is written, then reported as a conflict (its answer was
    /// lost and the re-sent command found the record moved on: by this very write).
    lose_next_answer: std::sync::atomic::AtomicBool,
    /// `save_turn` is the inner store's atomic one (a lost answer then hides the messages' write
    /// too); unset, it is the trait's two steps through this wrapper's own methods.
    atomic_turns: std::sync::atomic::AtomicBool,
    /// `import_record` is the inner store's (else the trait's default: `Unsupported`).
    import: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl as_storage::StorageBase for Faulty {
    fn backend_name(&self) -> &'static str {
        "faulty"
    }
    fn capabilities(&self) -> as_storage::Capabilities {
        // Its save_turn is the inner atomic one only when `atomic_turns` is set.
        let atomic = self.atomic_turns.load(std::sync::atomic::Ordering::SeqCst);
        self.inner.capabilities().with_atomic_turns(atomic)
    }
    async fn open(&self) -> as_storage::Result<()> {
        self.inner.open().await
    }
    async fn close(&self) -> as_storage::Result<()> {
        self.inner.close().await
    }
    async fn upsert_session(&self, req: UpsertSession) -> as_storage::Result<as_storage::SessionRecord> {
        self.log.lock().unwrap().push("upsert".into());
        self.inner.upsert_session(req).await
    }
    async fn import_record(
        &self,
        record: &as_storage::SessionRecord,
        messages: &[Msg],
        mode: as_storage::ImportMode,
    ) -> as_storage::Result<as_storage::ImportOutcome> {
        if !self.import.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Unsupported,
                "faulty",
                "import_record",
                "off",
            ));
        }
        self.log.lock().unwrap().push("import".into());
        self.inner.import_record(record, messages, mode).await
    }
    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&as_storage::Revision>,
    ) -> as_storage::Result<as_storage::Revision> {
        if self.gate_update.load(std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            self.proceed.notified().await;
        }
        if self.panic_next_update.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("a backend bug in update_session_state");
        }
        if self.fail_next_update.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Unavailable,
                "faulty",
                "update_session_state",
                "redis is restarting",
            ));
        }
        let r = self.inner.update_session_state(key, state, expected).await;
        if r.is_ok() && self.lose_next_answer.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Conflict,
                "faulty",
                "update_session_state",
                "the record moved on (re-sent command)",
            ));
        }
        self.log.lock().unwrap().push("update".into());
        r
    }
    async fn save_turn(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&as_storage::Revision>,
        messages: &[Msg],
    ) -> as_storage::Result<as_storage::SavedTurn> {
        if !self.atomic_turns.load(std::sync::atomic::Ordering::SeqCst) {
            let revision = self.update_session_state(key, state, expected).await?;
            for m in messages {
                if let Err(e) = self.upsert_message(key, m).await {
                    let mut saved = as_storage::SavedTurn::new(revision);
                    saved.log_error = Some(e);
                    return Ok(saved);
                }
            }
            return Ok(as_storage::SavedTurn::new(revision));
        }
        let r = self.inner.save_turn(key, state, expected, messages).await;
        if r.is_ok() && self.lose_next_answer.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Conflict,
                "faulty",
                "save_turn",
                "the record moved on (re-sent command)",
            ));
        }
        r
    }
    async fn get_session(&self, key: &SessionKey) -> as_storage::Result<Option<as_storage::SessionRecord>> {
        if self.create_behind_the_next_get.swap(false, std::sync::atomic::Ordering::SeqCst) {
            let mut theirs = AgentState::default();
            theirs.context.push(Msg::user("user", "the other runner's turn"));
            let req = UpsertSession::new(key.owner(), SessionConfig::new("ws"))
                .with_session_id(key.session_id.clone())
                .with_state(theirs);
            self.inner.upsert_session(req).await?;
            return Ok(None);
        }
        self.inner.get_session(key).await
    }
    async fn list_sessions(
        &self,
        owner: &as_storage::Owner,
        page: &as_storage::PageRequest,
    ) -> as_storage::Result<as_storage::SessionPage> {
        self.inner.list_sessions(owner, page).await
    }
    async fn delete_session(&self, key: &SessionKey) -> as_storage::Result<bool> {
        self.inner.delete_session(key).await
    }
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> as_storage::Result<()> {
        if self.fail_messages.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Unavailable,
                "faulty",
                "upsert_message",
                "down",
            ));
        }
        self.inner.upsert_message(key, msg).await?;
        self.log.lock().unwrap().push(format!("message {:?}", msg.role).to_lowercase());
        Ok(())
    }
    async fn get_message(&self, key: &SessionKey, id: &str) -> as_storage::Result<Option<Msg>> {
        self.inner.get_message(key, id).await
    }
    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> as_storage::Result<Vec<Msg>> {
        self.inner.list_messages(key, offset, limit).await
    }
}

async fn faulty() -> Arc<Faulty> {
    let s = Arc::new(Faulty::default());
    as_storage::StorageBase::open(&*s).await.unwrap();
    s
}

#[tokio::test]
async fn a_turn_dropped_during_its_final_write_completes_it_before_releasing_the_lock() {
    let storage = faulty().await;
    let lock = Arc::new(RecordingLock { log: Arc::clone(&storage.log) });
    let shared: SharedStorage = storage.clone();
    let runner = SessionRunner::new(shared, SessionConfig::new("ws")).with_lock(lock);
    let agent = agent_with(vec![ScriptedTurn::new().text("done")], Toolkit::new());
    let k = key("dropped-in-write");
    storage.gate_update.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut sink = |_: &AgentEvent| {};
    {
        let fut = runner.run_turn(&agent, &k, ReplyInput::user_text("go"), &mut sink);
        tokio::pin!(fut);
        tokio::select! {
            _ = &mut fut => panic!("the turn cannot finish while its write is held"),
            () = storage.entered.notified() => {}
        }
        // `fut` is dropped here, while the conditional update is under way.
    }
    storage.proceed.notify_one();
    assert_eq!(runner.wait_background_writes().await, 1);
    assert_eq!(
        *storage.log.lock().unwrap(),
        [
            "acquire dropped-in-write",
            "upsert",
            "update",
            "message user",
            "message assistant",
            "release dropped-in-write"
        ],
        "the create under the lock, the whole write, then the release"
    );
    let stored = as_storage::StorageBase::get_session(&*storage, &k).await.unwrap().unwrap();
    assert_eq!(stored.state.context.len(), 2);
}

#[tokio::test]
async fn a_session_created_by_another_runner_meanwhile_is_continued_not_overwritten() {
    for import in [false, true] {
        created_meanwhile(import).await;
    }
}

async fn created_meanwhile(import: bool) {
    let storage = faulty().await;
    storage.import.store(import, std::sync::atomic::Ordering::SeqCst);
    let shared: SharedStorage = storage.clone();
    let runner = SessionRunner::new(shared, SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("hello")], Toolkit::new());
    let k = key("raced");
    storage.create_behind_the_next_get.store(true, std::sync::atomic::Ordering::SeqCst);
    let out = turn(&runner, &agent, &k, Msg::user("user", "hi")).await.1.unwrap();
    assert!(!out.created, "the other runner created it");
    let texts: Vec<String> = out.state.context.iter().filter_map(|m| m.get_text_content("")).collect();
    assert_eq!(texts, ["the other runner's turn", "hi", "hello"]);
    let stored = as_storage::StorageBase::get_session(&*storage, &k).await.unwrap().unwrap();
    assert_eq!(stored.state, out.state);
    // With a create-only write the other runner's session is never touched (no upsert that
    // replaces its config and bumps its revision); without one, the upsert is the fallback.
    let log = storage.log.lock().unwrap().clone();
    assert_eq!(log.contains(&"upsert".to_owned()), !import, "{log:?}");
    // A plain first turn still reports the create.
    let agent = agent_with(vec![ScriptedTurn::new().text("hello")], Toolkit::new());
    assert!(turn(&runner, &agent, &key("fresh"), Msg::user("user", "hi")).await.1.unwrap().created);
}

#[tokio::test]
async fn a_message_log_failure_after_the_state_was_saved_does_not_fail_the_turn() {
    let storage = faulty().await;
    let shared: SharedStorage = storage.clone();
    let runner = SessionRunner::new(shared, SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("hello")], Toolkit::new());
    let k = key("log-down");
    storage.fail_messages.store(true, std::sync::atomic::Ordering::SeqCst);
    let out = turn(&runner, &agent, &k, Msg::user("user", "hi")).await.1.unwrap();
    assert!(out.log_error.as_deref().is_some_and(|e| e.contains("down")), "{:?}", out.log_error);
    let stored = as_storage::StorageBase::get_session(&*storage, &k).await.unwrap().unwrap();
    assert_eq!((stored.revision(), stored.state), (out.revision, out.state), "the state was saved");
}

#[tokio::test]
async fn a_resume_or_interrupt_of_a_missing_session_creates_nothing() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("never")], Toolkit::new());
    let k = key("nobody-here");
    let call = as_message::ToolCallBlock::new("c1", "t", "{}");
    let external = as_agent::ExternalExecutionResultEvent::new(
        "r",
        vec![as_message::ToolResultBlock::new("c1", "t", "ran", as_message::ToolResultState::Success)],
    );
    let inputs: Vec<(ReplyInput, Option<AgentErrorKind>)> = vec![
        (
            UserConfirmResultEvent::new("r", vec![as_agent::ConfirmResult::approve(call)]).into(),
            Some(AgentErrorKind::UnexpectedEvent),
        ),
        (external.into(), Some(AgentErrorKind::UnexpectedEvent)),
        (as_agent::UserInterruptEvent::new("r").into(), None),
    ];
    for (input, kind) in inputs {
        let label = format!("{input:?}");
        let (events, r) = turn(&runner, &agent, &k, input).await;
        match kind {
            Some(kind) => assert_eq!(r.unwrap_err().kind(), kind, "{label}"),
            None => assert_eq!(r.unwrap().status, ReplyStatus::NoOp, "{label}"),
        }
        assert!(events.is_empty(), "{label}");
        assert!(storage.get_session(&k).await.unwrap().is_none(), "{label}: the session was created");
    }
    assert_eq!(runner.wait_background_writes().await, 0);
}

#[tokio::test]
async fn a_repeated_external_result_id_answers_its_call_once() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("x1", "remote", r#"{"text": "a"}"#), ScriptedTurn::new().text("thanks")],
        Toolkit::new().with(AllowTool::new("remote").external().arc()),
    );
    let k = key("ext");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let result =
        |text: &str| as_message::ToolResultBlock::new("x1", "remote", text, as_message::ToolResultState::Success);
    let ev = as_agent::ExternalExecutionResultEvent::new(parked.state.reply_id.clone(), vec![result("A"), result("B")]);
    let (events, r) = turn(&runner, &agent, &k, ev).await;
    let done = r.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    let ends = events.iter().filter(|e| matches!(e, AgentEvent::ToolResultEnd(_))).count();
    assert_eq!(ends, 1, "one result per call");
    let results: Vec<String> = done
        .state
        .context
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) if r.id == "x1" => Some(r.output.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec!["B".to_owned()], "the last result for the id counts");
    // The log's reply message agrees with the state.
    let log = storage.list_messages(&k, 0, 0).await.unwrap();
    let logged: Vec<String> = log
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) if r.id == "x1" => Some(r.output.text()),
            _ => None,
        })
        .collect();
    assert_eq!(logged, vec!["B".to_owned()]);
}

/// A final write that fails, or whose task panics (a backend bug), hands the turn back as
/// `Unsaved`; `save_unsaved` writes it.
#[tokio::test]
async fn a_turn_whose_write_failed_is_handed_back_and_can_be_saved_again() {
    type Fault = fn(&Faulty) -> &std::sync::atomic::AtomicBool;
    let cases: [(Fault, &str); 2] =
        [(|f| &f.fail_next_update, "redis is restarting"), (|f| &f.panic_next_update, "panicked")];
    for (fault, message) in cases {
        let faulty = faulty().await;
        let storage: SharedStorage = faulty.clone();
        let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
        let agent =
            agent_with(vec![ScriptedTurn::new().text("first"), ScriptedTurn::new().text("second")], Toolkit::new());
        let k = key("unsaved");
        let first = turn(&runner, &agent, &k, Msg::user("user", "one")).await.1.unwrap();
        fault(&faulty).store(true, std::sync::atomic::Ordering::SeqCst);
        let err = turn(&runner, &agent, &k, Msg::user("user", "two")).await.1.unwrap_err();
        assert_eq!(err.kind(), AgentErrorKind::Storage, "{err}");
        assert!(err.to_string().contains(message), "{err}");
        let as_agent::AgentError::Unsaved(unsaved) = err else { panic!("not an Unsaved error: {err}") };
        // Nothing of the turn reached the store...
        assert_eq!(storage.get_session(&k).await.unwrap().unwrap().revision(), first.revision);
        // ...but the turn is all there: its state (with the reply) and its messages.
        assert_eq!(unsaved.revision, first.revision);
        assert_eq!(unsaved.state.context.last().and_then(|m| m.get_text_content("")), Some("second".into()));
        assert_eq!(unsaved.messages.len(), 2, "the input and the reply");
        let state = unsaved.state.clone();
        let rev = runner.save_unsaved(&k, *unsaved).await.unwrap();
        let stored = storage.get_session(&k).await.unwrap().unwrap();
        assert_eq!((stored.revision(), stored.state), (rev, state));
        assert_eq!(storage.list_messages(&k, 0, 0).await.unwrap().len(), 4);
    }
}

#[tokio::test]
async fn a_resume_whose_log_lacks_the_reply_logs_each_result_once() {
    let faulty = faulty().await;
    let storage: SharedStorage = faulty.clone();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("x1", "remote", r#"{"text": "a"}"#), ScriptedTurn::new().text("thanks")],
        Toolkit::new().with(AllowTool::new("remote").external().arc()),
    );
    let k = key("no-log");
    // The park is saved, but its messages never reach the log.
    faulty.fail_messages.store(true, std::sync::atomic::Ordering::SeqCst);
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    assert!(parked.log_error.is_some());
    faulty.fail_messages.store(false, std::sync::atomic::Ordering::SeqCst);
    let ev = as_agent::ExternalExecutionResultEvent::new(
        parked.state.reply_id.clone(),
        vec![as_message::ToolResultBlock::new("x1", "remote", "ran", as_message::ToolResultState::Success)],
    );
    let done = turn(&runner, &agent, &k, ev).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    let logged: Vec<(String, String)> = storage
        .list_messages(&k, 0, 0)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.content.clone())
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some((r.output.text(), format!("{:?}", r.state))),
            _ => None,
        })
        .collect();
    assert_eq!(logged, vec![("ran".to_owned(), "Success".to_owned())], "the log's reply message");
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_counts_as_saved() {
    let faulty = faulty().await;
    let storage: SharedStorage = faulty.clone();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("first"), ScriptedTurn::new().text("second")], Toolkit::new());
    let k = key("lost-answer");
    turn(&runner, &agent, &k, Msg::user("user", "one")).await.1.unwrap();
    faulty.lose_next_answer.store(true, std::sync::atomic::Ordering::SeqCst);
    let t = turn(&runner, &agent, &k, Msg::user("user", "two")).await.1.unwrap();
    let stored = storage.get_session(&k).await.unwrap().unwrap();
    assert_eq!((stored.revision(), &stored.state), (t.revision.clone(), &t.state));
    assert_eq!(storage.list_messages(&k, 0, 0).await.unwrap().len(), 4, "the log was written too");
}

/// The same with an atomic `save_turn`: its lost answer hid the messages' write as well, which
/// landed with the state, so the runner must not write them a second time.
#[tokio::test]
async fn an_atomic_write_whose_answer_was_lost_logs_its_messages_once() {
    let faulty = faulty().await;
    faulty.atomic_turns.store(true, std::sync::atomic::Ordering::SeqCst);
    let storage: SharedStorage = faulty.clone();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(vec![ScriptedTurn::new().text("first"), ScriptedTurn::new().text("second")], Toolkit::new());
    let k = key("lost-atomic-answer");
    turn(&runner, &agent, &k, Msg::user("user", "one")).await.1.unwrap();
    faulty.lose_next_answer.store(true, std::sync::atomic::Ordering::SeqCst);
    let t = turn(&runner, &agent, &k, Msg::user("user", "two")).await.1.unwrap();
    assert!(t.log_error.is_none(), "{:?}", t.log_error);
    let stored = storage.get_session(&k).await.unwrap().unwrap();
    assert_eq!((stored.revision(), &stored.state), (t.revision.clone(), &t.state));
    let log: Vec<String> =
        storage.list_messages(&k, 0, 0).await.unwrap().iter().filter_map(|m| m.get_text_content("")).collect();
    assert_eq!(log, ["one", "first", "two", "second"]);
}

#[tokio::test]
async fn compressing_a_parked_context_is_refused() {
    let agent = Agent::builder(
        "Friday",
        "sys",
        Arc::new(ScriptedModel::new("m", [ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "x"}"#)])),
    )
    .toolkit(Toolkit::new().with(AllowTool::new("echo").ask().arc()))
    .build()
    .unwrap();
    let mut state = AgentState::default();
    let out = agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    let parked = state.clone();
    let err = agent.compress_context(&mut state).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Awaiting);
    assert_eq!(state, parked);
}

/// A model that reuses a call id within one reply (providers that number calls per response):
/// the second call still runs, under a fresh id, in the events and in the saved message alike.
#[tokio::test]
async fn a_call_id_the_model_reuses_in_one_reply_still_runs() {
    let agent = agent_with(
        vec![
            ScriptedTurn::new().tool_call("call_1", "echo", r#"{"text": "first"}"#),
            ScriptedTurn::new().tool_call("call_1", "echo", r#"{"text": "second"}"#),
            ScriptedTurn::new().text("done"),
        ],
        Toolkit::new().with(AllowTool::new("echo").arc()),
    );
    let mut state = AgentState::default();
    let mut events = Vec::new();
    let out =
        agent.reply_stream(&mut state, Msg::user("user", "go")).run_to_end(|e| events.push(e.clone())).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    let reply = state.context.last().unwrap();
    let calls: Vec<&str> = reply
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c.id.as_str()),
            _ => None,
        })
        .collect();
    let results = outputs(reply);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0], "call_1");
    assert_ne!(calls[1], "call_1");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, calls[0]);
    assert_eq!(results[1].0, calls[1]);
    assert!(results[1].1.contains("second"), "{results:?}");
    as_agent::testkit::check_history(&state.context).unwrap();
    // The events name the call by the id the message keeps.
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallStart(s) => Some(s.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, calls);
}

/// A state parked by AgentScope 2.0.4 after a `reply(None)`: the calls sit in the previous reply's
/// message (2.0.4 appends to the last own message whatever its id) while `reply_id` is the new
/// reply's. Confirming one call keeps its result next to it and leaves the other call parked.
#[tokio::test]
async fn a_park_in_an_earlier_replys_message_resumes_in_that_message() {
    let agent = Agent::builder(
        "Friday",
        "sys",
        Arc::new(ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "one"}"#).tool_call(
                    "c2",
                    "echo",
                    r#"{"text": "two"}"#,
                ),
                ScriptedTurn::new().text("c1 done"),
            ],
        )),
    )
    .toolkit(Toolkit::new().with(AllowTool::new("echo").ask().arc()))
    .build()
    .unwrap();
    let mut state = AgentState::default();
    let out = agent.reply_outcome(&mut state, Msg::user("user", "go")).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Parked);
    // As 2.0.4 would have it: the parked message keeps the earlier id, reply_id is the new reply's.
    let parked_msg_id = state.context.last().unwrap().id.clone();
    state.reply_id = "reply-of-the-wake-up-run".into();
    let c1 = match &state.context.last().unwrap().content[0] {
        ContentBlock::ToolCall(c) => c.clone(),
        other => panic!("{other:?}"),
    };
    let confirm = UserConfirmResultEvent::new(state.reply_id.clone(), vec![as_agent::ConfirmResult::approve(c1)]);
    let out = agent.reply_outcome(&mut state, confirm).await.unwrap();
    // c2 still asks; c1 ran and its result sits in the message that holds c1.
    assert_eq!(out.status, ReplyStatus::Parked);
    assert!(agent.is_parked(&state));
    let msg = state.context.iter().find(|m| m.id == parked_msg_id).unwrap();
    let result = msg.content.iter().find_map(|b| match b {
        ContentBlock::ToolResult(r) if r.id == "c1" => Some(r.output.text()),
        _ => None,
    });
    assert!(result.is_some_and(|t| t.contains("one")), "{msg:?}");
    // Then c2: the reply completes and the history pairs every call with one result.
    let c2 = match &msg.content[1] {
        ContentBlock::ToolCall(c) => c.clone(),
        other => panic!("{other:?}"),
    };
    let confirm = UserConfirmResultEvent::new(state.reply_id.clone(), vec![as_agent::ConfirmResult::approve(c2)]);
    let out = agent.reply_outcome(&mut state, confirm).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    as_agent::testkit::check_history(&state.context).unwrap();
}

/// A resume whose log copy of the reply message is behind the state (the previous resume's log
/// write failed after its state was saved) continues from the state's copy: the log ends with
/// every call of the reply and its result.
#[tokio::test]
async fn a_resume_whose_log_copy_is_behind_continues_from_the_state() {
    let faulty = faulty().await;
    let storage: SharedStorage = faulty.clone();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![
            ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "one"}"#),
            ScriptedTurn::new().tool_call("c2", "needs_ok", r#"{"text": "two"}"#),
            ScriptedTurn::new().text("done"),
        ],
        Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()),
    );
    let k = key("log-behind");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let approve = |id: &str, input: &str, reply_id: &str| {
        UserConfirmResultEvent::new(
            reply_id,
            vec![as_agent::ConfirmResult::approve(as_message::ToolCallBlock::new(id, "needs_ok", input))],
        )
    };
    // c1 runs and the model asks for c2: the state is saved, the log write fails.
    faulty.fail_messages.store(true, std::sync::atomic::Ordering::SeqCst);
    let again = turn(&runner, &agent, &k, approve("c1", r#"{"text": "one"}"#, &parked.state.reply_id)).await.1.unwrap();
    assert_eq!(again.status, ReplyStatus::Parked);
    assert!(again.log_error.is_some());
    faulty.fail_messages.store(false, std::sync::atomic::Ordering::SeqCst);
    let done = turn(&runner, &agent, &k, approve("c2", r#"{"text": "two"}"#, &again.state.reply_id)).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    let shape = |m: &Msg| -> Vec<String> {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(format!("call {} {:?}", c.id, c.state)),
                ContentBlock::ToolResult(r) => Some(format!("result {} {:?}", r.id, r.state)),
                _ => None,
            })
            .collect()
    };
    let in_state = done.state.context.iter().find(|m| m.id == done.state.reply_id).unwrap();
    let logged = storage.get_message(&k, &done.state.reply_id).await.unwrap().expect("the reply is logged");
    let mut want = shape(in_state);
    let mut got = shape(&logged);
    want.sort();
    got.sort();
    assert_eq!(got, want, "the log's reply message against the state's");
    assert_eq!(got.len(), 4, "{got:?}");
}

/// A resume's write whose answer was lost, on a store with a two-step `save_turn`: the state
/// landed, the log did not; the log already ends with the parked version of the reply message
/// (same id), so the runner must compare whole messages and write the completed one.
#[tokio::test]
async fn a_lost_answer_of_a_resume_on_a_two_step_store_still_logs_the_completed_reply() {
    let faulty = faulty().await;
    let storage: SharedStorage = faulty.clone();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![ScriptedTurn::new().tool_call("c1", "needs_ok", r#"{"text": "one"}"#), ScriptedTurn::new().text("done")],
        Toolkit::new().with(AllowTool::new("needs_ok").ask().arc()),
    );
    let k = key("lost-resume-answer");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let approve = UserConfirmResultEvent::new(
        parked.state.reply_id.clone(),
        vec![as_agent::ConfirmResult::approve(as_message::ToolCallBlock::new("c1", "needs_ok", r#"{"text": "one"}"#))],
    );
    faulty.lose_next_answer.store(true, std::sync::atomic::Ordering::SeqCst);
    let done = turn(&runner, &agent, &k, approve).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    assert!(done.log_error.is_none(), "{:?}", done.log_error);
    let log = storage.list_messages(&k, 0, 0).await.unwrap();
    let last = log.last().unwrap();
    assert_eq!(last.id, parked.state.reply_id);
    assert_eq!(last.get_text_content("").as_deref(), Some("done"), "the log's reply is the completed one: {last:?}");
}

/// A resume dropped after its first output event (an SSE client gone) leaves the state waiting
/// for the call (its result never reached the state) and the log's copy holding that output.
/// Sent again, the result is logged once, as the state has it.
#[tokio::test]
async fn output_of_a_dropped_resume_is_logged_once_when_the_result_is_sent_again() {
    use as_agent::MsgEventExt as _;
    use futures::StreamExt as _;
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = agent_with(
        vec![
            ScriptedTurn::new().tool_call("c1", "remote", r#"{"text": "a"}"#).tool_call(
                "c2",
                "remote",
                r#"{"text": "b"}"#,
            ),
            ScriptedTurn::new().text("done"),
        ],
        Toolkit::new().with(AllowTool::new("remote").concurrent().external().arc()),
    );
    let k = key("dropped-resume");
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    let result = |id: &str, text: &str| {
        as_message::ToolResultBlock::new(id, "remote", text, as_message::ToolResultState::Success)
    };
    // What a runner whose future was dropped after the first output event writes: the state as
    // the reply left it, and the log's reply message with the events it had streamed.
    let rec = storage.get_session(&k).await.unwrap().unwrap();
    let mut state = rec.state.clone();
    let mut logged = storage.get_message(&k, &state.reply_id).await.unwrap().unwrap();
    let only_c1 = as_agent::ExternalExecutionResultEvent::new(state.reply_id.clone(), vec![result("c1", "ran a")]);
    logged.append_event(&AgentEvent::ExternalExecutionResult(only_c1.clone()));
    {
        let mut stream = agent.reply_stream(&mut state, only_c1);
        while let Some(ev) = stream.next().await {
            let ev = ev.unwrap();
            logged.append_event(&ev);
            if matches!(ev, AgentEvent::ToolResultTextDelta(_)) {
                break;
            }
        }
    }
    assert!(agent.is_parked(&state), "both calls still wait");
    storage.update_session_state(&k, &state, Some(&rec.revision())).await.unwrap();
    storage.upsert_message(&k, &logged).await.unwrap();
    // The client sends both results again.
    let both = as_agent::ExternalExecutionResultEvent::new(
        state.reply_id.clone(),
        vec![result("c1", "ran a"), result("c2", "ran b")],
    );
    let done = turn(&runner, &agent, &k, both).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    let logged = storage.get_message(&k, &done.state.reply_id).await.unwrap().unwrap();
    assert_eq!(outputs(&logged), [("c1".to_owned(), "ran a".to_owned()), ("c2".to_owned(), "ran b".to_owned())]);
}

/// `(id, output text)` of each tool result of `m`, in block order.
fn outputs(m: &Msg) -> Vec<(String, String)> {
    m.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some((r.id.clone(), r.output.text())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn update_state_changes_a_session_between_turns_under_the_lock() {
    let storage = store().await;
    let lock = Arc::new(RecordingLock::default());
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(lock.clone());
    let agent = agent_with(vec![ScriptedTurn::new().text("hi")], Toolkit::new());
    let k = key("settings");
    turn(&runner, &agent, &k, Msg::user("user", "hello")).await.1.unwrap();
    let state =
        runner.update_state(&k, |s| s.permission_context.mode = as_message::PermissionMode::Explore).await.unwrap();
    assert_eq!(state.permission_context.mode, as_message::PermissionMode::Explore);
    assert_eq!(storage.get_session(&k).await.unwrap().unwrap().state, state);
    assert_eq!(state.context.len(), 2, "the rest of the state is as stored");
    let missing = runner.update_state(&key("nope"), |_| {}).await.unwrap_err();
    assert_eq!(missing.kind(), AgentErrorKind::Storage);
    assert_eq!(
        missing.storage_error().map(as_storage::StorageError::kind),
        Some(as_storage::StorageErrorKind::NotFound)
    );
    assert!(storage.get_session(&key("nope")).await.unwrap().is_none());
    assert_eq!(
        *lock.log.lock().unwrap(),
        [
            "acquire settings",
            "release settings",
            "acquire settings",
            "release settings",
            "acquire nope",
            "release nope"
        ]
    );
}

/// A lock another process holds: acquiring it never finishes.
#[derive(Debug, Default)]
struct HeldElsewhere;

#[async_trait]
impl SessionLock for HeldElsewhere {
    async fn acquire(&self, _key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        std::future::pending().await
    }
}

/// The cancel token also ends the wait for the session lock (a user's Ctrl-C while another
/// process runs the session): `Interrupted`, and nothing is created or written.
#[tokio::test]
async fn cancelling_while_waiting_for_the_lock_ends_the_turn_and_writes_nothing() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(Arc::new(HeldElsewhere));
    let agent = agent_with(vec![ScriptedTurn::new().text("ok")], Toolkit::new());
    let cancel = tokio_util::sync::CancellationToken::new();
    let k = key("waiting");
    let waiting = {
        let cancel = cancel.clone();
        async move { runner.run_turn_with_cancel(&agent, &k, Msg::user("user", "two").into(), &mut |_| {}, cancel).await }
    };
    let cancelled = async { cancel.cancel() };
    let (r, ()) = tokio::time::timeout(std::time::Duration::from_secs(30), async { tokio::join!(waiting, cancelled) })
        .await
        .expect("the turn kept waiting for the lock after it was cancelled");
    assert_eq!(r.unwrap_err().kind(), AgentErrorKind::Interrupted);
    assert!(storage.get_session(&key("waiting")).await.unwrap().is_none(), "nothing was created");
}

/// Tool-call ids repeat across replies (providers number calls per response, `CallIds` only keeps
/// them apart within one reply): a resume is judged against the parked reply's calls (spec §4, §7),
/// so an earlier reply's finished call with the same id does not make it a conflict. The same
/// answer sent again after the call was answered still is one (also once the session has moved
/// on), for a confirmation and for an external result alike.
#[tokio::test]
async fn a_call_id_an_earlier_reply_used_does_not_make_a_resume_conflict() {
    let confirm = |reply_id: String| -> ReplyInput {
        let call = as_message::ToolCallBlock::new("c1", "waits", r#"{"text": "b"}"#);
        UserConfirmResultEvent::new(reply_id, vec![as_agent::ConfirmResult::approve(call)]).into()
    };
    let external = |reply_id: String| -> ReplyInput {
        let result = as_message::ToolResultBlock::new("c1", "waits", "B", as_message::ToolResultState::Success);
        as_agent::ExternalExecutionResultEvent::new(reply_id, vec![result]).into()
    };
    type Answer = fn(String) -> ReplyInput;
    let cases: [(&str, AllowTool, Answer); 2] = [
        ("confirmation", AllowTool::new("waits").ask(), confirm),
        ("external result", AllowTool::new("waits").external(), external),
    ];
    for (what, waits, answer) in cases {
        let storage = store().await;
        let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
        let agent = agent_with(
            vec![
                ScriptedTurn::new().tool_call("c1", "echo", r#"{"text": "a"}"#),
                ScriptedTurn::new().text("ok"),
                ScriptedTurn::new().tool_call("c1", "waits", r#"{"text": "b"}"#),
                ScriptedTurn::new().text("done"),
                ScriptedTurn::new().text("more"),
            ],
            Toolkit::new().with(AllowTool::new("echo").arc()).with(waits.arc()),
        );
        let k = key("reused-id");
        let first = turn(&runner, &agent, &k, Msg::user("user", "a")).await.1.unwrap();
        assert_eq!(first.status, ReplyStatus::Completed, "{what}");
        let parked = turn(&runner, &agent, &k, Msg::user("user", "b")).await.1.unwrap();
        assert_eq!(parked.status, ReplyStatus::Parked, "{what}");
        let done = turn(&runner, &agent, &k, answer(parked.state.reply_id.clone())).await.1;
        assert_eq!(done.map(|d| d.status).map_err(|e| e.to_string()), Ok(ReplyStatus::Completed), "{what}");
        // The same answer again (another process that lost the race): a conflict, nothing written.
        let before = footprint(&storage, &k).await;
        let late = turn(&runner, &agent, &k, answer(parked.state.reply_id.clone())).await.1;
        assert_eq!(late.unwrap_err().kind(), AgentErrorKind::Conflict, "{what}");
        assert_eq!(footprint(&storage, &k).await, before, "{what}");
        // Still one after the session moved on to another reply: the answer names the answered one.
        assert_eq!(turn(&runner, &agent, &k, Msg::user("user", "c")).await.1.unwrap().status, ReplyStatus::Completed);
        let later = turn(&runner, &agent, &k, answer(parked.state.reply_id.clone())).await.1;
        assert_eq!(later.unwrap_err().kind(), AgentErrorKind::Conflict, "{what}");
    }
}

/// A client that disconnects (the turn future is dropped) and at once sends its next message: the
/// next turn on the same runner waits for the dropped turn's background write before it loads the
/// session, so it neither loses that turn's messages nor fails with a conflict after running.
#[tokio::test]
async fn a_turn_right_after_a_dropped_one_continues_from_its_write() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let k = key("dropped-then-next");
    let paused = pausing_agent(vec![ScriptedTurn::new().text("two")]);
    drop_turn_midway(&runner, &paused, &k, "one").await;
    let agent = &paused.0;
    // No wait_background_writes: the next message comes straight away.
    let next = turn(&runner, agent, &k, Msg::user("user", "two")).await.1;
    let next = next.map_err(|e| e.to_string()).unwrap();
    assert_eq!(next.status, ReplyStatus::Completed);
    let stored = storage.get_session(&k).await.unwrap().unwrap().state;
    assert_eq!(stored, next.state);
    let users: Vec<Option<String>> =
        stored.context.iter().filter(|m| m.role == as_message::Role::User).map(|m| m.get_text_content("")).collect();
    assert_eq!(users, vec![Some("one".to_owned()), Some("two".to_owned())], "both turns are kept");
    assert_eq!(storage.list_messages(&k, 0, 0).await.unwrap().len(), 4, "both turns are logged");
    assert_eq!(runner.wait_background_writes().await, 0, "nothing left running");
}

/// A compression during a reply that keeps only the tail of the reply message in the context
/// (the split runs inside the boundary message, §9.2), then a park: the resume continues the log's
/// copy, which holds the whole message, not the context's tail. The log keeps the calls and results
/// compressed out of the context, through the resume and after the reply ends.
#[tokio::test]
async fn a_resume_after_a_compression_split_the_reply_keeps_its_logged_head() {
    let storage = store().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let summary = serde_json::json!({
        "task_overview": "Echoes.", "current_state": "c1 echoed.", "important_discoveries": "None.",
        "next_steps": "Echo again.", "context_to_preserve": "None.",
    });
    let long = format!(r#"{{"text": "{}"}}"#, "x".repeat(600));
    let model = Arc::new(
        ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().tool_call("c1", "echo", long.clone()),
                ScriptedTurn::new().text("y".repeat(1600)).tool_call("c2", "echo", r#"{"text": "two"}"#),
                ScriptedTurn::new().tool_call("so", as_model::STRUCTURED_OUTPUT_TOOL, summary.to_string()),
                ScriptedTurn::new().tool_call("c3", "needs_ok", r#"{"text": "three"}"#),
                ScriptedTurn::new().tool_call("c4", "needs_ok", r#"{"text": "four"}"#),
                ScriptedTurn::new().text("done"),
            ],
        )
        .with_context_size(1500),
    );
    let agent = Agent::builder("Friday", "sys", model.clone())
        .toolkit(Toolkit::new().with(AllowTool::new("echo").arc()).with(AllowTool::new("needs_ok").ask().arc()))
        .context_config(as_agent::ContextConfig::default().with_ratios(0.4, 0.2))
        .build()
        .unwrap();
    let k = key("compressed-reply");
    let approve = |id: &str, input: &str, reply_id: &str| {
        UserConfirmResultEvent::new(
            reply_id,
            vec![as_agent::ConfirmResult::approve(as_message::ToolCallBlock::new(id, "needs_ok", input))],
        )
    };
    let shape = |m: &Msg| -> Vec<String> {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(format!("call {} {:?}", c.id, c.state)),
                ContentBlock::ToolResult(r) => Some(format!("result {} {:?} {}", r.id, r.state, r.output.text().len())),
                ContentBlock::Text(t) => Some(format!("text {}", t.text.len())),
                _ => None,
            })
            .collect()
    };
    let parked = turn(&runner, &agent, &k, Msg::user("user", "go")).await.1.unwrap();
    assert_eq!(parked.status, ReplyStatus::Parked);
    // The compression ran inside the reply and kept only the tail of its message: c1, its result
    // and the text went into the summary.
    assert!(parked.state.summary.text().contains("Echoes."), "compressed: {:?}", parked.state.summary);
    let reply_id = parked.state.reply_id.clone();
    let in_state = parked.state.context.iter().find(|m| m.id == reply_id).unwrap();
    assert_eq!(shape(in_state), ["call c2 Finished", "result c2 Success 9", "call c3 Asking"]);
    let head = ["call c1 Finished", "result c1 Success 606", "text 1600", "call c2 Finished", "result c2 Success 9"];
    let logged = storage.get_message(&k, &reply_id).await.unwrap().expect("the reply is logged");
    assert_eq!(shape(&logged), [&head[..], &["call c3 Asking"]].concat());
    // c3 runs and the model asks for c4: the log keeps the head.
    let again = turn(&runner, &agent, &k, approve("c3", r#"{"text": "three"}"#, &reply_id)).await.1.unwrap();
    assert_eq!(again.status, ReplyStatus::Parked);
    assert_eq!(again.state.reply_id, reply_id);
    let logged = storage.get_message(&k, &reply_id).await.unwrap().expect("the reply is logged");
    let resumed = ["call c3 Finished", "result c3 Success 11", "call c4 Asking"];
    assert_eq!(shape(&logged), [&head[..], &resumed[..]].concat(), "after the resume");
    // c4 runs and the reply ends.
    let done = turn(&runner, &agent, &k, approve("c4", r#"{"text": "four"}"#, &reply_id)).await.1.unwrap();
    assert_eq!(done.status, ReplyStatus::Completed);
    let logged = storage.get_message(&k, &reply_id).await.unwrap().expect("the reply is logged");
    let ended = ["call c3 Finished", "result c3 Success 11", "call c4 Finished", "result c4 Success 10", "text 4"];
    assert_eq!(shape(&logged), [&head[..], &ended[..]].concat(), "after the reply ended");
    as_agent::testkit::check_history(std::slice::from_ref(&logged)).unwrap();
}
