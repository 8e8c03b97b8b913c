//! Built-in tools against a real temporary directory: texts, the read cache, read-before-edit (and its
//! recovery from a stale read), Grep's line cap, Bash timeouts, output limits, and cancellation killing
//! the whole process group.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use as_message::ToolResultState;
use as_tools::builtin::builtin_tools;
use as_tools::{
    CancellationToken, INTERRUPTED_TEXT, SharedToolState, ToolCallContext, ToolOutput, ToolResponse, Toolkit,
};
use futures::StreamExt;
use serde_json::json;

struct Env {
    dir: tempfile::TempDir,
    toolkit: Toolkit,
    state: SharedToolState,
}

impl Env {
    fn new() -> Self {
        let toolkit = builtin_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
        Self { dir: tempfile::tempdir().unwrap(), toolkit, state: SharedToolState::default() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    fn p(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    fn ctx(&self) -> ToolCallContext {
        ToolCallContext::new("call", self.state.clone(), self.dir.path().canonicalize().unwrap())
    }

    async fn call(&self, name: &str, input: serde_json::Value) -> ToolResponse {
        self.call_ctx(name, input, self.ctx()).await
    }

    async fn call_ctx(&self, name: &str, input: serde_json::Value, ctx: ToolCallContext) -> ToolResponse {
        let out: Vec<ToolOutput> = self.toolkit.call(name, &input.to_string(), ctx).collect().await;
        match out.last() {
            Some(ToolOutput::Response(r)) => r.clone(),
            other => panic!("no final response: {other:?}"),
        }
    }
}

fn ok(r: &ToolResponse) -> String {
    assert_eq!(r.state, ToolResultState::Success, "{}", r.text());
    r.text()
}

fn err(r: &ToolResponse) -> String {
    assert_eq!(r.state, ToolResultState::Error, "{}", r.text());
    r.text()
}

fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
}

#[tokio::test]
async fn read_formats_lines_and_maintains_the_cache() {
    let env = Env::new();
    let file = env.path("a.txt");
    std::fs::write(&file, "one\r\ntwo\nthree").unwrap();
    set_mtime(&file, 1_700_000_000);
    let text = ok(&env.call("Read", json!({"file_path": env.p("a.txt")})).await);
    assert_eq!(text, "     1\tone\n     2\ttwo\n     3\tthree");
    let entry = env.state.snapshot().tool_context.read_file_cache[0].clone();
    assert_eq!(entry.file_path, env.p("a.txt"));
    assert_eq!(entry.lines, ["one\n", "two\n", "three"]);
    assert_eq!(entry.updated_at, 1_700_000_000.0);
    assert_eq!(entry.bytes, 13.0 / 1024.0, "kilobytes of the normalised lines");

    // same mtime: served from the cache even though the bytes changed
    std::fs::write(&file, "changed\n").unwrap();
    set_mtime(&file, 1_700_000_000);
    assert_eq!(
        ok(&env.call("Read", json!({"file_path": env.p("a.txt"), "offset": 2, "limit": 1})).await),
        "     2\ttwo"
    );
    // new mtime: re-read and re-cached
    set_mtime(&file, 1_700_000_100);
    assert_eq!(ok(&env.call("Read", json!({"file_path": env.p("a.txt")})).await), "     1\tchanged");
    let cache = env.state.snapshot().tool_context.read_file_cache;
    assert_eq!(cache.len(), 1);
    assert_eq!(cache[0].updated_at, 1_700_000_100.0);
}

/// Read numbers and caches lines as 2.0.4's Read does (`str.splitlines(keepends=True)`, so a form
/// feed, `\v`, `\x1c`–`\x1e`, NEL, U+2028 and U+2029 end a line too). Texts and cached lines
/// recorded from agentscope 2.0.4's `Read().call(file_path, offset, limit, _agent_state)`; before
/// the fix a form feed did not end a line, so every later line number was off by one.
#[tokio::test]
async fn read_numbers_lines_as_2_0_4_does() {
    let seps = "a\u{b}b\u{c}c\u{1c}d\u{1d}e\u{1e}f\u{85}g\u{2028}h\u{2029}i\nj\r\nk\rl\n";
    let seps_cached = [
        "a\u{b}",
        "b\u{c}",
        "c\u{1c}",
        "d\u{1d}",
        "e\u{1e}",
        "f\u{85}",
        "g\u{2028}",
        "h\u{2029}",
        "i\n",
        "j\n",
        "k\n",
        "l\n",
    ];
    let cases: &[(&str, i64, i64, &str, &[&str])] = &[
        (
            "page one\u{c}page two\nend\n",
            1,
            2000,
            "     1\tpage one\u{c}\n     2\tpage two\n     3\tend",
            &["page one\u{c}", "page two\n", "end\n"],
        ),
        ("page one\u{c}page two\nend\n", 3, 2, "     3\tend", &["page one\u{c}", "page two\n", "end\n"]),
        ("page one\u{c}page two\nend\n", 9, 3, "", &["page one\u{c}", "page two\n", "end\n"]),
        (
            seps,
            1,
            2000,
            "     1\ta\u{b}\n     2\tb\u{c}\n     3\tc\u{1c}\n     4\td\u{1d}\n     5\te\u{1e}\n     6\tf\u{85}\n     \
             7\tg\u{2028}\n     8\th\u{2029}\n     9\ti\n    10\tj\n    11\tk\n    12\tl",
            &seps_cached,
        ),
        (seps, 3, 2, "     3\tc\u{1c}\n     4\td\u{1d}", &seps_cached),
        (seps, 9, 3, "     9\ti\n    10\tj\n    11\tk", &seps_cached),
        ("x\ny\n\nz", 1, 2000, "     1\tx\n     2\ty\n     3\t\n     4\tz", &["x\n", "y\n", "\n", "z"]),
        ("x\ny\n\nz", 3, 2, "     3\t\n     4\tz", &["x\n", "y\n", "\n", "z"]),
    ];
    for (content, offset, limit, text, cached) in cases {
        let env = Env::new();
        std::fs::write(env.path("f.txt"), content).unwrap();
        let input = json!({"file_path": env.p("f.txt"), "offset": offset, "limit": limit});
        assert_eq!(ok(&env.call("Read", input).await), *text, "{content:?} from {offset}, {limit} lines");
        assert_eq!(env.state.snapshot().tool_context.read_file_cache[0].lines, *cached, "{content:?}");
    }
}

#[tokio::test]
async fn read_errors_are_observations() {
    let env = Env::new();
    std::fs::create_dir(env.path("d")).unwrap();
    std::fs::write(env.path("long.txt"), "x".repeat(2100)).unwrap();
    assert_eq!(
        err(&env.call("Read", json!({"file_path": "rel.txt"})).await),
        "Error: file_path must be an absolute path, got: rel.txt"
    );
    assert_eq!(
        err(&env.call("Read", json!({"file_path": env.p("nope")})).await),
        format!("Error: File does not exist: {}", env.p("nope"))
    );
    assert_eq!(
        err(&env.call("Read", json!({"file_path": env.p("d")})).await),
        format!("Error: Path is a directory, not a file: {}", env.p("d"))
    );
    let long = ok(&env.call("Read", json!({"file_path": env.p("long.txt")})).await);
    assert!(long.ends_with(&format!("{}[truncated]", "x".repeat(10))) && long.len() == 7 + 2000 + 11, "{}", long.len());
    let e = err(&env.call("Read", json!({"file_path": env.p("long.txt"), "limit": 0})).await);
    assert!(e.starts_with("Input validation failed for tool 'Read': 0 is less than the minimum of 1"), "{e}");
}

#[tokio::test]
async fn edit_changes_no_byte_outside_the_edit() {
    let env = Env::new();
    let edit = |name: &str, old: &str, new: &str| json!({"file_path": env.p(name), "old_string": old, "new_string": new, "replace_all": false});
    // Latin-1 bytes: the decoded copy has U+FFFD where they were, so the edit is refused.
    std::fs::write(env.path("latin1.txt"), b"caf\xe9 one\nna\xefve two\n").unwrap();
    ok(&env.call("Read", json!({"file_path": env.p("latin1.txt")})).await);
    let e = err(&env.call("Edit", edit("latin1.txt", "one", "1")).await);
    assert!(e.contains("is not UTF-8 text"), "{e}");
    assert_eq!(std::fs::read(env.path("latin1.txt")).unwrap(), b"caf\xe9 one\nna\xefve two\n", "untouched");
    // CRLF line ends stay CRLF.
    std::fs::write(env.path("crlf.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    ok(&env.call("Read", json!({"file_path": env.p("crlf.txt")})).await);
    ok(&env.call("Edit", edit("crlf.txt", "two", "2")).await);
    assert_eq!(std::fs::read_to_string(env.path("crlf.txt")).unwrap(), "one\r\n2\r\nthree\r\n");
    // Mixed line ends cannot be kept by an edit of the decoded copy: refused, untouched.
    std::fs::write(env.path("mixed.txt"), "one\r\ntwo\nthree\rfour\n").unwrap();
    ok(&env.call("Read", json!({"file_path": env.p("mixed.txt")})).await);
    let e = err(&env.call("Edit", edit("mixed.txt", "two", "2")).await);
    assert!(e.contains("mixes line endings"), "{e}");
    assert_eq!(std::fs::read_to_string(env.path("mixed.txt")).unwrap(), "one\r\ntwo\nthree\rfour\n");
}

#[tokio::test]
async fn edit_requires_a_read_of_the_current_version() {
    let env = Env::new();
    let file = env.path("e.txt");
    std::fs::write(&file, "alpha beta\nbeta\n").unwrap();
    let edit = |old: &str, new: &str, all: bool| json!({"file_path": env.p("e.txt"), "old_string": old, "new_string": new, "replace_all": all});
    const NOT_READ: &str = "Error: To edit a file, you must first read it using the Read tool.";
    assert_eq!(err(&env.call("Edit", edit("alpha", "ALPHA", false)).await), NOT_READ);
    ok(&env.call("Read", json!({"file_path": env.p("e.txt")})).await);
    assert_eq!(
        err(&env.call("Edit", edit("beta", "B", false)).await),
        format!(
            "Error: old_string appears 2 times in {}. Set replace_all=true to replace all occurrences, or make old_string more specific.",
            env.p("e.txt")
        )
    );
    assert_eq!(
        err(&env.call("Edit", edit("zeta", "Z", false)).await),
        format!("Error: old_string not found in {}", env.p("e.txt"))
    );
    assert_eq!(
        err(&env.call("Edit", edit("a", "a", false)).await),
        "Error: old_string and new_string are identical. No changes to make."
    );
    let r = env.call("Edit", edit("alpha", "ALPHA", false)).await;
    assert_eq!(ok(&r), format!("Successfully replaced 1 occurrence in {}", env.p("e.txt")));
    assert_eq!(r.metadata["occurrences"], 1);
    // the cache follows the tool's own write: a second edit needs no new Read
    assert_eq!(
        ok(&env.call("Edit", edit("beta", "B", true)).await),
        format!("Successfully replaced all 2 occurrences in {}", env.p("e.txt"))
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "ALPHA B\nB\n");
    // someone else changes the file: the model must read it again
    std::fs::write(&file, "other\n").unwrap();
    set_mtime(&file, 1_600_000_000);
    assert_eq!(err(&env.call("Edit", edit("other", "x", false)).await), NOT_READ);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "other\n", "nothing written");
    assert_eq!(
        err(&env.call("Edit", json!({"file_path": env.p("missing"), "old_string": "a", "new_string": "b"})).await),
        format!("Error: File not found: {}", env.p("missing"))
    );
}

#[tokio::test]
async fn write_creates_files_and_guards_unread_ones() {
    let env = Env::new();
    // Line counts as 2.0.4's Write counts them (`len(content.split("\n"))`).
    for (content, lines) in [("", 1), ("x", 1), ("x\n", 2), ("a\nb", 2), ("a\r\nb\n", 3)] {
        let r = env.call("Write", json!({"file_path": env.p("counted.txt"), "content": content})).await;
        assert_eq!(ok(&r), format!("The file {} has been written successfully ({lines} lines).", env.p("counted.txt")));
    }
    let r = env.call("Write", json!({"file_path": env.p("new/dir/f.txt"), "content": "a\nb\n"})).await;
    assert_eq!(ok(&r), format!("The file {} has been written successfully (3 lines).", env.p("new/dir/f.txt")));
    assert_eq!(std::fs::read_to_string(env.path("new/dir/f.txt")).unwrap(), "a\nb\n");
    // written files are cached: Edit works right away
    ok(&env.call("Edit", json!({"file_path": env.p("new/dir/f.txt"), "old_string": "a\n", "new_string": "A\n"})).await);
    std::fs::write(env.path("old.txt"), "x").unwrap();
    assert_eq!(
        err(&env.call("Write", json!({"file_path": env.p("old.txt"), "content": "y"})).await),
        format!(
            "Error: File {} exists but has not been read yet. You must read the file first before writing to it.",
            env.p("old.txt")
        )
    );
    ok(&env.call("Read", json!({"file_path": env.p("old.txt")})).await);
    ok(&env.call("Write", json!({"file_path": env.p("old.txt"), "content": "y"})).await);
    assert_eq!(std::fs::read_to_string(env.path("old.txt")).unwrap(), "y");
}

#[tokio::test]
async fn glob_and_grep() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("src/sub")).unwrap();
    for (f, t) in [("src/a.rs", 100), ("src/sub/b.rs", 300), ("src/c.txt", 200), ("top.rs", 50)] {
        std::fs::write(env.path(f), format!("fn {f}() {{}}\nlet x = 1;\n")).unwrap();
        set_mtime(&env.path(f), 1_700_000_000 + t);
    }
    assert_eq!(
        ok(&env.call("Glob", json!({"pattern": "src/**/*.rs"})).await),
        format!("{}\n{}", env.p("src/sub/b.rs"), env.p("src/a.rs"))
    );
    assert_eq!(ok(&env.call("Glob", json!({"pattern": "*.rs"})).await), env.p("top.rs"), "* does not cross /");
    assert_eq!(
        ok(&env.call("Glob", json!({"pattern": "**/*.rs", "head_limit": 1})).await),
        format!("{}\n\n[Showing results with pagination = limit: 1]", env.p("src/sub/b.rs"))
    );
    assert_eq!(ok(&env.call("Glob", json!({"pattern": "*.md"})).await), "No files found matching pattern: *.md");
    let abs = format!("{}/**/b.rs", env.p("src"));
    assert_eq!(ok(&env.call("Glob", json!({ "pattern": abs })).await), env.p("src/sub/b.rs"), "absolute pattern");
    std::fs::create_dir_all(env.path(".git/objects")).unwrap();
    std::fs::write(env.path(".git/objects/x.rs"), "").unwrap();
    assert!(!ok(&env.call("Glob", json!({"pattern": "**/*.rs"})).await).contains(".git"), ".git is not searched");
    assert_eq!(
        err(&env.call("Glob", json!({"pattern": "*", "path": "nope"})).await),
        format!("Directory not found: {}", env.p("nope"))
    );

    assert_eq!(ok(&env.call("Grep", json!({"pattern": "let x", "glob": "*.txt"})).await), env.p("src/c.txt"));
    assert_eq!(
        ok(&env.call("Grep", json!({"pattern": "FN TOP", "case_insensitive": true, "output_mode": "content"})).await),
        format!("{}:1:fn top.rs() {{}}", env.p("top.rs"))
    );
    assert_eq!(
        ok(&env.call("Grep", json!({"pattern": "x", "path": "top.rs", "output_mode": "count"})).await),
        "1",
        "a single file is shown without its name, as ripgrep shows it"
    );
    assert_eq!(
        ok(&env
            .call(
                "Grep",
                json!({"pattern": "FN TOP", "case_insensitive": true, "output_mode": "content", "path": "top.rs"})
            )
            .await),
        "1:fn top.rs() {}"
    );
    assert_eq!(ok(&env.call("Grep", json!({"pattern": "x", "path": "top.rs"})).await), env.p("top.rs"));
    assert_eq!(ok(&env.call("Grep", json!({"pattern": "nothing"})).await), "No matches found for pattern: nothing");
    assert!(err(&env.call("Grep", json!({"pattern": "("})).await).starts_with("Error: invalid regex pattern \"(\""));
}

#[tokio::test]
async fn bash_runs_in_the_working_directory() {
    let env = Env::new();
    assert_eq!(ok(&env.call("Bash", json!({"command": "pwd"})).await), format!("{}\n", env.p("")).replace("/\n", "\n"));
    assert_eq!(ok(&env.call("Bash", json!({"command": "echo out; echo err >&2"})).await), "out\n\nerr\n");
    assert_eq!(
        err(&env.call("Bash", json!({"command": "echo partial; exit 3"})).await),
        "Command failed: echo partial; exit 3\n\nStdout:\npartial\n"
    );
}

/// 2.0.4 decodes Bash's output and replaces only `\r\n` with `\n`: a lone `\r` (a progress bar's
/// carriage return) stays, in the output and in a failed command's text (the port turned it into
/// `\n`).
#[tokio::test]
async fn bash_keeps_a_lone_carriage_return() {
    let env = Env::new();
    assert_eq!(ok(&env.call("Bash", json!({"command": "printf 'a\\rb'"})).await), "a\rb");
    assert_eq!(ok(&env.call("Bash", json!({"command": "printf 'a\\r\\nb\\r'"})).await), "a\nb\r");
    assert_eq!(ok(&env.call("Bash", json!({"command": "printf 'a\\rb' >&2"})).await), "a\rb");
    assert_eq!(
        err(&env.call("Bash", json!({"command": "printf 'a\\rb'; exit 1"})).await),
        "Command failed: printf 'a\\rb'; exit 1\n\nStdout:\na\rb"
    );
}

#[tokio::test]
async fn bash_hides_the_configured_variables() {
    let env = Env::new();
    // By default the process's own credentials are hidden, everything else is passed on.
    let default = as_tools::builtin::BashTool::default();
    assert!(default.hidden_env.iter().any(|v| v == "OPENAI_API_KEY"));
    assert!(default.hidden_env.iter().any(|v| v == "AGENTSCOPE_STORAGE"));
    assert_eq!(ok(&env.call("Bash", json!({"command": "echo ${HOME:+set}"})).await), "set\n");
    // The mechanism, on a variable every test process has.
    let hiding = as_tools::builtin::BashTool { hidden_env: vec!["HOME".into()], ..Default::default() };
    use as_tools::IntoDynTool as _;
    let toolkit = Toolkit::new().with(hiding.into_dyn_tool());
    let out: Vec<ToolOutput> =
        toolkit.call("Bash", &json!({"command": "echo ${HOME:-hidden}"}).to_string(), env.ctx()).collect().await;
    let Some(ToolOutput::Response(r)) = out.last() else { panic!("{out:?}") };
    assert_eq!(r.text(), "hidden\n");
}

#[tokio::test]
async fn bash_limits_output_and_time() {
    let env = Env::new();
    let big = ok(&env.call("Bash", json!({"command": "head -c 100000 /dev/zero | tr '\\0' x"})).await);
    assert_eq!(big, format!("{}\n... (output truncated)", "x".repeat(30000)));
    let started = Instant::now();
    let r = env.call("Bash", json!({"command": "sleep 30", "timeout": 300})).await;
    assert_eq!(err(&r), "Command timed out after 300ms: sleep 30");
    assert!(started.elapsed() < Duration::from_secs(10));
    let e = err(&env.call("Bash", json!({"command": "ls", "timeout": 700000})).await);
    assert!(e.contains("is greater than the maximum of 600000"), "{e}");
}

/// Live (non-zombie) processes whose command line contains `marker`.
fn live_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if !String::from_utf8_lossy(&cmdline).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()).unwrap_or("Z");
        if state != "Z" && state != "X" {
            out.push(pid);
        }
    }
    out
}

