//! A chat turn against a private redis-server: `get_session` + `update_session_state` on states
//! of 10, 100 and 1000 messages (about 5, 50 and 500 KB), next to a bare `GET` + `SET` of the
//! same bytes (the floor; the two are measured interleaved), plus 64 sessions driven concurrently.
//!
//! AgentScope Python 2.0.4 measured 0.72, 2.75 and 23.0 ms per turn on the same sizes.
//! Run with `cargo bench -p as-storage-redis --bench turn`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use as_storage::{Owner, SessionConfig, SessionKey, StorageBase, UpsertSession};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{RedisStorage, RedisStorageConfig};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fred::prelude::{Builder, ClientLike, Config, KeysInterface};

/// With `--features timing-mimalloc`: mimalloc, the `agentscope` binary's allocator.
#[cfg(feature = "timing-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn state_with(n: usize) -> as_state::AgentState {
    let mut s = as_state::AgentState::default();
    for i in 0..n {
        let text = format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(9));
        s.context.push(as_message::Msg::user("user", text));
    }
    s
}

struct Env {
    _server: RedisServer,
    rt: tokio::runtime::Runtime,
    storage: Arc<RedisStorage>,
    raw: fred::prelude::Client,
}

fn env() -> Option<Env> {
    let server = RedisServer::start()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (storage, raw) = rt.block_on(async {
        let s = RedisStorage::new(RedisStorageConfig::from_url(&server.url()).unwrap()).unwrap();
        s.open().await.unwrap();
        let raw = Builder::from_config(Config::from_url(&server.url()).unwrap()).build().unwrap();
        raw.init().await.unwrap();
        (Arc::new(s), raw)
    });
    Some(Env { _server: server, rt, storage, raw })
}

async fn create(s: &RedisStorage, owner: &Owner, n: usize) -> SessionKey {
    let rec = s
        .upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws-1")).with_state(state_with(n)))
        .await
        .unwrap();
    owner.session(rec.id)
}

/// One turn: load the session, "run the agent" (bump cur_iter), write the state back with CAS.
async fn turn(s: &RedisStorage, key: &SessionKey) {
    let rec = s.get_session(key).await.unwrap().unwrap();
    let rev = rec.revision();
    let mut state = rec.state;
    state.cur_iter += 1;
    s.update_session_state(key, &state, Some(&rev)).await.unwrap();
}

/// Median microseconds per phase over `iters` turns, each phase timed in the same loop so noise
/// hits them alike: the two storage calls of a turn, then the raw `GET`, the codec alone
/// (UTF-8 check + parse, encode) and a raw `SET` of the same bytes.
fn breakdown(e: &Env, key: &SessionKey, iters: usize) -> [f64; 6] {
    let rkey = e.storage.session_key(&key.user_id, &key.session_id);
    let floor_key = format!("{rkey}:floor");
    let mut t: [Vec<Duration>; 6] = Default::default();
    e.rt.block_on(async {
        for _ in 0..iters {
            let a = Instant::now();
            let rec = e.storage.get_session(key).await.unwrap().unwrap();
            let b = Instant::now();
            let rev = rec.revision();
            let mut state = rec.state;
            state.cur_iter += 1;
            e.storage.update_session_state(key, &state, Some(&rev)).await.unwrap();
            let c = Instant::now();
            let raw: Bytes = e.raw.get(&rkey).await.unwrap();
            let d = Instant::now();
            let parsed: as_storage::SessionRecord =
                as_storage::decode_record(std::str::from_utf8(&raw).unwrap()).unwrap();
            let f = Instant::now();
            let json = as_storage::encode_record(&parsed.meta(), &parsed.state);
            let g = Instant::now();
            e.raw.set::<(), _, _>(&floor_key, Bytes::from(json), None, None, false).await.unwrap();
            let h = Instant::now();
            for (slot, span) in t.iter_mut().zip([b - a, c - b, d - c, f - d, g - f, h - g]) {
                slot.push(span);
            }
        }
    });
    t.map(|mut v| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e6
    })
}

