//! `agentscope sessions …` across processes on one SQLite file: every command is a new process,
//! so this is the session lifecycle a user drives from the shell (create, show, CAS set-state
//! with a conflict, paging, ownership, delete).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use std::io::Write;
use std::process::{Command, Output, Stdio};

use as_storage::SessionRecord;

struct Cli {
    url: String,
    _dir: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite:{}", dir.path().join("sessions.db").display());
        Self { url, _dir: dir }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentscope"))
            .args(["--storage", &self.url, "sessions"])
            .args(args)
            .env_remove("AGENTSCOPE_STORAGE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agentscope");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
        drop(input);
        child.wait_with_output().expect("wait")
    }

    /// Runs and expects exit 0; returns stdout.
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.run(args, stdin);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("utf-8")
    }

    /// Runs and expects `code` with one line on stderr containing `needle`.
    fn fails(&self, args: &[&str], stdin: Option<&str>, code: i32, needle: &str) {
        let o = self.run(args, stdin);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err:?}");
        assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        assert!(o.stdout.is_empty());
    }
}

fn owner<'a>(agent: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--user", "alice", "--agent", agent];
    v.extend_from_slice(rest);
    v
}

fn with<'a>(cmd: &'a str, args: Vec<&'a str>) -> Vec<&'a str> {
    let mut v = vec![cmd];
    v.extend(args);
    v
}

const RICH: &str = include_str!("../../../tests/fixtures/agentscope-2.0.4/rich_agent_state.compact.json");

#[test]
fn lifecycle_across_processes() {
    let cli = Cli::new();
    let created = cli.ok(
        &with("create", owner("friday", &["--session", "chat-1", "--name", "support", "--state", "-"])),
        Some(RICH),
    );
    assert_eq!(created, "chat-1\n");

    // show prints the stored record: canonical bytes, state.session_id forced to the session id.
    let shown = cli.ok(&with("show", owner("friday", &["--session", "chat-1"])), None);
    let rec: SessionRecord = as_message::from_json(shown.trim_end()).expect("a SessionRecord");
    assert_eq!(shown.trim_end(), rec.to_canonical_json(), "show prints canonical bytes");
    assert_eq!(rec.state.session_id, "chat-1");
    assert_eq!(rec.config.name, "support");
    let mut fixture: as_state::AgentState = as_message::from_json(RICH).expect("fixture");
    fixture.session_id = "chat-1".into();
    assert_eq!(rec.state, fixture, "the state survived the round trip through another process");
    let summary = cli.ok(&with("show", owner("friday", &["--session", "chat-1", "--summary"])), None);
    assert!(summary.contains("chat-1"), "{summary}");

    // set-state with the revision just read wins and prints the new revision...
    let rev0 = rec.updated_at.to_string();
    let mut next = as_state::AgentState::for_session("ignored-id");
    next.context.push(as_message::Msg::user("alice", "hello again"));
    let next_json = as_message::to_json(&next);
    let rev1 =
        cli.ok(&with("set-state", owner("friday", &["--session", "chat-1", "--expect", &rev0, "-"])), Some(&next_json));
    let rev1 = rev1.trim_end();
    let parse = |t: &str| t.parse::<as_storage::Timestamp>().expect("a revision is a timestamp");
    assert!(parse(rev1) > parse(&rev0), "revision {rev1} after {rev0}");
    // ...and a second writer still holding the old revision gets exit 4, writing nothing.
    cli.fails(
        &with("set-state", owner("friday", &["--session", "chat-1", "--expect", &rev0, "-"])),
        Some(RICH),
        4,
        "changed since revision",
    );
    let rec: SessionRecord =
        as_message::from_json(cli.ok(&with("show", owner("friday", &["--session", "chat-1"])), None).trim_end())
            .unwrap();
    assert_eq!(rec.updated_at.to_string(), rev1);
    assert_eq!(rec.state.context.len(), 1);
    assert_eq!(rec.state.session_id, "chat-1");

    // Another agent of the same user neither sees nor takes the id.
    cli.fails(&with("show", owner("other", &["--session", "chat-1"])), None, 3, "not found");
    cli.fails(&with("create", owner("other", &["--session", "chat-1"])), None, 4, "taken by another agent");

    // Delete, then it is gone for every command.
    cli.ok(&with("delete", owner("friday", &["--session", "chat-1"])), None);
    cli.fails(&with("show", owner("friday", &["--session", "chat-1"])), None, 3, "not found");
    cli.fails(&with("delete", owner("friday", &["--session", "chat-1"])), None, 3, "not found");
    cli.fails(&with("set-state", owner("friday", &["--session", "chat-1", "-"])), Some(&next_json), 3, "not found");
}