/// Live `sleep {marker}` processes (the shell's own command line also contains the marker).
fn sleeps(marker: &str) -> usize {
    live_with(&format!("sleep\0{marker}")).len()
}

/// Polls an observable condition (process table) with a deadline.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn cancelling_bash_kills_the_process_group() {
    let env = Env::new();
    let marker = format!("{}.{}", 4000 + std::process::id() % 1000, 17);
    // a background and a foreground grandchild, both in the command's process group
    let command = format!("sleep {marker} & sleep {marker}; wait");
    let cancel = CancellationToken::new();
    let ctx = env.ctx().with_cancel(cancel.clone());
    let call = tokio::spawn({
        let toolkit = env.toolkit.clone();
        async move { toolkit.call("Bash", &json!({ "command": command }).to_string(), ctx).collect::<Vec<_>>().await }
    });
    until("both sleeps running", || sleeps(&marker) == 2).await;
    cancel.cancel();
    let out = call.await.unwrap();
    let Some(ToolOutput::Response(r)) = out.last() else { panic!("{out:?}") };
    assert_eq!(r.state, ToolResultState::Interrupted);
    assert_eq!(r.text(), INTERRUPTED_TEXT);
    until("no orphan left", || live_with(&marker).is_empty()).await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_process_group() {
    let env = Env::new();
    let marker = format!("{}.{}", 5000 + std::process::id() % 1000, 23);
    let command = format!("sleep {marker} & sleep {marker}; wait");
    let mut stream = env.toolkit.call("Bash", &json!({ "command": command }).to_string(), env.ctx());
    // drive the call until the processes exist, then drop it mid-run
    let poll = async {
        loop {
            tokio::select! {
                item = stream.next() => panic!("call finished early: {item:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if sleeps(&marker) == 2 { break; }
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), poll).await.expect("sleeps never started");
    drop(stream);
    until("no orphan left", || live_with(&marker).is_empty()).await;
}

#[tokio::test]
async fn concurrent_reads_share_the_cache() {
    let env = Env::new();
    for i in 0..8 {
        std::fs::write(env.path(&format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    let calls = (0..8).map(|i| env.call("Read", json!({"file_path": env.p(&format!("f{i}.txt"))})));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|r| r.state == ToolResultState::Success));
    let mut cached: Vec<String> =
        env.state.snapshot().tool_context.read_file_cache.into_iter().map(|e| e.file_path).collect();
    cached.sort();
    assert_eq!(cached.len(), 8);
}

#[tokio::test]
async fn read_refuses_what_never_ends_or_is_too_big() {
    let env = Env::new();
    let r = env.call("Read", json!({"file_path": "/dev/zero"})).await;
    assert_eq!(err(&r), "Error: Not a regular file: /dev/zero");
    // A sparse file just over the limit (no disk used).
    let big = env.path("big.log");
    std::fs::File::create(&big).unwrap().set_len(64 * 1024 * 1024 + 1).unwrap();
    let r = env.call("Read", json!({"file_path": env.p("big.log"), "limit": 10})).await;
    assert!(err(&r).starts_with("Error: File is too large to read (67108865 bytes"), "{}", r.text());
}

#[tokio::test]
async fn write_replaces_whole_keeps_permissions_and_follows_symlinks() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let target = env.path("script.sh");
    std::fs::write(&target, "old\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink(&target, env.path("link.sh")).unwrap();
    ok(&env.call("Read", json!({"file_path": env.p("link.sh")})).await);
    ok(&env.call("Write", json!({"file_path": env.p("link.sh"), "content": "new\n"})).await);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
    assert!(std::fs::symlink_metadata(env.path("link.sh")).unwrap().file_type().is_symlink(), "the link stays a link");
    assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o750);
    let leftovers: Vec<String> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn edit_refuses_a_file_changed_within_the_same_mtime() {
    let env = Env::new();
    let file = env.path("e.txt");
    std::fs::write(&file, "alpha\n").unwrap();
    set_mtime(&file, 1_600_000_000);
    ok(&env.call("Read", json!({"file_path": env.p("e.txt")})).await);
    // Someone rewrites it and the mtime does not move (two writes in one clock tick).
    std::fs::write(&file, "alpha and omega\n").unwrap();
    set_mtime(&file, 1_600_000_000);
    let edit = json!({"file_path": env.p("e.txt"), "old_string": "alpha", "new_string": "ALPHA"});
    let r = env.call("Edit", edit).await;
    assert_eq!(
        err(&r),
        format!("Error: {} has changed since it was read. Read it again before editing.", env.p("e.txt"))
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "alpha and omega\n", "the other writer's text is kept");
}

#[tokio::test]
async fn write_keeps_hard_links_and_follows_dangling_links() {
    let env = Env::new();
    // A hard-linked file is written in place: both names still show the new text.
    std::fs::write(env.path("a.txt"), "old\n").unwrap();
    std::fs::hard_link(env.path("a.txt"), env.path("b.txt")).unwrap();
    ok(&env.call("Read", json!({"file_path": env.p("a.txt")})).await);
    ok(&env.call("Write", json!({"file_path": env.p("a.txt"), "content": "new\n"})).await);
    assert_eq!(std::fs::read_to_string(env.path("b.txt")).unwrap(), "new\n");
    // A dangling symlink: its target is created, the link stays.
    std::os::unix::fs::symlink(env.path("target.txt"), env.path("link.txt")).unwrap();
    ok(&env.call("Write", json!({"file_path": env.p("link.txt"), "content": "made\n"})).await);
    assert_eq!(std::fs::read_to_string(env.path("target.txt")).unwrap(), "made\n");
    assert!(std::fs::symlink_metadata(env.path("link.txt")).unwrap().file_type().is_symlink());
}

#[tokio::test]
async fn grep_modes_agree_on_line_anchors() {
    let env = Env::new();
    std::fs::write(env.path("lib.rs"), "mod a;\nuse std::fs;\n").unwrap();
    std::fs::write(env.path("main.rs"), "fn main() {}\n").unwrap();
    let files = ok(&env.call("Grep", json!({"pattern": "^use "})).await);
    assert_eq!(files, env.p("lib.rs"), "`^` anchors at each line, not only the first");
    let count = ok(&env.call("Grep", json!({"pattern": "^use ", "output_mode": "count"})).await);
    assert_eq!(count, format!("{}:1", env.p("lib.rs")));
    let content = ok(&env.call("Grep", json!({"pattern": "fs;$", "output_mode": "content"})).await);
    assert_eq!(content, format!("{}:2:use std::fs;", env.p("lib.rs")));
    assert_eq!(ok(&env.call("Grep", json!({"pattern": "fs;$"})).await), env.p("lib.rs"));
}

/// `/proc` files claim a size of 0: the caps are enforced on what is read, and searches never
/// enter `/proc`, `/sys` or `/dev`.
#[tokio::test]
async fn size_caps_hold_for_files_that_claim_no_size() {
    let env = Env::new();
    let r = env.call("Read", json!({"file_path": "/proc/self/pagemap", "limit": 1})).await;
    assert!(err(&r).starts_with("Error: File is too large to read (more than 67108864 bytes"), "{}", r.text());
    std::fs::write(env.path("a.txt"), "needle\n").unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", env.path("pagemap")).unwrap();
    assert_eq!(ok(&env.call("Grep", json!({"pattern": "needle"})).await), env.p("a.txt"));
    std::os::unix::fs::symlink("/proc/self", env.path("self")).unwrap();
    for path in ["/proc/self", "/proc/self/status", env.p("self").as_str(), "/sys/kernel", "/dev"] {
        let r = env.call("Grep", json!({"pattern": "Name|a", "path": path})).await;
        assert_eq!(ok(&r), "No matches found for pattern: Name|a", "{path}");
    }
    let r = env.call("Glob", json!({"pattern": "*", "path": "/proc/self"})).await;
    assert_eq!(ok(&r), "No files found matching pattern: *");
}

/// An integral float for an integer argument is read as the integer (jsonschema accepts `5.0` as
/// an integer and pydantic reads it as 5, so 2.0.4 runs the call).
#[tokio::test]
async fn integral_floats_are_integers() {
    let env = Env::new();
    assert_eq!(ok(&env.call("Bash", json!({"command": "echo hi", "timeout": 5000.0})).await), "hi\n");
}

// Grep's and Glob's bounds (line width) and Edit's recovery from a stale read.
/// A file rewritten without its mtime moving (two writes in one clock tick, or `touch -r`): Edit
/// refuses the stale read whatever `old_string` is (the model's old text or the new one), and the
/// next Read shows the new text instead of the stale cached one, after which Edit works again.
#[tokio::test]
async fn edit_after_a_same_mtime_rewrite_recovers_with_a_new_read() {
    let env = Env::new();
    let file = env.p("f.txt");
    let path = Path::new(&file);
    let changed = format!("Error: {file} has changed since it was read. Read it again before editing.");
    let edit = |old: &str, new: &str| json!({"file_path": file, "old_string": old, "new_string": new});
    std::fs::write(path, "a\n").unwrap();
    set_mtime(path, 1_600_000_000);
    assert_eq!(ok(&env.call("Read", json!({"file_path": file})).await), "     1\ta");
    std::fs::write(path, "b\n").unwrap();
    set_mtime(path, 1_600_000_000);
    // An edit of the text the model saw.
    assert_eq!(err(&env.call("Edit", edit("a", "z")).await), changed);
    assert_eq!(
        ok(&env.call("Read", json!({"file_path": file})).await),
        "     1\tb",
        "the new text, not the cached one"
    );
    assert_eq!(ok(&env.call("Edit", edit("b", "c")).await), format!("Successfully replaced 1 occurrence in {file}"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), "c\n");
    // An edit of text only the new version holds: the same refusal, not "old_string not found".
    std::fs::write(path, "d\n").unwrap();
    set_mtime(path, 1_600_000_000);
    ok(&env.call("Read", json!({"file_path": file})).await);
    std::fs::write(path, "e\n").unwrap();
    set_mtime(path, 1_600_000_000);
    assert_eq!(err(&env.call("Edit", edit("e", "f")).await), changed);
    assert_eq!(std::fs::read_to_string(path).unwrap(), "e\n", "nothing written");
    assert_eq!(ok(&env.call("Read", json!({"file_path": file})).await), "     1\te");
    assert_eq!(ok(&env.call("Edit", edit("e", "f")).await), format!("Successfully replaced 1 occurrence in {file}"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), "f\n");
}

/// Grep shows a matching line longer than 500 bytes, its line end included, as ripgrep's
/// `--max-columns 500` does (2.0.4 runs `rg --max-columns 500` through a pipe, so without colours:
/// `[Omitted long matching line]`), not the whole line.
#[tokio::test]
async fn grep_omits_matching_lines_over_500_bytes() {
    let env = Env::new();
    let long = format!("{}\n", "function f() {} ".repeat(6250));
    assert_eq!(long.len(), 100_001);
    let edge = |n: usize| format!("function{}", "x".repeat(n - "function".len()));
    // A 5 MB one-line bundle is the reviewer's scenario; 100 000 characters show the same.
    std::fs::write(env.p("bundle.js"), &long).unwrap();
    // 499 + "\n" fits, 500 + "\n" does not; the last line has no line end, so its 500 fit.
    std::fs::write(env.p("edge.txt"), format!("{}\n{}\n{}", edge(499), edge(500), edge(500))).unwrap();
    let grep = |path: &str| json!({"pattern": "function", "output_mode": "content", "path": env.p(path)});
    let text = ok(&env.call("Grep", grep("bundle.js")).await);
    // (A single file is shown without its name, as ripgrep shows it.)
    assert_eq!(text, "1:[Omitted long matching line]");
    let text = ok(&env.call("Grep", grep("edge.txt")).await);
    assert_eq!(text, format!("1:{}\n2:[Omitted long matching line]\n3:{}", edge(499), edge(500)));
    // The other modes print no lines: they still count the long one.
    let count = json!({"pattern": "function", "output_mode": "count", "path": env.p("bundle.js")});
    assert_eq!(ok(&env.call("Grep", count).await), "1");
}

/// Grep stops searching one entry past `head_limit` (it holds no more than it can show); the
/// pagination note still says there were more, and 0 still means all.
#[tokio::test]
async fn grep_keeps_paginating_when_it_stops_early() {
    let env = Env::new();
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(env.p(f), "hit\nmiss\nhit\n").unwrap();
    }
    let grep = |mode: &str, limit: u64| json!({"pattern": "hit", "output_mode": mode, "head_limit": limit});
    let (a, b, c) = (env.p("a.txt"), env.p("b.txt"), env.p("c.txt"));
    let note = "\n\n[Showing results with pagination = limit: 2]";
    assert_eq!(ok(&env.call("Grep", grep("content", 2)).await), format!("{a}:1:hit\n{a}:3:hit{note}"));
    assert_eq!(
        ok(&env.call("Grep", grep("content", 3)).await),
        format!("{a}:1:hit\n{a}:3:hit\n{b}:1:hit\n\n[Showing results with pagination = limit: 3]")
    );
    assert_eq!(ok(&env.call("Grep", grep("files_with_matches", 2)).await), format!("{a}\n{b}{note}"));
    assert_eq!(ok(&env.call("Grep", grep("count", 3)).await), format!("{a}:2\n{b}:2\n{c}:2"));
    assert_eq!(ok(&env.call("Grep", grep("content", 0)).await).lines().count(), 6);
}
