//! Live two-way interop with AgentScope Python 2.0.4 on one private redis-server (run by
//! `cargo xtask interop`, or directly): Python creates and updates a session, Rust reads, lists,
//! updates and extends it and creates its own; Python reads both (and re-serialises Rust's
//! record to the same bytes), writes Rust's; Rust sees that, deletes Python's; Python deletes
//! Rust's. Both sides use `key_ttl=3600`.
//!
//! Needs a Python with `agentscope==2.0.4` importable: `AGENTSCOPE_PYTHON` (default `python3`);
//! set it up with `pip install agentscope==2.0.4 apscheduler redis`. Skipped (with a message)
//! when that Python or `redis-server` is missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::process::Command;
use std::time::Duration;

use as_message::Msg;
use as_storage::{PageRequest, StorageBase, UpsertSession};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, TtlPolicy};
use common::{all_keys, owner, raw, store};
use fred::prelude::KeysInterface;
use serde_json::Value;

fn python() -> String {
    std::env::var("AGENTSCOPE_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".to_owned())
}

/// Whether `python` imports agentscope 2.0.4 and redis.
fn python_ready(python: &str) -> bool {
    let probe = "import importlib.metadata as m, redis, agentscope.app.storage; \
                 assert m.version('agentscope') == '2.0.4'";
    Command::new(python).args(["-c", probe]).output().is_ok_and(|o| o.status.success())
}

fn py(python: &str, port: u16, phase: &str, args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/live_interop.py");
    let out = Command::new(python).arg(script).arg(port.to_string()).arg(phase).args(args).output().unwrap();
    assert!(out.status.success(), "python {phase} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[tokio::test]
async fn python_2_0_4_and_rust_share_sessions_both_ways() {
    let python = python();
    if !python_ready(&python) {
        println!(
            "skipping: {python} cannot import agentscope==2.0.4 \
             (pip install agentscope==2.0.4 apscheduler redis, then set AGENTSCOPE_PYTHON)"
        );
        return;
    }
    let Some(server) = RedisServer::start() else { return };
    let port = server.port();
    let r = raw(&server.url()).await;
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(Duration::from_secs(3600))).await;
    let o = owner();

    // 1. Python writes.
    let w = py(&python, port, "write", &[]);
    let py_id = w["session_id"].as_str().unwrap().to_owned();
    let py_key = o.session(py_id.clone());
    let py_bytes: String = r.get(format!("agentscope:user:user-1:session:{py_id}")).await.unwrap();
    let parsed: as_storage::SessionRecord = as_message::from_json(&py_bytes).unwrap();
    assert_eq!(as_message::to_json(&parsed), py_bytes, "Python's record survives a Rust round trip byte for byte");

    // 2. Rust reads, lists, updates and extends Python's session, and creates its own.
    let rec = s.get_session(&py_key).await.unwrap().unwrap();
    assert_eq!((rec.config.name.as_str(), rec.state.cur_iter, rec.state.context.len()), ("from python", 3, 2));
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert_eq!(page.sessions.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [py_id.as_str()]);
    let msgs = s.list_messages(&py_key, 0, 50).await.unwrap();
    assert_eq!(msgs.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["py-m1", "py-m2"]);
    assert!(s.get_message(&py_key, "py-m2").await.unwrap().unwrap().get_text_content("").unwrap().contains('✓'));
    let mut state = rec.state.clone();
    state.cur_iter = 4;
    let mut reply = Msg::assistant("Friday", "rust continues");
    reply.id = "rs-reply".into();
    state.context.push(reply.clone());
    // As the runner writes a turn: state and message log in one save_turn.
    let saved = s.save_turn(&py_key, &state, Some(&rec.revision()), std::slice::from_ref(&reply)).await.unwrap();
    assert!(saved.log_error.is_none());
    let rust = s
        .upsert_session(
            UpsertSession::new(o.clone(), as_storage::SessionConfig::new("ws-rs").with_name("from rust"))
                .with_session_id("rust-sess")
                .with_schedule("sched-r")
                .with_state(common::rich_state()),
        )
        .await
        .unwrap();
    let mut m1 = Msg::user("user", "hi from rust ✓");
    m1.id = "rs-m1".into();
    s.upsert_message(&o.session("rust-sess"), &m1).await.unwrap();

    // 3. Python reads both, then writes Rust's session.
    let read = py(&python, port, "read", &[&py_id, "rust-sess"]);
    assert_eq!(read["py"]["cur_iter"], 4);
    assert_eq!(read["py"]["context"], serde_json::json!(["py-m1", "py-m2", "rs-reply"]));
    assert_eq!(read["py"]["messages"], serde_json::json!(["py-m1", "py-m2", "rs-reply"]));
    assert_eq!(read["rust"]["cur_iter"], rust.state.cur_iter);
    assert_eq!(read["rust"]["context"].as_array().unwrap().len(), rust.state.context.len());
    assert_eq!(
        (read["rust"]["source"].as_str(), read["rust"]["schedule"].as_str()),
        (Some("schedule"), Some("sched-r"))
    );
    assert_eq!(read["rust"]["session_id"], "rust-sess");
    assert_eq!(read["rust"]["messages"], serde_json::json!(["rs-m1"]));
    assert_eq!(read["rust"]["get_message"], "rs-m1");
    assert_eq!(read["rust"]["roundtrip"], true, "Python re-serialises Rust's record to the same bytes");
    assert_eq!(read["rust"]["messages_roundtrip"], true, "and Rust's messages");
    let mut listed: Vec<String> = serde_json::from_value(read["listed"].clone()).unwrap();
    listed.sort();
    assert_eq!(listed, [py_id.clone(), "rust-sess".to_owned()]);

    // 4. Rust sees Python's write of its session (and writes on top of it),
    //    and deletes Python's session.
    let rs_key = o.session("rust-sess");
    let now = s.get_session(&rs_key).await.unwrap().unwrap();
    assert_eq!(now.state.cur_iter, 99);
    s.update_session_state(&rs_key, &now.state, None).await.unwrap();
    assert_eq!(s.list_messages(&rs_key, 0, 0).await.unwrap().len(), 2);
    assert!(s.delete_session(&py_key).await.unwrap());

    // 5. Python sees the delete and deletes Rust's session; nothing is left behind.
    let check = py(&python, port, "check", &[&py_id, "rust-sess"]);
    assert_eq!(check["py_after_rust_delete"], true);
    assert_eq!(check["listed"], serde_json::json!(["rust-sess"]));
    assert_eq!(check["rust_cur_iter"], 99);
    assert_eq!(check["deleted"], true);
    assert!(s.get_session(&rs_key).await.unwrap().is_none());
    assert!(all_keys(&r).await.is_empty(), "{:?}", all_keys(&r).await);
}
