//! `agentscope chat` end to end, non-interactive (`--message`, `--json`, `--confirm`) and the
//! interactive loop fed by a pipe: the built binary against the local OpenAI-compatible mock
//! server, with SQLite (and Redis when installed). The interactive chat on a terminal is `e2e_pty.rs`.
// Helpers outside `#[test]` fns are test code too (clippy.toml only covers `#[test]`/`cfg(test)` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use as_model_openai::test_server::{MockReply, MockServer, SseStep, chunk};
use e2e_support::*;

fn server(rt: &tokio::runtime::Runtime) -> MockServer {
    rt.block_on(MockServer::start()).expect("mock server")
}

/// Two processes, one session: the second turn's model input holds the first turn.
fn remembers_across_processes(storage: &str) {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    srv.push(text_reply(&["Nice to meet ", "you, Ada!"]));
    let mut args = chat_args(storage, &url);
    args.extend(["--message", "My name is Ada."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("Nice to meet you, Ada!"), "{}", stdout(&o));
    let id = new_session_id(&stderr(&o));

    srv.push(text_reply(&["Your name is Ada."]));
    let mut args = chat_args(storage, &url);
    args.extend(["--session", &id, "--message", "What is my name?"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("Your name is Ada."));
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    let second = request_messages(&reqs[1].body);
    assert!(second.contains(&"user: My name is Ada.".to_owned()), "{second:?}");
    assert!(second.contains(&"assistant: Nice to meet you, Ada!".to_owned()), "{second:?}");
    assert_eq!(second.last().map(String::as_str), Some("user: What is my name?"));
}

#[test]
fn sqlite_session_is_remembered_by_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    remembers_across_processes(&storage);
}

#[test]
fn redis_session_is_remembered_by_the_next_process() {
    let Some(redis) = Redis::start() else { return };
    remembers_across_processes(&redis.url);
}

#[test]
fn json_mode_prints_the_event_stream() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    srv.push(MockReply::sse([chunk::reasoning("Hm."), chunk::text("Hi"), chunk::finish("stop"), chunk::usage(3, 1)]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "hello", "--json"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let types: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            v["type"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("REPLY_START"));
    assert_eq!(types.last().map(String::as_str), Some("REPLY_END"));
    for t in ["THINKING_BLOCK_DELTA", "TEXT_BLOCK_DELTA", "MODEL_CALL_END"] {
        assert!(types.iter().any(|x| x == t), "{t} in {types:?}");
    }
}

#[test]
fn missing_key_is_one_line_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let o = run(&[
        "--storage",
        &storage,
        "chat",
        "--user",
        "u",
        "--agent",
        "a",
        "--model",
        "openai:gpt-4o-mini",
        "--message",
        "hi",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("OPENAI_API_KEY is not set: export OPENAI_API_KEY="), "{err}");
    let o = run(&[
        "--storage",
        &storage,
        "chat",
        "--user",
        "u",
        "--agent",
        "a",
        "--model",
        "deepseek:deepseek-chat",
        "--message",
        "hi",
    ]);
    assert!(stderr(&o).contains("DEEPSEEK_API_KEY"), "{}", stderr(&o));
}

#[test]
fn unknown_session_is_exit_3_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let mut args = chat_args(&storage, "http://127.0.0.1:9/v1");
    args.extend(["--session", "nope", "--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown session nope") && err.contains("sessions list"), "{err}");
}

/// `--confirm` answers a parked session, so it needs `--session`: without it the command is a
/// usage error (exit 2) at parse time and writes nothing, rather than creating a new session it
/// then cannot answer (exit 5, a stray empty session left behind).
#[test]
fn confirm_without_session_is_a_usage_error_that_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    for extra in
        [&["--confirm", "yes"][..], &["--confirm", "always", "--json"], &["--confirm", "no", "--message", "hi"]]
    {
        let mut args = chat_args(&storage, "http://127.0.0.1:9/v1");
        args.extend(extra);
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains("--session"), "{extra:?}: {err}");
        assert!(!err.contains("new session"), "{extra:?}: {err}");
        let o = run(&["--storage", &storage, "sessions", "list", "--user", "alice", "--agent", "friday"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o).trim(), "", "{extra:?} left a session behind");
    }
}

#[test]
fn unreachable_model_is_exit_6() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(6), "stdout {} stderr {}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
    assert!(err.contains("the model failed") && err.contains("is the model server reachable at --base-url?"), "{err}");
}

