//! The runner's session locks, so a turn of `chat` (and of the demo's steps) never runs beside
//! another process's turn on the same session: on Redis, AgentScope's chat-run lock
//! (`agentscope:session:lock:{session_id}`, [`as_storage_redis::SessionLock`], shared with Python
//! 2.0.4) as [`as_agent::SessionLock`]; on SQLite, an OS file lock per session ([`FileRunLock`]).
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
        match self.locks.try_acquire(&key.session_id).await {
            Ok(Some(guard)) => return Ok(Box::new(RedisRunGuard(guard))),
            Ok(None) => busy_notice(key, self.wait),
            Err(e) => return Err(AgentError::Storage(e)),
        }
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

/// A per-session lock for the stores of one machine (SQLite): an exclusive advisory lock
/// ([`std::fs::File::try_lock`], `flock` on Unix) on a file in a directory next to the database,
/// one file per session while it is held or waited for (the holder removes it on release). The
/// operating system drops the lock when the process ends, however it ends, so it never outlives
/// its holder and is never lost while held.
#[derive(Debug)]
pub(crate) struct FileRunLock {
    dir: std::path::PathBuf,
    wait: Duration,
    /// Notified (once per acquire) when an acquire finds the session busy and starts waiting, so
    /// a test can observe the wait; `None` in the runner.
    busy_signal: Option<Arc<tokio::sync::Notify>>,
}

impl FileRunLock {
    /// Locks in `dir` (created on first use), waiting up to `wait` for a busy session.
    pub(crate) fn shared(dir: std::path::PathBuf, wait: Duration) -> Arc<dyn SessionLock> {
        Arc::new(Self { dir, wait, busy_signal: None })
    }

    /// The lock file of `key`: a stable hash of the key (FNV-1a, the same in every build), so
    /// ids of any length and character make a valid file name. Two keys sharing a hash only wait
    /// for each other.
    fn path(&self, key: &SessionKey) -> std::path::PathBuf {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in [&key.user_id, &key.agent_id, &key.session_id] {
            for b in part.bytes().chain([0]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        self.dir.join(format!("{h:016x}.lock"))
    }
}

/// A held [`FileRunLock`]: the open, locked file and its path.
struct FileRunGuard(std::fs::File, std::path::PathBuf);

#[async_trait]
impl LockGuard for FileRunGuard {
    async fn release(self: Box<Self>) -> as_agent::Result<()> {
        // The holder removes the file (so a directory of locks does not keep one file per session
        // ever run); a process waiting on the removed file sees it is gone once it gets the lock,
        // and locks the path's new file instead ([`is_current`]). Without the right to remove it
        // (a directory shared read-only), the file stays, which is harmless.
        // Only while the path still names the file held: a file put there by someone else since
        // (after an outside removal) is another holder's lock.
        #[cfg(unix)]
        if is_current(&self.0, &self.1).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.1);
        }
        // Closing the file releases the lock too; unlocking first makes it immediate and explicit.
        self.0.unlock().map_err(|e| AgentError::Lock(format!("unlocking the session lock file: {e}")))
    }
}

