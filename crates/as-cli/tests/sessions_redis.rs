//! `agentscope sessions …` end to end with `--storage redis://…`: every command, each invocation
//! a new process sharing a private redis-server (compat layout with a TTL, and the cluster
//! layout on a real 3-master cluster); an unreachable server and bad URLs exit with clear codes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use std::process::{Command, Output, Stdio};

use as_storage_redis::testing::{RedisCluster, RedisServer, command, raw_command};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentscope"))
        .args(args)
        .env_remove("AGENTSCOPE_STORAGE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run agentscope")
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn run_s(storage: &str, cmd: &str, rest: &[&str]) -> Output {
    let mut v = vec!["--storage", storage, "sessions", cmd, "--user", "user-1", "--agent", "agent-1"];
    v.extend_from_slice(rest);
    run(&v)
}

fn fixture(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/agentscope-2.0.4")
        .join(name)
        .display()
        .to_string()
}

/// create, show, set-state (with and without a stale revision), list, delete.
fn every_command(storage: &str) -> String {
    let id = ok(&run_s(storage, "create", &["--name", "first"])).split_whitespace().last().expect("id").to_owned();
    let shown = ok(&run_s(storage, "show", &["--session", &id]));
    let record: serde_json::Value = serde_json::from_str(shown.trim()).expect("compact JSON record");
    assert_eq!(record["config"]["name"], "first");
    let rev = record["updated_at"].as_str().expect("updated_at").to_owned();
    let state = fixture("rich_agent_state.compact.json");
    ok(&run_s(storage, "set-state", &["--session", &id, "--expect", &rev, &state]));
    let stale = run_s(storage, "set-state", &["--session", &id, "--expect", &rev, &state]);
    assert_eq!(code(&stale), 4, "a stale revision is a conflict: {}", String::from_utf8_lossy(&stale.stderr));
    let shown = ok(&run_s(storage, "show", &["--session", &id]));
    let record: serde_json::Value = serde_json::from_str(shown.trim()).expect("record");
    assert_eq!(record["state"]["context"].as_array().map(Vec::len), Some(3));
    assert_eq!(record["state"]["session_id"], id.as_str());
    ok(&run_s(storage, "create", &["--name", "second"]));
    let listed = ok(&run_s(storage, "list", &["--json"]));
    assert!(listed.contains(&id) && listed.contains("second"), "{listed}");
    assert_eq!(code(&run_s(storage, "set-state", &["--session", "nope", &state])), 3);
    ok(&run_s(storage, "delete", &["--session", &id]));
    assert_eq!(code(&run_s(storage, "show", &["--session", &id])), 3);
    assert_eq!(code(&run_s(storage, "delete", &["--session", &id])), 3);
    id
}

#[test]
fn every_sessions_command_on_a_private_redis_with_2_0_4_keys_and_a_ttl() {
    let Some(server) = RedisServer::start() else { return };
    let storage = format!("{}/0?ttl=3600", server.url());
    every_command(&storage);
    let keys = raw_command(server.port(), "KEYS agentscope:user:user-1:*").expect("KEYS");
    assert!(keys.contains("agentscope:user:user-1:agent:agent-1:sessions"), "{keys}");
    let ttl = raw_command(server.port(), "TTL agentscope:user:user-1:agent:agent-1:sessions").expect("TTL");
    let ttl: i64 = ttl.trim().trim_start_matches(':').parse().expect("integer reply");
    assert!((3500..=3600).contains(&ttl), "ttl={ttl}");
}

#[test]
fn every_sessions_command_on_a_cluster_with_the_cluster_layout() {
    let Some(cluster) = RedisCluster::start() else { return };
    let storage = format!("redis://127.0.0.1:{}?layout=cluster", cluster.ports()[0]);
    every_command(&storage);
    // The compat layout is refused on a cluster, with the reason.
    // A configuration the store cannot work with: a usage error (2), not a failed check (1).
    let o = run_s(&format!("redis://127.0.0.1:{}", cluster.ports()[0]), "list", &[]);
    assert_eq!(code(&o), 2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("layout=cluster"), "{err}");
}

