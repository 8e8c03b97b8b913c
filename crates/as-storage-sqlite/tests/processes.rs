//! Several processes on one file: the compare-and-set holds across processes, and a writer
//! killed with SIGKILL in the middle of its loop loses nothing it reported as committed.
//!
//! The child processes are this test binary re-executed with `AS_SQLITE_CHILD` set: the same
//! `#[test]` function then runs the child's part and exits.

// clippy.toml allows these inside #[test] fns only; the helpers below are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use as_message::Msg;
use as_storage::{Owner, SessionConfig, SessionKey, StorageBase, StorageErrorKind, UpsertSession};
use as_storage_sqlite::SqliteStorage;

const CHILD: &str = "AS_SQLITE_CHILD";
const PREFIX: &str = "AS_SQLITE ";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn owner() -> Owner {
    Owner::new("user-1", "agent-1")
}

/// Re-runs this binary's test `name` in child mode with `env`.
fn spawn_child(name: &str, env: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    // Leading newline: libtest may have printed "test name ... " without one.
    writeln!(out, "\n{PREFIX}{line}").unwrap();
    out.flush().unwrap();
}

fn child_env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("child needs {key}"))
}

fn reported_lines(child: Child) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap().lines().filter_map(|l| l.strip_prefix(PREFIX).map(str::to_owned)).collect()
}

fn create_session(path: &Path) -> SessionKey {
    runtime().block_on(async {
        let s = SqliteStorage::open_path(path).await.unwrap();
        let rec = s.upsert_session(UpsertSession::new(owner(), SessionConfig::new("ws"))).await.unwrap();
        s.close().await.unwrap();
        owner().session(rec.id)
    })
}

// ---------------------------------------------------------------------------------------------
// Two processes, one file, compare-and-set.

/// Child: `turns` turns on the session with CAS, retrying on conflict; reports its conflicts.
fn cas_writer_child() {
    let path = PathBuf::from(child_env("AS_SQLITE_PATH"));
    let key = owner().session(child_env("AS_SQLITE_SESSION"));
    let writer = child_env("AS_SQLITE_WRITER");
    let turns: usize = child_env("AS_SQLITE_TURNS").parse().unwrap();
    runtime().block_on(async {
        let s = SqliteStorage::open_path(&path).await.unwrap();
        let mut conflicts = 0;
        for i in 0..turns {
            loop {
                let rec = s.get_session(&key).await.unwrap().unwrap();
                let rev = rec.revision();
                let mut state = rec.state;
                state.context.push(Msg::user(writer.clone(), format!("{writer} {i}")));
                match s.update_session_state(&key, &state, Some(&rev)).await {
                    Ok(_) => break,
                    Err(e) if e.kind() == StorageErrorKind::Conflict => conflicts += 1,
                    Err(e) => panic!("{writer} turn {i}: {e}"),
                }
            }
        }
        s.close().await.unwrap();
        report(&format!("DONE {writer} conflicts={conflicts}"));
    });
}

