//! `agentscope schema` and `agentscope state fmt|check`, driven as a process.

#![cfg(test)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn agentscope(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentscope"));
    cmd.args(args).env_remove("AGENTSCOPE_STORAGE").stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn schema_lists_and_prints_the_committed_files() {
    let list = agentscope(&["schema"], None);
    assert!(list.status.success());
    let text = stdout(&list);
    for name in ["agent-state", "msg", "session-record"] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{text}");
        let one = agentscope(&["schema", name], None);
        assert!(one.status.success());
        let committed = std::fs::read_to_string(format!("{ROOT}/docs/schemas/{name}.schema.json")).unwrap();
        assert_eq!(stdout(&one), committed, "{name}");
    }
    let missing = agentscope(&["schema", "nope"], None);
    assert_eq!(missing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("agent-state"), "lists the known names");
}

#[test]
fn fmt_writes_pydantic_bytes_for_every_golden() {
    for (file, kind) in [
        ("empty_agent_state.compact.json", None),
        ("rich_agent_state.compact.json", Some("state")),
        ("session_record.compact.json", None),
        ("redis-session-after-cycle.compact.json", Some("record")),
    ] {
        let path = format!("{FIX}{file}");
        let mut args = vec!["state", "fmt", path.as_str()];
        if let Some(k) = kind {
            args.extend(["--kind", k]);
        }
        let out = agentscope(&args, None);
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout(&out) == std::fs::read_to_string(&path).unwrap(), "{file} is byte-identical");
    }
}

#[test]
fn fmt_canonicalises_pretty_input_from_stdin() {
    let pretty = std::fs::read(format!("{FIX}rich_agent_state.pretty.json")).unwrap();
    let compact = std::fs::read_to_string(format!("{FIX}rich_agent_state.compact.json")).unwrap();
    for args in [&["state", "fmt"][..], &["state", "fmt", "-"][..]] {
        let out = agentscope(args, Some(&pretty));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout(&out) == compact);
    }
}

#[test]
fn fmt_reads_a_single_message() {
    let msg = r#"{"name":"n","role":"assistant","id":"m1","created_at":"2025-06-01T10:00:00","content":[{"text":"hi","id":"b"}],"x":1}"#;
    let out = agentscope(&["state", "fmt"], Some(msg.as_bytes()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout(&out),
        r#"{"name":"n","content":[{"type":"text","text":"hi","id":"b"}],"role":"assistant","id":"m1","metadata":{},"created_at":"2025-06-01T10:00:00","finished_at":null,"usage":null}"#
    );
}

#[test]
fn fmt_rejects_bad_input_with_the_json_path() {
    let bad = r#"{"context":[{"name":"a","role":"assistant","content":[{"type":"data","source":{"type":"url","url":"/rel","media_type":"x"}}]}]}"#;
    let out = agentscope(&["state", "fmt", "--kind", "state"], Some(bad.as_bytes()));
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("context[0].content[0].source.url"), "{err}");
}

#[test]
fn check_reports_each_file_and_fails_on_any_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"session_id":"s","tasks_context":{"tasks":[{"subject":"s","description":"d"}]}}"#)
        .unwrap();
    let rich = format!("{FIX}rich_agent_state.compact.json");
    let record = format!("{FIX}session_record.compact.json");

    let ok = agentscope(&["state", "check", &rich, &record], None);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let text = stdout(&ok);
    assert!(text.contains(&format!("ok  {rich}  state 3 messages")), "{text}");
    assert!(text.contains(&format!("ok  {record}  record 3 messages")), "{text}");

    let mixed = agentscope(&["state", "check", &rich, bad.to_str().unwrap()], None);
    assert_eq!(mixed.status.code(), Some(1));
    let err = String::from_utf8_lossy(&mixed.stderr);
    assert!(err.contains("tasks_context.tasks[0].metadata"), "{err}");

    let missing = agentscope(&["state", "check", "/nonexistent/x.json"], None);
    assert_eq!(missing.status.code(), Some(1));
    let usage = agentscope(&["state", "check"], None);
    assert_eq!(usage.status.code(), Some(2), "no FILE is a usage error");
}

/// pydantic's `AgentState` reads any JSON object (unknown keys dropped, the rest defaulted), so a
/// session record missing its owner (`{"id":…,"state":{…}}`) or a message would check as an empty
/// state, its messages silently dropped. `state check` refuses them (as `sessions set-state` does),
/// naming the key; a state with a key it does not know still checks, as pydantic reads it.
#[test]
fn check_refuses_a_record_or_a_message_taken_for_a_state() {
    let dir = tempfile::tempdir().unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIX}session_record.compact.json")).unwrap()).unwrap();
    let partial = dir.path().join("partial.json");
    std::fs::write(&partial, serde_json::json!({"id": record["id"], "state": record["state"]}).to_string()).unwrap();
    let partial = partial.to_str().unwrap();
    let msg = dir.path().join("msg.json");
    std::fs::write(&msg, serde_json::to_string(&record["state"]["context"][0]).unwrap()).unwrap();
    let msg = msg.to_str().unwrap();
    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, r#"{"foo":1}"#).unwrap();
    let unknown = unknown.to_str().unwrap();

    for args in [&["state", "check", partial][..], &["state", "check", "--kind", "state", msg]] {
        let o = agentscope(args, None);
        let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {all}");
        assert!(all.contains("not an AgentState") && !all.contains("ok  "), "{args:?}: {all}");
    }
    let o = agentscope(&["state", "check", partial], None);
    let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(all.contains(&format!("error  {partial}  at state: ")), "names the key: {all}");
    // `state fmt` would print the empty state: refused too (invalid input).
    let o = agentscope(&["state", "fmt", partial], None);
    assert_eq!(o.status.code(), Some(5), "{}", stdout(&o));
    assert!(o.stdout.is_empty());

    let o = agentscope(&["state", "check", unknown], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), format!("ok  {unknown}  state 0 messages\n"));
}

/// cli.md: results on stdout, diagnostics on stderr. `state check` prints an `ok` line per good file
/// on stdout; a file that fails is an `error  FILE  why` line on stderr, with the count of failures.
#[test]
fn check_prints_ok_lines_on_stdout_and_errors_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"context": 3}"#).unwrap();
    let bad = bad.to_str().unwrap();
    let rich = format!("{FIX}rich_agent_state.compact.json");
    let o = agentscope(&["state", "check", bad, &rich, "/nonexistent/x.json"], None);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), format!("ok  {rich}  state 3 messages\n"));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with(&format!("error  {bad}  at context: ")), "{err}");
    assert!(lines[1].starts_with("error  /nonexistent/x.json  cannot read: "), "{err}");
    assert_eq!(lines[2], "2 of 3 files failed");
}
