//! Opening the file safely and a small pool of connections used from blocking threads.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use as_storage::{StorageError, StorageErrorKind};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use crate::error::{BACKEND, OpError, SqliteError, SqliteErrorKind};
use crate::options::SqliteOptions;
use crate::schema;

/// Shared by every clone of a storage handle.
pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    pub(crate) opts: SqliteOptions,
    pool: Mutex<PoolState>,
    /// Connections in use by writes, and by reads: apart, so that writes waiting for another
    /// process's lock never hold up a read (WAL readers need no lock).
    permits: Arc<Semaphore>,
    read_permits: Arc<Semaphore>,
    opening: tokio::sync::Mutex<()>,
    /// The identity of the file `open()` opened (new pooled connections must find the same one).
    identity: Mutex<Option<FileId>>,
}

struct PoolState {
    open: bool,
    /// Each knows its file: one taken out before a close and back after a reopen (perhaps of
    /// another file, after a restore) is checked at its next checkout like any other.
    idle: Vec<Pooled>,
}

/// An idle connection, the identity of the file it was opened on, and when its schema version
/// was last read.
struct Pooled {
    conn: Connection,
    file: Option<FileId>,
    schema_checked: Instant,
}

impl Inner {
    pub(crate) fn new(path: PathBuf, opts: SqliteOptions) -> Self {
        let opts = opts.clamped();
        let permits = Arc::new(Semaphore::new(opts.max_connections));
        let read_permits = Arc::new(Semaphore::new(opts.max_connections));
        Self {
            path,
            opts,
            pool: Mutex::new(PoolState { open: false, idle: Vec::new() }),
            permits,
            read_permits,
            opening: tokio::sync::Mutex::new(()),
            identity: Mutex::new(None),
        }
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        // A panic while holding this lock cannot leave the pool inconsistent (push/pop only).
        self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state().open
    }

    /// `Unavailable` when the store is not open: checked after the ids and before anything is
    /// done with the content (depth, size, encoding), as the memory store does. Every operation
    /// checks again when it takes its connection.
    pub(crate) fn ready(&self, op: &'static str) -> Result<(), StorageError> {
        if self.is_open() { Ok(()) } else { Err(Self::closed().into_storage(op)) }
    }

    pub(crate) fn map(&self, err: rusqlite::Error) -> SqliteError {
        SqliteError::from_rusqlite(err, &self.path)
    }

    /// Every connection stayed in use for [`SqliteOptions::acquire_timeout`].
    fn no_connection(&self) -> SqliteError {
        SqliteError::new(
            SqliteErrorKind::Busy,
            format!(
                "all {} connections of {} stayed in use for {:?} (acquire_timeout)",
                self.opts.max_connections,
                self.path.display(),
                self.opts.acquire_timeout
            ),
        )
    }

    fn closed() -> SqliteError {
        SqliteError::new(SqliteErrorKind::Closed, "the store is not open (call open() first, or it was closed)")
    }

    /// Opens the file (creating and initialising it when absent), checks it is ours and
    /// migrates it. Idempotent.
    pub(crate) async fn open(self: &Arc<Self>) -> Result<(), StorageError> {
        let _guard = self.opening.lock().await;
        if self.is_open() {
            return Ok(());
        }
        let inner = Arc::clone(self);
        // The identity is read right after the open, on the blocking thread like the open itself.
        let (conn, identity) = tokio::task::spawn_blocking(move || {
            initialize(&inner.path, &inner.opts).map(|conn| (conn, file_id(&inner.path)))
        })
        .await
        .map_err(|e| worker_died("open", &e))?
        .map_err(|e| e.into_storage("open"))?;
        *self.identity.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = identity;
        let mut st = self.state();
        st.idle.push(Pooled { conn, file: identity, schema_checked: Instant::now() });
        st.open = true;
        Ok(())
    }

    /// Closes every idle connection; in-flight ones are closed when they come back. Idempotent.
    /// Closing the last connection checkpoints the WAL (file I/O), so it happens on a blocking thread.
    pub(crate) async fn close(&self) {
        let idle = self.take_idle_and_mark_closed();
        if !idle.is_empty() {
            // A failed join means the drop panicked; nothing is left to release either way.
            let _ = tokio::task::spawn_blocking(move || drop(idle)).await;
        }
    }

    fn take_idle_and_mark_closed(&self) -> Vec<Pooled> {
        let mut st = self.state();
        st.open = false;
        std::mem::take(&mut st.idle)
    }

    /// Runs `f`, which may write, with a pooled connection on a blocking thread.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, op: &'static str, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Inner) -> Result<T, OpError> + Send + 'static,
    {
        self.run_with(&self.permits, op, f).await
    }

