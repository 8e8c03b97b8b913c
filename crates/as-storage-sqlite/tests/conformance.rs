//! The shared storage conformance suite against `SqliteStorage`, one file in a temp dir per
//! scenario; `reopen` opens the same file again as an independent store (a second pool of
//! connections), which is what another process does. `build_faulty` adds fault triggers to the
//! test's file (see [`TriggerFaults`]).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use as_storage::conformance::{BuildOptions, Faults, Faulty, StorageFactory};
use as_storage::{SharedStorage, StorageBase, StorageError, StorageErrorKind};
use as_storage_sqlite::{SqliteOptions, SqliteStorage};

/// A fresh database file per scenario.
struct SqliteFactory;

/// Keeps the temp dir (and so the file) alive for the scenario.
struct Guard {
    dir: tempfile::TempDir,
    options: SqliteOptions,
}

impl Guard {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("sessions.db")
    }
}

impl StorageFactory for SqliteFactory {
    type Guard = Guard;

    async fn build(&self, options: &BuildOptions) -> Result<(Guard, SharedStorage), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| {
            StorageError::new(as_storage::StorageErrorKind::Backend, "sqlite", "build", "temp dir").with_source(e)
        })?;
        let mut opts = SqliteOptions::default();
        if let Some(max) = options.max_record_bytes {
            opts = opts.with_max_record_bytes(max);
        }
        let guard = Guard { dir, options: opts.clone() };
        let store = SqliteStorage::with_options(guard.path(), opts);
        store.open().await?;
        Ok((guard, Arc::new(store)))
    }

    async fn reopen(&self, guard: &Guard) -> Result<Option<SharedStorage>, StorageError> {
        let store = SqliteStorage::with_options(guard.path(), guard.options.clone());
        store.open().await?;
        Ok(Some(Arc::new(store)))
    }

    async fn build_faulty(&self, options: &BuildOptions) -> Result<Option<Faulty<Guard>>, StorageError> {
        let (guard, store) = self.build(options).await?;
        let faults = TriggerFaults::install(&guard.path())?;
        Ok(Some(Faulty::new(guard, store, Arc::new(faults))))
    }
}

/// The message every injected fault fails with.
const INJECTED: &str = "injected fault";

/// Faults injected from outside the backend: a counter table and `BEFORE` triggers on every
/// insert, update and delete of the tables the backend writes (`sessions`, `messages`), added to
/// the test's database file after the store opened it. The backend's code is untouched; its
/// schema check accepts the file (the version table is there, and extra objects are allowed
/// then).
///
/// A trigger fires once per row written (SQLite triggers are `FOR EACH ROW`): while the counter is
/// not NULL, each one takes 1 off it and, when that takes it below 0, `RAISE(ABORT, …)` fails the
/// statement. So after `arm(n)` the rows 0..n are written and row `n` fails. The counter's own
/// updates are part of the writer's transaction: when the failure rolls it back they are undone
/// too, and the counter is back at `n` (each sweep step arms it again anyway).
struct TriggerFaults {
    conn: Mutex<rusqlite::Connection>,
}

fn test_error(what: &str, e: rusqlite::Error) -> StorageError {
    StorageError::new(StorageErrorKind::Backend, "sqlite-test", "faults", what.to_owned()).with_source(e)
}

impl TriggerFaults {
    fn install(path: &Path) -> Result<Self, StorageError> {
        let conn = rusqlite::Connection::open(path).map_err(|e| test_error("open the test file", e))?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(|e| test_error("busy_timeout", e))?;
        let mut sql = String::from(
            "BEGIN IMMEDIATE;
             CREATE TABLE test_faults (id INTEGER PRIMARY KEY CHECK (id = 1), remaining INTEGER);
             INSERT INTO test_faults (id, remaining) VALUES (1, NULL);",
        );
        for table in ["sessions", "messages"] {
            for event in ["INSERT", "UPDATE", "DELETE"] {
                sql.push_str(&format!(
                    "CREATE TRIGGER test_fault_{table}_{event} BEFORE {event} ON {table}
                     WHEN (SELECT remaining FROM test_faults) IS NOT NULL
                     BEGIN
                         UPDATE test_faults SET remaining = remaining - 1;
                         SELECT RAISE(ABORT, '{INJECTED}') WHERE (SELECT remaining FROM test_faults) < 0;
                     END;"
                ));
            }
        }
        sql.push_str("COMMIT;");
        conn.execute_batch(&sql).map_err(|e| test_error("install the fault triggers", e))?;
        Ok(Self { conn: Mutex::new(conn) })
    }

