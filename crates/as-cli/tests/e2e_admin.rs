//! `sessions export | import | validate | show --summary` end to end, between two SQLite files
//! and from SQLite to Redis (when redis-server is installed): export -> import -> export is
//! byte-identical (timestamps and all), and export/validate without `--agent` cover every agent.
// Helpers outside `#[test]` fns are test code too (clippy.toml only covers `#[test]`/`cfg(test)` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use as_model_openai::test_server::{MockReply, MockServer, chunk};
use e2e_support::*;

/// Makes sessions through the real chat path (so each has a message log too): two for agent
/// `friday` (one parked on a Write confirmation), one for `helper`.
fn seed(storage: &str, work: &std::path::Path) -> Vec<String> {
    let rt = runtime();
    let srv = rt.block_on(MockServer::start()).unwrap();
    let url = srv.base_url();
    let workdir = work.to_string_lossy().into_owned();
    let mut ids = Vec::new();
    for (agent, text) in [("friday", "Hello Ada."), ("helper", "Hi.")] {
        srv.push(MockReply::sse([chunk::text(text), chunk::finish("stop")]));
        let o = run(&[
            "--storage",
            storage,
            "chat",
            "--user",
            "alice",
            "--agent",
            agent,
            "--model",
            "openai:m",
            "--base-url",
            &url,
            "--message",
            "I am Ada.",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        ids.push(new_session_id(&stderr(&o)));
    }
    let input = serde_json::json!({"file_path": work.join("n.txt").to_string_lossy(), "content": "x"}).to_string();
    srv.push(MockReply::sse([
        chunk::text("Writing."),
        chunk::tool_call(0, Some("c1"), Some("Write"), &input),
        chunk::finish("tool_calls"),
    ]));
    let o = run(&[
        "--storage",
        storage,
        "chat",
        "--user",
        "alice",
        "--agent",
        "friday",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--workdir",
        &workdir,
        "--message",
        "Write it down.",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    ids.push(new_session_id(&stderr(&o)));
    ids
}

/// `sessions export --user alice` with no `--agent`: every agent of the user (friday and helper).
fn export(storage: &str) -> String {
    let o = run(&["--storage", storage, "sessions", "export", "--user", "alice"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("exported 3 sessions (6 messages)"), "{}", stderr(&o));
    stdout(&o)
}

/// `(agent, created_at, updated_at)` of every exported line, in file order.
fn owners_and_times(export: &str) -> Vec<(String, String, String)> {
    export
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let r = &v["record"];
            let s = |k: &str| r[k].as_str().unwrap().to_owned();
            (s("agent_id"), s("created_at"), s("updated_at"))
        })
        .collect()
}

fn round_trip(target: &str) {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("a.db").display());
    let ids = seed(&source, dir.path());
    let first = export(&source);
    assert_eq!(first.lines().count(), 3);
    let agents: Vec<String> = owners_and_times(&first).into_iter().map(|(a, _, _)| a).collect();
    assert_eq!(agents, ["friday", "friday", "helper"], "both agents, without naming them");
    let file = dir.path().join("alice.jsonl");
    std::fs::write(&file, &first).unwrap();
    let file = file.to_string_lossy().into_owned();

    let o = run(&["--storage", target, "sessions", "import", &file]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "imported 3 sessions (6 messages), skipped 0 existing, 0 failed");
    assert!(!stderr(&o).contains('\r'), "no progress bar when stderr is not a terminal");
    // Lossless: the target's export is byte-identical, timestamps included.
    let second = export(target);
    assert_eq!(owners_and_times(&second), owners_and_times(&first));
    assert_eq!(second, first, "export -> import -> export is byte-identical");
    let o = run(&["--storage", target, "sessions", "import", &file]);
    assert_eq!(stdout(&o).trim(), "imported 0 sessions (0 messages), skipped 3 existing, 0 failed");
    let o = run(&["--storage", target, "sessions", "import", "--overwrite", &file]);
    assert_eq!(stdout(&o).trim(), "imported 3 sessions (6 messages), skipped 0 existing, 0 failed");
    assert_eq!(export(target), first, "an overwrite neither duplicates the log nor moves the timestamps");

    let o = run(&[
        "--storage",
        target,
        "sessions",
        "validate",
        "--user",
        "alice",
        "--agent",
        "friday",
        "--agent",
        "helper",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).trim(), "checked 3 sessions: 0 bad");
    let o = run(&["--storage", target, "sessions", "validate", "--user", "alice"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).trim(), "checked 3 sessions: 0 bad", "every agent without --agent");
    let o = run(&["--storage", target, "sessions", "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).trim(), "checked 3 sessions: 0 bad", "every user without --user");

    // The parked session reads well.
    let o = show_summary(target, &ids[2]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "messages     2 in context",
        "message log  2",
        "user      user: Write it down.",
        "parked tool calls:\n  c1 Write",
        "(asking)",
        "permissions: mode default",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn sqlite_to_sqlite_is_lossless() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(&format!("sqlite:{}", dir.path().join("b.db").display()));
}

#[test]
fn sqlite_to_redis_is_lossless() {
    let Some(redis) = Redis::start() else { return };
    round_trip(&redis.url);
}

#[test]
fn bad_lines_are_reported_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("b.db").display());
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, "{\"kind\":\"session\",\"record\":{\"user_id\":\"u\"}}\nnot json\n").unwrap();
    let o = run(&["--storage", &target, "sessions", "import", &file.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).trim(), "imported 0 sessions (0 messages), skipped 0 existing, 2 failed");
    let err = stderr(&o);
    assert!(err.contains("line 1: record:") && err.contains("line 2: not JSON"), "{err}");
}

#[test]
fn validate_reports_a_corrupt_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let storage = format!("sqlite:{}", db.display());
    let ids = seed(&storage, dir.path());
    // Corrupt one stored record behind the store's back: an unknown block type in the context.
    assert!(corrupt(&db, &ids[0]), "record updated");
    let o = run(&["--storage", &storage, "sessions", "validate", "--user", "alice", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("bad  alice/friday/{}", ids[0])), "{out}");
    assert!(out.trim_end().ends_with("checked 2 sessions: 1 bad"), "{out}");
    // Without --user: every user and agent of the store.
    let o = run(&["--storage", &storage, "sessions", "validate"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("bad  alice/friday/{}", ids[0])), "{out}");
    assert!(out.trim_end().ends_with("checked 3 sessions: 1 bad"), "{out}");
    // `show` prints it as stored, and fails like the Redis backend does (exit 1).
    let o =
        run(&["--storage", &storage, "sessions", "show", "--user", "alice", "--agent", "friday", "--session", &ids[0]]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"type\":\"bogus\""), "{}", stdout(&o));
    assert!(stderr(&o).contains("not readable"), "{}", stderr(&o));
    // --agent alone is a usage error (which user's agent?).
    let o = run(&["--storage", &storage, "sessions", "validate", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn export_leaves_out_an_unreadable_record_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let storage = format!("sqlite:{}", db.display());
    let ids = seed(&storage, dir.path());
    assert!(corrupt(&db, &ids[0]), "record updated");
    let o = run(&["--storage", &storage, "sessions", "export", "--user", "alice", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "the readable session is still exported: {out}");
    assert!(out.contains(&ids[2]), "friday's other session: {out}");
    let err = stderr(&o);
    assert!(err.contains(&format!("skipped alice/friday/{}", ids[0])), "{err}");
    assert!(err.contains("1 unreadable sessions were left out"), "{err}");
}

#[test]
fn a_file_that_is_not_a_database_is_exit_6_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    let text = "my notes, not a database\n".repeat(200);
    std::fs::write(&notes, &text).unwrap();
    let storage = format!("sqlite:{}", notes.display());
    for args in [
        &["sessions", "export", "--user", "alice"][..],
        &["sessions", "validate", "--user", "alice"][..],
        &["sessions", "list", "--user", "alice", "--agent", "friday"][..],
    ] {
        let mut all = vec!["--storage", storage.as_str()];
        all.extend_from_slice(args);
        let o = run(&all);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("not an SQLite database"), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), text, "untouched");
}

/// Rewrites the stored JSON of `session` behind the store's back; returns whether a row changed.
fn corrupt(db: &std::path::Path, session: &str) -> bool {
    let conn = rusqlite::Connection::open(db).unwrap();
    let n = conn
        .execute(
            "UPDATE sessions SET record = replace(record, '\"type\":\"text\"', '\"type\":\"bogus\"') WHERE id = ?1",
            [session],
        )
        .unwrap();
    n == 1
}

/// The schema check reads the stored bytes: a record the lax reader accepts (pydantic reads a
/// numeric string as an int) but that breaks the published schema is reported.
#[test]
fn validate_checks_the_stored_bytes_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let storage = format!("sqlite:{}", db.display());
    let ids = seed(&storage, dir.path());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n = conn
        .execute(
            "UPDATE sessions SET record = replace(record, '\"cur_iter\":0,', '\"cur_iter\":\"0\",') WHERE id = ?1",
            [&ids[0]],
        )
        .unwrap();
    assert_eq!(n, 1);
    let changed: String = conn.query_row("SELECT record FROM sessions WHERE id = ?1", [&ids[0]], |r| r.get(0)).unwrap();
    assert!(changed.contains("\"cur_iter\":\"0\""), "the seed's cur_iter is not 0: {changed}");
    let o = run(&["--storage", &storage, "sessions", "validate", "--user", "alice", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("bad  alice/friday/{}  schema: /state/cur_iter", ids[0])), "{out}");
}