    /// Runs `f`, which only reads, with a pooled connection on a blocking thread; reads have
    /// their own [`SqliteOptions::max_connections`] connections, so they never wait behind writes.
    pub(crate) async fn run_read<T, F>(self: &Arc<Self>, op: &'static str, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Inner) -> Result<T, OpError> + Send + 'static,
    {
        self.run_with(&self.read_permits, op, f).await
    }

    async fn run_with<T, F>(
        self: &Arc<Self>,
        permits: &Arc<Semaphore>,
        op: &'static str,
        f: F,
    ) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Inner) -> Result<T, OpError> + Send + 'static,
    {
        self.ready(op)?;
        // A permit that is free is taken at once, without the timer: only a wait for a busy pool
        // arms it (so a runtime without a time driver runs the store until the pool is full).
        let permit = match Arc::clone(permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Self::closed().into_storage(op)),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                match tokio::time::timeout(self.opts.acquire_timeout, Arc::clone(permits).acquire_owned()).await {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(Self::closed().into_storage(op)),
                    Err(_) => return Err(self.no_connection().into_storage(op)),
                }
            }
        };
        let inner = Arc::clone(self);
        let joined = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut pooled = inner.checkout()?;
            let out = f(&mut pooled.conn, &inner);
            inner.checkin(pooled);
            out
        })
        .await;
        match joined {
            Ok(r) => r.map_err(|e| e.into_storage(op)),
            Err(e) => Err(worker_died(op, &e)),
        }
    }

    /// An idle connection, or a new one, after the checks a new connection makes: the file at
    /// the path is still the one `open()` opened and the connection is to that file (on every
    /// use), and its schema is one this build knows (another process may have migrated it since
    /// the connection was made; read again at most [`SqliteOptions::schema_recheck`] after the last time). A
    /// pooled connection to another file (from before a reopen) is dropped.
    fn checkout(&self) -> Result<Pooled, OpError> {
        let identity = *self.identity.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let pooled = {
                let mut st = self.state();
                if !st.open {
                    return Err(Self::closed().into());
                }
                st.idle.pop()
            };
            let now = file_id(&self.path);
            if let Some(expected) = identity
                && now != Some(expected)
            {
                return Err(replaced(&self.path).into());
            }
            let Some(pooled) = pooled else {
                let conn = connect(&self.path, &self.opts, identity)?;
                return Ok(Pooled { conn, file: now, schema_checked: Instant::now() });
            };
            if pooled.file != now {
                continue;
            }
            let mut pooled = pooled;
            if pooled.schema_checked.elapsed() >= self.opts.schema_recheck {
                let map = |e| SqliteError::from_rusqlite(e, &self.path);
                schema::check_known(&pooled.conn, schema::MIGRATIONS, &map)?;
                pooled.schema_checked = Instant::now();
            }
            return Ok(pooled);
        }
    }

    fn checkin(&self, pooled: Pooled) {
        // A connection left inside a transaction (it cannot happen with rusqlite's guards, but be
        // safe) is dropped, which rolls it back.
        if !pooled.conn.is_autocommit() {
            return;
        }
        let mut st = self.state();
        if st.open {
            st.idle.push(pooled);
        }
    }
}

fn replaced(path: &Path) -> SqliteError {
    SqliteError::new(
        SqliteErrorKind::CannotOpen,
        format!("{} was replaced or moved while the store was open; open the store again", path.display()),
    )
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropped without `close()`: release the connections off the async runtime when there is one.
        let idle = self.take_idle_and_mark_closed();
        if idle.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || drop(idle));
            }
            Err(_) => drop(idle),
        }
    }
}

fn worker_died(op: &'static str, e: &tokio::task::JoinError) -> StorageError {
    StorageError::new(StorageErrorKind::Backend, BACKEND, op, format!("sqlite worker thread failed: {e}"))
}

fn io_error(path: &Path, what: &str, e: &io::Error) -> SqliteError {
    let kind = match e.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => SqliteErrorKind::ReadOnly,
        io::ErrorKind::StorageFull => SqliteErrorKind::DiskFull,
        _ => SqliteErrorKind::CannotOpen,
    };
    SqliteError::new(kind, format!("cannot {what} {}: {e}", path.display()))
}

/// One configured connection to an existing, initialised file. The pool opens these after
/// `open()`, so each one checks again what `open()` checked: the file is still the one opened
/// (`identity`, not replaced by a restore or a move) and its schema is still one this build knows
/// (another process may have migrated it since).
pub(crate) fn connect(path: &Path, opts: &SqliteOptions, identity: Option<FileId>) -> Result<Connection, SqliteError> {
    let conn = open_raw(path, opts)?;
    if let Some(expected) = identity
        && file_id(path) != Some(expected)
    {
        return Err(replaced(path));
    }
    let map = |e| SqliteError::from_rusqlite(e, path);
    schema::preflight(&conn, schema::MIGRATIONS, &map)?;
    configure(&conn, path, opts)?;
    Ok(conn)
}

/// What identifies a file on its file system (device and inode on Unix).
pub(crate) type FileId = (u64, u64);