    fn set(&self, remaining: Option<i64>) -> Result<(), StorageError> {
        let conn = self.conn.lock().map_err(|_| {
            StorageError::new(StorageErrorKind::Backend, "sqlite-test", "faults", "the connection's lock is poisoned")
        })?;
        conn.execute("UPDATE test_faults SET remaining = ?1", [remaining])
            .map_err(|e| test_error("set the fault counter", e))?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Faults for TriggerFaults {
    async fn arm(&self, n: usize) -> Result<(), StorageError> {
        let n = i64::try_from(n).map_err(|_| {
            StorageError::new(StorageErrorKind::InvalidInput, "sqlite-test", "faults", "fault position out of range")
        })?;
        self.set(Some(n))
    }

    async fn disarm(&self) -> Result<(), StorageError> {
        self.set(None)
    }

    /// The trigger's message, in the error or any of its sources.
    fn is_injected(&self, error: &StorageError) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = cur {
            if e.to_string().contains(INJECTED) {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

// Exactly the TTL scenarios skip (a new skip fails its test): SQLite has no key expiry, and
// the store does not declare `ttl`. Everything else, the fault sweep included, runs.
as_storage::storage_conformance_tests!(SqliteFactory, skipped = [ttl_expires_idle_sessions, ttl_restarts_on_writes]);

/// The fault sweep runs here, and must pass rather than skip: the factory has a fault hook and
/// the store declares `atomic_turns`, so a skip would mean the hook was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_turn_fault_sweep_runs_and_passes() {
    let outcome = as_storage::conformance::save_turn_failure_at_any_write_leaves_nothing(&SqliteFactory).await;
    assert_eq!(outcome.unwrap(), as_storage::conformance::Outcome::Passed);
}

/// An injected fault reaches the caller as what it is, a failed write (`Backend`, not retryable,
/// the trigger's message kept), and is not mistaken for a lost answer (`Unavailable`) or a lost
/// compare-and-set (`Conflict`). The counter's own updates roll back with the failed turn (so
/// arming `n` before each call fails a distinct write each time); the file is sound afterwards,
/// and the extra triggers do not stop the file from being opened again.
#[tokio::test]
async fn injected_faults_are_plain_write_failures() {
    let (guard, store) = SqliteFactory.build(&BuildOptions::default()).await.unwrap();
    let faults = TriggerFaults::install(&guard.path()).unwrap();
    let remaining = || -> Option<i64> {
        let conn = faults.conn.lock().unwrap();
        conn.query_row("SELECT remaining FROM test_faults", [], |r| r.get(0)).unwrap()
    };
    let owner = as_storage::Owner::new("u", "a");
    let rec = store
        .upsert_session(as_storage::UpsertSession::new(owner.clone(), as_storage::SessionConfig::new("w")))
        .await
        .unwrap();
    let key = owner.session(rec.id.clone());
    let turn: Vec<as_message::Msg> = (0..3)
        .map(|i| {
            let mut m = as_message::Msg::user("u", format!("hi {i}"));
            m.id = format!("m{i}");
            m
        })
        .collect();
    // The state row and three messages: four writes; the first, the third (inside the transaction,
    // after two rows were written) and the last fail alike.
    for n in [0, 2, 3] {
        faults.arm(n).await.unwrap();
        let e = store.save_turn(&key, &rec.state, Some(&rec.revision()), &turn).await.unwrap_err();
        assert_eq!(remaining(), Some(n as i64), "write {n}: the counter's updates were rolled back with the turn");
        faults.disarm().await.unwrap();
        assert!(faults.is_injected(&e), "{e}");
        assert_eq!(e.kind(), StorageErrorKind::Backend, "{e}");
        assert!(!e.is_retryable(), "{e}");
        assert!(e.to_string().contains(INJECTED), "{e}");
    }
    assert!(!faults.is_injected(&StorageError::new(StorageErrorKind::Backend, "sqlite", "x", "disk full")));
    // Armed past the last write, the turn goes through and uses up exactly its four writes.
    faults.arm(4).await.unwrap();
    store.save_turn(&key, &rec.state, Some(&rec.revision()), &turn).await.unwrap();
    assert_eq!(remaining(), Some(0));
    faults.disarm().await.unwrap();
    assert_eq!(remaining(), None);
    let sqlite = SqliteStorage::open_path(guard.path()).await.unwrap();
    assert!(sqlite.integrity_check().await.unwrap().is_empty());
    assert_eq!(sqlite.list_messages(&key, 0, 0).await.unwrap().len(), 3);
}
