//! Shared helpers of the `reliability_*` test binaries (`cargo xtask reliability`).
//!
//! Every figure a test measures is printed as one `RELIABILITY <name> <value>` line on stdout;
//! `cargo xtask reliability` runs the binaries with `--nocapture` and collects those lines into
//! `docs/reliability.md`. `AS_RELIABILITY_FULL=1` selects the full form (more cases, more rounds).
// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;

use as_storage::{InMemoryStorage, SharedStorage};
use as_storage_redis::{RedisStorage, RedisStorageConfig};
use as_storage_sqlite::SqliteStorage;

/// Whether the full form runs (`AS_RELIABILITY_FULL=1`).
pub fn full() -> bool {
    std::env::var("AS_RELIABILITY_FULL").is_ok_and(|v| v == "1")
}

/// `short` in the short form, `full` in the full form.
pub fn scale(short: u32, full_n: u32) -> u32 {
    if full() { full_n } else { short }
}

/// Prints one figure for the report.
pub fn figure(name: &str, value: impl std::fmt::Display) {
    println!("RELIABILITY {name} {value}");
}

/// An opened in-memory store.
pub async fn memory() -> SharedStorage {
    let s: SharedStorage = Arc::new(InMemoryStorage::new());
    s.open().await.unwrap();
    s
}

/// An opened SQLite store on `path`.
pub async fn sqlite(path: &Path) -> SharedStorage {
    let s: SharedStorage = Arc::new(SqliteStorage::new(path));
    s.open().await.unwrap();
    s
}

/// An opened Redis store on `url`.
pub async fn redis(url: &str) -> SharedStorage {
    let s: SharedStorage = Arc::new(RedisStorage::new(RedisStorageConfig::from_url(url).unwrap()).unwrap());
    s.open().await.unwrap();
    s
}
