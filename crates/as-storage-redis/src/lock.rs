//! [`SessionLock`]: the cross-process chat-run lock of AgentScope (`agentscope:session:lock:{session_id}`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use as_storage::{StorageError, StorageErrorKind, validate_id};
use fred::prelude::{KeysInterface, LuaInterface, Pool, Value};
use fred::types::{Expiration, SetOptions};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{err, map_fred};
use crate::scripts::{LOCK_EXTEND, LOCK_RELEASE};
use crate::storage::RedisStorage;

/// The shortest wait before retrying a failed heartbeat.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// The longest lock expiry [`SessionLock::with_ttl`] sets (100 years).
const MAX_LOCK_TTL: Duration = crate::MAX_KEY_TTL;

/// AgentScope's lock key prefix (`app/message_bus/_keys.py`).
pub const DEFAULT_LOCK_PREFIX: &str = "agentscope:session:lock:";

/// Acquires per-session run locks compatible with AgentScope 2.0.4's message bus: the key is
/// `agentscope:session:lock:{session_id}`, taken with `SET key <uuid4 hex> NX` plus an expiry
/// (600 s by default, like 2.0.4), kept alive by a heartbeat (every 300 s by default) that only
/// extends a key still holding *our* token, and released by compare-and-delete — both in Lua,
/// where 2.0.4 extends blindly and releases with a racy `GET` then `DEL`.
///
/// Two runners (Rust or Python) never hold the lock of one session at once; a runner should load
/// the session state *after* acquiring it (2.0.4 loads it before, race R2).
///
/// ```no_run
/// # async fn demo(storage: as_storage_redis::RedisStorage) -> Result<(), as_storage::StorageError> {
/// use std::time::Duration;
/// let locks = as_storage_redis::SessionLock::new(&storage)?;
/// let guard = locks.acquire("session-1", Duration::from_secs(30)).await?;
/// // … load the session, run the agent, write the state back …
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SessionLock {
    pool: Pool,
    prefix: String,
    ttl: Duration,
    heartbeat: Duration,
    poll: Duration,
    timeout: Duration,
}

/// Runs one lock command within `limit` (a caller's pool may have no command timeout at all):
/// past it, a typed `Unavailable`.
async fn within<T>(
    limit: Duration,
    op: &'static str,
    key: &str,
    fut: impl std::future::Future<Output = Result<T, StorageError>>,
) -> Result<T, StorageError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(err(StorageErrorKind::Unavailable, op, format!("no answer for {key} within {limit:?}"))),
    }
}

impl SessionLock {
    /// Locks on the connection of an open `storage`, with 2.0.4's timings and the storage's
    /// command timeout.
    pub fn new(storage: &RedisStorage) -> Result<Self, StorageError> {
        Ok(Self::from_pool(storage.pool()?).with_timeout(storage.timeout()))
    }

    /// Locks on a caller's pool (command timeout 5 s; see [`SessionLock::with_timeout`]).
    pub fn from_pool(pool: Pool) -> Self {
        Self {
            pool,
            prefix: DEFAULT_LOCK_PREFIX.to_owned(),
            ttl: Duration::from_secs(600),
            heartbeat: Duration::from_secs(300),
            poll: Duration::from_millis(50),
            timeout: Duration::from_secs(5),
        }
    }

