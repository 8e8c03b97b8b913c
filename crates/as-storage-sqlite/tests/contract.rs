//! SQLite-specific behaviour of the storage contract: persistence across reopen, stored bytes,
//! schema bookkeeping, and the parts of the contract the shared suite does not reach
//! (the file on disk).

// clippy.toml allows these inside #[test] fns only; the helpers below are test code too.
#![allow(clippy::unwrap_used)]

use as_message::{ContentBlock, Msg};
use as_state::AgentState;
use as_storage::{
    Owner, PageRequest, SessionConfig, SessionKey, SessionRecord, StorageBase, StorageErrorKind, UpsertSession,
    encode_record,
};
use as_storage_sqlite::{SqliteOptions, SqliteStorage};

fn owner() -> Owner {
    Owner::new("user-1", "agent-1")
}

async fn store(dir: &tempfile::TempDir) -> SqliteStorage {
    SqliteStorage::open_path(dir.path().join("sessions.db")).await.unwrap()
}

/// An open store that takes records of at most 4 KiB, holding one fresh session.
async fn small_store_with_a_session(dir: &tempfile::TempDir) -> (SqliteStorage, SessionRecord, SessionKey) {
    let s = SqliteStorage::with_options(
        dir.path().join("sessions.db"),
        SqliteOptions::default().with_max_record_bytes(4096),
    );
    s.open().await.unwrap();
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    (s, rec, key)
}

fn turn(state: &mut AgentState, i: usize) {
    state.append_context("user", vec![ContentBlock::text(format!("question {i}"))]);
    state.context.push(Msg::assistant("assistant", format!("answer {i}")));
}

fn raw(dir: &tempfile::TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.path().join("sessions.db")).unwrap()
}

#[tokio::test]
async fn sessions_survive_reopen_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws").with_name("chat"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let mut state = rec.state.clone();
    turn(&mut state, 1);
    let rev = s.update_session_state(&key, &state, Some(&rec.revision())).await.unwrap();
    s.close().await.unwrap();
    drop(s);

    let s = store(&dir).await;
    let got = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(got.revision(), rev);
    assert_eq!(got.state.context, state.context);
    assert_eq!(got.state.session_id, rec.id, "state.session_id is forced to the record id");
    // The record column holds exactly the canonical bytes.
    let stored: String =
        raw(&dir).query_row("SELECT record FROM sessions WHERE id = ?1", [&rec.id], |r| r.get(0)).unwrap();
    assert_eq!(stored, encode_record(&got.meta(), &got.state));
    assert_eq!(stored, got.to_canonical_json());
}

