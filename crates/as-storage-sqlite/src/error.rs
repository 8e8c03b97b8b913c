//! `SqliteError`: what can go wrong with the file, mapped to [`StorageError`] at the trait edge.

use std::fmt;
use std::path::Path;

use as_storage::{StorageError, StorageErrorKind};
use rusqlite::ErrorCode;

/// The backend name used in every [`StorageError`] this crate produces.
pub(crate) const BACKEND: &str = "sqlite";

/// What went wrong with the SQLite file, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SqliteErrorKind {
    /// The path exists but is not an SQLite database (`SQLITE_NOTADB`). Nothing was written to it.
    NotADatabase,
    /// The path is an SQLite database made by something else (it has tables but no agentscope
    /// schema). It is left untouched.
    ForeignDatabase,
    /// The file was written by a newer version of this crate (schema version above what this code knows).
    SchemaTooNew,
    /// The database file is damaged (`SQLITE_CORRUPT`).
    Corrupt,
    /// The file or its directory cannot be written (`SQLITE_READONLY`, a read-only location).
    ReadOnly,
    /// The disk (or the configured `max_page_count`) is full (`SQLITE_FULL`); the write was rolled back.
    DiskFull,
    /// Another connection held the lock for longer than the busy timeout (`SQLITE_BUSY`/`SQLITE_LOCKED`),
    /// or kept changing the WAL index while this one tried to lock it (`SQLITE_PROTOCOL`).
    Busy,
    /// The file cannot be opened or created (missing directory, a directory in its place, permissions).
    CannotOpen,
    /// An I/O error from the operating system (`SQLITE_IOERR`).
    Io,
    /// A value or a statement over SQLite's size limits (`SQLITE_TOOBIG`).
    TooBig,
    /// The store is closed (or was never opened).
    Closed,
    /// Anything else SQLite reported.
    Other,
}

impl fmt::Display for SqliteErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotADatabase => "not a database",
            Self::ForeignDatabase => "not an agentscope session database",
            Self::SchemaTooNew => "schema too new",
            Self::Corrupt => "database corrupt",
            Self::ReadOnly => "read-only",
            Self::DiskFull => "disk full",
            Self::Busy => "busy",
            Self::CannotOpen => "cannot open",
            Self::Io => "i/o error",
            Self::TooBig => "too big",
            Self::Closed => "closed",
            Self::Other => "sqlite error",
        })
    }
}

/// An error of the SQLite backend. It travels as the `source` of a [`StorageError`]; get it
/// back with [`SqliteError::from_storage`].
///
/// ```
/// use as_storage_sqlite::{SqliteError, SqliteErrorKind};
/// let e = SqliteError::new(SqliteErrorKind::DiskFull, "database or disk is full");
/// let s: as_storage::StorageError = e.into_storage("update_session_state");
/// assert_eq!(SqliteError::from_storage(&s).map(|e| e.kind()), Some(SqliteErrorKind::DiskFull));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct SqliteError {
    kind: SqliteErrorKind,
    message: String,
    #[source]
    source: Option<rusqlite::Error>,
}

