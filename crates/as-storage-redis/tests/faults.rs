//! Faults: a hung or dead Redis gives `Unavailable` within the timeout, the client reconnects
//! by itself, and a SIGKILL in the middle of a write loop loses nothing that was acknowledged
//! and leaves nothing half-written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use as_storage::{PageRequest, SessionKey, StorageBase, StorageErrorKind};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{RedisStorage, RedisStorageConfig, SessionLock};
use common::{owner, req};
use fred::prelude::{KeysInterface, SetsInterface};

const TIMEOUT: Duration = Duration::from_millis(300);
/// Generous slack for a loaded 2-core CI machine. `TIMEOUT + SLACK` (2.8 s) stays well below the
/// 5 s default timeouts (storage and lock), so a bound still shows it was our timeout that fired.
const SLACK: Duration = Duration::from_millis(2500);

async fn open(server: &RedisServer) -> RedisStorage {
    let s = RedisStorage::new(RedisStorageConfig::from_url(&server.url()).unwrap().with_timeout(TIMEOUT)).unwrap();
    s.open().await.unwrap();
    s
}

/// Polls `get_session` until it succeeds (the client reconnects on its own), bounded.
async fn until_available(s: &RedisStorage, key: &SessionKey) -> Duration {
    let start = Instant::now();
    loop {
        if s.get_session(key).await.is_ok() {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(15), "no reconnection within 15 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_redis_is_unavailable_within_the_timeout_and_recovers() {
    let Some(server) = RedisServer::start() else { return };
    let s = open(&server).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    server.pause().unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let e = s.get_session(&key).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
        assert!(e.is_retryable());
        assert!(t.elapsed() < TIMEOUT + SLACK, "took {:?}", t.elapsed());
        let t = Instant::now();
        let e = s.update_session_state(&key, &rec.state, None).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
        assert!(t.elapsed() < TIMEOUT + SLACK, "took {:?}", t.elapsed());
        let t = Instant::now();
        let e = s.list_sessions(&o, &PageRequest::default()).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
        assert!(t.elapsed() < TIMEOUT + SLACK, "took {:?}", t.elapsed());
        // fred puts no timeout on SCAN pages: list_agents must bound them itself.
        let t = Instant::now();
        let e = tokio::time::timeout(Duration::from_secs(10), s.list_agents(&o.user_id))
            .await
            .expect("list_agents hung on a paused Redis")
            .unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
        assert!(t.elapsed() < TIMEOUT + SLACK, "took {:?}", t.elapsed());
    }
    server.resume().unwrap();
    until_available(&s, &key).await;
    assert_eq!(s.get_session(&key).await.unwrap().unwrap().id, rec.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_redis_is_unavailable_and_the_client_reconnects_by_itself() {
    let Some(mut server) = RedisServer::start_with(&["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    else {
        return;
    };
    let s = open(&server).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    server.kill();
    let t = Instant::now();
    let e = s.get_session(&key).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
    assert!(t.elapsed() < TIMEOUT + SLACK, "took {:?}", t.elapsed());
    server.restart().unwrap();
    until_available(&s, &key).await;
    assert_eq!(s.get_session(&key).await.unwrap().unwrap(), rec, "the acknowledged create survived (AOF always)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_write_loop_loses_only_failed_writes_and_leaves_nothing_partial() {
    let Some(mut server) = RedisServer::start_with(&["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    else {
        return;
    };
    let s = open(&server).await;
    let o = owner();
    let main = s.upsert_session(req(&o).with_session_id("main")).await.unwrap();
    let main_key = o.session(main.id.clone());
    let mut created_ok = Vec::new();
    let mut created_failed = Vec::new();
    let mut last_acked_iter = 0;
    let mut failed_iters = Vec::new();
    for i in 0..120i64 {
        if i == 40 {
            server.kill();
        }
        if i == 48 {
            server.restart().unwrap();
        }
        let id = format!("s{i}");
        let state = as_state::AgentState { cur_iter: i, ..common::state_with(3) };
        match s.upsert_session(req(&o).with_session_id(&id).with_state(state.clone())).await {
            Ok(_) => created_ok.push(id),
            Err(e) => {
                assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
                created_failed.push(id);
            }
        }
        match s.update_session_state(&main_key, &state, None).await {
            Ok(_) => last_acked_iter = i,
            Err(e) => {
                assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
                failed_iters.push(i);
            }
        }
    }
    assert!(created_failed.len() >= 8, "the outage was exercised: {created_failed:?}");
    assert!(created_ok.iter().any(|id| id == "s119"), "writes succeed again after the restart");

    // Kill once more (no clean shutdown), restart, and inspect what is on disk.
    server.kill();
    server.restart().unwrap();
    let fresh = open(&server).await;
    let r = common::raw(&server.url()).await;
    let index: HashSet<String> = r.smembers("agentscope:user:user-1:agent:agent-1:sessions").await.unwrap();
    for id in &created_ok {
        let rec = fresh.get_session(&o.session(id.clone())).await.unwrap();
        let rec = rec.unwrap_or_else(|| panic!("acknowledged create {id} was lost"));
        assert_eq!(format!("s{}", rec.state.cur_iter), *id);
        assert!(index.contains(id), "acknowledged {id} is indexed");
    }
    for id in &created_failed {
        let present = r.exists::<bool, _>(format!("agentscope:user:user-1:session:{id}")).await.unwrap();
        assert_eq!(present, index.contains(id), "{id}: record and index entry exist together or not at all");
        if present {
            assert!(fresh.get_session(&o.session(id.clone())).await.unwrap().is_some(), "{id} is whole");
        }
    }
    // Every indexed id has its record, and every record is readable in full.
    let page = fresh.list_sessions(&o, &PageRequest { limit: 1000, cursor: None }).await.unwrap();
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert_eq!(page.sessions.len(), index.len());
    let main_now = fresh.get_session(&main_key).await.unwrap().unwrap();
    let i = main_now.state.cur_iter;
    assert!(
        i == last_acked_iter || (i > last_acked_iter && failed_iters.contains(&i)),
        "main holds iteration {i}: the last acknowledged one ({last_acked_iter}) or a later unacknowledged one"
    );
    assert_eq!(main_now.state.context.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_cannot_be_renewed_in_time_is_marked_lost() {
    let Some(server) = RedisServer::start() else { return };
    let s = open(&server).await;
    let locks =
        SessionLock::new(&s).unwrap().with_ttl(Duration::from_millis(1200)).with_heartbeat(Duration::from_millis(200));
    let guard = locks.try_acquire("sess-hung").await.unwrap().unwrap();
    server.pause().unwrap();
    // The key may expire 1.2 s after the SET: by then the guard must say so (another runner could
    // take the lock once Redis answers again).
    tokio::time::timeout(Duration::from_secs(10), guard.lost()).await.expect("the guard never noticed");
    assert!(guard.is_lost());
    server.resume().unwrap();
    // A guard whose heartbeat keeps working is never marked lost.
    let kept = locks.try_acquire("sess-ok").await.unwrap().unwrap();
    for _ in 0..4 {
        assert!(kept.extend().await.unwrap());
    }
    assert!(!kept.is_lost());
    assert!(kept.release().await.unwrap());
}

/// One failed renewal is no lost lock while the last renewal still holds: the heartbeat retries
/// sooner and keeps the lock once Redis answers again (with `ttl = 2 × heartbeat`, 2.0.4's
/// ratio, a single failure used to give the lock up at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_survives_a_blip_shorter_than_its_expiry() {
    let Some(server) = RedisServer::start() else { return };
    let s = open(&server).await;
    let locks = SessionLock::new(&s).unwrap().with_ttl(Duration::from_secs(3));
    let guard = locks.try_acquire("sess-blip").await.unwrap().unwrap();
    let start = Instant::now();
    server.pause().unwrap();
    // The heartbeat at 1.5 s fails (Redis paused); Redis answers again well before 3 s.
    let paused_for = Duration::from_millis(1900);
    assert!(tokio::time::timeout(paused_for, guard.lost()).await.is_err(), "lost during the blip");
    server.resume().unwrap();
    // Past the first expiry (3 s after the SET) the guard still holds the lock.
    let past_expiry = Duration::from_millis(3500).saturating_sub(start.elapsed());
    assert!(tokio::time::timeout(past_expiry, guard.lost()).await.is_err(), "the guard gave the lock up");
    assert!(!guard.is_lost());
    let r = common::raw(&server.url()).await;
    let held: Option<String> = r.get(guard.key()).await.unwrap();
    assert_eq!(held.as_deref(), Some(guard.token()));
    assert!(guard.release().await.unwrap());
}

/// A caller's fred pool has no command timeout by default: the lock must still not hang, and a
/// guard must know it is lost once its last renewal ran out, whatever the heartbeat waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_a_pool_without_timeouts_never_hang() {
    let Some(server) = RedisServer::start() else { return };
    let pool = fred::prelude::Builder::from_config(fred::prelude::Config::from_url(&server.url()).unwrap())
        .build_pool(1)
        .unwrap();
    fred::prelude::ClientLike::init(&pool).await.unwrap();
    let locks = SessionLock::from_pool(pool)
        .with_timeout(TIMEOUT)
        .with_ttl(Duration::from_millis(900))
        .with_heartbeat(Duration::from_millis(600));
    let guard = locks.try_acquire("sess-a").await.unwrap().unwrap();
    server.pause().unwrap();
    let start = Instant::now();
    let bound = TIMEOUT + SLACK + Duration::from_secs(2);
    let e = tokio::time::timeout(bound, locks.try_acquire("sess-b")).await.expect("try_acquire hung").unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
    assert!(start.elapsed() < TIMEOUT + SLACK, "try_acquire took {:?}", start.elapsed());
    // The heartbeat's extension hangs (no pool timeout); the guard still says lost in time.
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("the guard never noticed");
    assert!(guard.is_lost());
    let start = Instant::now();
    let released = tokio::time::timeout(bound, guard.release()).await.expect("release hung");
    assert_eq!(released.unwrap_err().kind(), StorageErrorKind::Unavailable);
    assert!(start.elapsed() < TIMEOUT + SLACK, "release took {:?}", start.elapsed());
    server.resume().unwrap();
}

#[tokio::test]
async fn huge_durations_do_not_overflow() {
    let Some(server) = RedisServer::start() else { return };
    let s =
        RedisStorage::new(RedisStorageConfig::from_url(&server.url()).unwrap().with_timeout(Duration::MAX)).unwrap();
    s.open().await.unwrap();
    let locks = SessionLock::new(&s).unwrap().with_ttl(Duration::MAX);
    let guard = locks.acquire("sess-1", Duration::MAX).await.unwrap();
    assert!(guard.extend().await.unwrap());
    let busy = locks.with_poll_interval(Duration::MAX).acquire("sess-1", Duration::from_millis(1)).await.unwrap_err();
    assert_eq!(busy.kind(), StorageErrorKind::Conflict);
    assert!(guard.release().await.unwrap());
    // A sliding TTL past what Redis accepts is cut to 100 years: the staged (large) update's
    // `EXPIRE` after its `RENAME` is never refused, which would leave the staging key's expiry.
    let s = RedisStorage::new(
        RedisStorageConfig::from_url(&server.url()).unwrap().with_key_ttl(Duration::from_secs(u64::MAX)),
    )
    .unwrap();
    s.open().await.unwrap();
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    s.update_session_state(&o.session(rec.id.clone()), &common::state_with(60), None).await.unwrap();
    let r = common::raw(&server.url()).await;
    let ttl: i64 = r.ttl(format!("agentscope:user:user-1:session:{}", rec.id)).await.unwrap();
    assert!(ttl > 99 * 365 * 24 * 3600, "ttl {ttl}");
}

/// A caller that gives up while its lock `SET` is under way (drops the acquiring future) leaves no
/// lock behind: the `SET` lands once Redis answers again, and is taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_given_up_mid_set_leaves_no_lock() {
    let Some(server) = RedisServer::start() else { return };
    let s = open(&server).await;
    let locks = SessionLock::new(&s).unwrap();
    server.pause().unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(100), locks.try_acquire("sess-drop")).await;
    assert!(gave_up.is_err(), "Redis is paused: the SET cannot have been answered");
    server.resume().unwrap();
    let r = common::raw(&server.url()).await;
    let key = locks.key("sess-drop");
    let start = Instant::now();
    // The SET ran (its command was sent) and the take-back after it: bounded wait for the latter.
    while r.exists::<bool, _>(&key).await.unwrap() {
        assert!(start.elapsed() < Duration::from_secs(10), "the lock SET was left behind: {key}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The session can be locked (waiting a little, in case the check above ran before the SET).
    let guard = locks.acquire("sess-drop", Duration::from_secs(5)).await.expect("the session is free");
    assert!(guard.release().await.unwrap());
}

/// An `open` given up midway (its future dropped: a caller's own timeout, or `open`'s overall
/// limit) leaves no connection behind: the pool it was building is closed, not left connected
/// (and reconnecting) with nobody to close it. Given up here while the server is paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_given_up_midway_leaves_no_connection() {
    let Some(server) = RedisServer::start() else { return };
    let port = server.port();
    let reply = as_storage_redis::testing::raw_command(port, "CLIENT PAUSE 1000 ALL").unwrap();
    assert!(reply.starts_with("+OK"), "{reply}");
    let cfg = RedisStorageConfig::from_url(&server.url()).unwrap().with_timeout(Duration::from_secs(5));
    let s = RedisStorage::new(cfg).unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(300), s.open()).await.is_err(), "open did not wait");
    assert!(!s.is_open());
    // Once the pause is over, only the probe's own connection is left.
    let start = Instant::now();
    loop {
        let list = as_storage_redis::testing::raw_command(port, "CLIENT LIST").unwrap_or_default();
        let clients = list.lines().filter(|l| l.contains(" cmd=")).count();
        if clients == 1 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "connections left: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
