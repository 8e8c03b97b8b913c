//! Plan-mode task tools: 2.0.4 texts (scenario reset-tools-and-tasks) and link consistency.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_state::{TaskContext, TaskState};
use as_tools::task_tools::{
    TaskCreateParams, TaskUpdateParams, TaskUpdateStatus, create_task, get_task, list_tasks, task_tools, update_task,
};
use as_tools::{SharedToolState, ToolCallContext, ToolOutput, Toolkit};
use futures::StreamExt;
use proptest::prelude::*;

async fn run(
    toolkit: &Toolkit,
    shared: &SharedToolState,
    name: &str,
    input: &str,
) -> (String, as_message::ToolResultState) {
    let ctx = ToolCallContext::new("c", shared.clone(), "/");
    let out: Vec<ToolOutput> = toolkit.call(name, input, ctx).collect().await;
    match out.last() {
        Some(ToolOutput::Response(r)) => (r.text(), r.state),
        other => panic!("no response: {other:?}"),
    }
}

#[tokio::test]
async fn scenario_texts_match_2_0_4() {
    let toolkit = task_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
    let shared = SharedToolState::default();
    let ok = as_message::ToolResultState::Success;
    assert_eq!(
        run(&toolkit, &shared, "TaskCreate", r#"{"subject": "Check weather", "description": "Oslo"}"#).await,
        ("Task (id=1) created successfully: Check weather".into(), ok)
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskCreate", r#"{"subject": "Report", "description": "Tell user"}"#).await,
        ("Task (id=2) created successfully: Report".into(), ok)
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskUpdate", r#"{"task_id": "2", "add_blocked_by": ["1"], "status": "in_progress"}"#)
            .await,
        ("Update task (id=2) add_blocked_by, status.".into(), ok)
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskList", "{}").await,
        ("1 [pending] Check weather\n2 [in_progress] Report[blocked by 1]".into(), ok)
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskGet", r#"{"task_id": "2"}"#).await,
        ("Task (id=2): Report\nStatus: in_progress\nDescription: Tell user\nBlocked by: #1".into(), ok)
    );
    // the state matches the fixture's tasks_context (created_at aside)
    let tasks = shared.snapshot().tasks_context;
    let json = serde_json::to_value(&tasks).unwrap();
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/agentscope-2.0.4/scenario-reset-tools-and-tasks.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut expect = fixture["phases"][0]["state_after"]["tasks_context"].clone();
    let mut got = json;
    for v in [&mut expect, &mut got] {
        for t in v["tasks"].as_array_mut().unwrap() {
            t.as_object_mut().unwrap().remove("created_at");
        }
    }
    assert_eq!(got, expect);
}

#[tokio::test]
async fn errors_and_other_texts() {
    let toolkit = task_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
    let shared = SharedToolState::default();
    let err = as_message::ToolResultState::Error;
    assert_eq!(run(&toolkit, &shared, "TaskList", "{}").await.0, "No tasks available.");
    assert_eq!(run(&toolkit, &shared, "TaskGet", r#"{"task_id": "9"}"#).await, ("Task not found".into(), err));
    assert_eq!(
        run(&toolkit, &shared, "TaskUpdate", r#"{"task_id": "9"}"#).await,
        ("TaskNotFoundError: The task (id=9) does not exist.".into(), err)
    );
    run(&toolkit, &shared, "TaskCreate", r#"{"subject": "A", "description": "a", "metadata": {"k": 1}}"#).await;
    assert_eq!(
        run(&toolkit, &shared, "TaskUpdate", r#"{"task_id": "1"}"#).await.0,
        "No updates were made to the task (id=1). Make sure you provided at least one field to update and the values \
         are correct."
    );
    assert_eq!(
        run(
            &toolkit,
            &shared,
            "TaskUpdate",
            r#"{"task_id": "1", "owner": "bob", "status": "completed", "metadata": {"k": null, "j": "x"}}"#
        )
        .await
        .0,
        "Update task (id=1) status, owner, metadata.\n\nTask completed. Call TaskList now to find your next available \
         task or see if your work unblocked others."
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskGet", r#"{"task_id": "1"}"#).await.0,
        "Task (id=1): A\nStatus: completed\nDescription: a\nOwner: bob\nMetadata: {'j': 'x'}"
    );
    assert_eq!(run(&toolkit, &shared, "TaskList", "{}").await.0, "1 [completed] A(bob)");
    assert_eq!(
        run(&toolkit, &shared, "TaskUpdate", r#"{"task_id": "1", "status": "deleted"}"#).await.0,
        "Task (id=1) has been deleted."
    );
    assert_eq!(
        run(&toolkit, &shared, "TaskCreate", r#"{"subject": "B", "description": "b"}"#).await.0,
        "Task (id=1) created successfully: B"
    );
    // schema errors are observations too
    let (text, state) = run(&toolkit, &shared, "TaskUpdate", r#"{"task_id": "1", "status": "done"}"#).await;
    assert_eq!(state, err);
    assert!(text.starts_with("Input validation failed for tool 'TaskUpdate': "), "{text}");
}

/// Every link has both ends, points at an existing task, and no task blocks itself.
fn assert_consistent(tasks: &TaskContext) {
    let ids: Vec<&str> = tasks.tasks.iter().map(|t| t.id.as_str()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicate ids {ids:?}");
    for t in &tasks.tasks {
        for b in &t.blocks {
            assert_ne!(b, &t.id);
            let other = tasks.tasks.iter().find(|o| &o.id == b).unwrap_or_else(|| panic!("dangling {b}"));
            assert!(other.blocked_by.contains(&t.id), "{} blocks {b} but not reverse", t.id);
        }
        for b in &t.blocked_by {
            assert_ne!(b, &t.id);
            let other = tasks.tasks.iter().find(|o| &o.id == b).unwrap_or_else(|| panic!("dangling {b}"));
            assert!(other.blocks.contains(&t.id), "{} blocked by {b} but not reverse", t.id);
        }
        let mut bl = t.blocks.clone();
        bl.sort();
        bl.dedup();
        assert_eq!(bl.len(), t.blocks.len(), "duplicate blocks");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create,
    Block { id: u8, add: Vec<u8> },
    BlockedBy { id: u8, add: Vec<u8> },
    Status { id: u8, status: u8 },
    Get(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let ids = || proptest::collection::vec(0u8..8, 0..4);
    prop_oneof![
        3 => Just(Op::Create),
        3 => (0u8..8, ids()).prop_map(|(id, add)| Op::Block { id, add }),
        3 => (0u8..8, ids()).prop_map(|(id, add)| Op::BlockedBy { id, add }),
        2 => (0u8..8, 0u8..4).prop_map(|(id, status)| Op::Status { id, status }),
        1 => (0u8..8).prop_map(Op::Get),
    ]
}

proptest! {
    #[test]
    fn random_operations_keep_links_consistent(ops in proptest::collection::vec(op(), 1..60)) {
        let mut tasks = TaskContext::default();
        let s = |n: u8| n.to_string();
        for op in ops {
            match op {
                Op::Create => {
                    let before = tasks.tasks.len();
                    create_task(&mut tasks, TaskCreateParams { subject: "s".into(), description: "d".into(), metadata: None });
                    prop_assert_eq!(tasks.tasks.len(), before + 1);
                    prop_assert_eq!(tasks.tasks.last().unwrap().state, TaskState::Pending);
                }
                Op::Block { id, add } => {
                    let r = update_task(&mut tasks, TaskUpdateParams { task_id: s(id), add_blocks: Some(add.iter().map(|a| s(*a)).collect()), ..Default::default() });
                    prop_assert_eq!(r.is_ok(), tasks.tasks.iter().any(|t| t.id == s(id)));
                }
                Op::BlockedBy { id, add } => {
                    let _ = update_task(&mut tasks, TaskUpdateParams { task_id: s(id), add_blocked_by: Some(add.iter().map(|a| s(*a)).collect()), ..Default::default() });
                }
                Op::Status { id, status } => {
                    let status = [TaskUpdateStatus::Pending, TaskUpdateStatus::InProgress, TaskUpdateStatus::Completed, TaskUpdateStatus::Deleted][status as usize];
                    let existed = tasks.tasks.iter().any(|t| t.id == s(id));
                    let _ = update_task(&mut tasks, TaskUpdateParams { task_id: s(id), status: Some(status), ..Default::default() });
                    if status == TaskUpdateStatus::Deleted && existed {
                        prop_assert!(!tasks.tasks.iter().any(|t| t.id == s(id)));
                    }
                }
                Op::Get(id) => {
                    prop_assert_eq!(get_task(&tasks, &s(id)).is_ok(), tasks.tasks.iter().any(|t| t.id == s(id)));
                    let _ = list_tasks(&tasks);
                }
            }
            assert_consistent(&tasks);
        }
    }
}
