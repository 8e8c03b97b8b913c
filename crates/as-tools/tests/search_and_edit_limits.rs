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