#[tokio::test]
async fn listing_columns_match_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws").with_name("named"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let mut state = rec.state.clone();
    for i in 0..3 {
        turn(&mut state, i);
    }
    s.update_session_state(&key, &state, None).await.unwrap();
    let page = s.list_sessions(&owner(), &PageRequest::default()).await.unwrap();
    assert!(page.errors.is_empty());
    let sum = &page.sessions[0];
    assert_eq!((sum.id.as_str(), sum.name.as_str(), sum.message_count), (rec.id.as_str(), "named", Some(6)));
    let rec = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(sum.size_bytes, rec.to_canonical_json().len() as u64);
    assert_eq!(sum.updated_at, rec.updated_at);
    let (updated, count): (String, i64) = raw(&dir)
        .query_row("SELECT updated_at, message_count FROM sessions WHERE id = ?1", [&rec.id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((updated, count), (rec.revision().0, 6));
}

#[tokio::test]
async fn list_uses_the_owner_index_and_pages_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let mut ids = Vec::new();
    for _ in 0..7 {
        ids.push(s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap().id);
    }
    s.upsert_session(UpsertSession::new(Owner::new("user-1", "other"), SessionConfig::new("ws"))).await.unwrap();
    let mut seen = Vec::new();
    let mut page = PageRequest::first(3);
    loop {
        let p = s.list_sessions(&owner(), &page).await.unwrap();
        seen.extend(p.sessions.iter().map(|x| (x.created_at, x.id.clone())));
        match p.next_cursor {
            Some(c) => page.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first, then id descending");
    let plan: String = raw(&dir)
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE user_id = 'u' AND agent_id = 'a' \
             ORDER BY created_sort DESC, id DESC LIMIT 3",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("sessions_by_owner"), "{plan}");
    let plan: String = raw(&dir)
        .query_row("EXPLAIN QUERY PLAN SELECT msg FROM messages WHERE session_pk = 1 ORDER BY seq", [], |r| r.get(3))
        .unwrap();
    assert!(plan.contains("PRIMARY KEY") || plan.contains("sqlite_autoindex_messages"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

#[tokio::test]
async fn messages_log_and_delete_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let mut a = Msg::user("user", "a");
    s.upsert_message(&key, &a).await.unwrap();
    let b = Msg::assistant("assistant", "b");
    s.upsert_message(&key, &b).await.unwrap();
    // Same id as the last: replaced; same id as an older one: appended again.
    let b2 = Msg { content: vec![ContentBlock::text("b2")], ..b.clone() };
    s.upsert_message(&key, &b2).await.unwrap();
    a.content = vec![ContentBlock::text("a again")];
    s.upsert_message(&key, &a).await.unwrap();
    let all = s.list_messages(&key, 0, 0).await.unwrap();
    assert_eq!(all.iter().map(|m| m.get_text_content("").unwrap()).collect::<Vec<_>>(), ["a", "b2", "a again"]);
    assert_eq!(s.get_message(&key, &a.id).await.unwrap().unwrap().get_text_content(""), Some("a again".into()));
    assert_eq!(s.list_messages(&key, -2, 1).await.unwrap().len(), 1);
    assert_eq!(s.list_messages(&key, 1, 0).await.unwrap().len(), 0, "LRANGE 1 0 is empty");
    let other = SessionKey::new("user-1", "agent-2", rec.id.clone());
    assert_eq!(s.upsert_message(&other, &a).await.unwrap_err().kind(), StorageErrorKind::NotFound);
    assert!(s.list_messages(&other, 0, 0).await.unwrap().is_empty());

    assert!(s.delete_session(&key).await.unwrap());
    assert!(!s.delete_session(&key).await.unwrap());
    let left: i64 = raw(&dir).query_row("SELECT count(*) FROM messages", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 0, "the message log goes with the session");
    assert_eq!(s.update_session_state(&key, &rec.state, None).await.unwrap_err().kind(), StorageErrorKind::NotFound);
}

#[tokio::test]
async fn cas_and_ownership() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let r1 = s.update_session_state(&key, &rec.state, Some(&rec.revision())).await.unwrap();
    let stale = s.update_session_state(&key, &rec.state, Some(&rec.revision())).await.unwrap_err();
    assert_eq!(stale.kind(), StorageErrorKind::Conflict);
    let r2 = s.update_session_state(&key, &rec.state, None).await.unwrap();
    assert!(r2 > r1 && r1 > rec.revision());
    // Same id under another agent of the same user is taken; under another user it is free.
    let taken = UpsertSession::new(Owner::new("user-1", "agent-2"), SessionConfig::new("ws")).with_session_id(&rec.id);
    assert_eq!(s.upsert_session(taken).await.unwrap_err().kind(), StorageErrorKind::AlreadyExists);
    let free = UpsertSession::new(Owner::new("user-2", "agent-1"), SessionConfig::new("ws")).with_session_id(&rec.id);
    assert_eq!(s.upsert_session(free).await.unwrap().id, rec.id);
    let wrong = SessionKey::new("user-1", "agent-2", rec.id.clone());
    assert!(s.get_session(&wrong).await.unwrap().is_none());
    assert!(!s.delete_session(&wrong).await.unwrap());
    assert!(s.get_session(&key).await.unwrap().is_some());
    let bad = SessionKey::new("user-1", "agent-1", "a:b");
    assert_eq!(s.get_session(&bad).await.unwrap_err().kind(), StorageErrorKind::InvalidKey);
}

#[tokio::test]
async fn upsert_update_keeps_state_and_created_at() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let mut state = AgentState::default();
    turn(&mut state, 0);
    let rec = s
        .upsert_session(
            UpsertSession::new(owner(), SessionConfig::new("ws")).with_session_id("fixed-id").with_state(state),
        )
        .await
        .unwrap();
    assert_eq!(rec.id, "fixed-id");
    let up = s
        .upsert_session(
            UpsertSession::new(owner(), SessionConfig::new("ws2").with_name("n2")).with_session_id("fixed-id"),
        )
        .await
        .unwrap();
    assert_eq!(up.created_at, rec.created_at);
    assert!(up.updated_at > rec.updated_at);
    assert_eq!(up.state.context, rec.state.context);
    assert_eq!(up.config.workspace_id, "ws2");
    let got = s.get_session(&owner().session("fixed-id")).await.unwrap().unwrap();
    assert_eq!(got, up);
}

#[tokio::test]
async fn too_large_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (s, rec, key) = small_store_with_a_session(&dir).await;
    let mut state = rec.state.clone();
    state.context.push(Msg::user("user", "x".repeat(5000)));
    let e = s.update_session_state(&key, &state, None).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::TooLarge);
    assert_eq!(s.get_session(&key).await.unwrap().unwrap(), rec);
    let e = s.upsert_message(&key, &state.context[0]).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::TooLarge);
    assert!(s.list_messages(&key, 0, 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn lifecycle_and_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/sessions.db");
    let s = SqliteStorage::new(&path);
    let key = owner().session("s1");
    assert_eq!(s.get_session(&key).await.unwrap_err().kind(), StorageErrorKind::Unavailable, "not opened yet");
    s.open().await.unwrap();
    s.open().await.unwrap();
    assert!(path.exists(), "parent directories are created");
    assert_eq!(s.schema_version().await.unwrap(), 1);
    assert!(s.integrity_check().await.unwrap().is_empty());
    let mode: String =
        rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    s.close().await.unwrap();
    s.close().await.unwrap();
    assert_eq!(s.get_session(&key).await.unwrap_err().kind(), StorageErrorKind::Unavailable, "closed");
    s.open().await.unwrap();
    assert!(s.get_session(&key).await.unwrap().is_none(), "reopens after close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_cas_writers_one_wins_each_round() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    for round in 0..5 {
        let cur = s.get_session(&key).await.unwrap().unwrap();
        let mut tasks = Vec::new();
        for w in 0..8 {
            let (s, key, cur) = (s.clone(), key.clone(), cur.clone());
            tasks.push(tokio::spawn(async move {
                let mut st = cur.state.clone();
                st.context.push(Msg::user("user", format!("round {round} writer {w}")));
                s.update_session_state(&key, &st, Some(&cur.revision())).await
            }));
        }
        let mut wins = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => wins += 1,
                Err(e) => assert_eq!(e.kind(), StorageErrorKind::Conflict),
            }
        }
        assert_eq!(wins, 1, "exactly one conditional writer wins round {round}");
    }
    assert_eq!(s.get_session(&key).await.unwrap().unwrap().state.context.len(), 5);
}

