//! `agentscope sessions …` end to end against the built binary with `--storage memory`.
//!
//! A memory store lives for one process, so these tests check what one invocation can show:
//! the printed id, exit codes and one-line messages. Persistence across processes is tested
//! with SQLite (and Redis) by their engineers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn agentscope(args: &[&str]) -> Output {
    run(args, None, &[])
}

fn run(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentscope"));
    cmd.args(args).env_remove("AGENTSCOPE_STORAGE").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn agentscope");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("wait")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

/// A failure: the expected code, nothing on stdout, exactly one line on stderr mentioning `needle`.
fn assert_fails(o: &Output, expected: i32, needle: &str) {
    let err = stderr(o);
    assert_eq!(code(o), expected, "stdout {:?} stderr {err:?}", stdout(o));
    assert!(stdout(o).is_empty(), "stdout: {:?}", stdout(o));
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{err:?} mentions {needle:?}");
}

const OWNER: [&str; 4] = ["--user", "user-1", "--agent", "agent-1"];

fn with_owner<'a>(cmd: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = vec!["--storage", "memory", "sessions"];
    v.extend_from_slice(cmd);
    v.extend_from_slice(&OWNER);
    v.extend_from_slice(rest);
    v
}

#[test]
fn create_prints_a_fresh_id() {
    let o = agentscope(&with_owner(&["create"], &[]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let id = out.split_whitespace().last().expect("an id");
    assert_eq!(id.len(), 32, "uuid4 hex: {out:?}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    // Two processes, two ids.
    let o2 = agentscope(&with_owner(&["create"], &[]));
    assert_ne!(stdout(&o2), out);
    // A write to a memory store says it does not last.
    assert!(stderr(&o).contains("keeps nothing"), "{}", stderr(&o));
}

#[test]
fn create_with_explicit_id_name_workspace_and_state() {
    let state = include_str!("../../../tests/fixtures/agentscope-2.0.4/rich_agent_state.compact.json");
    let o = run(
        &with_owner(&["create"], &["--session", "chat.1", "--workspace", "ws-9", "--name", "My chat", "--state", "-"]),
        Some(state),
        &[],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "chat.1\n");
}

#[test]
fn invalid_ids_exit_5() {
    for (user, agent, session) in [("u", "a", "a:b"), ("u", "a", "x y"), ("{u}", "a", "s"), ("u", "a*", "s")] {
        let args =
            ["--storage", "memory", "sessions", "create", "--user", user, "--agent", agent, "--session", session];
        assert_fails(&agentscope(&args), 5, "forbidden character");
    }
    let o = agentscope(&with_owner(&["show"], &["--session", "a:b"]));
    assert_fails(&o, 5, "invalid key");
    let long = "x".repeat(257);
    let o = agentscope(&with_owner(&["delete"], &["--session", &long]));
    assert_fails(&o, 5, "longer than 256 bytes");
}

#[test]
fn unknown_sessions_exit_3() {
    let o = agentscope(&with_owner(&["show"], &["--session", "nope"]));
    assert_fails(&o, 3, "not found");
    let o = agentscope(&with_owner(&["delete"], &["--session", "nope"]));
    assert_fails(&o, 3, "not found");
    let o = run(&with_owner(&["set-state"], &["--session", "nope", "-"]), Some("{}"), &[]);
    assert_fails(&o, 3, "\"nope\" not found");
}

#[test]
fn bad_state_input_exits_5() {
    let o = run(&with_owner(&["create"], &["--state", "-"]), Some("{\"context\": 3}"), &[]);
    assert_fails(&o, 5, "not an AgentState");
    // pydantic would read these as empty states; the state is checked before the session is looked up.
    for doc in [r#"{"id":"s1","state":{"context":[]}}"#, r#"{"user_id":"u","agent_id":"a"}"#] {
        let o = run(&with_owner(&["set-state"], &["--session", "nope", "-"]), Some(doc), &[]);
        assert_fails(&o, 5, "not an AgentState");
    }
    let o = agentscope(&with_owner(&["create"], &["--state", "/nonexistent/state.json"]));
    assert_fails(&o, 5, "cannot read");
    // Every command that reads an input file says the same of one it cannot read.
    for args in [
        vec!["state", "fmt", "/nonexistent/state.json"],
        vec!["sessions", "import", "/nonexistent/export.jsonl"],
        vec!["sessions", "set-state", "--user", "u", "--agent", "a", "--session", "s", "/nonexistent/state.json"],
        vec!["sessions", "import", "/"],
    ] {
        let mut all = vec!["--storage", "memory"];
        all.extend(args.iter().copied());
        assert_fails(&agentscope(&all), 5, "cannot read");
    }
}

#[test]
fn list_of_an_empty_store() {
    let o = agentscope(&with_owner(&["list"], &[]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let o = agentscope(&with_owner(&["list"], &["--json"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "{\"sessions\":[],\"next_cursor\":null,\"errors\":[]}\n");
    let o = agentscope(&with_owner(&["list"], &["--cursor", "garbage"]));
    assert_fails(&o, 5, "invalid cursor");
}

#[test]
fn storage_from_the_environment_and_bad_urls() {
    let o = run(
        &["sessions", "show", "--user", "u", "--agent", "a", "--session", "s"],
        None,
        &[("AGENTSCOPE_STORAGE", "memory")],
    );
    assert_fails(&o, 3, "not found");
    let o = agentscope(&["--storage", "ftp://x", "sessions", "list", "--user", "u", "--agent", "a"]);
    assert_fails(&o, 2, "unsupported --storage");
}

#[test]
fn help_documents_the_exit_codes() {
    let o = agentscope(&["sessions", "--help"]);
    assert_eq!(code(&o), 0);
    let help = stdout(&o);
    for cmd in ["create", "show", "list", "set-state", "delete"] {
        assert!(help.contains(cmd), "{cmd} in {help}");
    }
    let o = agentscope(&["--help"]);
    let help = stdout(&o);
    for line in
        ["3    not found", "4    conflict", "5    invalid id or input", "6    storage or model backend unavailable"]
    {
        assert!(help.contains(line), "{line:?} in {help}");
    }
}
