//! The per-turn hot path on SQLite: `get_session` + `update_session_state` (with CAS) on a session
//! of 10 / 100 / 1000 messages, and turns per second with 64 sessions driven concurrently.
//!
//! Two state shapes: `plain` is exactly the Redis benchmark's (`as-storage-redis/benches/turn.rs`:
//! user messages of ~250 bytes of text), so the figures compare; `tools` is the shared conversation builder
//! `as_state::test_utils::conversation_state` (question, tool call, tool result, answer).
//!
//! `cargo bench -p as-storage-sqlite --bench turn` (add `-- --quick` for a short run).

// Benchmarks are test code: failing loudly on setup errors is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use as_message::{JsonValue, Msg};
use as_state::AgentState;
use as_storage::{Owner, SessionConfig, SessionKey, StorageBase, UpsertSession};
use as_storage_sqlite::{SqliteOptions, SqliteStorage, Synchronous};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// The Redis benchmark's state: `n` user messages of ~250 bytes of text.
fn plain(n: usize) -> AgentState {
    let mut s = AgentState::default();
    for i in 0..n {
        s.context.push(Msg::user("user", format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(9))));
    }
    s
}

#[derive(Clone, Copy)]
enum Shape {
    Plain,
    Tools,
}

impl Shape {
    fn state(self, n: usize) -> AgentState {
        match self {
            Self::Plain => plain(n),
            Self::Tools => as_state::test_utils::conversation_state(n),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Tools => "tools",
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn setup(
    dir: &tempfile::TempDir,
    opts: SqliteOptions,
    sessions: usize,
    shape: Shape,
    messages: usize,
) -> (SqliteStorage, Vec<SessionKey>) {
    let store = SqliteStorage::with_options(dir.path().join("bench.db"), opts);
    store.open().await.unwrap();
    let owner = Owner::new("bench-user", "bench-agent");
    let state = shape.state(messages);
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
    group.sample_size(30).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    let cases = [
        (Shape::Plain, Synchronous::Normal, 10usize),
        (Shape::Plain, Synchronous::Normal, 100),
        (Shape::Plain, Synchronous::Normal, 1000),
        (Shape::Tools, Synchronous::Normal, 10),
        (Shape::Tools, Synchronous::Normal, 100),
        (Shape::Tools, Synchronous::Normal, 1000),
        (Shape::Plain, Synchronous::Full, 100),
    ];
    for (shape, sync, messages) in cases {
        let label = format!("{}/{}", shape.name(), if sync == Synchronous::Full { "sync_full" } else { "sync_normal" });
        let dir = tempfile::tempdir().unwrap();
        let (store, keys) =
            rt.block_on(setup(&dir, SqliteOptions::default().with_synchronous(sync), 1, shape, messages));
        let size = rt.block_on(store.get_session(&keys[0])).unwrap().unwrap().to_canonical_json().len();
        println!("sqlite_turn/{label}/{messages}: record is {size} bytes");
        group.throughput(Throughput::Elements(1));
        let mut n = 0u64;
        group.bench_function(BenchmarkId::new(format!("get_update/{label}"), messages), |b| {
            b.to_async(&rt).iter(|| {
                n += 1;
                turn(&store, &keys[0], n)
            })
        });
    }
    group.finish();
}

fn concurrent_sessions(c: &mut Criterion) {
    const SESSIONS: usize = 64;
    let rt = runtime();
    let mut group = c.benchmark_group("sqlite_concurrent");
    group.sample_size(20).measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(SESSIONS as u64));
    for (shape, messages) in [(Shape::Plain, 10usize), (Shape::Plain, 100), (Shape::Tools, 100)] {
        let dir = tempfile::tempdir().unwrap();
        let (store, keys) = rt.block_on(setup(&dir, SqliteOptions::default(), SESSIONS, shape, messages));
        let store = Arc::new(store);
        let keys = Arc::new(keys);
        let id = BenchmarkId::new(format!("64_sessions_turns/{}", shape.name()), messages);
        group.bench_function(id, |b| {
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
    }
    group.finish();
}

/// The serialization floor any backend pays per turn: parse the stored record, encode the new one.
fn json_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("json_floor");
    group.sample_size(30).measurement_time(Duration::from_secs(4));
    for (shape, messages) in [(Shape::Plain, 100usize), (Shape::Tools, 10), (Shape::Tools, 100), (Shape::Tools, 1000)] {
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
            shape.state(messages),
        );
        let text = rec.to_canonical_json();
        group.bench_function(BenchmarkId::new(format!("parse_encode/{}", shape.name()), messages), |b| {
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