#[tokio::test]
async fn a_damaged_record_is_a_serialization_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let good = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let bad = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    raw(&dir).execute("UPDATE sessions SET record = '{\"id\": 1', config = 'nope' WHERE id = ?1", [&bad.id]).unwrap();
    let key = owner().session(bad.id.clone());
    assert_eq!(s.get_session(&key).await.unwrap_err().kind(), StorageErrorKind::Serialization);
    let e = s.update_session_state(&key, &bad.state, None).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization);
    // The listing reads only the columns beside the record, so it still shows both sessions.
    let page = s.list_sessions(&owner(), &PageRequest::default()).await.unwrap();
    assert_eq!(page.sessions.len(), 2);
    // A listing column that cannot be read is an error item of the page, not a failed listing.
    raw(&dir).execute("UPDATE sessions SET created_at = 'yesterday' WHERE id = ?1", [&bad.id]).unwrap();
    let page = s.list_sessions(&owner(), &PageRequest::default()).await.unwrap();
    assert_eq!(page.sessions.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [good.id.as_str()]);
    assert_eq!(page.errors.len(), 1);
    assert_eq!(page.errors[0].session_id, bad.id);
    assert_eq!(page.errors[0].error.kind(), StorageErrorKind::Serialization);
    // So is a column holding a value of the wrong type (a BLOB name, a text count).
    for damage in ["name = x'ff', created_at = created_sort", "name = 'ok', message_count = 'n/a'"] {
        raw(&dir).execute(&format!("UPDATE sessions SET {damage} WHERE id = ?1"), [&bad.id]).unwrap();
        let page = s.list_sessions(&owner(), &PageRequest::default()).await.unwrap();
        assert_eq!(page.sessions.len(), 1, "{damage}");
        assert_eq!(page.errors.len(), 1, "{damage}");
        assert_eq!(page.errors[0].error.kind(), StorageErrorKind::Serialization, "{damage}");
    }
    assert!(s.get_session(&owner().session(good.id)).await.unwrap().is_some());
    assert!(s.delete_session(&key).await.unwrap(), "a damaged session can still be deleted");
}

