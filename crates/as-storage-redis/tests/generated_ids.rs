//! An application's id factory ([`as_message::set_id_factory`]) seen by the Redis store: an id no
//! key can address is refused (`InvalidKey`, nothing written) instead of creating a session nobody
//! could read, update or delete again; a factory that keeps answering an id already taken ends in
//! `Conflict` after the bounded retries, without touching the session that holds it.
//!
//! The factory is process-wide, so this binary holds exactly one test: no other test can see it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use as_storage::{PageRequest, StorageBase, StorageErrorKind};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, TtlPolicy};
use common::{all_keys, owner, raw, req, store};
use fred::prelude::KeysInterface;

#[tokio::test]
async fn a_generated_id_is_checked_like_a_given_one() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    let o = owner();

    as_message::set_id_factory(Some(Arc::new(|| "urn:x".to_owned())));
    let refused = s.upsert_session(req(&o)).await;
    as_message::set_id_factory(None);
    let e = refused.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::InvalidKey, "{e}");
    assert!(e.message().contains("urn:x"), "{e}");
    assert!(all_keys(&r).await.is_empty(), "nothing was written");

    // A factory stuck on an id that is taken: the create never overwrites the holder.
    let held = s.upsert_session(req(&o)).await.unwrap();
    let rkey = format!("agentscope:user:user-1:session:{}", held.id);
    let before: String = r.get(&rkey).await.unwrap();
    let taken = held.id.clone();
    as_message::set_id_factory(Some(Arc::new(move || taken.clone())));
    let stuck = s.upsert_session(req(&o)).await;
    as_message::set_id_factory(None);
    let e = stuck.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Conflict, "{e}");
    let after: String = r.get(&rkey).await.unwrap();
    assert_eq!(after, before, "the session holding the id is untouched");
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert_eq!(page.sessions.len(), 1, "{page:?}");

    // The default generator works again.
    let rec = s.upsert_session(req(&o)).await.unwrap();
    assert_eq!(rec.id.len(), 32);
    assert_ne!(rec.id, held.id);
}