/// Whether `path` still names the file `file` has open: a holder removes the lock file when it
/// releases, so a lock won on a file that is no longer at `path` guards nothing.
#[cfg(unix)]
fn is_current(file: &std::fs::File, path: &std::path::Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let open = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Lock files are never removed off Unix, so a won lock always guards the file at its path.
#[cfg(not(unix))]
fn is_current(_: &std::fs::File, _: &std::path::Path) -> std::io::Result<bool> {
    Ok(true)
}

#[async_trait]
impl SessionLock for FileRunLock {
    async fn acquire(&self, key: &SessionKey) -> as_agent::Result<Box<dyn LockGuard>> {
        let path = self.path(key);
        // The lock files cannot be used (permissions, a read-only disk): the store is unusable
        // for turns (exit 6), not busy.
        let io = |what: &str, e: std::io::Error| {
            AgentError::Storage(as_storage::StorageError::new(
                StorageErrorKind::Unavailable,
                "sqlite",
                "lock",
                format!("{what} {}: {e}", path.display()),
            ))
        };
        // A lock needs no write access to its file (`flock`): an existing one is opened for
        // reading, so users sharing a database (a group-writable directory) share its locks.
        let open = || match std::fs::File::open(&path) {
            Ok(file) => Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir).map_err(|e| io("creating the lock directory for", e))?;
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .map_err(|e| io("creating the session lock file", e))
            }
            Err(e) => Err(io("opening the session lock file", e)),
        };
        let mut file = open()?;
        let deadline = tokio::time::Instant::now().checked_add(self.wait);
        let mut told = false;
        loop {
            // Shared access is enough for an exclusive `flock` (unlike `fcntl` locks).
            match file.try_lock() {
                Ok(()) if is_current(&file, &path).map_err(|e| io("checking", e))? => {
                    return Ok(Box::new(FileRunGuard(file, path)));
                }
                // Won on a file its holder removed when it released: the lock is the path's new file.
                Ok(()) => {
                    file = open()?;
                    continue;
                }
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(io("locking", e)),
            }
            if !told {
                told = true;
                busy_notice(key, self.wait);
                if let Some(signal) = &self.busy_signal {
                    signal.notify_one();
                }
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return Err(AgentError::Lock(format!(
                    "session {} is busy: another process held its lock file {} for the last {} s (wait longer \
                     with {WAIT_VAR}=SECONDS)",
                    key.session_id,
                    path.display(),
                    self.wait.as_secs(),
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Tells the user (stderr) that a turn waits for a session another process is running.
fn busy_notice(key: &SessionKey, wait: std::time::Duration) {
    eprintln!(
        "session {} is busy: another process is running a turn on it; waiting up to {} s for its lock (Ctrl-C \
         to give up)",
        key.session_id,
        wait.as_secs()
    );
}

/// How often a waiting turn tries a busy session's lock file again.
const POLL: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_lock_excludes_a_second_holder_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let locks = FileRunLock::shared(dir.path().join("locks"), Duration::ZERO);
        let key = SessionKey::new("alice", "friday", "s/../1");
        let held = locks.acquire(&key).await.unwrap();
        let busy = locks.acquire(&key).await.err().unwrap();
        assert_eq!(busy.kind(), as_agent::AgentErrorKind::Lock);
        assert!(busy.to_string().contains("busy"), "{busy}");
        // Another session is free meanwhile.
        let other = locks.acquire(&SessionKey::new("bob", "friday", "s/../1")).await.unwrap();
        held.release().await.unwrap();
        let again = locks.acquire(&key).await.unwrap();
        again.release().await.unwrap();
        other.release().await.unwrap();
    }

    /// A released lock removes its file; a process that was waiting on that file then locks the
    /// path's new file, so it still excludes everyone else.
    #[cfg(unix)]
    #[tokio::test]
    async fn released_lock_files_are_removed_and_a_waiter_moves_to_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let lock_dir = dir.path().join("locks");
        let now = FileRunLock::shared(lock_dir.clone(), Duration::ZERO);
        let waiting = Arc::new(tokio::sync::Notify::new());
        let patient = FileRunLock {
            dir: lock_dir.clone(),
            wait: Duration::from_secs(30),
            busy_signal: Some(Arc::clone(&waiting)),
        };
        let key = SessionKey::new("alice", "friday", "s1");
        let first = now.acquire(&key).await.unwrap();
        let waiter = tokio::spawn(async move { patient.acquire(&key).await });
        // The waiter has opened the current file and found it busy before it is released.
        tokio::time::timeout(Duration::from_secs(10), waiting.notified())
            .await
            .expect("the waiter finds the session busy and waits");
        first.release().await.unwrap();
        let second = waiter.await.unwrap().unwrap();
        // It holds the file at the path: a third process is refused.
        let key = SessionKey::new("alice", "friday", "s1");
        let busy = now.acquire(&key).await.err().expect("the waiter holds the session");
        assert_eq!(busy.kind(), as_agent::AgentErrorKind::Lock, "{busy}");
        second.release().await.unwrap();
        assert_eq!(std::fs::read_dir(&lock_dir).unwrap().count(), 0, "no lock file is left behind");
    }

    /// A holder whose file was removed behind its back (and replaced by another holder's) leaves
    /// that other holder's file alone when it releases.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_release_never_removes_another_holders_file() {
        let dir = tempfile::tempdir().unwrap();
        let locks = FileRunLock { dir: dir.path().join("locks"), wait: Duration::ZERO, busy_signal: None };
        let key = SessionKey::new("alice", "friday", "s1");
        let first = locks.acquire(&key).await.unwrap();
        std::fs::remove_file(locks.path(&key)).unwrap(); // a cleaner, say
        let second = locks.acquire(&key).await.unwrap();
        first.release().await.unwrap();
        assert!(locks.path(&key).exists(), "the second holder's lock file was removed");
        let busy = locks.acquire(&key).await.err().expect("the second holder still holds the session");
        assert_eq!(busy.kind(), as_agent::AgentErrorKind::Lock);
        second.release().await.unwrap();
    }

    /// The check behind it: a lock won on a removed file is not current.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_file_removed_by_its_holder_is_not_current() {
        let dir = tempfile::tempdir().unwrap();
        let locks = FileRunLock { dir: dir.path().join("locks"), wait: Duration::ZERO, busy_signal: None };
        let key = SessionKey::new("alice", "friday", "s1");
        let held = locks.acquire(&key).await.unwrap();
        let path = locks.path(&key);
        let stale = std::fs::File::open(&path).unwrap();
        assert!(is_current(&stale, &path).unwrap());
        held.release().await.unwrap();
        stale.try_lock().unwrap();
        assert!(!is_current(&stale, &path).unwrap(), "removed");
        let again = locks.acquire(&key).await.unwrap();
        assert!(!is_current(&stale, &path).unwrap(), "replaced by a new file");
        again.release().await.unwrap();
    }
}
