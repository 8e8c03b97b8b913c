//! Load, latency and memory figures that criterion cannot express, for `cargo xtask bench`.
//!
//! Each invocation measures one thing in a fresh process (so peak RSS is its own) and prints one
//! `BENCH_JSON {...}` line per figure. Modes (first argument after `--`):
//!
//! * `throughput STORE SESSIONS MESSAGES SECONDS`: turns per second (get_session + update_session_state)
//!   with SESSIONS tasks each driving its own session, for SECONDS, on `sqlite` or `redis`.
//! * `runner STORE MESSAGES ITERS`: a full runner turn (load, reply with a constant model, conditional
//!   write, message log) over a state of MESSAGES messages; median and quartiles of ITERS turns.
//! * `rss-parked COUNT`: peak RSS with COUNT parked sessions (20 messages, an `asking` tool call)
//!   loaded from SQLite at once.
//! * `rss-reply MESSAGES`: peak RSS of one reply over a MESSAGES-message state (SQLite, constant model).
//! * `dump-state MESSAGES PATH`: writes the conversation-shaped state as JSON (for the Python comparison).
//!
//! Every figure names the global allocator it ran on: the system allocator, or mimalloc (the
//! `agentscope` binary's) with `--features timing-mimalloc`.
//!
//! Run by `cargo xtask bench` (both allocators); by hand:
//! `cargo bench -p as-tests --bench load -- throughput sqlite 64 10 2`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench harness code

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use as_agent::{Agent, ReplyInput, SessionRunner};
use as_message::{ContentBlock, Msg, ToolCallBlock, ToolCallState};
use as_model::ConstantModel;
use as_state::AgentState;
use as_state::test_utils::conversation_state;
use as_storage::{SessionConfig, SessionKey, SharedStorage, UpsertSession};