#[test]
fn unreachable_redis_and_bad_urls_exit_with_clear_codes() {
    let port = as_storage_redis::testing::free_port().expect("port");
    let o = run_s(&format!("redis://127.0.0.1:{port}?timeout_ms=300"), "list", &[]);
    assert_eq!(code(&o), 6, "unreachable backend: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("redis-server"));
    for bad in ["redis://h:1?layout=weird", "redis://:secret@h:1?ttl=x"] {
        let o = run_s(bad, "list", &[]);
        assert_eq!(code(&o), 2, "{bad}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("secret"), "the password is never printed");
    }
}

/// `sessions show` prints the record exactly as stored: here one written by another (newer)
/// writer, with a field we do not know and a number spelled its own way.
#[test]
fn show_prints_exactly_the_stored_bytes() {
    let Some(server) = RedisServer::start() else {
        println!("skipped: redis-server is not installed");
        return;
    };
    let fixture = std::fs::read_to_string(fixture("session_record.compact.json")).unwrap();
    let stored = fixture.trim_end().replacen("{\"id\"", "{\"from_a_newer_writer\":[1.50,true],\"id\"", 1);
    assert_ne!(stored, fixture.trim_end());
    let key = "agentscope:user:user-1:session:sessrec_fixture_0001";
    assert!(command(server.port(), &["SET", key, &stored]).unwrap().starts_with("+OK"));
    let shown = ok(&run_s(&server.url(), "show", &["--session", "sessrec_fixture_0001"]));
    assert_eq!(shown.trim_end(), stored);
    // Another agent of the user does not see it.
    let other = run(&[
        "--storage",
        &server.url(),
        "sessions",
        "show",
        "--user",
        "user-1",
        "--agent",
        "agent-2",
        "--session",
        "sessrec_fixture_0001",
    ]);
    assert_eq!(code(&other), 3);
}

/// A session AgentScope Python 2.0.4 wrote (its `state.session_id` is not the record id, as 2.0.4
/// leaves it) is exported as stored and passes `validate`; a record in an agent's index that says
/// it is another agent's is reported by `validate`, not silently skipped.
#[test]
fn python_sessions_export_as_stored_and_validate_clean() {
    let Some(server) = RedisServer::start() else {
        println!("skipped: redis-server is not installed");
        return;
    };
    let stored = std::fs::read_to_string(fixture("redis-session-after-cycle.compact.json")).unwrap();
    let stored = stored.trim_end();
    let record: serde_json::Value = serde_json::from_str(stored).unwrap();
    let id = record["id"].as_str().unwrap();
    assert_ne!(record["state"]["session_id"].as_str(), Some(id), "the fixture's ids differ, as 2.0.4 leaves them");
    let key = format!("agentscope:user:user-1:session:{id}");
    assert!(command(server.port(), &["SET", &key, stored]).unwrap().starts_with("+OK"));
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    assert!(command(server.port(), &["SADD", index, id]).unwrap().starts_with(':'));
    // Its message log, as 2.0.4 keeps it (one Msg JSON per list element).
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("rich_agent_state.compact.json")).unwrap()).unwrap();
    let messages: Vec<String> = state["context"].as_array().unwrap().iter().map(|m| m.to_string()).collect();
    for m in &messages {
        assert!(command(server.port(), &["RPUSH", &format!("{key}:messages"), m]).unwrap().starts_with(':'));
    }
    let url = server.url();
    let export = ok(&run(&["--storage", &url, "sessions", "export", "--user", "user-1"]));
    let line: serde_json::Value = serde_json::from_str(export.trim_end()).unwrap();
    assert_eq!(line["record"], record, "exported as stored");
    let exported: Vec<String> = line["messages"].as_array().unwrap().iter().map(|m| m.to_string()).collect();
    assert_eq!(exported, messages);
    let validated = run(&["--storage", &url, "sessions", "validate", "--user", "user-1"]);
    assert_eq!(code(&validated), 0, "{}", String::from_utf8_lossy(&validated.stdout));
    // Export, import into the embedded store, export again: the same line (lossless across
    // backends, a 2.0.4 record's timestamps and ids included), but for `state.session_id`, which
    // an import sets to the record id (2.0.4 leaves an unrelated id there).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &export).unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("s.db").display());
    ok(&run(&["--storage", &sqlite, "sessions", "import", file.to_str().unwrap()]));
    let again = ok(&run(&["--storage", &sqlite, "sessions", "export", "--user", "user-1"]));
    let again: serde_json::Value = serde_json::from_str(again.trim_end()).unwrap();
    let mut want = line.clone();
    want["record"]["state"]["session_id"] = serde_json::Value::from(id);
    assert_eq!(again, want, "export -> import -> export changed the line");
    // The same record in another agent's index: that agent's listing reports it.
    let other = "agentscope:user:user-1:agent:agent-2:sessions";
    assert!(command(server.port(), &["SADD", other, id]).unwrap().starts_with(':'));
    let validated = run(&["--storage", &url, "sessions", "validate", "--user", "user-1"]);
    assert_eq!(code(&validated), 1);
    let report = String::from_utf8_lossy(&validated.stdout);
    assert!(report.contains("user-1/agent-2") && report.contains("belongs to user-1/agent-1"), "{report}");
}
