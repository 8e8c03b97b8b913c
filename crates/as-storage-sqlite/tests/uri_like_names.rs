//! A relative file name that begins with `file:` is a file name, not an SQLite URI (the bundled
//! SQLite is built with `SQLITE_USE_URI`, so it would otherwise read `?nolock=1` and open another
//! file without locking). Its own test binary: it changes the process's working directory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_storage::{Owner, SessionConfig, StorageBase, UpsertSession};
use as_storage_sqlite::SqliteStorage;

#[tokio::test]
async fn a_name_beginning_with_file_colon_is_that_file() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let name = "file:sessions.db?nolock=1";
    let s = SqliteStorage::open_path(name).await.unwrap();
    let owner = Owner::new("u1", "a1");
    let rec = s.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await.unwrap();
    s.close().await.unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files.first().map(String::as_str), Some(name), "{files:?}");
    assert!(!files.iter().any(|f| f == "sessions.db"), "the URI's file was opened: {files:?}");
    let again = SqliteStorage::open_path(name).await.unwrap();
    assert_eq!(again.get_session(&owner.session(rec.id.clone())).await.unwrap().map(|r| r.id), Some(rec.id));
    again.close().await.unwrap();
}
