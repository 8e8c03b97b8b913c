//! The wire form of each state type, pinned with insta (review the `.snap` files).

#![cfg(test)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use as_message::{ContentBlock, Msg, to_json, with_id_factory};
use as_state::{AgentState, ReadCacheEntry, Task, TaskContext, TaskState, ToolContext};

fn seeded<R>(f: impl FnOnce() -> R) -> R {
    let n = Arc::new(AtomicU32::new(1));
    with_id_factory(Arc::new(move || format!("id{:04}", n.fetch_add(1, Ordering::SeqCst))), f)
}

#[test]
fn default_agent_state() {
    seeded(|| insta::assert_snapshot!(to_json(&AgentState::default())));
}

#[test]
fn tool_context_with_cache() {
    let mut t = ToolContext::default();
    t.cache_file_with_mtime("/w/a.txt", vec!["line 1\n".into(), "ünï\n".into()], 1_748_772_000.0);
    t.read_file_cache.push(ReadCacheEntry {
        lines: vec![],
        updated_at: 1e16,
        bytes: 1e-7,
        file_path: "/w/empty".into(),
    });
    t.activated_groups.push("browser".into());
    insta::assert_snapshot!(to_json(&t));
}

#[test]
fn task_context() {
    seeded(|| {
        let mut a = Task::new("Fix the build", "make cargo test pass");
        a.created_at = "2025-06-01T10:00:00.000001".into();
        a.state = TaskState::InProgress;
        a.owner = Some("Friday".into());
        let mut b = Task::new("Ship", "tag a release");
        b.created_at = "2025-06-01T10:00:00".into();
        b.blocked_by.push(a.id.clone());
        a.blocks.push(b.id.clone());
        insta::assert_snapshot!(to_json(&TaskContext { tasks: vec![a, b] }));
    });
}

#[test]
fn agent_state_after_append_context() {
    seeded(|| {
        let mut s = AgentState::for_session("s1");
        let mut user = Msg::user("user", "hi");
        user.created_at = "2025-06-01T10:00:00".into();
        user.finished_at = Some(user.created_at.clone());
        s.context.push(user);
        s.append_context("Friday", vec![ContentBlock::text("hello")]);
        s.context[1].created_at = "2025-06-01T10:00:02.500000".into();
        s.cur_iter = 1;
        s.middle_context.insert("big".into(), serde_json::from_str("1180591620717411303424").unwrap());
        insta::assert_snapshot!(to_json(&s));
    });
}