impl SqliteError {
    /// Builds an error without an underlying SQLite error.
    pub fn new(kind: SqliteErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    /// The kind, to match on.
    pub fn kind(&self) -> SqliteErrorKind {
        self.kind
    }

    /// The human-readable detail.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Finds the `SqliteError` inside a [`StorageError`] produced by this crate.
    pub fn from_storage(err: &StorageError) -> Option<&SqliteError> {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
        while let Some(e) = cur {
            if let Some(found) = e.downcast_ref::<SqliteError>() {
                return Some(found);
            }
            cur = e.source();
        }
        None
    }

    /// The [`StorageErrorKind`] this maps to at the trait edge.
    pub fn storage_kind(&self) -> StorageErrorKind {
        match self.kind {
            SqliteErrorKind::Busy | SqliteErrorKind::Closed => StorageErrorKind::Unavailable,
            SqliteErrorKind::TooBig => StorageErrorKind::TooLarge,
            SqliteErrorKind::NotADatabase
            | SqliteErrorKind::ForeignDatabase
            | SqliteErrorKind::SchemaTooNew
            | SqliteErrorKind::Corrupt
            | SqliteErrorKind::ReadOnly
            | SqliteErrorKind::DiskFull
            | SqliteErrorKind::CannotOpen
            | SqliteErrorKind::Io
            | SqliteErrorKind::Other => StorageErrorKind::Backend,
        }
    }

    /// Wraps this error into a [`StorageError`] for `operation`, keeping it as the source.
    pub fn into_storage(self, operation: &'static str) -> StorageError {
        let message = self.to_string();
        StorageError::new(self.storage_kind(), BACKEND, operation, message).with_source(self)
    }

    /// Maps a rusqlite error, naming `path` in messages about the file itself.
    pub(crate) fn from_rusqlite(err: rusqlite::Error, path: &Path) -> Self {
        let (kind, message) = match &err {
            rusqlite::Error::SqliteFailure(ffi, msg) => {
                let detail = msg.clone().unwrap_or_else(|| ffi.to_string());
                let p = path.display();
                match ffi.code {
                    ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                        (SqliteErrorKind::Busy, format!("{p} is locked by another connection: {detail}"))
                    }
                    // A race on the WAL index's locks that SQLite gave up retrying: transient.
                    ErrorCode::FileLockingProtocolFailed => {
                        (SqliteErrorKind::Busy, format!("{p}: WAL locking race with another connection: {detail}"))
                    }
                    ErrorCode::NotADatabase => (
                        SqliteErrorKind::NotADatabase,
                        format!("{p} is not an SQLite database; refusing to touch it: {detail}"),
                    ),
                    ErrorCode::DatabaseCorrupt => {
                        (SqliteErrorKind::Corrupt, format!("{p} is corrupt (restore it from a backup): {detail}"))
                    }
                    ErrorCode::ReadOnly | ErrorCode::PermissionDenied => {
                        (SqliteErrorKind::ReadOnly, format!("{p} cannot be written: {detail}"))
                    }
                    ErrorCode::DiskFull => (
                        SqliteErrorKind::DiskFull,
                        format!("{p}: the disk or the database size limit is full: {detail}"),
                    ),
                    ErrorCode::CannotOpen => (SqliteErrorKind::CannotOpen, format!("cannot open {p}: {detail}")),
                    ErrorCode::SystemIoFailure => (SqliteErrorKind::Io, format!("i/o error on {p}: {detail}")),
                    ErrorCode::TooBig => (SqliteErrorKind::TooBig, format!("value too big for SQLite: {detail}")),
                    _ => (SqliteErrorKind::Other, detail),
                }
            }
            other => (SqliteErrorKind::Other, other.to_string()),
        };
        Self { kind, message, source: Some(err) }
    }
}

/// What a blocking operation fails with: a backend-specific error, or one already in the contract's terms.
#[derive(Debug)]
pub(crate) enum OpError {
    /// A file/SQLite problem.
    Sqlite(SqliteError),
    /// A contract-level outcome (`NotFound`, `Conflict`, ...).
    Storage(StorageError),
}

impl From<SqliteError> for OpError {
    fn from(e: SqliteError) -> Self {
        Self::Sqlite(e)
    }
}

impl From<StorageError> for OpError {
    fn from(e: StorageError) -> Self {
        Self::Storage(e)
    }
}

impl OpError {
    pub(crate) fn into_storage(self, operation: &'static str) -> StorageError {
        match self {
            Self::Sqlite(e) => e.into_storage(operation),
            Self::Storage(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: std::os::raw::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    /// `SQLITE_PROTOCOL` is a lock race of the WAL (another connection kept changing the
    /// wal-index while this one tried to take its lock): as transient as `SQLITE_BUSY`.
    #[test]
    fn a_wal_locking_protocol_failure_is_retryable_like_busy() {
        let e = SqliteError::from_rusqlite(failure(rusqlite::ffi::SQLITE_PROTOCOL), Path::new("s.db"));
        assert_eq!(e.kind(), SqliteErrorKind::Busy, "{e}");
        let s = e.into_storage("get_session");
        assert_eq!(s.kind(), StorageErrorKind::Unavailable, "{s}");
        assert!(s.is_retryable(), "{s}");
    }
}
