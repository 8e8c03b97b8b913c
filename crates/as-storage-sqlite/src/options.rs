//! Tuning knobs of [`crate::SqliteStorage`].

use std::time::Duration;

/// How hard SQLite syncs to disk on commit (`PRAGMA synchronous` in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// Every committed turn survives a crash of the process; a power loss or OS crash may lose the
    /// last few commits but never corrupts the file. SQLite's recommendation for WAL.
    #[default]
    Normal,
    /// Every commit is fsynced: also survives a power loss, at the cost of one fsync per write.
    Full,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// Options of a [`crate::SqliteStorage`]. Build with [`SqliteOptions::default`] and the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use as_storage_sqlite::{SqliteOptions, Synchronous};
/// let o = SqliteOptions::default().with_busy_timeout(Duration::from_secs(2)).with_synchronous(Synchronous::Full);
/// assert_eq!(o.busy_timeout, Duration::from_secs(2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a writer waits for another connection's lock before failing with `Unavailable`.
    /// At most `i32::MAX` milliseconds (about 24.8 days, what SQLite takes) is used.
    pub busy_timeout: Duration,
    /// Most connections (and so blocking threads) used at once by writes; reads have as many
    /// again of their own, so that writes waiting for another process's lock never hold up a read.
    /// At least 1 and at most [`tokio::sync::Semaphore::MAX_PERMITS`] is used.
    pub max_connections: usize,
    /// How long an operation waits for one of those connections when all are in use (by
    /// operations waiting for another process's lock, say) before failing with `Unavailable`
    /// (retryable). Default: 5 s, like [`SqliteOptions::busy_timeout`]. So a write waits at most
    /// this long for a connection, then at most `busy_timeout` for the lock (twice when another
    /// writer changed the row between its optimistic attempt and its locked retry), never longer
    /// however many operations queue. That wait (and only it: a free connection is taken at once)
    /// uses Tokio's timer, so it needs a runtime built with a time driver (`enable_time` or
    /// `enable_all`; `#[tokio::main]` has one); without one it panics.
    pub acquire_timeout: Duration,
    /// Commit durability.
    pub synchronous: Synchronous,
    /// Largest record (or message) JSON accepted, in bytes; larger writes fail with `TooLarge`.
    pub max_record_bytes: usize,
    /// `PRAGMA max_page_count` on every connection: caps the file size (pages of 4096 bytes).
    /// `None` leaves SQLite's default. Mostly useful to test a full disk.
    pub max_page_count: Option<u64>,
    /// Create the file's missing parent directories on open.
    pub create_dirs: bool,
    /// How long a pooled connection goes without reading the file's schema version again (one
    /// query, a few microseconds). A newer build that migrates the file while this store is open
    /// is noticed (`SchemaTooNew`) by each connection at most this long after it last looked.
    /// `Duration::ZERO` reads it before every operation. Default: 1 s. (Whether the file at the
    /// path is still the one opened is checked before every operation whatever this says.)
    pub schema_recheck: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Normal,
            max_record_bytes: as_storage::DEFAULT_MAX_RECORD_BYTES,
            max_page_count: None,
            create_dirs: true,
            schema_recheck: Duration::from_secs(1),
        }
    }
}

/// The longest busy timeout SQLite takes: `i32::MAX` milliseconds.
const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

impl SqliteOptions {
    /// The options as a store uses them: values SQLite or Tokio cannot take (a busy timeout over
    /// `i32::MAX` ms, a connection count of 0 or over a semaphore's `MAX_PERMITS`) clamped into
    /// range instead of panicking. The fields are public, so this cannot be left to the setters.
    pub(crate) fn clamped(mut self) -> Self {
        self.busy_timeout = self.busy_timeout.min(MAX_BUSY_TIMEOUT);
        self.max_connections = self.max_connections.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        self
    }

    /// Sets [`SqliteOptions::busy_timeout`].
    pub fn with_busy_timeout(mut self, t: Duration) -> Self {
        self.busy_timeout = t;
        self
    }

    /// Sets [`SqliteOptions::max_connections`] (at least 1 and at most
    /// [`tokio::sync::Semaphore::MAX_PERMITS`] is used).
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Sets [`SqliteOptions::acquire_timeout`].
    pub fn with_acquire_timeout(mut self, t: Duration) -> Self {
        self.acquire_timeout = t;
        self
    }

    /// Sets [`SqliteOptions::synchronous`].
    pub fn with_synchronous(mut self, s: Synchronous) -> Self {
        self.synchronous = s;
        self
    }

    /// Sets [`SqliteOptions::max_record_bytes`].
    pub fn with_max_record_bytes(mut self, n: usize) -> Self {
        self.max_record_bytes = n;
        self
    }

    /// Sets [`SqliteOptions::max_page_count`].
    pub fn with_max_page_count(mut self, pages: Option<u64>) -> Self {
        self.max_page_count = pages;
        self
    }

    /// Sets [`SqliteOptions::create_dirs`].
    pub fn with_create_dirs(mut self, yes: bool) -> Self {
        self.create_dirs = yes;
        self
    }

    /// Sets [`SqliteOptions::schema_recheck`].
    pub fn with_schema_recheck(mut self, every: Duration) -> Self {
        self.schema_recheck = every;
        self
    }
}