    /// Sets how long one lock command may take before it fails with `Unavailable` (default 5 s).
    /// A heartbeat's extension is also bounded by how long the lock is surely still ours.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets the lock expiry (default 600 s; kept within 10 ms ..= 100 years, since Redis refuses
    /// an expiry that overflows its clock) and the heartbeat period (default: half of it).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.clamp(Duration::from_millis(10), MAX_LOCK_TTL);
        self.heartbeat = self.ttl / 2;
        self
    }

    /// Sets the heartbeat period (must be shorter than the TTL to keep the lock).
    pub fn with_heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(1));
        self
    }

    /// Sets how often [`SessionLock::acquire`] retries while someone else holds the lock.
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// Sets the key prefix (default `agentscope:session:lock:`).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The lock key of `session_id`.
    pub fn key(&self, session_id: &str) -> String {
        format!("{}{session_id}", self.prefix)
    }

    /// Takes the lock if it is free; `None` when another runner holds it.
    pub async fn try_acquire(&self, session_id: &str) -> Result<Option<SessionLockGuard>, StorageError> {
        const OP: &str = "lock";
        validate_id("session_id", session_id)?;
        let key = self.key(session_id);
        let token = uuid::Uuid::new_v4().simple().to_string();
        // The key expires at the latest one TTL after the SET was sent.
        let sent = Instant::now();
        let ms = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        // One connection for the SET, its check and a cleanup: commands on it run in order, so a
        // cleanup can never overtake a SET still on its way.
        let client = self.pool.next().clone();
        // Until we know the outcome, a SET that may have landed is taken back when we give up:
        // on an error, and also when this future is dropped while the SET is under way.
        let unclaimed =
            Unclaimed { client: Some(client.clone()), key: key.clone(), token: token.clone(), limit: self.timeout };
        let taken = within(self.timeout, OP, &key, async {
            let set: Option<String> = client
                .set(&key, token.as_str(), Some(Expiration::PX(ms)), Some(SetOptions::NX), false)
                .await
                .map_err(|e| map_fred(OP, Some(&key), e))?;
            if set.is_some() {
                return Ok(true);
            }
            // Nil: someone holds it, or this very SET ran before and its reply was lost (a re-sent
            // command): then the key holds our token and the lock is ours.
            let holder: Option<String> = client.get(&key).await.map_err(|e| map_fred(OP, Some(&key), e))?;
            Ok(holder.as_deref() == Some(token.as_str()))
        })
        .await;
        match taken {
            Ok(true) => {
                unclaimed.disarm();
                Ok(Some(SessionLockGuard::start(
                    self.pool.clone(),
                    key,
                    token,
                    self.ttl,
                    self.heartbeat,
                    sent,
                    self.timeout,
                )))
            }
            Ok(false) => {
                unclaimed.disarm();
                Ok(None)
            }
            // The SET may have been applied and only its reply lost: `unclaimed` takes it back.
            Err(e) => Err(e),
        }
    }

    /// Takes the lock, polling while another runner holds it; `Conflict` after `wait`.
    pub async fn acquire(&self, session_id: &str, wait: Duration) -> Result<SessionLockGuard, StorageError> {
        // No deadline when `wait` reaches beyond what an `Instant` can hold.
        let deadline = Instant::now().checked_add(wait);
        loop {
            if let Some(g) = self.try_acquire(session_id).await? {
                return Ok(g);
            }
            let next_poll = Instant::now().checked_add(self.poll);
            if let Some(deadline) = deadline
                && next_poll.is_none_or(|t| t > deadline)
            {
                return Err(err(
                    StorageErrorKind::Conflict,
                    "lock",
                    format!("session {session_id:?} is locked by another runner (waited {wait:?})"),
                ));
            }
            // The holder may be another process: there is nothing to await but the key itself.
            tokio::time::sleep(self.poll).await;
        }
    }
}

#[derive(Debug)]
struct Shared {
    lost: AtomicBool,
    notify: Notify,
    /// Until when the lock is surely ours: when its last successful `SET` or extension was sent,
    /// plus the TTL (`None`: beyond what an `Instant` can hold).
    held_until: Mutex<Option<Instant>>,
}

impl Shared {
    fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn renewed(&self, sent: Instant, ttl: Duration) {
        *self.held_until.lock().unwrap_or_else(PoisonError::into_inner) = sent.checked_add(ttl);
    }

    /// Whether the lock may have expired by `t` (no renewal reached Redis in time).
    fn may_expire_by(&self, t: Instant) -> bool {
        self.held_until.lock().unwrap_or_else(PoisonError::into_inner).is_some_and(|until| until <= t)
    }

    /// How long after `t` the lock is surely still ours (`None`: beyond what an `Instant` holds).
    fn surely_held_for(&self, t: Instant) -> Option<Duration> {
        self.held_until.lock().unwrap_or_else(PoisonError::into_inner).map(|until| until.saturating_duration_since(t))
    }
}

/// A lock `SET` whose outcome is not known yet. Dropped armed (an error, or the caller gave up and
/// dropped the acquiring future), it takes the lock back if the SET landed: a token nobody knows
/// would block the session for the whole TTL. Compare-and-delete on the SET's own connection, in
/// the background, so it runs after the SET.
struct Unclaimed {
    client: Option<fred::clients::Client>,
    key: String,
    token: String,
    limit: Duration,
}

impl Unclaimed {
    fn disarm(mut self) {
        self.client = None;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (key, token, limit) = (std::mem::take(&mut self.key), std::mem::take(&mut self.token), self.limit);
        rt.spawn(async move {
            let release = eval::<i64>(&client, LOCK_RELEASE, &key, vec![Value::String(token.into())]);
            let _ = tokio::time::timeout(limit, release).await;
        });
    }
}

/// A held session lock. A background heartbeat extends it while held; if the heartbeat finds
/// the key gone or owned by someone else, or cannot reach Redis before the last renewal runs out
/// (the key may then expire and another runner take it), the guard is marked lost
/// ([`SessionLockGuard::lost`] resolves) and the runner should stop. Dropping the guard stops the heartbeat and releases the
/// lock in the background; prefer [`SessionLockGuard::release`].
#[derive(Debug)]
pub struct SessionLockGuard {
    pool: Pool,
    key: String,
    token: String,
    ttl: Duration,
    timeout: Duration,
    shared: Arc<Shared>,
    heartbeat: Option<JoinHandle<()>>,
    released: bool,
}