/// Keeps whatever backs a store (temp dir, redis-server) alive.
enum Backing {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Redis(#[allow(dead_code)] as_storage_redis::testing::RedisServer),
}

async fn open_store(kind: &str) -> Option<(SharedStorage, Backing)> {
    match kind {
        "sqlite" => {
            let dir = tempfile::tempdir().unwrap();
            let s: SharedStorage = Arc::new(as_storage_sqlite::SqliteStorage::new(dir.path().join("bench.db")));
            s.open().await.unwrap();
            Some((s, Backing::Dir(dir)))
        }
        "redis" => {
            let server = as_storage_redis::testing::RedisServer::start()?;
            let s: SharedStorage = Arc::new(as_storage_redis::RedisStorage::from_url(&server.url()).unwrap());
            s.open().await.unwrap();
            Some((s, Backing::Redis(server)))
        }
        "memory" => {
            let s: SharedStorage = Arc::new(as_storage::InMemoryStorage::new());
            s.open().await.unwrap();
            Some((s, Backing::Dir(tempfile::tempdir().unwrap())))
        }
        other => panic!("unknown store {other}"),
    }
}

/// With `--features timing-mimalloc`: mimalloc, the `agentscope` binary's allocator.
#[cfg(feature = "timing-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The global allocator this build measures (every figure names it).
const ALLOCATOR: &str = if cfg!(feature = "timing-mimalloc") { "mimalloc" } else { "system" };

fn emit(mut value: serde_json::Value) {
    if let Some(figure) = value.as_object_mut() {
        figure.insert("allocator".to_owned(), ALLOCATOR.into());
    }
    println!("BENCH_JSON {value}");
}

/// Peak and current resident set size of this process, in KiB (Linux `/proc/self/status`).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

async fn seed(storage: &SharedStorage, key: &SessionKey, state: AgentState) {
    let req =
        UpsertSession::new(key.owner(), SessionConfig::new("ws")).with_session_id(&key.session_id).with_state(state);
    storage.upsert_session(req).await.unwrap();
}

async fn throughput(store: &str, sessions: usize, messages: usize, seconds: f64) {
    let Some((storage, _backing)) = open_store(store).await else {
        emit(serde_json::json!({"mode": "throughput", "store": store, "skipped": "redis-server not found"}));
        return;
    };
    let state = conversation_state(messages);
    let keys: Vec<SessionKey> =
        (0..sessions).map(|i| SessionKey::new("bench-user", "bench-agent", format!("s{i}"))).collect();
    for k in &keys {
        seed(&storage, k, state.clone()).await;
    }
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for k in keys {
        let storage = Arc::clone(&storage);
        let done = Arc::clone(&done);
        let errors = Arc::clone(&errors);
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let rec = storage.get_session(&k).await.unwrap().unwrap();
                let rev = rec.revision();
                match storage.update_session_state(&k, &rec.state, Some(&rev)).await {
                    Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let turns = done.load(Ordering::Relaxed);
    emit(serde_json::json!({
        "mode": "throughput", "store": store, "sessions": sessions, "messages": messages,
        "seconds": elapsed, "turns": turns, "errors": errors.load(Ordering::Relaxed),
        "turns_per_sec": turns as f64 / elapsed,
    }));
}

fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

async fn runner(store: &str, messages: usize, iters: usize) {
    let Some((storage, _backing)) = open_store(store).await else {
        emit(serde_json::json!({"mode": "runner", "store": store, "skipped": "redis-server not found"}));
        return;
    };
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = Agent::builder("Friday", "sys", Arc::new(ConstantModel::new("constant", "Sure."))).build().unwrap();
    let key = SessionKey::new("bench-user", "bench-agent", "runner");
    let base = conversation_state(messages);
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters + 2 {
        seed(&storage, &key, base.clone()).await;
        let t = Instant::now();
        runner.run_turn(&agent, &key, ReplyInput::user_text("next?"), &mut |_| {}).await.unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    samples.drain(..2); // warm-up
    let (q1, median, q3) = quartiles(samples);
    emit(serde_json::json!({
        "mode": "runner", "store": store, "messages": messages, "iters": iters,
        "median_ms": median, "q1_ms": q1, "q3_ms": q3,
    }));
}

fn parked_state(i: usize) -> AgentState {
    let mut state = conversation_state(20);
    state.reply_id = format!("reply{i:027}");
    let mut call = ToolCallBlock::new(format!("call_park_{i}"), "Bash", r#"{"command":"npm run build"}"#);
    call.state = ToolCallState::Asking;
    let mut msg = Msg::assistant("Friday", "I need to run the build.");
    msg.id.clone_from(&state.reply_id);
    msg.content.push(ContentBlock::ToolCall(call));
    state.context.push(msg);
    state
}

async fn rss_parked(count: usize) {
    let (storage, _backing) = open_store("sqlite").await.unwrap();
    let keys: Vec<SessionKey> =
        (0..count).map(|i| SessionKey::new("bench-user", "bench-agent", format!("p{i}"))).collect();
    for (i, k) in keys.iter().enumerate() {
        seed(&storage, k, parked_state(i)).await;
    }
    let (_, before) = rss_kib();
    let mut loaded = Vec::with_capacity(count);
    for k in &keys {
        let rec = storage.get_session(k).await.unwrap().unwrap();
        assert!(rec.state.has_awaiting_tool_calls("Friday"));
        loaded.push(rec);
    }
    let (peak, after) = rss_kib();
    let bytes: usize = loaded.iter().map(|r| r.to_canonical_json().len()).sum();
    emit(serde_json::json!({
        "mode": "rss-parked", "sessions": count, "peak_rss_kib": peak, "rss_before_load_kib": before,
        "rss_after_load_kib": after, "json_bytes": bytes,
        "kib_per_session": (after.saturating_sub(before)) as f64 / count as f64,
    }));
    drop(loaded);
}

async fn rss_reply(messages: usize) {
    let (storage, _backing) = open_store("sqlite").await.unwrap();
    let key = SessionKey::new("bench-user", "bench-agent", "big");
    seed(&storage, &key, conversation_state(messages)).await;
    let (_, before) = rss_kib();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let agent = Agent::builder("Friday", "sys", Arc::new(ConstantModel::new("constant", "Sure."))).build().unwrap();
    runner.run_turn(&agent, &key, ReplyInput::user_text("next?"), &mut |_| {}).await.unwrap();
    let (peak, after) = rss_kib();
    let state_bytes = as_message::to_json(&conversation_state(messages)).len();
    emit(serde_json::json!({
        "mode": "rss-reply", "messages": messages, "state_bytes": state_bytes,
        "peak_rss_kib": peak, "rss_before_kib": before, "rss_after_kib": after,
    }));
}

fn main() {
    // `cargo bench` passes `--bench`; ignore flags.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let num = |i: usize, d: f64| args.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(d);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    match arg(0).as_str() {
        "throughput" => rt.block_on(throughput(&arg(1), num(2, 64.0) as usize, num(3, 10.0) as usize, num(4, 2.0))),
        "runner" => rt.block_on(runner(&arg(1), num(2, 10.0) as usize, num(3, 30.0) as usize)),
        "rss-parked" => rt.block_on(rss_parked(num(1, 1000.0) as usize)),
        "rss-reply" => rt.block_on(rss_reply(num(1, 1000.0) as usize)),
        "dump-state" => {
            // The conversation-shaped state as JSON, for the Python side of the comparison.
            let json = as_message::to_json(&conversation_state(num(1, 10.0) as usize));
            std::fs::write(arg(2), json).unwrap();
        }
        "" => println!("load bench: pass a mode (see the file's docs); nothing measured"),
        other => panic!("unknown mode {other}"),
    }
}