#[tokio::test]
async fn cursors_survive_ids_with_the_separator() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    for id in ["a|1", "a|2", "b|x|y", "plain"] {
        let req = UpsertSession::new(owner(), SessionConfig::new("ws")).with_session_id(id);
        s.upsert_session(req).await.unwrap();
    }
    let mut page = PageRequest::first(1);
    let mut ids = Vec::new();
    loop {
        let p = s.list_sessions(&owner(), &page).await.unwrap();
        ids.extend(p.sessions.into_iter().map(|x| x.id));
        match p.next_cursor {
            Some(c) => page.cursor = Some(c),
            None => break,
        }
    }
    ids.sort();
    assert_eq!(ids, ["a|1", "a|2", "b|x|y", "plain"]);
    let bad = PageRequest { limit: 1, cursor: Some("no separator".into()) };
    assert_eq!(s.list_sessions(&owner(), &bad).await.unwrap_err().kind(), StorageErrorKind::InvalidInput);
}

/// Times whose UTC instant falls outside years 1-9999 (an aware time at either end of the range,
/// which an import can bring in) still list at the right end, and every page's cursor reads back:
/// the listing agrees with the in-memory store's, page by page. (SQLite orders such times among
/// themselves by id; these ids agree with their times.)
#[tokio::test]
async fn extreme_times_list_in_order_with_working_cursors() {
    use as_storage::{ImportMode, InMemoryStorage, Timestamp};
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let memory = InMemoryStorage::new();
    memory.open().await.unwrap();
    let template = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    memory.import_record(&template, &[], ImportMode::CreateOnly).await.unwrap();
    for (id, at) in [
        ("future", "9999-12-31T23:00:00-05:00"),
        ("past", "0001-01-01T00:30:00+01:00"),
        ("edge", "9999-12-31T23:59:59.999999"),
        ("start", "0001-01-01T00:00:00"),
        ("plain", "2024-05-01T10:00:00+02:00"),
    ] {
        let mut rec = template.clone();
        rec.id = id.to_owned();
        rec.created_at = at.parse::<Timestamp>().unwrap();
        rec.updated_at = rec.created_at;
        s.import_record(&rec, &[], ImportMode::CreateOnly).await.unwrap();
        memory.import_record(&rec, &[], ImportMode::CreateOnly).await.unwrap();
    }
    let expected = pages_of_one(&memory).await;
    assert_eq!(expected.len(), 6);
    assert_eq!(pages_of_one(&s).await, expected);
}

/// Every session of `owner()`, listed one per page.
async fn pages_of_one(store: &dyn StorageBase) -> Vec<String> {
    let mut ids = Vec::new();
    let mut page = PageRequest::first(1);
    loop {
        let p = store.list_sessions(&owner(), &page).await.unwrap();
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        ids.extend(p.sessions.into_iter().map(|x| x.id));
        match p.next_cursor {
            Some(c) => page.cursor = Some(c),
            None => return ids,
        }
    }
}

