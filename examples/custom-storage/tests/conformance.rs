//! Runs the whole as-storage conformance suite against `JsonDirStorage`: this file is all a
//! backend crate needs (a factory and one macro call, with the scenarios it expects to skip).

use std::sync::Arc;

use as_storage::conformance::{BuildOptions, StorageFactory};
use as_storage::{SharedStorage, StorageBase, StorageError};
use example_custom_storage::JsonDirStorage;

/// Each scenario gets its own temporary directory, removed when the guard drops.
struct JsonDirFactory;

impl StorageFactory for JsonDirFactory {
    type Guard = tempfile::TempDir;

    async fn build(&self, options: &BuildOptions) -> Result<(tempfile::TempDir, SharedStorage), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| {
            StorageError::new(as_storage::StorageErrorKind::Backend, "json-dir", "build", "no temp dir").with_source(e)
        })?;
        let mut store = JsonDirStorage::new(dir.path());
        if let Some(max) = options.max_record_bytes {
            store = store.with_max_record_bytes(max);
        }
        store.open().await?;
        Ok((dir, Arc::new(store)))
    }

    /// A new instance over the same directory, as after a process restart.
    async fn reopen(&self, guard: &tempfile::TempDir) -> Result<Option<SharedStorage>, StorageError> {
        let store = JsonDirStorage::new(guard.path());
        store.open().await?;
        Ok(Some(Arc::new(store)))
    }
}

// One test per scenario. List the scenarios your backend is expected to skip, exactly: any other
// skip fails its test (a skip checked nothing), and so does a listed scenario that runs. This
// store declares only `durable`: its lock is in-process (no `cross_process`), it has no expiry
// (no `ttl`), and its `save_turn` is the trait's default two steps (no `atomic_turns`, so no
// fault sweep either).
as_storage::storage_conformance_tests!(
    JsonDirFactory,
    skipped = [
        save_turn_is_all_or_nothing,
        save_turn_failure_at_any_write_leaves_nothing,
        cross_process_instances_agree,
        ttl_expires_idle_sessions,
        ttl_restarts_on_writes,
    ]
);

/// Ids that are valid in the contract but dangerous as paths stay inside the root.
#[tokio::test]
async fn path_like_ids_stay_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let store = JsonDirStorage::new(&root);
    store.open().await.unwrap();
    let owner = as_storage::Owner::new("..", "agent/1");
    let rec = store
        .upsert_session(
            as_storage::UpsertSession::new(owner, as_storage::SessionConfig::new("ws")).with_session_id("../../x"),
        )
        .await
        .unwrap();
    assert_eq!(rec.id, "../../x");
    let outside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(outside, [std::ffi::OsString::from("root")], "nothing written outside the root");
}

/// A record that cannot be read is reported under its session id (what `delete_session` takes),
/// also for a long id whose directory is nested.
#[tokio::test]
async fn an_unreadable_record_is_reported_by_session_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonDirStorage::new(dir.path());
    store.open().await.unwrap();
    let owner = as_storage::Owner::new("u", "a");
    let long = "s".repeat(200);
    for id in ["short", long.as_str()] {
        store
            .upsert_session(
                as_storage::UpsertSession::new(owner.clone(), as_storage::SessionConfig::new("ws")).with_session_id(id),
            )
            .await
            .unwrap();
    }
    // Corrupt both records behind the store's back.
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "record.json") {
                std::fs::write(&p, "{not json").unwrap();
            }
        }
    }
    let page = store.list_sessions(&owner, &as_storage::PageRequest::first(10)).await.unwrap();
    let mut ids: Vec<&str> = page.errors.iter().map(|e| e.session_id.as_str()).collect();
    ids.sort();
    let mut want = [long.as_str(), "short"];
    want.sort();
    assert_eq!(ids, want);
    for e in &page.errors {
        assert_eq!(e.error.kind(), as_storage::StorageErrorKind::Serialization);
    }
}

/// A generated session id is checked like a given one, and a taken one is never updated: with an
/// id factory that repeats itself, the next create without an id fails with `Conflict`. (The
/// factory is installed for this thread only, so no other test sees it.)
#[test]
fn generated_ids_are_checked_and_never_reused() {
    use as_storage::{Owner, SessionConfig, StorageErrorKind, UpsertSession};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonDirStorage::new(dir.path());
    let owner = Owner::new("user-1", "agent-1");
    let create = |name: &str| {
        rt.block_on(store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws").with_name(name))))
    };
    rt.block_on(store.open()).unwrap();
    let e = as_message::with_id_factory(Arc::new(|| "urn:x".to_owned()), || create("urn")).unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::InvalidKey, "{e}");
    let (first, second) =
        as_message::with_id_factory(Arc::new(|| "fixed".to_owned()), || (create("first"), create("second")));
    let first = first.unwrap();
    assert_eq!(first.id, "fixed");
    assert_eq!(second.unwrap_err().kind(), StorageErrorKind::Conflict);
    assert_eq!(rt.block_on(store.get_session(&owner.session("fixed"))).unwrap(), Some(first));
    let page = rt.block_on(store.list_sessions(&owner, &as_storage::PageRequest::default())).unwrap();
    assert_eq!(page.sessions.len(), 1);
}