/// CPU time (user + system, all threads) and minor page faults of a process so far, from
/// `/proc/<pid>/stat`.
fn cpu_time(pid: &str) -> (Duration, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // minflt is field 10; utime and stime are fields 14 and 15, in clock ticks (USER_HZ = 100).
    (Duration::from_millis((field(11) + field(12)) * 10), field(7))
}

/// Turns for about two seconds: wall time, CPU time of this process and of redis-server, and
/// this process's page faults, per turn (CPU time and faults are what a shared, noisy machine
/// distorts least).
fn cpu_per_turn(e: &Env, key: &SessionKey) -> [f64; 4] {
    let server = e._server.pid().map(|p| p.to_string()).unwrap_or_default();
    let ((c0, f0), (s0, _), t0) = (cpu_time("self"), cpu_time(&server), Instant::now());
    let mut turns = 0u32;
    e.rt.block_on(async {
        while t0.elapsed() < Duration::from_secs(2) {
            turn(&e.storage, key).await;
            turns += 1;
        }
    });
    let wall = t0.elapsed();
    let ((c1, f1), (s1, _)) = (cpu_time("self"), cpu_time(&server));
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(turns);
    [per(wall), per(c1 - c0), per(s1 - s0), (f1 - f0) as f64 / f64::from(turns)]
}

/// `TURN_BREAKDOWN=1 target/release/deps/turn-… --bench turn/`: print where a turn's time goes.
fn print_breakdown(e: &Env, key: &SessionKey, n: usize) {
    if std::env::var_os("TURN_BREAKDOWN").is_none() {
        return;
    }
    let iters = if n >= 1000 { 300 } else { 1000 };
    breakdown(e, key, iters / 4);
    for run in 0..3 {
        let port = e._server.port();
        as_storage_redis::testing::raw_command(port, "CONFIG RESETSTAT").unwrap();
        let [get, upd, raw_get, parse, encode, raw_set] = breakdown(e, key, iters);
        println!(
            "breakdown/{n} run {run}: get_session {get:.1} us (GET {raw_get:.1} + parse {parse:.1} + other {:.1}) | \
             update {upd:.1} us (encode {encode:.1} + SET {raw_set:.1} + other {:.1}) | turn {:.1} = codec {:.0}% + \
             GET+SET {:.0}% + other {:.0}%",
            get - raw_get - parse,
            upd - encode - raw_set,
            get + upd,
            100.0 * (parse + encode) / (get + upd),
            100.0 * (raw_get + raw_set) / (get + upd),
            100.0 * (get + upd - parse - encode - raw_get - raw_set) / (get + upd),
        );
        let [wall, client, server, faults] = cpu_per_turn(e, key);
        println!(
            "cpu/{n} run {run}: turn wall {wall:.1} us, client CPU {client:.1} us, redis-server CPU {server:.1} us, \
             client page faults {faults:.1}"
        );
        let stats = as_storage_redis::testing::raw_command(port, "INFO commandstats").unwrap();
        for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
            let usec = line.split(',').find_map(|f| f.strip_prefix("usec_per_call=")).unwrap_or("?");
            println!("  server {}: {usec} us/call", line.split(':').next().unwrap_or(line));
        }
    }
}