/// A state nested as deep as the store reads it (serde_json's limit is 128 levels) exports to a
/// line that imports: the import reads the record at its own depth, not one level inside the line.
#[test]
fn a_deeply_nested_state_exports_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let n = 124;
    let state = dir.path().join("deep.json");
    std::fs::write(&state, format!("{{\"middle_context\":{{\"a\":{}{}}}}}", "[".repeat(n), "]".repeat(n))).unwrap();
    let source = format!("sqlite:{}", dir.path().join("a.db").display());
    let target = format!("sqlite:{}", dir.path().join("b.db").display());
    let state = state.to_string_lossy();
    let o = run(&["--storage", &source, "sessions", "create", "--user", "d", "--agent", "d", "--state", &state]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["--storage", &source, "sessions", "export", "--user", "d"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let exported = stdout(&o);
    let file = dir.path().join("d.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let o = run(&["--storage", &target, "sessions", "import", &file.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "imported 1 sessions (0 messages), skipped 0 existing, 0 failed");
    let o = run(&["--storage", &target, "sessions", "export", "--user", "d"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), exported);
}

/// The export line holds the record exactly as stored, not a re-encoding of it (docs/architecture.md):
/// another writer's key order, spacing and unknown fields survive the export.
#[test]
fn export_writes_the_stored_record_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let storage = format!("sqlite:{}", db.display());
    let o = run(&["--storage", &storage, "sessions", "create", "--user", "alice", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).split_whitespace().next().unwrap().to_owned();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: String = conn.query_row("SELECT record FROM sessions WHERE id = ?1", [&id], |r| r.get(0)).unwrap();
    // As another writer might have stored it: an unknown key first, and spaces.
    let written = format!("{{\"x_writer\": \"python\", {}", stored.strip_prefix('{').unwrap());
    conn.execute("UPDATE sessions SET record = ?1 WHERE id = ?2", [&written, &id]).unwrap();
    let o = run(&["--storage", &storage, "sessions", "export", "--user", "alice"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line = stdout(&o);
    assert!(line.contains(&format!("\"record\":{written},\"messages\":[")), "{line}");
}
