//! The per-turn hot path on SQLite: `get_session` + `update_session_state` (with CAS) on a session
//! of 10 / 100 / 1000 messages of realistic conversation, and turns per second with 64
//! sessions driven concurrently.
//!
//! `cargo bench -p as-storage-sqlite --bench turn` (add `-- --quick` for a short run).

// Benchmarks are test code: failing loudly on setup errors is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use as_message::{ContentBlock, JsonValue, Msg, TextOrBlocks, ToolCallBlock, ToolResultBlock, ToolResultState};
use as_state::AgentState;
use as_storage::{Owner, SessionConfig, SessionKey, StorageBase, UpsertSession};
use as_storage_sqlite::{SqliteOptions, SqliteStorage, Synchronous};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// A coding-assistant conversation of `messages` messages, in cycles of four: a user question,
/// an assistant tool call, the tool's result (a 40-line file), and the assistant's answer.
fn conversation(messages: usize) -> AgentState {
    let mut st = AgentState::default();
    let file: String = (0..40).map(|l| format!("    let value_{l} = compute(input, {l}); // step {l}\n")).collect();
    for i in 0..messages {
        let turn = i / 4;
        let m = match i % 4 {
            0 => Msg::user(
                "user",
                format!("Can you explain what src/module_{turn}.rs does and whether it handles errors?"),
            ),
            1 => {
                let mut a = Msg::assistant("Friday", format!("I'll read src/module_{turn}.rs first."));
                a.content.push(ContentBlock::ToolCall(ToolCallBlock::new(
                    format!("call_{turn}"),
                    "Read",
                    format!(r#"{{"file_path":"src/module_{turn}.rs","limit":200}}"#),
                )));
                a
            }
            2 => {
                let mut r = Msg::assistant("Friday", "");
                r.content = vec![ContentBlock::ToolResult(ToolResultBlock::new(
                    format!("call_{turn}"),
                    "Read",
                    TextOrBlocks::Text(file.clone()),
                    ToolResultState::Success,
                ))];
                r
            }
            _ => Msg::assistant(
                "Friday",
                format!(
                    "src/module_{turn}.rs computes forty intermediate values from its input. It does not \
                     handle errors: `compute` can panic on overflow, so wrap it in a checked variant and \
                     return a Result. {}",
                    "Details follow. ".repeat(8)
                ),
            ),
        };
        st.context.push(m);
    }
    st.middle_context.insert("turns".into(), JsonValue::from((messages / 4) as u64));
    st
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn setup(
    dir: &tempfile::TempDir,
    opts: SqliteOptions,
    sessions: usize,
    messages: usize,
) -> (SqliteStorage, Vec<SessionKey>) {
    let store = SqliteStorage::with_options(dir.path().join("bench.db"), opts);
    store.open().await.unwrap();
    let owner = Owner::new("bench-user", "bench-agent");
    let state = conversation(messages);
    let mut keys = Vec::new();
    for _ in 0..sessions {
        let rec = store
            .upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws")).with_state(state.clone()))
            .await
            .unwrap();
        keys.push(owner.session(rec.id));
    }
    (store, keys)
}

/// One chat turn as the runner does it: load, change the state, write it back with CAS.
/// The state keeps its size (the last message is rewritten) so every iteration is comparable.
async fn turn(store: &SqliteStorage, key: &SessionKey, n: u64) {
    let rec = store.get_session(key).await.unwrap().expect("session exists");
    let rev = rec.revision();
    let mut state = rec.state;
    if let Some(last) = state.context.last_mut() {
        last.metadata.insert("turn".into(), JsonValue::from(n));
    }
    state.cur_iter = (n % 10) as i64;
    store.update_session_state(key, &state, Some(&rev)).await.unwrap();
}

fn single_session(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("sqlite_turn");
    group.sample_size(30).measurement_time(Duration::from_secs(6));
    for (sync, label) in [(Synchronous::Normal, "normal"), (Synchronous::Full, "full")] {
        for messages in [10usize, 100, 1000] {
            if sync == Synchronous::Full && messages != 100 {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let (store, keys) = rt.block_on(setup(&dir, SqliteOptions::default().with_synchronous(sync), 1, messages));
            let size = rt.block_on(store.get_session(&keys[0])).unwrap().unwrap().to_canonical_json().len();
            println!("sqlite_turn/{label}/{messages}: record is {size} bytes");
            group.throughput(Throughput::Elements(1));
            let mut n = 0u64;
            group.bench_function(BenchmarkId::new(format!("get+update/{label}"), messages), |b| {
                b.to_async(&rt).iter(|| {
                    n += 1;
                    turn(&store, &keys[0], n)
                })
            });
        }
    }
    group.finish();
}

fn concurrent_sessions(c: &mut Criterion) {
    const SESSIONS: usize = 64;
    const MESSAGES: usize = 100;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (store, keys) = rt.block_on(setup(&dir, SqliteOptions::default(), SESSIONS, MESSAGES));
    let store = Arc::new(store);
    let keys = Arc::new(keys);
    let mut group = c.benchmark_group("sqlite_concurrent");
    group.sample_size(20).measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(SESSIONS as u64));
    group.bench_function(BenchmarkId::new("64_sessions_one_turn_each", MESSAGES), |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (store, keys) = (Arc::clone(&store), Arc::clone(&keys));
            async move {
                let start = Instant::now();
                for it in 0..iters {
                    let mut set = tokio::task::JoinSet::new();
                    for k in 0..SESSIONS {
                        let (store, keys) = (Arc::clone(&store), Arc::clone(&keys));
                        set.spawn(async move { turn(&store, &keys[k], it).await });
                    }
                    while let Some(r) = set.join_next().await {
                        r.unwrap();
                    }
                }
                start.elapsed()
            }
        })
    });
    group.finish();
}

/// The serialization floor any backend pays per turn: parse the stored record, encode the new one.
fn json_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("json_floor");
    group.sample_size(30).measurement_time(Duration::from_secs(4));
    for messages in [10usize, 100, 1000] {
        let rec = as_storage::SessionRecord::from_parts(
            as_storage::SessionMeta {
                id: "s".into(),
                updated_at: as_storage::Timestamp::now(),
                created_at: as_storage::Timestamp::now(),
                user_id: "u".into(),
                agent_id: "a".into(),
                source: as_storage::SessionSource::User,
                source_schedule_id: None,
                team_id: None,
                config: SessionConfig::new("ws"),
            },
            conversation(messages),
        );
        let text = rec.to_canonical_json();
        group.bench_function(BenchmarkId::new("parse+encode", messages), |b| {
            b.iter(|| {
                let r: as_storage::SessionRecord = as_message::from_json(std::hint::black_box(&text)).unwrap();
                std::hint::black_box(as_storage::encode_record(&r.meta(), &r.state))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, single_session, concurrent_sessions, json_floor);
criterion_main!(benches);