fn bench_turns(c: &mut Criterion) {
    let Some(e) = env() else { return };
    let owner = Owner::new("bench-user", "bench-agent");
    let mut group = c.benchmark_group("turn");
    group.measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1)).sample_size(30);
    for n in [10usize, 100, 1000] {
        let key = e.rt.block_on(create(&e.storage, &owner, n));
        let bytes: Bytes = e.rt.block_on(async {
            e.raw.get::<Bytes, _>(e.storage.session_key(&key.user_id, &key.session_id)).await.unwrap()
        });
        println!("turn/{n}: record of {} bytes", bytes.len());
        print_breakdown(&e, &key, n);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("get_session", n), &key, |b, key| {
            b.iter_custom(|iters| {
                e.rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..iters {
                        e.storage.get_session(key).await.unwrap().unwrap();
                    }
                    t.elapsed()
                })
            });
        });
        let state = state_with(n);
        group.bench_with_input(BenchmarkId::new("update_session_state", n), &key, |b, key| {
            b.iter_custom(|iters| {
                e.rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..iters {
                        e.storage.update_session_state(key, &state, None).await.unwrap();
                    }
                    t.elapsed()
                })
            });
        });
        // The turn and its floor are measured interleaved: every iteration of either benchmark
        // runs one turn and one bare GET+SET and times only its own, so the machine's drift
        // (other jobs on a shared VM) hits both figures alike and their ratio stays meaningful.
        let floor_key = format!("bench:floor:{n}");
        e.rt.block_on(e.raw.set::<(), _, _>(&floor_key, bytes.clone(), None, None, false)).unwrap();
        let bare = || async {
            let v: Bytes = e.raw.get(&floor_key).await.unwrap();
            e.raw.set::<(), _, _>(&floor_key, v, None, None, false).await.unwrap();
        };
        group.bench_with_input(BenchmarkId::new("get_update", n), &key, |b, key| {
            b.iter_custom(|iters| {
                e.rt.block_on(async {
                    let mut own = Duration::ZERO;
                    for _ in 0..iters {
                        let t = Instant::now();
                        turn(&e.storage, key).await;
                        own += t.elapsed();
                        bare().await;
                    }
                    own
                })
            });
        });
        group.bench_with_input(BenchmarkId::new("bare_get_set", n), &key, |b, key| {
            b.iter_custom(|iters| {
                e.rt.block_on(async {
                    let mut own = Duration::ZERO;
                    for _ in 0..iters {
                        turn(&e.storage, key).await;
                        let t = Instant::now();
                        bare().await;
                        own += t.elapsed();
                    }
                    own
                })
            });
        });
    }
    group.finish();
}

fn bench_concurrent(c: &mut Criterion) {
    let Some(e) = env() else { return };
    let owner = Owner::new("bench-user", "bench-agent");
    let mut group = c.benchmark_group("concurrent");
    group.measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    for n in [10usize, 100] {
        let keys: Vec<SessionKey> = e.rt.block_on(async {
            let mut keys = Vec::new();
            for _ in 0..64 {
                keys.push(create(&e.storage, &owner, n).await);
            }
            keys
        });
        group.throughput(Throughput::Elements(64));
        group.bench_with_input(BenchmarkId::new("64_sessions_turns", n), &keys, |b, keys| {
            b.iter_custom(|iters| {
                e.rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let mut tasks = Vec::with_capacity(keys.len());
                        for k in keys {
                            let (s, k) = (e.storage.clone(), k.clone());
                            tasks.push(tokio::spawn(async move { turn(&s, &k).await }));
                        }
                        for t in tasks {
                            t.await.unwrap();
                        }
                    }
                    t.elapsed()
                })
            });
        });
    }
    group.finish();
}

/// Where a turn's time goes besides Redis: parsing the record and encoding it (no I/O).
fn bench_codec(c: &mut Criterion) {
    let mut group = c.benchmark_group("codec");
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(30);
    for n in [10usize, 100, 1000] {
        let meta = as_storage::SessionRecord::from_parts(
            as_message::from_json(&as_message::to_json(&serde_json::json!({
                "id": "s", "updated_at": "2025-06-01T10:00:00", "created_at": "2025-06-01T10:00:00",
                "user_id": "u", "agent_id": "a", "config": {"workspace_id": "w", "name": "n"}
            })))
            .unwrap(),
            as_state::AgentState::default(),
        )
        .meta();
        let state = state_with(n);
        let json = as_storage::encode_record(&meta, &state);
        group.throughput(Throughput::Bytes(json.len() as u64));
        // What the backends read with (the fast canonical reader), and the serde path it falls back to.
        group.bench_with_input(BenchmarkId::new("parse_record", n), &json, |b, json| {
            b.iter(|| as_storage::decode_record(json).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("parse_record_serde", n), &json, |b, json| {
            b.iter(|| as_message::from_json::<as_storage::SessionRecord>(json).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("encode_record", n), &state, |b, state| {
            b.iter(|| as_storage::encode_record(&meta, state));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_codec, bench_turns, bench_concurrent);
criterion_main!(benches);
