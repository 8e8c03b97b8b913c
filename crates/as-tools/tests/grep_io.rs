//! Grep skips an oversized file by its metadata, without reading it (its own test binary, so the
//! process's read counter sees no other test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_tools::builtin::builtin_tools;
use as_tools::{SharedToolState, ToolCallContext, ToolOutput, Toolkit};
use futures::StreamExt;
use serde_json::json;

/// Bytes this process has read through `read` and similar calls (`rchar` of `/proc/self/io`).
fn bytes_read() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines().find_map(|l| l.strip_prefix("rchar:")).and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn grep_does_not_read_files_over_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse files of 1 GiB each: over the 10 MiB cap, holding nothing on disk.
    for i in 0..16 {
        let f = std::fs::File::create(dir.path().join(format!("big{i}.bin"))).unwrap();
        f.set_len(1 << 30).unwrap();
    }
    std::fs::write(dir.path().join("small.txt"), "needle\n").unwrap();
    let toolkit = builtin_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
    let Some(before) = bytes_read() else {
        eprintln!("skipping: /proc/self/io (rchar) is not readable here, so the bytes Grep reads cannot be counted");
        return;
    };
    let input = json!({"pattern": "needle", "path": dir.path().display().to_string()});
    let ctx = ToolCallContext::new("call", SharedToolState::default(), dir.path());
    let out: Vec<ToolOutput> = toolkit.call("Grep", &input.to_string(), ctx).collect().await;
    let read = bytes_read().unwrap() - before;
    match out.last() {
        Some(ToolOutput::Response(r)) => assert!(r.text().ends_with("small.txt"), "{}", r.text()),
        other => panic!("no final response: {other:?}"),
    }
    // Reading each up to the cap would be 160 MiB.
    assert!(read < 32 << 20, "Grep read {read} bytes");
}