#[test]
fn rejected_key_is_exit_6_naming_the_fix() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    srv.push(MockReply::error(401, "Incorrect API key provided", Some("invalid_api_key")));
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(6));
    let err = stderr(&o);
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
    assert!(err.contains("authentication failed") && err.contains("API key"), "{err}");
}

/// `--message` interrupted by SIGINT mid-stream: exit 130, the partial answer is stored and the next
/// turn (another process) sends it to the model.
fn interrupt_then_resume(storage: &str) {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    srv.push(MockReply::sse_steps([SseStep::Data(chunk::text("Once upon a time").to_string()), SseStep::Hang]));
    let mut args = chat_args(storage, &url);
    args.extend(["--message", "Tell me a story."]);
    let mut child = agentscope(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("Once upon a time") {
        let mut line = String::new();
        // The text arrives without a newline; read byte-wise until it shows.
        let buf = out.fill_buf().unwrap();
        assert!(!buf.is_empty(), "stdout closed early: {seen:?}");
        line.push_str(&String::from_utf8_lossy(buf));
        let n = buf.len();
        out.consume(n);
        seen.push_str(&line);
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "stderr {err}");
    assert!(rest.contains("[interrupted"), "{rest}");
    let id = new_session_id(&err);

    srv.push(text_reply(&["…and they lived happily."]));
    let mut args = chat_args(storage, &url);
    args.extend(["--session", &id, "--message", "Go on."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let second = request_messages(&srv.requests()[1].body);
    assert!(second.contains(&"assistant: Once upon a time".to_owned()), "{second:?}");
}

#[test]
fn sqlite_interrupt_saves_partial_reply() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    interrupt_then_resume(&storage);
}

#[test]
fn redis_interrupt_saves_partial_reply() {
    let Some(redis) = Redis::start() else { return };
    interrupt_then_resume(&redis.url);
}

/// A tool call parks the session; a plain message is refused (exit 5, the fix named); `--confirm yes`
/// from another process runs the tool and the model gets its result.
fn park_then_confirm(storage: &str) {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let work = tempfile::tempdir().unwrap();
    let note = work.path().join("note.txt");
    let input = serde_json::json!({"file_path": note.to_string_lossy(), "content": "Ada"}).to_string();
    srv.push(MockReply::sse([
        chunk::tool_call(0, Some("call_1"), Some("Write"), &input),
        chunk::finish("tool_calls"),
        chunk::usage(10, 5),
    ]));
    let workdir = work.path().to_string_lossy().into_owned();
    let mut args = chat_args(storage, &url);
    args.extend(["--workdir", &workdir, "--message", "Note my name."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("waiting for confirmation: Write"), "{}", stdout(&o));
    assert!(!note.exists());
    let id = new_session_id(&stderr(&o));

    let mut args = chat_args(storage, &url);
    args.extend(["--workdir", &workdir, "--session", &id, "--message", "hello?"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(5));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("waiting for a tool confirmation") && err.contains("--confirm"), "{err}");

    srv.push(text_reply(&["Noted."]));
    let mut args = chat_args(storage, &url);
    args.extend(["--workdir", &workdir, "--session", &id, "--confirm", "yes"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("Noted."));
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "Ada");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2, "the refused message never reached the model");
    let tool_msgs: Vec<&serde_json::Value> =
        reqs[1].body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 1, "{:?}", reqs[1].body);
}

#[test]
fn sqlite_park_then_confirm_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    park_then_confirm(&storage);
}

#[test]
fn redis_park_then_confirm_from_another_process() {
    let Some(redis) = Redis::start() else { return };
    park_then_confirm(&redis.url);
}

#[test]
fn locked_sqlite_is_exit_6_naming_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let storage = format!("sqlite:{}", db.display());
    let o = run(&["--storage", &storage, "sessions", "create", "--user", "alice", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Another process (this test) holds the write lock for the whole run.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut args = chat_args(&storage, "http://127.0.0.1:9/v1");
    args.extend(["--message", "hi"]);
    let o = run(&args);
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("locked") && err.contains("another process holds the SQLite file"), "{err}");
}

#[test]
fn unreachable_redis_is_exit_6_naming_the_fix() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let storage = format!("redis://127.0.0.1:{port}");
    let mut args = chat_args(&storage, "http://127.0.0.1:9/v1");
    args.extend(["--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is redis-server running and reachable"), "{err}");
}

