//! Grep's and Glob's bounds (line width, time) and Edit's recovery from a stale read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use as_message::ToolResultState;
use as_tools::builtin::builtin_tools;
use as_tools::{SharedToolState, ToolCallContext, ToolOutput, ToolResponse, Toolkit};
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

    fn p(&self, rel: &str) -> String {
        self.dir.path().canonicalize().unwrap().join(rel).display().to_string()
    }

    async fn call(&self, name: &str, input: serde_json::Value) -> ToolResponse {
        let ctx = ToolCallContext::new("call", self.state.clone(), self.dir.path().canonicalize().unwrap());
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
    assert_eq!(text, format!("{}:1:[Omitted long matching line]", env.p("bundle.js")));
    let text = ok(&env.call("Grep", grep("edge.txt")).await);
    let shown = env.p("edge.txt");
    assert_eq!(
        text,
        format!("{shown}:1:{}\n{shown}:2:[Omitted long matching line]\n{shown}:3:{}", edge(499), edge(500))
    );
    // The other modes print no lines: they still count the long one.
    let count = json!({"pattern": "function", "output_mode": "count", "path": env.p("bundle.js")});
    assert_eq!(ok(&env.call("Grep", count).await), format!("{}:1", env.p("bundle.js")));
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
