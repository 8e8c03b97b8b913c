//! `--storage URL` / `AGENTSCOPE_STORAGE`: parse the URL and open the store it names.
//!
//! | URL | store |
//! |---|---|
//! | `memory` | [`as_storage::InMemoryStorage`]: lives for one process |
//! | `sqlite:PATH` | `as_storage_sqlite::SqliteStorage` on one file |
//! | `redis://…`, `rediss://…` | `as-storage-redis` (not built into the binary yet: exit 2) |
//! | (none) | the default store (see [`DEFAULT_SQLITE_FILE`]) |

use std::path::PathBuf;
use std::sync::Arc;

use as_storage::SharedStorage;

use crate::exit::{CliError, CliResult, ExitKind};

/// File name of the default SQLite store (in `AGENTSCOPE_HOME` when set, else the working directory).
pub(crate) const DEFAULT_SQLITE_FILE: &str = "agentscope.db";

/// A parsed `--storage` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StorageUrl {
    /// `memory`.
    Memory,
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `redis://…` or `rediss://…`, kept whole (query options included).
    Redis(String),
}

impl StorageUrl {
    /// Parses a `--storage` value; `None` is the default store.
    pub(crate) fn parse(url: Option<&str>) -> CliResult<Self> {
        let Some(url) = url.map(str::trim) else { return Ok(Self::default_store()) };
        if url == "memory" || url == "memory:" {
            return Ok(Self::Memory);
        }
        // ---- sqlite engineer: options (`?busy_timeout=…`) and path rules go here ----
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path.is_empty() {
                return Err(CliError::new(ExitKind::Usage, "--storage sqlite:PATH needs a file path"));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        // ---- redis engineer: validate `redis://[:password@]host:port[/db][?ttl=…&layout=…]` here ----
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            return Ok(Self::Redis(url.to_owned()));
        }
        Err(CliError::new(
            ExitKind::Usage,
            format!("unsupported --storage {url:?}: expected memory, sqlite:PATH or redis://host:port"),
        ))
    }

    /// The store used without `--storage`.
    // ---- sqlite engineer: the platform data directory default goes here ----
    fn default_store() -> Self {
        let dir = std::env::var_os("AGENTSCOPE_HOME").map(PathBuf::from).unwrap_or_default();
        Self::Sqlite(dir.join(DEFAULT_SQLITE_FILE))
    }

    /// Builds and opens the store. A backend that cannot be reached is exit 6.
    pub(crate) async fn open(&self) -> CliResult<SharedStorage> {
        let storage: SharedStorage = match self {
            Self::Memory => Arc::new(as_storage::InMemoryStorage::new()),
            // ---- sqlite engineer: SqliteStorage options ----
            Self::Sqlite(path) => Arc::new(as_storage_sqlite::SqliteStorage::new(path)),
            // ---- redis engineer: `Self::Redis(url) => Arc::new(RedisStorage::from_url(url)?)` ----
            Self::Redis(url) => {
                return Err(CliError::new(
                    ExitKind::Usage,
                    format!("--storage {url}: the Redis backend is not built into this binary yet"),
                ));
            }
        };
        storage.open().await.map_err(crate::cmd::chat::storage_error)?;
        Ok(storage)
    }
}

/// Parses and opens `url` (the `--storage` value).
pub(crate) async fn open(url: Option<&str>) -> CliResult<SharedStorage> {
    StorageUrl::parse(url)?.open().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expect: Result<StorageUrl, ExitKind>) {
        let got = StorageUrl::parse(Some(url)).map_err(|e| e.kind());
        assert_eq!(got, expect, "{url:?}");
    }

    #[test]
    fn parses_urls() {
        check("memory", Ok(StorageUrl::Memory));
        check(" memory ", Ok(StorageUrl::Memory));
        check("sqlite:/tmp/a.db", Ok(StorageUrl::Sqlite("/tmp/a.db".into())));
        check("sqlite:rel.db", Ok(StorageUrl::Sqlite("rel.db".into())));
        check("sqlite://abs/x.db", Ok(StorageUrl::Sqlite("abs/x.db".into())));
        check("redis://127.0.0.1:6379/0?ttl=60", Ok(StorageUrl::Redis("redis://127.0.0.1:6379/0?ttl=60".into())));
        check("rediss://h:1", Ok(StorageUrl::Redis("rediss://h:1".into())));
        check("sqlite:", Err(ExitKind::Usage));
        check("ftp://x", Err(ExitKind::Usage));
        check("", Err(ExitKind::Usage));
        check("Memory", Err(ExitKind::Usage));
    }

    #[test]
    fn default_is_sqlite() {
        assert!(matches!(StorageUrl::parse(None), Ok(StorageUrl::Sqlite(p)) if p.ends_with(DEFAULT_SQLITE_FILE)));
    }

    #[tokio::test]
    async fn memory_opens() {
        let s = open(Some("memory")).await.unwrap();
        assert_eq!(s.backend_name(), "memory");
    }
}