#[test]
fn options_reach_the_agent() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").unwrap();
    let read = serde_json::json!({"file_path": note.to_string_lossy()}).to_string();
    // The model keeps reading; explore mode allows reads; one iteration is the bound.
    srv.push(MockReply::sse([chunk::tool_call(0, Some("r1"), Some("Read"), &read), chunk::finish("tool_calls")]));
    let workdir = dir.path().to_string_lossy().into_owned();
    let mut args = chat_args(&storage, &url);
    args.extend([
        "--system-prompt",
        "You are Zed.",
        "--permission-mode",
        "explore",
        "--max-iters",
        "1",
        "--workdir",
        &workdir,
        "--message",
        "Read the note.",
    ]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("[tool result] Read:") && out.contains("hello"), "{out}");
    assert!(out.contains("[stopped: the maximum number of iterations was reached]"), "{out}");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1, "one iteration only");
    assert_eq!(request_messages(&reqs[0].body)[0], "system: You are Zed.");
    // The mode is kept in the session.
    let id = new_session_id(&stderr(&o));
    let o = show_summary(&storage, &id);
    assert!(stdout(&o).contains("permissions: mode explore"), "{}", stdout(&o));
}

#[test]
fn accept_edits_writes_inside_the_workdir_without_asking() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let note = dir.path().join("note.txt");
    let input = serde_json::json!({"file_path": note.to_string_lossy(), "content": "Ada"}).to_string();
    srv.push(MockReply::sse([chunk::tool_call(0, Some("w1"), Some("Write"), &input), chunk::finish("tool_calls")]));
    srv.push(text_reply(&["Done."]));
    let workdir = dir.path().to_string_lossy().into_owned();
    let mut args = chat_args(&storage, &url);
    args.extend(["--permission-mode", "accept_edits", "--workdir", &workdir, "--message", "Write it."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("Done."), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "Ada");
}

