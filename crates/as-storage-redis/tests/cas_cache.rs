//! The envelope cache behind the CAS token: a turn reuses the envelope this process last saw,
//! and records rewritten behind its back by AgentScope Python 2.0.4 (in pydantic's canonical
//! bytes or in a non-canonical layout) are still noticed, never overwritten blindly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use as_storage::{Revision, SessionRecord, StorageBase, StorageErrorKind};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, TtlPolicy};
use common::{owner, raw, store};
use fred::prelude::KeysInterface;
use serde_json::Value;

/// The session record AgentScope Python 2.0.4 wrote (pydantic `model_dump_json`).
const PY_RECORD: &str = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
const PY_ID: &str = "sessrec_fixture_0001";

/// Python's record with another `updated_at` and `state.cur_iter`, as pydantic writes it.
fn python_rewrite(updated_at: &str, cur_iter: i64) -> String {
    let mut doc: Value = serde_json::from_str(PY_RECORD).unwrap();
    doc["updated_at"] = updated_at.into();
    doc["state"]["cur_iter"] = cur_iter.into();
    as_message::to_json(&doc)
}

/// The same record in a layout our writer never produces (`json.dumps` default separators in
/// the envelope), so its CAS token must be the whole value.
fn spaced(record: &str) -> String {
    let out = record.replacen("\",\"updated_at\":\"", "\", \"updated_at\": \"", 1);
    assert_ne!(out, record);
    out
}

#[tokio::test]
async fn python_rewrites_behind_the_envelope_cache_are_noticed() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    let key = owner().session(PY_ID);
    let rkey = s.session_key("user-1", PY_ID);
    assert_eq!(python_rewrite("2025-06-01T10:05:30.123456", 3), PY_RECORD, "the rewrite helper is byte-exact");
    r.set::<(), _, _>(&rkey, PY_RECORD, None, None, false).await.unwrap();

    // Two turns on Python's record: the second get reuses the envelope cached by the first update.
    let first = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(first.revision(), Revision("2025-06-01T10:05:30.123456".into()));
    let rev1 = s.update_session_state(&key, &first.state, Some(&first.revision())).await.unwrap();
    let second = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(second.revision(), rev1);
    assert_eq!(second.state, first.state);
    let mut state = second.state.clone();
    state.cur_iter = 10;
    let rev2 = s.update_session_state(&key, &state, Some(&rev1)).await.unwrap();
    assert!(rev2 > rev1);

    // Python writes the session again (later updated_at, other state).
    let py = python_rewrite("2099-01-01T00:00:00.000001", 41);
    r.set::<(), _, _>(&rkey, py.as_str(), None, None, false).await.unwrap();
    // Our cached envelope is stale: the conditional write conflicts and writes nothing...
    let e = s.update_session_state(&key, &state, Some(&rev2)).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Conflict);
    assert_eq!(r.get::<String, _>(&rkey).await.unwrap(), py);
    // ...an unconditional one is applied on top of Python's record, not on our stale envelope.
    let blind = s.update_session_state(&key, &state, None).await.unwrap();
    assert!(blind.0.as_str() > "2099-01-01T00:00:00.000001", "{blind}");
    r.set::<(), _, _>(&rkey, py.as_str(), None, None, false).await.unwrap();
    // The next get sees Python's record and caches a token for it.
    let seen = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(seen.state.cur_iter, 41);
    assert_eq!(seen.revision(), Revision("2099-01-01T00:00:00.000001".into()));
    let mut state = seen.state.clone();
    state.cur_iter = 42;
    let rev3 = s.update_session_state(&key, &state, Some(&seen.revision())).await.unwrap();
    let stored: String = r.get(&rkey).await.unwrap();
    let back: SessionRecord = as_message::from_json(&stored).unwrap();
    assert_eq!((back.revision(), back.state.cur_iter), (rev3, 42));
    assert_eq!(back.config, seen.config, "the envelope Python wrote is kept");
}

#[tokio::test]
async fn non_canonical_records_are_compared_whole() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    let key = owner().session(PY_ID);
    let rkey = s.session_key("user-1", PY_ID);
    r.set::<(), _, _>(&rkey, spaced(PY_RECORD), None, None, false).await.unwrap();

    let got = s.get_session(&key).await.unwrap().unwrap();
    let again = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(got, again);
    let mut state = got.state.clone();
    state.cur_iter = 5;

    // Python rewrites it, still non-canonical: the stale revision conflicts, nothing is written.
    let py = spaced(&python_rewrite("2099-01-01T00:00:00.000001", 41));
    r.set::<(), _, _>(&rkey, py.as_str(), None, None, false).await.unwrap();
    let e = s.update_session_state(&key, &state, Some(&got.revision())).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Conflict);
    assert_eq!(r.get::<String, _>(&rkey).await.unwrap(), py);

    // Same revision, other bytes behind an exact token: the server-side compare fails, the store
    // re-reads, finds the revision unchanged and writes on top of the new bytes.
    let seen = s.get_session(&key).await.unwrap().unwrap();
    let py_same_rev = py.replace("\"cur_iter\":41", "\"cur_iter\":43");
    r.set::<(), _, _>(&rkey, py_same_rev.as_str(), None, None, false).await.unwrap();
    let rev = s.update_session_state(&key, &state, Some(&seen.revision())).await.unwrap();
    let stored: String = r.get(&rkey).await.unwrap();
    let back: SessionRecord = as_message::from_json(&stored).unwrap();
    assert_eq!((back.revision(), back.state.cur_iter), (rev.clone(), 5));
    assert_eq!(stored, back.to_canonical_json(), "rewritten in canonical form");
    // Now canonical: the next turn takes the cached-envelope path.
    let next = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(next.revision(), rev);
    s.update_session_state(&key, &next.state, Some(&rev)).await.unwrap();
}
