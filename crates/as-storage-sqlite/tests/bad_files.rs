//! Bad files give typed, clear errors, and nothing is ever recreated over a user's file:
//! a file that is not a database, someone else's database, a newer schema, a directory in the
//! way, a read-only location, a full disk, a corrupt file and a lock held too long.

// clippy.toml allows these inside #[test] fns only; the helpers below are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use as_message::Msg;
use as_storage::{Owner, SessionConfig, StorageBase, StorageError, StorageErrorKind, UpsertSession};
use as_storage_sqlite::{SqliteError, SqliteErrorKind, SqliteOptions, SqliteStorage};

fn owner() -> Owner {
    Owner::new("user-1", "agent-1")
}

fn sqlite_kind(e: &StorageError) -> SqliteErrorKind {
    SqliteError::from_storage(e).unwrap_or_else(|| panic!("no SqliteError inside {e}")).kind()
}

async fn open_err(path: &Path) -> StorageError {
    SqliteStorage::new(path).open().await.unwrap_err()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let content = "my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).unwrap();
    let e = open_err(&path).await;
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::NotADatabase);
    assert_eq!(e.kind(), StorageErrorKind::Backend);
    assert!(e.to_string().contains("not an SQLite database"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "the message names the file: {e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content, "the file is untouched");
    assert_eq!(files_in(dir.path()), ["sessions.db"], "no -wal/-shm left beside it");
}

#[tokio::test]
async fn someone_elses_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');").unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let e = open_err(&path).await;
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::ForeignDatabase);
    assert!(e.to_string().contains("not made by agentscope"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "not switched to WAL, not migrated");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let s = SqliteStorage::open_path(&path).await.unwrap();
    s.close().await.unwrap();
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("INSERT INTO agentscope_schema VALUES (99, 'from the future', '2030-01-01T00:00:00')", []).unwrap();
    }
    let e = open_err(&path).await;
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::SchemaTooNew);
    assert!(e.to_string().contains("schema version 99"), "{e}");
    let c = rusqlite::Connection::open(&path).unwrap();
    let max: i64 = c.query_row("SELECT max(version) FROM agentscope_schema", [], |r| r.get(0)).unwrap();
    assert_eq!(max, 99, "not downgraded");
}

#[tokio::test]
async fn a_directory_in_the_way_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_err(dir.path()).await;
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::CannotOpen);
    assert!(e.to_string().contains("is a directory"), "{e}");
}

#[tokio::test]
async fn a_full_disk_is_a_typed_error_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    // 24 pages of 4 KiB: room for the schema and a little data.
    let s = SqliteStorage::with_options(&path, SqliteOptions::default().with_max_page_count(Some(24)));
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let mut state = rec.state.clone();
    let mut last_ok = rec.revision();
    let mut full = None;
    for i in 0..200 {
        state.context.push(Msg::user("user", format!("{i} {}", "x".repeat(3000))));
        match s.update_session_state(&key, &state, None).await {
            Ok(rev) => last_ok = rev,
            Err(e) => {
                full = Some((i, e));
                break;
            }
        }
    }
    let (i, e) = full.expect("the size limit is reached");
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::DiskFull, "{e}");
    assert!(e.to_string().contains("full"), "{e}");
    // The failed write was rolled back; the store still reads and the file is sound.
    let got = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(got.revision(), last_ok);
    assert_eq!(got.state.context.len(), i);
    assert!(s.integrity_check().await.unwrap().is_empty());
    // Small writes that fit still work after the failure.
    let small = UpsertSession::new(owner(), SessionConfig::new("ws")).with_session_id(rec.id.clone());
    s.upsert_session(small).await.unwrap();
}

#[tokio::test]
async fn a_lock_held_too_long_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let s = SqliteStorage::with_options(&path, SqliteOptions::default().with_busy_timeout(Duration::from_millis(200)));
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let mut state = rec.state.clone();
    state.context.push(Msg::user("user", "blocked"));
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let e = s.update_session_state(&key, &state, None).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
    assert!(e.is_retryable());
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::Busy);
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited for the busy timeout");
    // Readers are not blocked by a writer in WAL mode.
    assert_eq!(s.get_session(&key).await.unwrap().unwrap(), rec);
    holder.execute_batch("ROLLBACK").unwrap();
    s.update_session_state(&key, &state, None).await.unwrap();
}