#[test]
fn two_processes_share_one_file_with_cas() {
    if std::env::var_os(CHILD).is_some() {
        return cas_writer_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let key = create_session(&path);

    // Deterministic: a write by another process makes this process's revision stale.
    let rt = runtime();
    let s = rt.block_on(SqliteStorage::open_path(&path)).unwrap();
    let before = rt.block_on(s.get_session(&key)).unwrap().unwrap();
    let one = spawn_child(
        "two_processes_share_one_file_with_cas",
        &[
            ("AS_SQLITE_PATH", path.display().to_string()),
            ("AS_SQLITE_SESSION", key.session_id.clone()),
            ("AS_SQLITE_WRITER", "solo".into()),
            ("AS_SQLITE_TURNS", "1".into()),
        ],
    );
    assert_eq!(reported_lines(one), ["DONE solo conflicts=0"]);
    let stale = rt.block_on(s.update_session_state(&key, &before.state, Some(&before.revision()))).unwrap_err();
    assert_eq!(stale.kind(), StorageErrorKind::Conflict, "the other process's write is seen by the CAS");
    let after = rt.block_on(s.get_session(&key)).unwrap().unwrap();
    assert_eq!(after.state.context.len(), 1, "the losing write changed nothing");

    // Stress: two processes race on the same session; no update may be lost.
    const TURNS: usize = 150;
    let children: Vec<Child> = ["a", "b"]
        .iter()
        .map(|w| {
            spawn_child(
                "two_processes_share_one_file_with_cas",
                &[
                    ("AS_SQLITE_PATH", path.display().to_string()),
                    ("AS_SQLITE_SESSION", key.session_id.clone()),
                    ("AS_SQLITE_WRITER", (*w).to_owned()),
                    ("AS_SQLITE_TURNS", TURNS.to_string()),
                ],
            )
        })
        .collect();
    let mut conflicts = 0usize;
    for c in children {
        let lines = reported_lines(c);
        assert_eq!(lines.len(), 1, "{lines:?}");
        conflicts += lines[0].rsplit_once('=').unwrap().1.parse::<usize>().unwrap();
    }
    let rec = rt.block_on(s.get_session(&key)).unwrap().unwrap();
    let texts: Vec<String> = rec.state.context.iter().map(|m| m.get_text_content("").unwrap()).collect();
    assert_eq!(texts.len(), 1 + 2 * TURNS, "no lost update ({conflicts} conflicts were retried)");
    for w in ["a", "b"] {
        let mine: Vec<&String> = texts.iter().filter(|t| t.starts_with(&format!("{w} "))).collect();
        let expected: Vec<String> = (0..TURNS).map(|i| format!("{w} {i}")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "writer {w}'s turns, once each, in order");
    }
    println!("two processes x {TURNS} CAS turns: {conflicts} conflicts retried");
}

// ---------------------------------------------------------------------------------------------
// SIGKILL in the middle of a loop of turns.

/// Child: an endless loop of turns (state + message log), reporting each committed one.
fn crash_writer_child() {
    let path = PathBuf::from(child_env("AS_SQLITE_PATH"));
    let key = owner().session(child_env("AS_SQLITE_SESSION"));
    runtime().block_on(async {
        let s = SqliteStorage::open_path(&path).await.unwrap();
        loop {
            let rec = s.get_session(&key).await.unwrap().unwrap();
            let rev = rec.revision();
            let turn = rec.state.context.len() / 2;
            let mut state = rec.state;
            let q = Msg::user("user", format!("question {turn} {}", "q".repeat(200)));
            let a = Msg::assistant("assistant", format!("answer {turn} {}", "a".repeat(400)));
            state.context.push(q.clone());
            state.context.push(a.clone());
            s.upsert_message(&key, &q).await.unwrap();
            s.upsert_message(&key, &a).await.unwrap();
            s.update_session_state(&key, &state, Some(&rev)).await.unwrap();
            report(&format!("COMMITTED {turn}"));
        }
    });
}

#[test]
fn sigkill_mid_loop_loses_no_committed_turn() {
    if std::env::var_os(CHILD).is_some() {
        return crash_writer_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let key = create_session(&path);
    let mut last_reported: Option<usize> = None;
    for (round, kill_after) in [(0, 25usize), (1, 40), (2, 7), (3, 60)] {
        let mut child = spawn_child(
            "sigkill_mid_loop_loses_no_committed_turn",
            &[("AS_SQLITE_PATH", path.display().to_string()), ("AS_SQLITE_SESSION", key.session_id.clone())],
        );
        let stdout = child.stdout.take().unwrap();
        let mut seen = 0;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix(PREFIX) else { continue };
            let turn: usize = rest.strip_prefix("COMMITTED ").unwrap().parse().unwrap();
            if let Some(prev) = last_reported {
                assert!(turn > prev, "round {round}: turn {turn} after {prev}");
            }
            last_reported = Some(turn);
            seen += 1;
            if seen == kill_after {
                // The writer is already inside its next turn: kill it there.
                child.kill().unwrap();
                break;
            }
        }
        let status = child.wait().unwrap();
        assert!(!status.success(), "round {round}: the writer was killed, not finished");
        assert_eq!(seen, kill_after, "round {round}: the writer stopped early");
    }
    let last = last_reported.unwrap();

    // A fresh connection sees a sound file holding every reported turn.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    let rt = runtime();
    let s = rt.block_on(SqliteStorage::open_path(&path)).unwrap();
    assert!(rt.block_on(s.integrity_check()).unwrap().is_empty());
    let rec = rt.block_on(s.get_session(&key)).unwrap().unwrap();
    let stored_turns = rec.state.context.len() / 2;
    assert_eq!(rec.state.context.len() % 2, 0, "a turn is written whole or not at all");
    // The writer may have committed one more turn than it managed to print before the kill.
    assert!(stored_turns == last + 1 || stored_turns == last + 2, "stored {stored_turns} turns, last reported {last}");
    for (i, pair) in rec.state.context.chunks(2).enumerate() {
        assert!(pair[0].get_text_content("").unwrap().starts_with(&format!("question {i} ")));
        assert!(pair[1].get_text_content("").unwrap().starts_with(&format!("answer {i} ")));
    }
    // The message log holds every reported turn, in order (it may hold an extra uncommitted turn's
    // messages: they are written before the state).
    let log = rt.block_on(s.list_messages(&key, 0, 0)).unwrap();
    for i in 0..=last {
        let q = log.iter().position(|m| m.get_text_content("").unwrap().starts_with(&format!("question {i} ")));
        let a = log.iter().position(|m| m.get_text_content("").unwrap().starts_with(&format!("answer {i} ")));
        assert!(matches!((q, a), (Some(q), Some(a)) if q < a), "turn {i} in the message log");
    }
    println!("4 SIGKILLs; last reported turn {last}, stored turns {stored_turns}, log {} messages", log.len());
}

// ---------------------------------------------------------------------------------------------
// Several processes creating the same new file at the same moment.

/// Child: waits for the start line on stdin, then opens the (maybe absent) file and writes.
fn fresh_open_child() {
    let path = PathBuf::from(child_env("AS_SQLITE_PATH"));
    let writer = child_env("AS_SQLITE_WRITER");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    runtime().block_on(async {
        let s = SqliteStorage::open_path(&path).await.unwrap();
        let req = UpsertSession::new(owner(), SessionConfig::new("ws")).with_session_id(format!("from-{writer}"));
        let rec = s.upsert_session(req).await.unwrap();
        let mut state = rec.state.clone();
        state.context.push(Msg::user("user", format!("hello from {writer}")));
        let rev = rec.revision();
        s.update_session_state(&owner().session(rec.id), &state, Some(&rev)).await.unwrap();
        s.close().await.unwrap();
        report(&format!("DONE {writer}"));
    });
}

#[test]
fn processes_racing_to_create_the_file_share_one_schema() {
    if std::env::var_os(CHILD).is_some() {
        return fresh_open_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/sessions.db");
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<Child> = (0..4)
        .map(|w| {
            Command::new(&exe)
                .args(["--exact", "processes_racing_to_create_the_file_share_one_schema", "--nocapture"])
                .env(CHILD, "1")
                .env("AS_SQLITE_PATH", &path)
                .env("AS_SQLITE_WRITER", w.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    // Release them together.
    for c in &mut children {
        c.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    for (w, c) in children.into_iter().enumerate() {
        assert_eq!(reported_lines(c), [format!("DONE {w}")]);
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let migrations: i64 = conn.query_row("SELECT count(*) FROM agentscope_schema", [], |r| r.get(0)).unwrap();
    assert_eq!(migrations, 1, "the schema was created exactly once");
    drop(conn);
    let rt = runtime();
    let s = rt.block_on(SqliteStorage::open_path(&path)).unwrap();
    for w in 0..4 {
        let rec = rt.block_on(s.get_session(&owner().session(format!("from-{w}")))).unwrap().unwrap();
        assert_eq!(rec.state.context[0].get_text_content(""), Some(format!("hello from {w}")));
    }
    assert!(rt.block_on(s.integrity_check()).unwrap().is_empty());
}