#[test]
fn list_pages_newest_first() {
    let cli = Cli::new();
    let mut ids = Vec::new();
    for i in 0..5 {
        let name = format!("chat {i}");
        ids.push(cli.ok(&with("create", owner("friday", &["--name", &name])), None).trim_end().to_owned());
    }
    cli.ok(&with("create", owner("other", &[])), None);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let mut args = owner("friday", &["--limit", "2", "--json"]);
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page: serde_json::Value = serde_json::from_str(&cli.ok(&with("list", args), None)).expect("JSON page");
        let sessions = page["sessions"].as_array().expect("sessions");
        assert!(sessions.len() <= 2);
        seen.extend(sessions.iter().map(|s| s["id"].as_str().expect("id").to_owned()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "every session once, newest first, none of the other agent's");
    // The text form: one line per session on stdout, the next page's hint on stderr with the
    // cursor quoted for a shell (SQLite cursors hold a `|`).
    let o = cli.run(&with("list", owner("friday", &["--limit", "2"])), None);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with(&ids[0]) && lines[0].ends_with("chat 4"), "{text}");
    let hint = String::from_utf8(o.stderr).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&cli.ok(&with("list", owner("friday", &["--limit", "2", "--json"])), None)).unwrap();
    let cursor = json["next_cursor"].as_str().unwrap();
    assert!(cursor.contains('|'), "{cursor}");
    assert_eq!(hint.trim_end(), format!("more: --cursor '{cursor}'"));
    // A page of nothing is a usage error, on every backend alike.
    cli.fails(&with("list", owner("friday", &["--limit", "0"])), None, 2, "--limit");
}

#[test]
fn create_on_an_existing_session_keeps_what_is_not_given() {
    let cli = Cli::new();
    let id =
        cli.ok(&with("create", owner("friday", &["--session", "s1", "--workspace", "ws1", "--name", "first"])), None);
    assert_eq!(id.trim_end(), "s1");
    cli.ok(&with("create", owner("friday", &["--session", "s1", "--name", "second"])), None);
    let shown = cli.ok(&with("show", owner("friday", &["--session", "s1"])), None);
    let record: SessionRecord = serde_json::from_str(shown.trim_end()).unwrap();
    assert_eq!((record.config.workspace_id.as_str(), record.config.name.as_str()), ("ws1", "second"));
    // An empty id is not "no id": it is refused like every other invalid id.
    cli.fails(&with("create", owner("friday", &["--session", ""])), None, 5, "session_id");
}

#[test]
fn set_state_refuses_a_record_or_a_message_given_as_a_state() {
    let cli = Cli::new();
    let id = cli.ok(&with("create", owner("friday", &[])), None);
    let id = id.trim_end();
    let record = cli.ok(&with("show", owner("friday", &["--session", id])), None);
    cli.fails(&with("set-state", owner("friday", &["--session", id, "-"])), Some(&record), 5, "session record");
    let msg = as_message::to_json(&as_message::Msg::user("user", "hi"));
    cli.fails(&with("set-state", owner("friday", &["--session", id, "-"])), Some(&msg), 5, "a message");
    // An empty object is an empty state, as pydantic reads it.
    cli.ok(&with("set-state", owner("friday", &["--session", id, "-"])), Some("{}"));
}

#[test]
fn reading_a_database_that_does_not_exist_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typo").join("x.db");
    let storage = format!("sqlite:{}", db.display());
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentscope"))
            .args(["--storage", &storage, "sessions"])
            .args(args)
            .env_remove("AGENTSCOPE_STORAGE")
            .output()
            .unwrap()
    };
    let listed = run(&["list", "--user", "alice", "--agent", "friday"]);
    assert_eq!(listed.status.code(), Some(0));
    assert!(listed.stdout.is_empty());
    assert!(String::from_utf8_lossy(&listed.stderr).contains("no database at"));
    let shown = run(&["show", "--user", "alice", "--agent", "friday", "--session", "s1"]);
    assert_eq!(shown.status.code(), Some(3));
    assert!(!db.exists() && !dir.path().join("typo").exists(), "a read created the database");
    // A write creates it, as before.
    assert_eq!(run(&["create", "--user", "alice", "--agent", "friday"]).status.code(), Some(0));
    assert!(db.exists());
}

#[test]
fn names_with_control_characters_are_shown_escaped() {
    let cli = Cli::new();
    let name = "evil\nmore: --cursor fake\u{1b}[31mred";
    let id = cli.ok(&with("create", owner("friday", &["--name", name])), None);
    let text = cli.ok(&with("list", owner("friday", &[])), None);
    assert_eq!(text.lines().count(), 1, "{text:?}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let summary = cli.ok(&with("show", owner("friday", &["--session", id.trim_end(), "--summary"])), None);
    assert!(!summary.contains('\u{1b}') && !summary.contains("\nmore:"), "{summary:?}");
    // A right-to-left override would show the rest of the line reversed.
    cli.ok(&with("create", owner("bidi", &["--name", "invoice\u{202e}fdp.exe"])), None);
    let text = cli.ok(&with("list", owner("bidi", &[])), None);
    assert!(!text.contains('\u{202e}') && text.contains("invoice\\u{202e}fdp.exe"), "{text:?}");
}