/// The identity of the file at `path`, where the platform has one.
pub(crate) fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// `path` as SQLite must be given it to open exactly that file. The bundled SQLite is built with
/// `SQLITE_USE_URI`, so a name beginning with `file:` would be parsed as a URI (with query
/// parameters such as `nolock=1`) whatever the open flags say; `./` in front keeps it a plain
/// relative file name.
fn literal_path(path: &Path) -> std::borrow::Cow<'_, Path> {
    if path.as_os_str().as_encoded_bytes().starts_with(b"file:") {
        std::borrow::Cow::Owned(Path::new(".").join(path))
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// Opens without changing anything in the file, and reads its header.
fn open_raw(path: &Path, opts: &SqliteOptions) -> Result<Connection, SqliteError> {
    let map = |e| SqliteError::from_rusqlite(e, path);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(literal_path(path), flags).map_err(map)?;
    conn.busy_timeout(opts.busy_timeout).map_err(map)?;
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(map)? {
        return Err(SqliteError::new(
            SqliteErrorKind::ReadOnly,
            format!("{} can only be opened read-only (check its permissions and its directory's)", path.display()),
        ));
    }
    // The first read of the header: a file that is not a database fails here, before any write.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0)).map_err(map)?;
    Ok(conn)
}

/// Per-connection settings; switches the file to WAL (a write), so only for files known to be ours.
fn configure(conn: &Connection, path: &Path, opts: &SqliteOptions) -> Result<(), SqliteError> {
    let map = |e| SqliteError::from_rusqlite(e, path);
    let mode = switch_to_wal(conn, opts.busy_timeout).map_err(map)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SqliteError::new(
            SqliteErrorKind::Other,
            format!("{}: could not switch to WAL mode (journal_mode is {mode})", path.display()),
        ));
    }
    // journal_size_limit: after a checkpoint, truncate a WAL that grew past 64 MiB (big turns).
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA journal_size_limit = {};",
        opts.synchronous.pragma(),
        64 * 1024 * 1024
    ))
    .map_err(map)?;
    if let Some(pages) = opts.max_page_count {
        conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |r| r.get::<_, i64>(0)).map_err(map)?;
    }
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// `PRAGMA journal_mode = WAL`, retried for up to `busy_timeout` while it is `SQLITE_BUSY`: on a new
/// file still in rollback mode, processes opening it at once each hold a read lock and want the write
/// lock for the switch, and SQLite answers all but one `SQLITE_BUSY` at once, without calling the
/// busy handler (waiting could deadlock). Once a process has switched, the others' read locks are
/// gone and their retry finds the file in WAL mode.
fn switch_to_wal(conn: &Connection, busy_timeout: std::time::Duration) -> rusqlite::Result<String> {
    let deadline = Instant::now() + busy_timeout;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

/// Creates the file if needed (never over an existing one), checks it and migrates it.
pub(crate) fn initialize(path: &Path, opts: &SqliteOptions) -> Result<Connection, SqliteError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(SqliteError::new(
                SqliteErrorKind::CannotOpen,
                format!("{} is a directory, not a database file", path.display()),
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
                && !parent.exists()
            {
                if !opts.create_dirs {
                    return Err(SqliteError::new(
                        SqliteErrorKind::CannotOpen,
                        format!("the directory {} does not exist", parent.display()),
                    ));
                }
                std::fs::create_dir_all(parent).map_err(|e| io_error(parent, "create the directory", &e))?;
            }
            // Create the empty file ourselves, exclusively: an empty file is an empty database to
            // SQLite, and `create_new` can never truncate a file that appeared meanwhile. It holds
            // conversations, so on Unix only its owner may read it (SQLite gives the WAL and
            // shared-memory files it creates beside it the same mode).
            let mut create = std::fs::OpenOptions::new();
            create.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut create, 0o600);
            match create.open(path) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error(path, "create", &e)),
            }
        }
        Err(e) => return Err(io_error(path, "inspect", &e)),
    }
    let mut conn = open_raw(path, opts)?;
    let map = |e| SqliteError::from_rusqlite(e, path);
    // Refuse someone else's database or a newer schema before the first write (the WAL switch).
    schema::preflight(&conn, schema::MIGRATIONS, &map)?;
    configure(&conn, path, opts)?;
    schema::migrate(&mut conn, schema::MIGRATIONS, &map)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_pooled_connection_checks_the_file_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, other) = (dir.path().join("a.db"), dir.path().join("b.db"));
        let opts = SqliteOptions::default();
        drop(initialize(&path, &opts).unwrap());
        let id = file_id(&path);
        assert!(id.is_some());
        connect(&path, &opts, id).unwrap();
        // Another process migrated the file to a newer schema.
        let raw = Connection::open(&path).unwrap();
        raw.execute("INSERT INTO agentscope_schema VALUES (99, 'from the future', '2030-01-01T00:00:00')", []).unwrap();
        drop(raw);
        assert_eq!(connect(&path, &opts, id).unwrap_err().kind(), SqliteErrorKind::SchemaTooNew);
        // The file was replaced (a restore): same name, another file.
        drop(initialize(&other, &opts).unwrap());
        std::fs::rename(&other, &path).unwrap();
        let e = connect(&path, &opts, id).unwrap_err();
        assert_eq!(e.kind(), SqliteErrorKind::CannotOpen);
        assert!(e.message().contains("replaced"), "{e}");
    }
}