#[tokio::test]
async fn a_corrupt_file_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let s = SqliteStorage::open_path(&path).await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    s.close().await.unwrap();
    drop(s);
    // Overwrite every page after the first (the schema stays readable) with garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 4096, "the WAL was checkpointed into the file on close");
    for b in bytes.iter_mut().skip(4096) {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let s = SqliteStorage::new(&path);
    let e = match s.open().await {
        Err(e) => e,
        Ok(()) => s.get_session(&owner().session(rec.id)).await.unwrap_err(),
    };
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("corrupt"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Read-only locations. As root, permissions do not stop writes, so the attempt runs in a child
// process (this binary re-executed) as `nobody`.

const CHILD_PATH: &str = "AS_SQLITE_RO_PATH";

fn running_as_root(dir: &Path) -> bool {
    let probe = dir.join(".uid-probe");
    std::fs::write(&probe, b"").unwrap();
    let uid = std::fs::metadata(&probe).unwrap().uid();
    std::fs::remove_file(&probe).unwrap();
    uid == 0
}

/// Opens `path` in a process that permissions apply to; returns its one-line report.
fn open_elsewhere(test: &str, dir: &Path, path: &Path) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if running_as_root(dir) {
        // `nobody` may not reach the build directory (a checkout under /root): run a copy of
        // this binary from the world-readable temp dir.
        let copy = dir.join("bad_files_test_bin");
        std::fs::copy(&exe, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new(copy);
        cmd.uid(65534).gid(65534).current_dir(dir);
        cmd
    } else {
        Command::new(exe)
    };
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"]).env(CHILD_PATH, path);
    // ETXTBSY: another test thread forked while the copy was still open for writing; its child
    // closes that descriptor on exec, so trying again succeeds.
    let out = (0..100)
        .find_map(|_| match cmd.output() {
            Err(e) if e.raw_os_error() == Some(26) => {
                std::thread::yield_now();
                None
            }
            other => Some(other.unwrap()),
        })
        .expect("the copied test binary stayed busy");
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("AS_SQLITE_RO "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no report line in {stdout:?}; stderr {}", String::from_utf8_lossy(&out.stderr)))
}

/// Child: tries to open the store and reports the error kind.
fn child_open_and_report(path: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let line = match rt.block_on(SqliteStorage::open_path(path)) {
        Ok(_) => "opened".to_owned(),
        Err(e) => format!("{:?} {e}", SqliteError::from_storage(&e).map(SqliteError::kind)),
    };
    // Leading newline: libtest may have printed "test name ... " without one.
    println!("\nAS_SQLITE_RO {line}");
}

/// A tree everyone can traverse (the child may run as `nobody`), with `leaf` at `mode`.
fn world_dir(mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let leaf = dir.path().join("data");
    std::fs::create_dir(&leaf).unwrap();
    std::fs::set_permissions(&leaf, std::fs::Permissions::from_mode(mode)).unwrap();
    (dir, leaf)
}

#[test]
fn a_read_only_directory_is_a_typed_error() {
    if let Ok(p) = std::env::var(CHILD_PATH) {
        return child_open_and_report(&p);
    }
    let (dir, leaf) = world_dir(0o555);
    let path = leaf.join("sessions.db");
    let report = open_elsewhere("a_read_only_directory_is_a_typed_error", dir.path(), &path);
    assert!(report.starts_with("Some(ReadOnly)"), "{report}");
    assert!(report.contains(&path.display().to_string()), "{report}");
    assert!(!path.exists());
}

#[test]
fn a_read_only_file_is_a_typed_error() {
    if let Ok(p) = std::env::var(CHILD_PATH) {
        return child_open_and_report(&p);
    }
    let (dir, leaf) = world_dir(0o777);
    let path = leaf.join("sessions.db");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = SqliteStorage::open_path(&path).await.unwrap();
        s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        s.close().await.unwrap();
    });
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let report = open_elsewhere("a_read_only_file_is_a_typed_error", dir.path(), &path);
    assert!(report.starts_with("Some(ReadOnly)"), "{report}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file is untouched");
}

/// The checks a new connection makes (the file is still the one opened, its schema is one this
/// build knows) hold for a connection the pool reuses too: otherwise a store that keeps its
/// connections would go on writing to a file a restore moved away, or to a newer build's schema.
#[tokio::test]
async fn pooled_connections_check_the_file_and_its_schema_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let s = SqliteStorage::with_options(&path, SqliteOptions::default().with_schema_recheck(Duration::ZERO));
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    // A newer build migrated the file meanwhile.
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("INSERT INTO agentscope_schema VALUES (99, 'from the future', '2030-01-01T00:00:00')", []).unwrap();
    }
    let e = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws2"))).await.unwrap_err();
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::SchemaTooNew, "{e}");
    let e = s.get_session(&key).await.unwrap_err();
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::SchemaTooNew, "{e}");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("DELETE FROM agentscope_schema WHERE version = 99", []).unwrap();
    }
    assert!(s.get_session(&key).await.unwrap().is_some());

    // A restore moved another file into its place: nothing is read from or written to either.
    let other = dir.path().join("other.db");
    let o = SqliteStorage::open_path(&other).await.unwrap();
    o.close().await.unwrap();
    std::fs::rename(&path, dir.path().join("moved-away.db")).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let e = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws3"))).await.unwrap_err();
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::CannotOpen, "{e}");
    assert!(e.to_string().contains("replaced or moved"), "{e}");
    let e = s.get_session(&key).await.unwrap_err();
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::CannotOpen, "{e}");
    // Opened again, the store works on the file now at the path (the restored one).
    s.close().await.unwrap();
    s.open().await.unwrap();
    assert!(s.get_session(&key).await.unwrap().is_none(), "the restored file has no such session");
    s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws4"))).await.unwrap();
    let moved = SqliteStorage::open_path(dir.path().join("moved-away.db")).await.unwrap();
    let listed = moved.list_sessions(&owner(), &as_storage::PageRequest::first(10)).await.unwrap();
    assert_eq!(listed.sessions.len(), 1, "nothing was written to the moved-away file");
}

