//! The interactive `agentscope chat` in a pseudo-terminal: the real Ctrl-C byte (0x03) sent
//! mid-stream interrupts the reply and the prompt comes back; Ctrl-D quits; quitting at a tool
//! confirmation leaves the session parked and the next chat asks again first.
// Helpers outside `#[test]` fns are test code too (clippy.toml only covers `#[test]`/`cfg(test)` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use as_model_openai::test_server::{MockReply, MockServer, SseStep, chunk};
use e2e_support::*;

#[test]
fn sqlite_ctrl_c_interrupts_the_stream_and_ctrl_d_quits() {
    let dir = tempfile::tempdir().unwrap();
    ctrl_c_interrupts_the_stream_and_ctrl_d_quits(&format!("sqlite:{}", dir.path().join("s.db").display()));
}

#[test]
fn redis_ctrl_c_interrupts_the_stream_and_ctrl_d_quits() {
    let Some(redis) = Redis::start() else { return };
    ctrl_c_interrupts_the_stream_and_ctrl_d_quits(&redis.url);
}

fn ctrl_c_interrupts_the_stream_and_ctrl_d_quits(storage: &str) {
    let rt = runtime();
    let srv = rt.block_on(MockServer::start()).unwrap();
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    // The model streams a few words, then stalls (until the client goes away).
    srv.push(MockReply::sse_steps([
        SseStep::Data(chunk::reasoning("A story, then.").to_string()),
        SseStep::Data(chunk::text("Once upon a time").to_string()),
        SseStep::Hang,
    ]));
    let mut pty = Pty::spawn(&chat_args(storage, &url), dir.path());
    let banner = pty.expect("you> ");
    assert!(banner.contains("Ctrl-C interrupts a reply"), "{banner}");
    pty.send(b"Tell me a story.\r");
    let shown = pty.expect("Once upon a time");
    assert!(shown.contains("[thinking] A story, then."), "thinking is shown apart: {shown}");
    pty.send(b"\x03");
    pty.expect("[interrupted: the reply so far is saved]");
    pty.expect("you> ");

    srv.push(text_reply(&["...and that was the end."]));
    pty.send(b"Go on.\r");
    pty.expect("...and that was the end.");
    pty.expect("you> ");
    pty.send(b"\x04");
    assert_eq!(pty.wait(), 0, "Ctrl-D quits cleanly:\n{}", pty.all());

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    let second = request_messages(&reqs[1].body);
    assert!(second.contains(&"assistant: Once upon a time".to_owned()), "the partial reply was saved: {second:?}");
    assert_eq!(second.last().map(String::as_str), Some("user: Go on."));
}

#[test]
fn ctrl_c_at_the_prompt_quits_with_130() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let mut pty = Pty::spawn(&chat_args(&storage, "http://127.0.0.1:9/v1"), dir.path());
    pty.expect("you> ");
    pty.send(b"\x03");
    assert_eq!(pty.wait(), 130);
}

#[test]
fn sqlite_quitting_at_a_confirmation_parks_and_the_next_chat_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    quitting_at_a_confirmation_parks_and_the_next_chat_asks_first(&format!(
        "sqlite:{}",
        dir.path().join("s.db").display()
    ));
}

#[test]
fn redis_quitting_at_a_confirmation_parks_and_the_next_chat_asks_first() {
    let Some(redis) = Redis::start() else { return };
    quitting_at_a_confirmation_parks_and_the_next_chat_asks_first(&redis.url);
}

