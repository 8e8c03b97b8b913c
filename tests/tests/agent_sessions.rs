//! `as-agent` over the real backends: the `as_agent::testkit` scenarios against SQLite (a file in a temp dir)
//! and Redis (a private `redis-server`; skipped with a message when it is not installed), plus the Redis
//! session lock plugged into the runner through `as_agent::SessionLock`.

#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use as_agent::testkit::{StopBy, interrupt_at_every_await_point, park_then_resume_in_new_process};
use as_agent::{AgentError, LockGuard, ReplyInput, ReplyStatus, SessionLock, SessionRunner};
use as_storage::{SessionConfig, SessionKey, SharedStorage, StorageBase};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{RedisStorage, RedisStorageConfig};
use as_storage_sqlite::SqliteStorage;
use async_trait::async_trait;

async fn sqlite(path: &std::path::Path) -> SharedStorage {
    let s: SharedStorage = Arc::new(SqliteStorage::new(path));
    s.open().await.unwrap();
    s
}

async fn redis(url: &str) -> SharedStorage {
    let s: SharedStorage = Arc::new(RedisStorage::new(RedisStorageConfig::from_url(url).unwrap()).unwrap());
    s.open().await.unwrap();
    s
}

#[tokio::test]
async fn sqlite_interrupt_at_every_await_point() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir.path().join("sessions.db")).await;
    for stop in [StopBy::Drop, StopBy::Cancel] {
        let n = interrupt_at_every_await_point(Arc::clone(&storage), stop).await.unwrap();
        assert!(n > 25, "{n}");
    }
}

#[tokio::test]
async fn sqlite_park_then_resume_in_a_new_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    // Each "process" opens its own storage handle on the same file.
    park_then_resume_in_new_process(|| sqlite(&path), "park-resume").await.unwrap();
}

#[tokio::test]
async fn redis_interrupt_at_every_await_point() {
    let Some(server) = RedisServer::start() else { return };
    let storage = redis(&server.url()).await;
    for stop in [StopBy::Drop, StopBy::Cancel] {
        let n = interrupt_at_every_await_point(Arc::clone(&storage), stop).await.unwrap();
        assert!(n > 25, "{n}");
    }
}

#[tokio::test]
async fn redis_park_then_resume_in_a_new_process() {
    let Some(server) = RedisServer::start() else { return };
    let url = server.url();
    park_then_resume_in_new_process(|| redis(&url), "park-resume").await.unwrap();
}

/// The Redis chat-run lock as the runner's lock hook.
#[derive(Debug)]
struct RedisLock(as_storage_redis::SessionLock);

struct RedisGuard(as_storage_redis::SessionLockGuard);

#[async_trait]
impl LockGuard for RedisGuard {
    async fn release(self: Box<Self>) -> as_agent::Result<()> {
        self.0.release().await.map(|_| ()).map_err(AgentError::from)
    }
}

#[async_trait]
impl SessionLock for RedisLock {
    async fn acquire(&self, key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        let g = self
            .0
            .acquire(&key.session_id, Duration::from_secs(5))
            .await
            .map_err(|e| AgentError::Lock(e.to_string()))?;
        Ok(Box::new(RedisGuard(g)))
    }
}

#[tokio::test]
async fn redis_session_lock_serialises_turns() {
    let Some(server) = RedisServer::start() else { return };
    let storage = RedisStorage::new(RedisStorageConfig::from_url(&server.url()).unwrap()).unwrap();
    storage.open().await.unwrap();
    let locks = as_storage_redis::SessionLock::new(&storage).unwrap();
    let storage: SharedStorage = Arc::new(storage);
    let runner =
        SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws")).with_lock(Arc::new(RedisLock(locks)));
    let key = SessionKey::new("u1", "a1", "locked-session");
    // Two turns on one session at once: with the lock they serialise, so neither conflicts.
    let mk = |text: &'static str| {
        let model = Arc::new(as_model::ScriptedModel::new("m", [as_model::ScriptedTurn::new().text(text)]));
        as_agent::Agent::builder("Friday", "sys", model).build().unwrap()
    };
    let (a1, a2) = (mk("one"), mk("two"));
    let (mut s1, mut s2) = (|_: &as_agent::AgentEvent| {}, |_: &as_agent::AgentEvent| {});
    let (r1, r2) = tokio::join!(
        runner.run_turn(&a1, &key, ReplyInput::user_text("first"), &mut s1),
        runner.run_turn(&a2, &key, ReplyInput::user_text("second"), &mut s2),
    );
    assert_eq!(r1.unwrap().status, ReplyStatus::Completed);
    assert_eq!(r2.unwrap().status, ReplyStatus::Completed);
    let stored = storage.get_session(&key).await.unwrap().unwrap();
    assert_eq!(stored.state.context.len(), 4, "both turns are in the state");
    assert_eq!(storage.list_messages(&key, 0, 0).await.unwrap().len(), 4);
}
