//! Runs storage turns (get_session + conditional update_session_state) against a private
//! `redis-server`, for instruction-count profiling without a benchmark harness:
//! `valgrind --tool=callgrind target/release/examples/turn_timing 1000 21` minus the same with 1.
//!
//! Arguments: the number of messages (the `turn` bench's plain shape), the number of turns, and
//! optionally a state JSON file to use instead (as `cargo xtask paired` does, with the state the
//! Python side uses). Also prints the bare `GET`+`SET` of the same bytes (the bench's floor)
//! measured in the same process.

#![allow(clippy::unwrap_used, clippy::expect_used)] // profiling harness

use std::time::Instant;

use as_storage::{Owner, SessionConfig, StorageBase, UpsertSession};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{RedisStorage, RedisStorageConfig};

/// With `--features timing-mimalloc`: mimalloc, the `agentscope` binary's allocator.
#[cfg(feature = "timing-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(turns)) = (args.first(), args.get(1)) else {
        return Err("usage: turn_timing MESSAGES TURNS [STATE_FILE]".into());
    };
    let (n, turns): (usize, usize) = (n.parse()?, turns.parse()?);
    let Some(server) = RedisServer::start() else {
        return Err("redis-server not found".into());
    };
    // TURN_TIMING_RUNTIME=current measures on a current-thread runtime (no cross-thread wakeups).
    let rt = if std::env::var("TURN_TIMING_RUNTIME").is_ok_and(|v| v == "current") {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?
    };
    let body = run(n, turns, args.get(2).cloned(), server.url());
    // TURN_TIMING_SPAWN=1 runs the turns in a task spawned on the runtime, as a service's request
    // handlers run, instead of on the thread that blocks on the runtime.
    if std::env::var("TURN_TIMING_SPAWN").is_ok_and(|v| v == "1") {
        rt.block_on(async { rt.spawn(body).await })??;
    } else {
        rt.block_on(body)?;
    }
    Ok(())
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn run(n: usize, turns: usize, state_file: Option<String>, url: String) -> Result<(), BoxError> {
    {
        let s = RedisStorage::new(RedisStorageConfig::from_url(&url)?)?;
        s.open().await?;
        let state = match state_file {
            Some(path) => as_state::state_from_json(&std::fs::read_to_string(path)?)?,
            None => {
                let mut state = as_state::AgentState::default();
                for i in 0..n {
                    let text = format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(9));
                    state.context.push(as_message::Msg::user("user", text));
                }
                state
            }
        };
        let owner = Owner::new("bench-user", "bench-agent");
        let rec =
            s.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws-1")).with_state(state)).await?;
        let key = owner.session(rec.id);
        // Each phase of a turn timed separately (median per phase), then whole turns.
        let mut phases: [Vec<f64>; 3] = Default::default();
        for _ in 0..turns {
            let a = Instant::now();
            let rec = s.get_session(&key).await?.ok_or("missing")?;
            let b = Instant::now();
            let rev = rec.revision();
            let mut state = rec.state;
            state.cur_iter += 1;
            s.update_session_state(&key, &state, Some(&rev)).await?;
            let c = Instant::now();
            drop(state);
            let d = Instant::now();
            for (v, span) in phases.iter_mut().zip([b - a, c - b, d - c]) {
                v.push(span.as_secs_f64() * 1e6);
            }
        }
        let [get, update, dropped] = phases.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or_default()
        });
        eprintln!("median us: get_session {get:.0}, update_session_state {update:.0}, drop of the state {dropped:.0}");
        let start = Instant::now();
        for _ in 0..turns {
            let rec = s.get_session(&key).await?.ok_or("missing")?;
            let rev = rec.revision();
            let mut state = rec.state;
            state.cur_iter += 1;
            s.update_session_state(&key, &state, Some(&rev)).await?;
        }
        let per_turn = start.elapsed() / u32::try_from(turns.max(1))?;
        let raw = fred::prelude::Builder::from_config(fred::prelude::Config::from_url(&url)?).build()?;
        fred::prelude::ClientLike::init(&raw).await?;
        let rkey = s.session_key(&key.user_id, &key.session_id);
        let start = Instant::now();
        for _ in 0..turns {
            let v: fred::bytes::Bytes = fred::prelude::KeysInterface::get(&raw, &rkey).await?;
            fred::prelude::KeysInterface::set::<(), _, _>(&raw, "floor", v, None, None, false).await?;
        }
        let floor = start.elapsed() / u32::try_from(turns.max(1))?;
        let start = Instant::now();
        for _ in 0..turns {
            let v: fred::bytes::Bytes = fred::prelude::KeysInterface::get(&raw, &rkey).await?;
            std::hint::black_box(v);
        }
        let bare_get = start.elapsed() / u32::try_from(turns.max(1))?;
        eprintln!("bare GET alone {bare_get:?}");
        eprintln!(
            "{n} messages: {per_turn:?} per turn, bare GET+SET {floor:?} (wall), ratio {:.2}",
            per_turn.as_secs_f64() / floor.as_secs_f64()
        );
        Ok(())
    }
}
