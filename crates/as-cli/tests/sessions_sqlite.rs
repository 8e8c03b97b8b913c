//! `agentscope sessions …` end to end with SQLite: every command with `--storage sqlite:PATH`,
//! each invocation a new process sharing the file; the default store's location
//! (`AGENTSCOPE_HOME`, `XDG_DATA_HOME`, `HOME`) and `--help` naming it; a bad file's exit code.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the binary with a clean storage environment plus `env`.
fn run(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentscope"));
    cmd.args(args)
        .env_remove("AGENTSCOPE_STORAGE")
        .env_remove("AGENTSCOPE_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run agentscope")
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/agentscope-2.0.4").join(name)
}

const OWNER: [&str; 4] = ["--user", "user-1", "--agent", "agent-1"];

fn sessions(storage: &str, cmd: &[&str], rest: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["--storage".into(), storage.into(), "sessions".into()];
    v.extend(cmd.iter().map(|s| (*s).to_owned()));
    v.extend(OWNER.iter().map(|s| (*s).to_owned()));
    v.extend(rest.iter().map(|s| (*s).to_owned()));
    v
}

fn run_s(storage: &str, cmd: &[&str], rest: &[&str]) -> Output {
    let args = sessions(storage, cmd, rest);
    run(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[])
}

#[test]
fn every_sessions_command_works_on_one_sqlite_file_across_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("store.db");
    let storage = format!("sqlite:{}", db.display());

    let out = ok(&run_s(&storage, &["create"], &["--name", "first"]));
    let id = out.split_whitespace().last().expect("an id").to_owned();
    assert!(db.exists(), "the file was created");

    let shown = ok(&run_s(&storage, &["show"], &["--session", &id]));
    let record: serde_json::Value = serde_json::from_str(shown.trim()).expect("compact JSON record");
    assert_eq!(record["id"], id.as_str());
    assert_eq!(record["config"]["name"], "first");
    let rev = record["updated_at"].as_str().expect("updated_at").to_owned();

    let state = fixture("rich_agent_state.compact.json");
    let state_arg = state.display().to_string();
    ok(&run_s(&storage, &["set-state"], &["--session", &id, "--expect", &rev, &state_arg]));
    // The same revision again lost the race: exit 4, nothing written.
    let stale = run_s(&storage, &["set-state"], &["--session", &id, "--expect", &rev, &state_arg]);
    assert_eq!(code(&stale), 4, "stderr: {}", String::from_utf8_lossy(&stale.stderr));

    let shown = ok(&run_s(&storage, &["show"], &["--session", &id]));
    let record: serde_json::Value = serde_json::from_str(shown.trim()).expect("compact JSON record");
    assert_eq!(record["state"]["session_id"], id.as_str(), "state.session_id is the record id");
    assert_eq!(record["state"]["context"].as_array().map(Vec::len), Some(3), "the fixture's three messages");
    // The stored bytes keep the fixture's state bytes (apart from the forced session id).
    let fixture_text = std::fs::read_to_string(&state).expect("fixture");
    let fixture_json: serde_json::Value = serde_json::from_str(&fixture_text).expect("fixture JSON");
    let old_sid = fixture_json["session_id"].as_str().expect("session_id");
    let expected_state =
        fixture_text.replacen(&format!("\"session_id\":\"{old_sid}\""), &format!("\"session_id\":\"{id}\""), 1);
    assert!(shown.contains(expected_state.trim()), "the record embeds the state byte for byte");

    ok(&run_s(&storage, &["create"], &["--name", "second"]));
    let listed = ok(&run_s(&storage, &["list"], &["--json"]));
    assert!(listed.contains(&id), "{listed}");
    assert!(listed.contains("second"), "{listed}");

    ok(&run_s(&storage, &["delete"], &["--session", &id]));
    assert_eq!(code(&run_s(&storage, &["show"], &["--session", &id])), 3);
    assert_eq!(code(&run_s(&storage, &["delete"], &["--session", &id])), 3);
}

#[test]
fn default_store_follows_agentscope_home_then_xdg_data_home_then_home() {
    let a = tempfile::tempdir().expect("temp dir");
    let x = tempfile::tempdir().expect("temp dir");
    let h = tempfile::tempdir().expect("temp dir");
    let create = ["sessions", "create", "--user", "u", "--agent", "a"];

    ok(&run(&create, &[("AGENTSCOPE_HOME", a.path()), ("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
    assert!(a.path().join("sessions.db").is_file());
    assert!(!x.path().join("agentscope").exists() && !h.path().join(".local").exists());

    ok(&run(&create, &[("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
    assert!(x.path().join("agentscope/sessions.db").is_file());

    ok(&run(&create, &[("HOME", h.path())]));
    assert!(h.path().join(".local/share/agentscope/sessions.db").is_file());

    // And --help says so.
    for args in [&["--help"][..], &["sessions", "list", "--help"][..]] {
        let help = ok(&run(args, &[("AGENTSCOPE_HOME", a.path())]));
        let expected = format!("sqlite:{}", a.path().join("sessions.db").display());
        assert!(help.contains(&expected), "{args:?} help names {expected}:\n{help}");
        let help = ok(&run(args, &[("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
        let expected = format!("sqlite:{}", x.path().join("agentscope/sessions.db").display());
        assert!(help.contains(&expected), "{args:?} help names {expected}:\n{help}");
    }
}

#[test]
fn a_file_that_is_not_a_database_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n".repeat(100)).expect("write");
    let o = run_s(&format!("sqlite:{}", notes.display()), &["list"], &[]);
    assert_ne!(code(&o), 0);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not an SQLite database"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).expect("read"), "my notes\n".repeat(100), "untouched");
}
