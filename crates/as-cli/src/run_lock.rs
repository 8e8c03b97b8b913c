//! The runner's session lock over Redis: AgentScope's chat-run lock
//! (`agentscope:session:lock:{session_id}`, [`as_storage_redis::SessionLock`]) as
//! [`as_agent::SessionLock`], so a turn of `chat` (and of the demo's steps) on a Redis store never
//! runs beside another process's turn on the same session, Rust or Python 2.0.4 alike.
//!
//! A session that stays busy for the wait ([`DEFAULT_WAIT`], or `AGENTSCOPE_LOCK_WAIT` seconds) fails the turn with [`AgentError::Lock`] (exit 4); a lock
//! lost during the turn (its lease ran out unrenewed) interrupts the turn, which is then not
//! written (see [`as_agent::LockGuard`]).

use std::sync::Arc;
use std::time::Duration;

use as_agent::{AgentError, LockGuard, SessionLock};
use as_storage::{SessionKey, StorageErrorKind};
use async_trait::async_trait;

use crate::exit::{CliError, CliResult, ExitKind};

/// How long a turn waits, by default, for a session another process is running a turn on.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The variable that sets the wait, in whole seconds.
pub(crate) const WAIT_VAR: &str = "AGENTSCOPE_LOCK_WAIT";

/// The wait `AGENTSCOPE_LOCK_WAIT` asks for (`value`), or the default when unset.
pub(crate) fn wait_from(value: Option<&str>) -> CliResult<Duration> {
    let Some(v) = value else { return Ok(DEFAULT_WAIT) };
    v.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| CliError::new(ExitKind::Usage, format!("{WAIT_VAR} must be a whole number of seconds, not {v:?}")))
}

/// [`as_storage_redis::SessionLock`] as the runner's lock hook.
#[derive(Debug)]
pub(crate) struct RedisRunLock {
    locks: as_storage_redis::SessionLock,
    wait: Duration,
}

impl RedisRunLock {
    /// The chat-run lock on `storage`'s connections (which must be open), as the runner takes it;
    /// a busy session is waited for up to `wait`.
    pub(crate) fn shared(
        storage: &as_storage_redis::RedisStorage,
        wait: Duration,
    ) -> Result<Arc<dyn SessionLock>, as_storage::StorageError> {
        Ok(Arc::new(Self { locks: as_storage_redis::SessionLock::new(storage)?, wait }))
    }
}

struct RedisRunGuard(as_storage_redis::SessionLockGuard);

#[async_trait]
impl LockGuard for RedisRunGuard {
    async fn release(self: Box<Self>) -> as_agent::Result<()> {
        self.0.release().await.map(|_| ()).map_err(AgentError::from)
    }

    fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    async fn lost(&self) {
        self.0.lost().await;
    }
}

#[async_trait]
impl SessionLock for RedisRunLock {
    async fn acquire(&self, key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        match self.locks.acquire(&key.session_id, self.wait).await {
            Ok(guard) => Ok(Box::new(RedisRunGuard(guard))),
            // Still held after the wait: another process is running a turn on this session.
            Err(e) if e.kind() == StorageErrorKind::Conflict => Err(AgentError::Lock(format!(
                "session {} is busy: another process held its lock {} for the last {} s (wait longer with \
                 {WAIT_VAR}=SECONDS)",
                key.session_id,
                self.locks.key(&key.session_id),
                self.wait.as_secs(),
            ))),
            Err(e) => Err(AgentError::Storage(e)),
        }
    }
}
