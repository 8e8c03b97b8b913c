//! `InMemoryStorage` and an application's id factory ([`as_message::set_id_factory`]): a generated
//! session id is checked like a given one, and a factory that keeps repeating itself ends in an
//! error instead of a create that never returns.
//!
//! The factory is process-wide, so this binary holds exactly one test: no other test can see it.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use as_storage::{InMemoryStorage, Owner, SessionConfig, StorageBase, StorageErrorKind, UpsertSession};

#[test]
fn generated_ids_are_checked_and_retries_are_bounded() {
    let (done, finished) = mpsc::channel();
    // On its own thread, so a create that never returns fails the test instead of hanging it.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = InMemoryStorage::new();
        let owner = Owner::new("user-1", "agent-1");
        let create = |name: &str| {
            store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws").with_name(name)))
        };
        rt.block_on(store.open()).unwrap();

        // An id no key can address (2.0.4's factories may well produce one) is refused, and
        // nothing is created.
        as_message::set_id_factory(Some(Arc::new(|| "urn:x".to_owned())));
        let e = rt.block_on(create("urn")).unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::InvalidKey, "{e}");
        assert!(e.message().contains("urn:x"), "{e}");
        as_message::set_id_factory(Some(Arc::new(String::new)));
        assert_eq!(rt.block_on(create("empty")).unwrap_err().kind(), StorageErrorKind::InvalidKey);

        // A constant factory: the first create takes the id, the next ones find it taken every
        // time and give up with `Conflict`, leaving the first session as it was.
        as_message::set_id_factory(Some(Arc::new(|| "fixed".to_owned())));
        let first = rt.block_on(create("first")).unwrap();
        assert_eq!(first.id, "fixed");
        for _ in 0..2 {
            let e = rt.block_on(create("second")).unwrap_err();
            assert_eq!(e.kind(), StorageErrorKind::Conflict, "{e}");
        }
        // The same under another agent of the user: the id is that agent's, never taken over.
        let other = Owner::new("user-1", "agent-2");
        let e = rt.block_on(store.upsert_session(UpsertSession::new(other, SessionConfig::new("ws")))).unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Conflict, "{e}");
        as_message::set_id_factory(None);

        let page = rt.block_on(store.list_sessions(&owner, &as_storage::PageRequest::default())).unwrap();
        let ids: Vec<&str> = page.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["fixed"]);
        assert_eq!(rt.block_on(store.get_session(&owner.session("fixed"))).unwrap(), Some(first));
        // The default generator works again.
        let fresh = rt.block_on(create("fresh")).unwrap();
        assert_eq!(fresh.id.len(), 32);
        done.send(()).unwrap();
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test thread failed (its panic is printed above)"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("a create without an id did not return within 60 s"),
    }
}
