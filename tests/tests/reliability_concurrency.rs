//! Reliability, concurrency: 8 writers × 100 conditional updates on one session lose nothing and every
//! failed attempt is a `Conflict`; 256 sessions × 20 turns at once through `SessionRunner` persist every
//! turn exactly once (memory, SQLite, Redis; Redis is skipped with a message when `redis-server` is missing).

// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reliability;

use std::collections::HashSet;
use std::sync::Arc;

use as_agent::{Agent, ReplyInput, ReplyStatus, SessionRunner};
use as_model::{ScriptedModel, ScriptedTurn};
use as_storage::{Owner, SessionConfig, SessionKey, SharedStorage, StorageErrorKind, UpsertSession};
use as_storage_redis::testing::RedisServer;
use reliability::{figure, scale};

const WRITERS: usize = 8;
const UPDATES: usize = 100;

/// What the CAS race measured.
struct Race {
    attempts: usize,
    successes: usize,
    conflicts: usize,
    other_errors: Vec<String>,
    final_counter: i64,
}

/// 8 writers each try 100 read-increment-CAS rounds on `cur_iter` of one session.
async fn cas_race(storage: SharedStorage, session: &str) -> Race {
    let owner = Owner::new("rel-user", "rel-agent");
    let key = owner.session(session);
    storage.upsert_session(UpsertSession::new(owner, SessionConfig::new("ws")).with_session_id(session)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let (storage, key) = (Arc::clone(&storage), key.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut conflicts, mut other) = (0usize, 0usize, Vec::new());
            for _ in 0..UPDATES {
                let rec = storage.get_session(&key).await.unwrap().unwrap();
                let mut state = rec.state.clone();
                state.cur_iter += 1;
                // Give the other writers a chance to interleave between the read and the write.
                tokio::task::yield_now().await;
                match storage.update_session_state(&key, &state, Some(&rec.revision())).await {
                    Ok(_) => ok += 1,
                    Err(e) if e.kind() == StorageErrorKind::Conflict => conflicts += 1,
                    Err(e) => other.push(e.to_string()),
                }
            }
            (ok, conflicts, other)
        }));
    }
    let mut race =
        Race { attempts: WRITERS * UPDATES, successes: 0, conflicts: 0, other_errors: vec![], final_counter: 0 };
    for t in tasks {
        let (ok, c, other) = t.await.unwrap();
        race.successes += ok;
        race.conflicts += c;
        race.other_errors.extend(other);
    }
    race.final_counter = storage.get_session(&key).await.unwrap().unwrap().state.cur_iter;
    race
}

fn check_race(backend: &str, r: &Race) {
    let lost = r.successes as i64 - r.final_counter;
    figure(&format!("concurrency.cas.{backend}.attempts"), r.attempts);
    figure(&format!("concurrency.cas.{backend}.successes"), r.successes);
    figure(&format!("concurrency.cas.{backend}.conflicts"), r.conflicts);
    figure(&format!("concurrency.cas.{backend}.lost_updates"), lost);
    figure(&format!("concurrency.cas.{backend}.non_conflict_failures"), r.other_errors.len());
    assert!(r.other_errors.is_empty(), "{backend}: failed writes that are not Conflict: {:?}", r.other_errors);
    assert_eq!(r.successes + r.conflicts, r.attempts, "{backend}");
    assert_eq!(lost, 0, "{backend}: lost updates (successes {} final {})", r.successes, r.final_counter);
    assert!(r.successes >= UPDATES, "{backend}: at least one writer's worth of rounds succeeds");
}

/// `sessions` sessions × `turns` turns at once through the runner; every turn persisted exactly once.
async fn runner_fanout(backend: &str, storage: SharedStorage, sessions: usize, turns: usize) {
    let runner = Arc::new(SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")));
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let runner = Arc::clone(&runner);
        tasks.push(tokio::spawn(async move {
            let script = (0..turns).map(|t| ScriptedTurn::new().text(format!("reply {s}-{t}")));
            let model = Arc::new(ScriptedModel::new("scripted", script));
            let agent = Agent::builder("Friday", "sys", model).build().unwrap();
            let key = SessionKey::new("fan-user", "fan-agent", format!("fan-{s}"));
            let mut completed = 0;
            for t in 0..turns {
                let out = runner
                    .run_turn(&agent, &key, ReplyInput::user_text(format!("turn {s}-{t}")), &mut |_| {})
                    .await
                    .unwrap();
                completed += usize::from(out.status == ReplyStatus::Completed);
            }
            (key, completed)
        }));
    }
    let (mut bad, mut completed_turns) = (0usize, 0);
    for t in tasks {
        let (key, completed) = t.await.unwrap();
        completed_turns += completed;
        let rec = storage.get_session(&key).await.unwrap().unwrap();
        let log = storage.list_messages(&key, 0, 0).await.unwrap();
        let ids: HashSet<&str> = log.iter().map(|m| m.id.as_str()).collect();
        let users: Vec<String> = log
            .iter()
            .filter(|m| m.role == as_message::Role::User)
            .map(|m| m.get_text_content("").unwrap_or_default())
            .collect();
        let expected_users: Vec<String> =
            (0..turns).map(|t| format!("turn {}-{t}", key.session_id.trim_start_matches("fan-"))).collect();
        if rec.state.context.len() != 2 * turns
            || log.len() != 2 * turns
            || ids.len() != log.len()
            || users != expected_users
        {
            bad += 1;
            eprintln!(
                "{backend} {}: context {} log {} unique {} users {users:?}",
                key.session_id,
                rec.state.context.len(),
                log.len(),
                ids.len()
            );
        }
    }
    figure(&format!("concurrency.runner.{backend}.sessions"), sessions);
    figure(&format!("concurrency.runner.{backend}.turns"), completed_turns);
    figure(&format!("concurrency.runner.{backend}.sessions_not_exactly_once"), bad);
    assert_eq!(completed_turns, sessions * turns, "{backend}: turns that did not complete");
    assert_eq!(bad, 0, "{backend}: sessions whose turns are not persisted exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_race_memory() {
    check_race("memory", &cas_race(reliability::memory().await, "race").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_race_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    check_race("sqlite", &cas_race(reliability::sqlite(&dir.path().join("s.db")).await, "race").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_race_redis() {
    let Some(server) = RedisServer::start() else { return };
    check_race("redis", &cas_race(reliability::redis(&server.url()).await, "race").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runner_fanout_memory() {
    runner_fanout("memory", reliability::memory().await, 256, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runner_fanout_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let (s, t) = (scale(32, 256) as usize, scale(5, 20) as usize);
    runner_fanout("sqlite", reliability::sqlite(&dir.path().join("s.db")).await, s, t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runner_fanout_redis() {
    let Some(server) = RedisServer::start() else { return };
    let (s, t) = (scale(32, 256) as usize, scale(5, 20) as usize);
    runner_fanout("redis", reliability::redis(&server.url()).await, s, t).await;
}
