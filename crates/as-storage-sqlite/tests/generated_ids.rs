//! An application's id factory ([`as_message::set_id_factory`]) that generates an id no key can
//! address: the SQLite store refuses it (`InvalidKey`, nothing written) instead of creating a session
//! nobody could read, update or delete again.
//!
//! The factory is process-wide, so this binary holds exactly one test: no other test can see it.

use std::sync::Arc;

use as_storage::{Owner, PageRequest, SessionConfig, StorageBase, StorageErrorKind, UpsertSession};
use as_storage_sqlite::SqliteStorage;

#[tokio::test]
async fn a_generated_id_is_checked_like_a_given_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStorage::open_path(dir.path().join("sessions.db")).await.unwrap();
    let owner = Owner::new("user-1", "agent-1");
    as_message::set_id_factory(Some(Arc::new(|| "urn:x".to_owned())));
    let refused = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await;
    as_message::set_id_factory(None);
    let e = refused.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::InvalidKey, "{e}");
    assert!(e.message().contains("urn:x"), "{e}");
    let page = store.list_sessions(&owner, &PageRequest::default()).await.unwrap();
    assert!(page.sessions.is_empty() && page.errors.is_empty(), "nothing was written: {page:?}");
    // The default generator works again.
    let rec = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await.unwrap();
    assert_eq!(rec.id.len(), 32);
}
