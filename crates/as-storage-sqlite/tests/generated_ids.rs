//! An application's id factory ([`as_message::set_id_factory`]) that generates an id no key can
//! address: the SQLite store refuses it (`InvalidKey`, nothing written) instead of creating a session
//! nobody could read, update or delete again; one that keeps answering an id already taken ends in
//! `Conflict` after the bounded retries (as the memory and Redis stores do), without touching the
//! session that holds it.
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

    // A factory stuck on an id that is taken (by this agent, or by another agent of the user):
    // the create never overwrites the holder and ends in `Conflict`, not a UNIQUE failure.
    let held = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("held"))).await.unwrap();
    let held_key = owner.session(held.id.clone());
    let before = store.get_session_raw(&held_key).await.unwrap();
    let other = Owner::new("user-1", "agent-2");
    for who in [&owner, &other] {
        let taken = held.id.clone();
        as_message::set_id_factory(Some(Arc::new(move || taken.clone())));
        let stuck = store.upsert_session(UpsertSession::new(who.clone(), SessionConfig::new("ws"))).await;
        as_message::set_id_factory(None);
        let e = stuck.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Conflict, "{e}");
        assert_eq!(store.get_session_raw(&held_key).await.unwrap(), before, "the holder is untouched");
    }
    assert_eq!(store.list_sessions(&owner, &PageRequest::default()).await.unwrap().sessions.len(), 1);
    assert!(store.list_sessions(&other, &PageRequest::default()).await.unwrap().sessions.is_empty());

    // The default generator works again.
    let rec = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await.unwrap();
    assert_eq!(rec.id.len(), 32);
    assert_ne!(rec.id, held.id);
}