/// A call that finds a free connection arms no timer: on a runtime built without a time driver
/// (`enable_io()` only) an uncontended store works. This is not support for such runtimes: a wait
/// for a busy pool arms `acquire_timeout`, and `SqliteStorage`'s docs say the time driver is needed.
#[test]
fn an_uncontended_call_arms_no_timer() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let s = store(&dir).await;
        let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        let key = owner().session(rec.id.clone());
        let mut state = rec.state.clone();
        turn(&mut state, 1);
        let rev = s.update_session_state(&key, &state, Some(&rec.revision())).await.unwrap();
        let got = s.get_session(&key).await.unwrap().unwrap();
        assert_eq!(got.revision(), rev);
        assert_eq!(s.list_sessions(&owner(), &PageRequest::default()).await.unwrap().sessions.len(), 1);
        s.close().await.unwrap();
    });
}

/// A busy timeout over what SQLite takes (`i32::MAX` ms) is clamped to it instead of panicking
/// on the blocking thread that opens the file (open then failed).
#[tokio::test]
async fn a_huge_busy_timeout_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let max = std::time::Duration::from_millis(i32::MAX as u64);
    for t in [std::time::Duration::MAX, max + std::time::Duration::from_millis(1)] {
        let s =
            SqliteStorage::with_options(dir.path().join("sessions.db"), SqliteOptions::default().with_busy_timeout(t));
        s.open().await.unwrap();
        assert_eq!(s.options().busy_timeout, max);
        s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        s.close().await.unwrap();
    }
}

/// A connection count over what a Tokio semaphore holds is clamped to `Semaphore::MAX_PERMITS`
/// (building the store panicked), and 0 is 1 (not a pool that never hands out a connection).
#[tokio::test]
async fn connection_counts_are_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let mut zero = SqliteOptions::default();
    zero.max_connections = 0;
    let mut huge = SqliteOptions::default();
    huge.max_connections = usize::MAX;
    for (opts, used) in [
        (SqliteOptions::default().with_max_connections(usize::MAX), tokio::sync::Semaphore::MAX_PERMITS),
        (huge, tokio::sync::Semaphore::MAX_PERMITS),
        (zero, 1),
    ] {
        let s = SqliteStorage::with_options(
            dir.path().join("sessions.db"),
            opts.with_acquire_timeout(std::time::Duration::from_secs(30)),
        );
        assert_eq!(s.options().max_connections, used);
        s.open().await.unwrap();
        let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        assert!(s.get_session(&owner().session(rec.id)).await.unwrap().is_some());
        s.close().await.unwrap();
    }
}

/// A closed store answers `Unavailable` before it looks at what it is given (as the memory
/// store does, after the ids): a too deep or too large state or message is not reported as
/// `InvalidInput` or `TooLarge` by a store that could not have written it anyway.
#[tokio::test]
async fn a_closed_store_is_unavailable_before_content_checks() {
    let dir = tempfile::tempdir().unwrap();
    let (s, rec, key) = small_store_with_a_session(&dir).await;
    s.close().await.unwrap();
    let nest = |n: usize| (0..n).fold(as_message::JsonValue::from(1), |v, _| as_message::JsonValue::Array(vec![v]));
    let deep_depth = as_message::MAX_JSON_DEPTH + 1;
    let mut deep_state = rec.state.clone();
    deep_state.middle_context.insert("k".into(), nest(deep_depth));
    let mut deep_msg = Msg::user("user", "deep");
    deep_msg.metadata.insert("k".into(), nest(deep_depth));
    let big_msg = Msg::user("user", "x".repeat(5000));
    let unavailable = StorageErrorKind::Unavailable;
    let kind = |r: Result<(), as_storage::StorageError>| r.unwrap_err().kind();
    assert_eq!(kind(s.update_session_state(&key, &deep_state, None).await.map(drop)), unavailable);
    assert_eq!(kind(s.save_turn(&key, &deep_state, None, &[]).await.map(drop)), unavailable);
    assert_eq!(kind(s.save_turn(&key, &rec.state, None, std::slice::from_ref(&deep_msg)).await.map(drop)), unavailable);
    assert_eq!(kind(s.save_turn(&key, &rec.state, None, std::slice::from_ref(&big_msg)).await.map(drop)), unavailable);
    assert_eq!(kind(s.upsert_message(&key, &deep_msg).await), unavailable);
    assert_eq!(
        kind(s.import_record(&rec, &[deep_msg], as_storage::ImportMode::Overwrite).await.map(drop)),
        unavailable
    );
    assert_eq!(kind(s.import_record(&rec, &[big_msg], as_storage::ImportMode::Overwrite).await.map(drop)), unavailable);
    // A bad id is still `InvalidKey` first, closed or not.
    let bad = owner().session("urn:x");
    assert_eq!(kind(s.update_session_state(&bad, &deep_state, None).await.map(drop)), StorageErrorKind::InvalidKey);
}