/// Reads have connections of their own: with every write connection taken by a write waiting for
/// another process's lock, a read still runs at once (WAL readers need no lock) instead of
/// queueing behind the writes until they give up.
#[tokio::test]
async fn reads_do_not_queue_behind_writes_waiting_for_a_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let opts = SqliteOptions::default()
        .with_max_connections(1)
        .with_busy_timeout(Duration::from_secs(30))
        .with_acquire_timeout(Duration::from_secs(30));
    let s = SqliteStorage::with_options(&path, opts);
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    // Another process holds the write lock.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // Polled once, a write takes the only write connection (its permit is taken on the first
    // poll, when one is free) and hands the work to a blocking thread, where it waits for the
    // lock; polled once, a second write queues for the connection. Both are in progress from
    // here on: neither can finish before the COMMIT below (short of a 30 s timeout).
    let mut writer = std::pin::pin!(s.update_session_state(&key, &rec.state, None));
    let mut second = std::pin::pin!(s.update_session_state(&key, &rec.state, None));
    assert!(poll_once(writer.as_mut()).await.is_pending(), "the write waits for the other process's lock");
    assert!(poll_once(second.as_mut()).await.is_pending(), "the second write waits for the connection");
    // Reads run at once (a read queued behind the writes would wait 30 s, then fail Busy).
    assert_eq!(s.get_session(&key).await.unwrap().map(|r| r.id), Some(rec.id.clone()));
    let listed = s.list_sessions(&owner(), &as_storage::PageRequest::first(5)).await.unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert!(poll_once(writer.as_mut()).await.is_pending(), "the reads ran while the write still waited");
    assert!(poll_once(second.as_mut()).await.is_pending(), "the reads ran while the second write still queued");
    other.execute_batch("COMMIT").unwrap();
    writer.await.unwrap();
    second.await.unwrap();
}

/// Polls `f` once (with the caller's waker, so a later `.await` of it is woken as usual).
async fn poll_once<F: std::future::Future>(mut f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await
}

/// A write queued behind writes that wait for another process's lock gives up after
/// `acquire_timeout` with a retryable `Busy` (`Unavailable`), however long their `busy_timeout`
/// is: a queue of turns never waits `busy_timeout` once per turn ahead of it.
#[tokio::test]
async fn a_write_waiting_for_a_connection_gives_up_after_acquire_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let opts = SqliteOptions::default()
        .with_max_connections(1)
        .with_busy_timeout(Duration::from_secs(60))
        .with_acquire_timeout(Duration::from_millis(100));
    let s = SqliteStorage::with_options(&path, opts);
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut state = rec.state.clone();
    state.context.push(Msg::user("user", "first"));
    let writer = {
        let (s, key, state) = (s.clone(), key.clone(), state.clone());
        tokio::spawn(async move { s.update_session_state(&key, &state, None).await })
    };
    // The first write takes the only write connection (a single-threaded test runtime runs it on
    // this yield) and holds it until the lock is released below, so the second can only end by
    // giving up (without the bound it would wait the first's 60 s).
    tokio::task::yield_now().await;
    let second = tokio::time::timeout(Duration::from_secs(30), s.update_session_state(&key, &rec.state, None))
        .await
        .expect("the queued write gave up instead of waiting for the connection");
    let e = second.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
    assert!(e.is_retryable());
    assert_eq!(sqlite_kind(&e), SqliteErrorKind::Busy);
    assert!(e.to_string().contains("acquire_timeout"), "{e}");
    assert!(!writer.is_finished(), "the first write still waits for the lock");
    other.execute_batch("COMMIT").unwrap();
    writer.await.unwrap().unwrap();
    assert_eq!(s.get_session(&key).await.unwrap().unwrap().state.context.len(), 1, "only the first write landed");
}