#[test]
fn a_relative_workdir_is_not_the_whole_disk() {
    // `--workdir .` in accept-edits mode: a Write outside the current directory still asks (the
    // session parks) instead of counting `/` as the working directory.
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("work");
    std::fs::create_dir(&inside).unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let outside = dir.path().join("outside.txt");
    let input = serde_json::json!({"file_path": outside.to_string_lossy(), "content": "Ada"}).to_string();
    srv.push(MockReply::sse([chunk::tool_call(0, Some("w1"), Some("Write"), &input), chunk::finish("tool_calls")]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--permission-mode", "accept_edits", "--workdir", ".", "--message", "Write it.", "--json"]);
    let o = agentscope(&args).current_dir(&inside).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("REQUIRE_USER_CONFIRM"), "{}", stdout(&o));
    assert!(!outside.exists(), "written without asking");
    // A --workdir that does not exist is a usage error.
    let mut args = chat_args(&storage, &url);
    args.extend(["--workdir", "no-such-dir", "--message", "Hi."]);
    let o = agentscope(&args).current_dir(&inside).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--workdir no-such-dir"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("new session"), "a session was created: {}", stderr(&o));
}

#[test]
fn confirm_no_tells_the_model_it_was_denied() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let note = dir.path().join("note.txt");
    let input = serde_json::json!({"file_path": note.to_string_lossy(), "content": "Ada"}).to_string();
    srv.push(MockReply::sse([chunk::tool_call(0, Some("w1"), Some("Write"), &input), chunk::finish("tool_calls")]));
    let workdir = dir.path().to_string_lossy().into_owned();
    let mut args = chat_args(&storage, &url);
    args.extend(["--workdir", &workdir, "--message", "Write it."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = new_session_id(&stderr(&o));
    srv.push(text_reply(&["Understood, I won't."]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--workdir", &workdir, "--session", &id, "--confirm", "no", "--json"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!note.exists());
    let ends: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "TOOL_RESULT_END")
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["state"], "denied");
    let tool_msg =
        srv.requests()[1].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    assert!(tool_msg["content"].to_string().contains("denied by user"), "{tool_msg}");
}

#[test]
fn sigint_interrupts_a_running_tool_and_the_result_is_saved() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let input = serde_json::json!({"command": "sleep 30"}).to_string();
    srv.push(MockReply::sse([chunk::tool_call(0, Some("b1"), Some("Bash"), &input), chunk::finish("tool_calls")]));
    let workdir = dir.path().to_string_lossy().into_owned();
    let mut args = chat_args(&storage, &url);
    args.extend(["--permission-mode", "bypass", "--workdir", &workdir, "--message", "Wait a bit."]);
    let started = std::time::Instant::now();
    let mut child = agentscope(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("[tool result] Bash") {
        let buf = out.fill_buf().unwrap();
        assert!(!buf.is_empty(), "stdout closed early: {seen:?}");
        seen.push_str(&String::from_utf8_lossy(buf));
        let n = buf.len();
        out.consume(n);
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(started.elapsed() < std::time::Duration::from_secs(25), "the tool did not run to its end");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("(interrupted)") && rest.contains("[interrupted: the reply so far is saved]"), "{rest}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let id = new_session_id(&err);

    // The next turn sends the model the interrupted call with its result.
    srv.push(text_reply(&["OK, stopped."]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--workdir", &workdir, "--session", &id, "--message", "Never mind."]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let msgs = srv.requests()[1].body["messages"].as_array().unwrap().clone();
    let tool = msgs.iter().find(|m| m["role"] == "tool").expect("a tool result");
    assert!(tool["content"].to_string().contains("interrupted by the user"), "{tool}");
}

/// One command to the test's redis-server, sent as another process (AgentScope Python) would
/// send it; returns the reply's value (`0`, `OK`, the string).
fn redis_command(redis: &Redis, args: &[&str]) -> String {
    let port = redis.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port in the URL");
    let reply = as_storage_redis::testing::command(port, args).expect("redis answers");
    let reply = reply.trim_end();
    match reply.split_once("\r\n") {
        Some((_length, value)) => value.to_owned(),
        None => reply.trim_start_matches([':', '+']).to_owned(),
    }
}

/// On Redis a turn takes AgentScope's chat-run lock: while another process holds
/// `agentscope:session:lock:{id}`, no turn runs (the model is never called) and the command ends
/// with exit 4 naming the busy session; once the lock is free, the turn runs.
#[test]
fn redis_turn_never_runs_while_another_process_holds_the_session_lock() {
    let Some(redis) = Redis::start() else { return };
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    srv.push(text_reply(&["first"]));
    let mut args = chat_args(&redis.url, &url);
    args.extend(["--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let id = new_session_id(&stderr(&o));
    // The first turn released its lock.
    let lock = format!("agentscope:session:lock:{id}");
    assert_eq!(redis_command(&redis, &["EXISTS", &lock]), "0");

    redis_command(&redis, &["SET", &lock, "held-by-python", "PX", "60000"]);
    srv.push(text_reply(&["second"]));
    let mut args = chat_args(&redis.url, &url);
    args.extend(["--session", &id, "--message", "again"]);
    let o = agentscope(&args).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(4), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("busy") && stderr(&o).contains(&lock), "{}", stderr(&o));
    assert_eq!(srv.requests().len(), 1, "the model was called while the session was locked");
    assert_eq!(redis_command(&redis, &["GET", &lock]), "held-by-python", "someone else's lock was touched");
    // Changing the session's mode is a write too: it waits for the lock as well.
    let mut with_mode = args.clone();
    with_mode.extend(["--permission-mode", "explore"]);
    let o = agentscope(&with_mode).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(4), "stderr: {}", stderr(&o));
    let shown = stdout(&show(&redis.url, &id, &[]));
    assert!(!shown.contains(r#""mode":"explore""#), "the mode was written under another's lock");

    redis_command(&redis, &["DEL", &lock]);
    let o = agentscope(&args).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("second"));
    assert_eq!(srv.requests().len(), 2);

    // A bad wait is a usage error, not a silent default.
    let o = agentscope(&args).env("AGENTSCOPE_LOCK_WAIT", "soon").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(&o));
}

/// The name of a session's lock file next to an SQLite database: FNV-1a (64 bit) of user, agent
/// and session id, each followed by a NUL byte, in 16 hex digits. Every build must agree on it, or
/// two versions of the binary would run one session at once.
fn lock_file_name(user: &str, agent: &str, session: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [user, agent, session] {
        for b in part.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}.lock")
}

/// On SQLite (one machine) a turn takes an OS file lock per session, next to the database: while
/// another process holds it, no turn runs; the lock goes with its holder.
#[test]
fn sqlite_turn_never_runs_while_another_process_holds_the_session_lock() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let storage = format!("sqlite:{}", db.display());
    srv.push(text_reply(&["first"]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "hi"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let id = new_session_id(&stderr(&o));
    // The first turn removed its lock file when it released it.
    let lock_dir = dir.path().join("s.db.locks");
    assert_eq!(std::fs::read_dir(&lock_dir).unwrap().count(), 0, "a lock file outlived its turn");
    // The session's lock file, held here as another process (or another build) would hold it:
    // its name is an on-disk contract between processes, pinned by this test.
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_dir.join(lock_file_name("alice", "friday", &id)))
        .unwrap();
    held.try_lock().expect("nobody holds the session");

    srv.push(text_reply(&["second"]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--session", &id, "--message", "again"]);
    let o = agentscope(&args).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(4), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    assert_eq!(srv.requests().len(), 1, "the model was called while the session was locked");
    // The same database through a symlink shares the same locks.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let linked = format!("sqlite:{}", link.display());
    let mut args_linked = chat_args(&linked, &url);
    args_linked.extend(["--session", &id, "--message", "again"]);
    let o = agentscope(&args_linked).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(4), "through the symlink: {}", stderr(&o));
    assert_eq!(srv.requests().len(), 1);

    drop(held);
    let o = agentscope(&args).env("AGENTSCOPE_LOCK_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("second"));
    assert_eq!(srv.requests().len(), 2);
}

/// Ctrl-C while a turn waits for a session another process is running ends the command at once
/// with exit 130 (not after the wait, with 4), and the message it was to send is not written.
#[test]
fn ctrl_c_while_waiting_for_a_busy_session_exits_130_and_writes_nothing() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    srv.push(text_reply(&["first"]));
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "one"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let id = new_session_id(&stderr(&o));
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.path().join("s.db.locks").join(lock_file_name("alice", "friday", &id)))
        .unwrap();
    held.try_lock().expect("nobody holds the session");

    let mut args = chat_args(&storage, &url);
    args.extend(["--session", &id, "--message", "two"]);
    let mut child = agentscope(&args)
        .env("AGENTSCOPE_LOCK_WAIT", "20")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("is busy") {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "stderr closed early: {seen:?}");
        seen.push_str(&line);
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    std::io::Read::read_to_string(&mut err, &mut seen).unwrap();
    assert_eq!(status.code(), Some(130), "stderr {seen}");
    drop(held);
    assert_eq!(srv.requests().len(), 1, "the model was called");
    let shown = stdout(&show(&storage, &id, &[]));
    assert!(!shown.contains("two"), "the interrupted message was written: {shown}");
}

/// `chat --message` with a full disk behind stdout (`> /dev/full`), as text and as `--json`: the turn
/// still runs and is saved, but the command says the output failed and exits 1, like every command
/// whose stdout fails (a reply nobody could read is not a success).
#[test]
fn a_full_stdout_fails_the_turn_with_exit_1_but_the_turn_is_saved() {
    if let Err(e) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        eprintln!("skipping: no /dev/full to write to ({e})");
        return;
    }
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    for extra in [&[][..], &["--json"]] {
        srv.push(text_reply(&["Hello ", "there."]));
        let mut args = chat_args(&storage, &url);
        args.extend(["--message", "hello"]);
        args.extend_from_slice(extra);
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = agentscope(&args).stdout(full).stderr(Stdio::piped()).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains("error: cannot write the output"), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        let id = new_session_id(&err);
        let o = show(&storage, &id, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).contains("Hello there."), "{extra:?}: the reply was saved: {}", stdout(&o));
    }
}

/// The interactive chat with `input` piped to it (no terminal), to the end of that input.
fn interactive(storage: &str, url: &str, input: &str) -> std::process::Output {
    let mut child = agentscope(&chat_args(storage, url))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The interactive chat: a turn that fails says so on stderr (diagnostics), never among the replies
/// on stdout, and the chat goes on; at the end of input the exit code is the last turn's failure (6:
/// the model refused the key), or 0 when the last turn went well.
#[test]
fn interactive_turn_errors_go_to_stderr_and_a_failed_last_turn_is_the_exit_code() {
    let rt = runtime();
    let srv = server(&rt);
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let refused = || MockReply::error(401, "Incorrect API key provided", Some("invalid_api_key"));

    srv.push(refused());
    let o = interactive(&storage, &url, "hello\n");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(6), "stdout {out}\nstderr {err}");
    assert!(!out.contains("error") && !out.contains("authentication failed"), "{out}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error: the model failed")).count(), 1, "{err}");

    // A failed turn, then one that works: the chat went on, and ends well.
    srv.push(refused());
    srv.push(text_reply(&["Fine, thanks."]));
    let o = interactive(&storage, &url, "hello\nhow are you?\n");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "stdout {out}\nstderr {err}");
    assert!(out.contains("Fine, thanks.") && !out.contains("error"), "{out}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error: the model failed")).count(), 1, "{err}");
    // cli.md gives the codes but not this rule, so `chat --help` states it.
    let help = stdout(&run(&["chat", "--help"]));
    assert!(help.contains("or with the exit code of the last turn when that turn failed"), "{help}");
}