/// A session column holding a value of the wrong type (a file damaged, or written by something
/// else) is the `Serialization` error naming the session on every read path, as in a listing,
/// not a `Backend` failure. (SQLite's TEXT affinity turns a number written into a text column
/// into text, `record = 1` then fails to parse and `updated_at = 5` is a Unix time: the wrong type
/// that stays is a BLOB.)
#[tokio::test]
async fn a_column_of_the_wrong_type_is_a_serialization_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let check = |what: &str, r: Result<(), as_storage::StorageError>, id: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{what}: {e}");
        assert!(e.message().contains(id), "{what}: {e}");
    };
    for damage in ["updated_at = x'35'", "record = x'7b7d'", "config = x'7b7d'", "source = x'75736572'"] {
        let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        let key = owner().session(rec.id.clone());
        raw(&dir).execute(&format!("UPDATE sessions SET {damage} WHERE id = ?1"), [&rec.id]).unwrap();
        let id = rec.id.as_str();
        if damage.starts_with("record") {
            // Read as bytes, as a BLOB or not: `{}` is no record (this was already right).
            assert_eq!(s.get_session(&key).await.unwrap_err().kind(), StorageErrorKind::Serialization);
        } else {
            check(damage, s.update_session_state(&key, &rec.state, None).await.map(drop), id);
            check(damage, s.save_turn(&key, &rec.state, None, &[Msg::user("user", "hi")]).await.map(drop), id);
        }
        let again = UpsertSession::new(owner(), SessionConfig::new("ws")).with_session_id(rec.id.clone());
        check(damage, s.upsert_session(again).await.map(drop), id);
        assert!(s.delete_session(&key).await.unwrap());
    }
    // A message of the wrong type.
    let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
    let key = owner().session(rec.id.clone());
    let m = Msg::user("user", "hi");
    s.upsert_message(&key, &m).await.unwrap();
    raw(&dir).execute("UPDATE messages SET msg = CAST(msg AS BLOB)", []).unwrap();
    check("message", s.get_message(&key, &m.id).await.map(drop), &rec.id);
    check("message", s.list_messages(&key, 0, 0).await.map(drop), &rec.id);
}

/// The file holds conversations: a new one is readable by its owner only (0600, whatever the
/// umask lets through), and so are the WAL and shared-memory files SQLite creates beside it
/// (it gives them the database file's mode). The check runs in a child process under umask 022,
/// where a file made with the default mode would be readable by everyone (under a umask of 077 it
/// could not tell).
#[cfg(unix)]
#[test]
fn a_new_file_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    const CHILD: &str = "AS_SQLITE_MODE_CHILD";
    let name = "a_new_file_is_private_to_its_owner";
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("umask 022 && exec \"$0\" --exact \"$1\" --nocapture --test-threads 1")
            .arg(&exe)
            .arg(name)
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("1 passed"), "the child ran no test: {stdout}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    let probe_mode = std::fs::metadata(&probe).unwrap().permissions().mode() & 0o777;
    assert_eq!(probe_mode, 0o644, "umask 022 in the child");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = store(&dir).await;
        s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        for name in ["sessions.db", "sessions.db-wal", "sessions.db-shm"] {
            let mode = std::fs::metadata(dir.path().join(name)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name}: {mode:o}");
        }
        s.close().await.unwrap();
    });
}