async fn extend(pool: &Pool, key: &str, token: &str, ttl: Duration) -> Result<bool, StorageError> {
    let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let r: i64 = eval(pool, LOCK_EXTEND, key, vec![Value::String(token.into()), Value::Integer(ms)])
        .await
        .map_err(|e| map_fred("lock_extend", Some(key), e))?;
    Ok(r == 1)
}

/// `EVALSHA`, falling back to `EVAL` when the server does not know the script, on a pool or on one
/// client (whose commands run in order on its connection).
async fn eval<R: fred::prelude::FromValue>(
    on: &impl LuaInterface,
    source: &'static str,
    key: &str,
    args: Vec<Value>,
) -> Result<R, fred::prelude::Error> {
    let sha = fred::util::sha1_hash(source);
    match on.evalsha::<R, _, _, _>(sha, vec![key.to_owned()], args.clone()).await {
        Err(e) if e.details().starts_with("NOSCRIPT") => on.eval(source, vec![key.to_owned()], args).await,
        r => r,
    }
}

impl SessionLockGuard {
    fn start(
        pool: Pool,
        key: String,
        token: String,
        ttl: Duration,
        every: Duration,
        sent: Instant,
        timeout: Duration,
    ) -> Self {
        let shared = Arc::new(Shared {
            lost: AtomicBool::new(false),
            notify: Notify::new(),
            held_until: Mutex::new(sent.checked_add(ttl)),
        });
        let task = {
            let (pool, key, token, shared) = (pool.clone(), key.clone(), token.clone(), shared.clone());
            tokio::spawn(async move {
                let mut wait = every;
                loop {
                    tokio::time::sleep(wait).await;
                    let sent = Instant::now();
                    // An answer that comes after the lock may have run out is no renewal: wait at
                    // most until then (and at most the command timeout).
                    let sure = shared.surely_held_for(sent).unwrap_or(timeout);
                    match within(timeout.min(sure), "lock_extend", &key, extend(&pool, &key, &token, ttl)).await {
                        Ok(true) => {
                            shared.renewed(sent, ttl);
                            wait = every;
                        }
                        Ok(false) => {
                            shared.mark_lost();
                            return;
                        }
                        // Redis unreachable: the lock is surely ours only until the last renewal
                        // runs out. Retry sooner than the regular beat (a quarter of what is left,
                        // so several tries fit) and give up only once it has run out.
                        Err(e) => {
                            tracing::warn!(target: "as_storage_redis", key = %key, error = %e, "lock heartbeat failed");
                            match shared.surely_held_for(Instant::now()) {
                                Some(left) if left > MIN_RETRY => wait = every.min(left / 4).max(MIN_RETRY),
                                Some(_) => {
                                    shared.mark_lost();
                                    return;
                                }
                                None => wait = every,
                            }
                        }
                    }
                }
            })
        };
        Self { pool, key, token, ttl, timeout, shared, heartbeat: Some(task), released: false }
    }

    /// The lock key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Our random token (the key's value while we hold it).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether the heartbeat found the lock taken over or expired, or could not renew it in time,
    /// or the last renewal has run out by now (also while an extension is still unanswered).
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst) || self.shared.may_expire_by(Instant::now())
    }

    /// Resolves when the lock is lost (see [`SessionLockGuard::is_lost`]).
    pub async fn lost(&self) {
        loop {
            let notified = self.shared.notify.notified();
            if self.is_lost() {
                return;
            }
            notified.await;
        }
    }

    /// Extends the lock now; `false` (and marked lost) when it is no longer ours.
    pub async fn extend(&self) -> Result<bool, StorageError> {
        let sent = Instant::now();
        let ok = within(self.timeout, "lock_extend", &self.key, extend(&self.pool, &self.key, &self.token, self.ttl))
            .await?;
        if ok {
            self.shared.renewed(sent, self.ttl);
        } else {
            self.shared.mark_lost();
        }
        Ok(ok)
    }

    /// Releases the lock if it is still ours; returns whether it was.
    pub async fn release(mut self) -> Result<bool, StorageError> {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
        let release = async {
            eval::<i64>(&self.pool, LOCK_RELEASE, &self.key, vec![Value::String(self.token.as_str().into())])
                .await
                .map_err(|e| map_fred("lock_release", Some(&self.key), e))
        };
        let r = within(self.timeout, "lock_release", &self.key, release).await?;
        // Done only once answered: an error, or this future dropped before the answer, leaves the
        // release to `Drop` (one more compare-and-delete, harmless if the first one ran).
        self.released = true;
        Ok(r == 1)
    }
}

impl Drop for SessionLockGuard {
    fn drop(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
        if self.released {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (pool, key, token) =
                (self.pool.clone(), std::mem::take(&mut self.key), std::mem::take(&mut self.token));
            let limit = self.timeout;
            rt.spawn(async move {
                let release = eval::<i64>(&pool, LOCK_RELEASE, &key, vec![Value::String(token.into())]);
                let _ = tokio::time::timeout(limit, release).await;
            });
        }
    }
}
