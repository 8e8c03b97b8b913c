//! The write paths encode the state (or message) on the async side and move only the bytes into the
//! blocking pool. The stored bytes must still be exactly `encode_record(meta, state)` / `to_json(msg)`:
//! also for a state whose `session_id` is not the session's (it is rewritten to the record id) and for text
//! that needs escaping.

// clippy.toml allows these inside #[test] fns only; the helpers below are test code too.
#![allow(clippy::unwrap_used)]

use as_message::{ContentBlock, Msg};
use as_state::AgentState;
use as_storage::{Owner, SessionConfig, SessionKey, StorageBase, UpsertSession, encode_record};
use as_storage_sqlite::SqliteStorage;

fn owner() -> Owner {
    Owner::new("user-1", "agent-1")
}

async fn store(dir: &tempfile::TempDir) -> SqliteStorage {
    SqliteStorage::open_path(dir.path().join("sessions.db")).await.unwrap()
}

fn raw_record(dir: &tempfile::TempDir, id: &str) -> String {
    let c = rusqlite::Connection::open(dir.path().join("sessions.db")).unwrap();
    c.query_row("SELECT record FROM sessions WHERE id = ?1", [id], |r| r.get(0)).unwrap()
}

fn raw_messages(dir: &tempfile::TempDir) -> Vec<String> {
    let c = rusqlite::Connection::open(dir.path().join("sessions.db")).unwrap();
    let mut stmt = c.prepare("SELECT msg FROM messages ORDER BY seq").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
}

/// Text that exercises the JSON escapes: quotes, backslashes, control characters, non-ASCII.
const TRICKY: &str = "say \"hi\" \\ tab\tnew\nline \u{1} é 😀 </script>";

async fn new_session(s: &SqliteStorage, id: &str) -> SessionKey {
    let req = UpsertSession::new(owner(), SessionConfig::new("ws").with_name(TRICKY)).with_session_id(id);
    let rec = s.upsert_session(req).await.unwrap();
    owner().session(rec.id)
}

#[tokio::test]
async fn updated_records_are_byte_identical_to_encode_record() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let key = new_session(&s, "s-1").await;
    for n in [0usize, 1, 7, 60] {
        let mut state = as_state::test_utils::conversation_state(n);
        state.session_id = key.session_id.clone();
        state.context.push(Msg::user("user", TRICKY));
        let rev = s.update_session_state(&key, &state, None).await.unwrap();
        let got = s.get_session(&key).await.unwrap().unwrap();
        assert_eq!(got.revision(), rev);
        assert_eq!(got.state, state);
        assert_eq!(raw_record(&dir, "s-1"), encode_record(&got.meta(), &state), "{n} turns");
    }
}

#[tokio::test]
async fn a_foreign_session_id_in_the_state_is_written_as_the_record_id() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let key = new_session(&s, "s-2").await;
    for foreign in [String::new(), "other".to_owned(), TRICKY.to_owned(), "s-2-but-longer".repeat(40)] {
        let mut state = AgentState::for_session(foreign.clone());
        state.append_context("user", vec![ContentBlock::text(TRICKY)]);
        state.context.push(Msg::assistant("assistant", format!("answer to {foreign}")));
        let rec = s.get_session(&key).await.unwrap().unwrap();
        s.update_session_state(&key, &state, Some(&rec.revision())).await.unwrap();
        let got = s.get_session(&key).await.unwrap().unwrap();
        assert_eq!(got.state.session_id, "s-2", "foreign id {foreign:?}");
        assert_eq!(got.state.context, state.context);
        // `encode_record` ignores `state.session_id` and writes the record id: the stored bytes are the same.
        assert_eq!(raw_record(&dir, "s-2"), encode_record(&got.meta(), &state), "foreign id {foreign:?}");
        assert_eq!(raw_record(&dir, "s-2"), got.to_canonical_json());
    }
}

#[tokio::test]
async fn logged_messages_are_their_canonical_json() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let key = new_session(&s, "s-3").await;
    let first = Msg::user("user", TRICKY);
    let mut second = Msg::assistant("assistant", "partial");
    s.upsert_message(&key, &first).await.unwrap();
    s.upsert_message(&key, &second).await.unwrap();
    // Same id as the tail: replaced in place.
    second.content.push(ContentBlock::text(TRICKY));
    s.upsert_message(&key, &second).await.unwrap();
    assert_eq!(raw_messages(&dir), [as_message::to_json(&first), as_message::to_json(&second)]);
    assert_eq!(s.list_messages(&key, 0, 0).await.unwrap(), [first, second]);
}
