//! The shared storage conformance suite against `SqliteStorage`, one file in a temp dir per
//! scenario; `reopen` opens the same file again as an independent store (a second pool of
//! connections), which is what another process does.

use std::sync::Arc;

use as_storage::conformance::{BuildOptions, StorageFactory};
use as_storage::{SharedStorage, StorageBase, StorageError};
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
}

as_storage::storage_conformance_tests!(SqliteFactory);