fn quitting_at_a_confirmation_parks_and_the_next_chat_asks_first(storage: &str) {
    let rt = runtime();
    let srv = rt.block_on(MockServer::start()).unwrap();
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let note = work.join("note.txt");
    let write = |content: &str| {
        let input = serde_json::json!({"file_path": note.to_string_lossy(), "content": content}).to_string();
        MockReply::sse([chunk::tool_call(0, Some("call_w"), Some("Write"), &input), chunk::finish("tool_calls")])
    };
    let workdir = work.to_string_lossy().into_owned();
    let mut args = chat_args(storage, &url);
    args.extend(["--workdir", &workdir]);

    srv.push(write("Ada\n"));
    let mut pty = Pty::spawn(&args, dir.path());
    pty.expect("you> ");
    pty.send(b"Save my name.\r");
    let ask = pty.expect("> ");
    assert!(ask.contains("The agent wants to run: Write"), "{ask}");
    // cli.md: tool confirmations prompt `[y/n/a]`; "always" names the rule it would add.
    assert!(ask.contains("Allow? [y/n/a]"), "{ask}");
    assert!(ask.contains("a = always, adds rule: Write "), "{ask}");
    pty.send(b"\x03");
    // Ctrl-C quits with exit 130 (the guide's "interrupted by Ctrl-C (state saved)", as at the `you>`
    // prompt; the process exits, it is not killed by SIGINT), and the call stays parked in the store.
    assert_eq!(pty.wait(), 130, "{}", pty.all());
    assert!(!note.exists());
    let session = pty
        .all()
        .lines()
        .find_map(|l| l.strip_prefix("new session ").and_then(|r| r.split_whitespace().next()).map(str::to_owned))
        .expect("session id printed");
    let o = show_summary(storage, &session);
    assert!(stdout(&o).contains("parked tool calls:\n  call_w Write"), "{}", stdout(&o));

    // The next chat on that session asks again before anything else; "a" adds the rule.
    let mut args2 = args.clone();
    args2.extend(["--session", &session]);
    let mut pty = Pty::spawn(&args2, dir.path());
    let first = pty.expect("Allow?");
    assert!(!first.contains("you> "), "asked before the prompt: {first}");
    assert!(first.contains("(2 messages so far; last, user: Save my name.)"), "a recap of the session: {first}");
    srv.push(text_reply(&["Saved."]));
    pty.expect("> ");
    pty.send(b"a\r");
    pty.expect("Saved.");
    pty.expect("you> ");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "Ada\n");

    // The rule now allows the same call without asking.
    srv.push(write("Ada Lovelace\n"));
    srv.push(text_reply(&["Updated."]));
    pty.send(b"Add my surname.\r");
    let shown = pty.expect("Updated.");
    assert!(!shown.contains("Allow?"), "the always rule applied: {shown}");
    pty.send(b"\x04");
    assert_eq!(pty.wait(), 0);
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "Ada Lovelace\n");
    // "always" put the suggested rule into the session's permission context.
    let o = show_summary(storage, &session);
    let summary = stdout(&o);
    assert!(summary.contains("  allow Write "), "{summary}");
}

#[test]
fn colours_on_a_terminal_and_plain_when_piped() {
    let rt = runtime();
    let srv = rt.block_on(MockServer::start()).unwrap();
    let url = srv.base_url();
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("s.db").display());
    let reply = || MockReply::sse([chunk::reasoning("Hm."), chunk::text("Hello."), chunk::finish("stop")]);

    srv.push(reply());
    let mut args = chat_args(&storage, &url);
    args.extend(["--message", "hi"]);
    let mut pty = Pty::spawn_with(&args, dir.path(), true);
    pty.expect("Hello.");
    assert_eq!(pty.wait(), 0);
    let shown = pty.all();
    assert!(shown.contains("\x1b[2mthinking: Hm."), "thinking dimmed on a terminal: {shown:?}");

    srv.push(reply());
    let o = agentscope(&args).env_remove("NO_COLOR").output().unwrap();
    let out = stdout(&o);
    assert!(!out.contains('\x1b'), "no escape codes when piped: {out:?}");
    assert!(out.contains("[thinking] Hm.\nHello."), "{out:?}");
}

#[test]
fn import_draws_a_progress_bar_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("a.db").display());
    let target = format!("sqlite:{}", dir.path().join("b.db").display());
    for _ in 0..3 {
        let o = run(&["--storage", &source, "sessions", "create", "--user", "alice", "--agent", "friday"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = run(&["--storage", &source, "sessions", "export", "--user", "alice", "--agent", "friday"]);
    let file = dir.path().join("x.jsonl");
    std::fs::write(&file, stdout(&o)).unwrap();
    let file = file.to_string_lossy().into_owned();
    let mut pty = Pty::spawn(&["--storage", &target, "sessions", "import", &file], dir.path());
    pty.expect("imported 3 sessions (0 messages), skipped 0 existing, 0 failed");
    assert_eq!(pty.wait(), 0);
    assert!(pty.all().contains("/3 sessions"), "a bar on the terminal: {:?}", pty.all());
}

#[test]
fn export_draws_a_progress_bar_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("a.db").display());
    for _ in 0..3 {
        let o = run(&["--storage", &source, "sessions", "create", "--user", "alice", "--agent", "friday"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let mut pty = Pty::spawn(&["--storage", &source, "sessions", "export", "--user", "alice"], dir.path());
    pty.expect("exported 3 sessions (0 messages)");
    assert_eq!(pty.wait(), 0);
    assert!(pty.all().contains("/3 sessions"), "a bar on the terminal: {:?}", pty.all());
}
