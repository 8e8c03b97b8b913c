//! Plan-mode task tools (2.0.4 `TaskCreate`, `TaskGet`, `TaskList`, `TaskUpdate`) on
//! `tasks_context`.
//!
//! They always ALLOW, are concurrency-safe, and are **read-only** as far as the permission
//! engine is concerned (they change only the plan, never the world), so they work in
//! `explore` mode, which is how 2.0.4 does planning.
//!
//! Links are kept symmetric: `a.blocks` contains `b` exactly when `b.blocked_by` contains `a`,
//! both tasks exist, and no task blocks itself (2.0.4 accepts a self-edge; the port skips it).

mod descriptions;

use as_message::{JsonMap, JsonValue};
use as_state::{Task, TaskContext, TaskState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::ToolCallContext;
use crate::error::{ToolError, ToolErrorKind};
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::ToolStream;
use crate::tool::{IntoDynTool, Tool};
use crate::util::python_value_repr;

/// The params of the creating task tool.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct TaskCreateParams {
    /// A brief title for the task
    pub subject: String,
    /// What needs to be done
    pub description: String,
    /// Arbitrary metadata to attach to the task
    #[serde(default)]
    pub metadata: Option<JsonMap>,
}

/// The params of the get task.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct TaskGetParams {
    /// The ID of the task to retrieve
    pub task_id: String,
}

/// The params of the list task params.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct TaskListParams {}

/// A status `TaskUpdate` can set (`deleted` removes the task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskUpdateStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Remove the task and every reference to it.
    Deleted,
}

/// The params of the update task.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
pub struct TaskUpdateParams {
    /// The task id.
    pub task_id: String,
    /// New subject for the task
    #[serde(default)]
    pub subject: Option<String>,
    /// New description for the task
    #[serde(default)]
    pub description: Option<String>,
    /// Task IDs that this task blocks
    #[serde(default)]
    pub add_blocks: Option<Vec<String>>,
    /// New status for the task
    #[serde(default)]
    pub status: Option<TaskUpdateStatus>,
    /// Task IDs that block this task
    #[serde(default)]
    pub add_blocked_by: Option<Vec<String>>,
    /// New owner for the task
    #[serde(default)]
    pub owner: Option<String>,
    /// Metadata keys to merge into the task. Set a key to null to delete it.
    #[serde(default)]
    pub metadata: Option<JsonMap>,
}

/// Creates a pending task with id `max(numeric ids) + 1`; returns the model text.
pub fn create_task(tasks: &mut TaskContext, params: TaskCreateParams) -> String {
    let next = tasks.tasks.iter().filter_map(|t| t.id.parse::<u64>().ok()).max().map_or(1, |m| m + 1);
    let mut task = Task::new(params.subject, params.description);
    task.id = next.to_string();
    task.metadata = params.metadata.unwrap_or_default();
    let text = format!("Task (id={}) created successfully: {}", task.id, task.subject);
    tasks.tasks.push(task);
    text
}

/// The `TaskGet` text, or `Err("Task not found")`.
pub fn get_task(tasks: &TaskContext, task_id: &str) -> Result<String, String> {
    let task = tasks.tasks.iter().find(|t| t.id == task_id).ok_or_else(|| "Task not found".to_owned())?;
    let mut lines = vec![
        format!("Task (id={}): {}", task.id, task.subject),
        format!("Status: {}", state_str(task.state)),
        format!("Description: {}", task.description),
    ];
    if let Some(owner) = task.owner.as_deref().filter(|o| !o.is_empty()) {
        lines.push(format!("Owner: {owner}"));
    }
    if !task.blocked_by.is_empty() {
        lines.push(format!("Blocked by: {}", hashes(&task.blocked_by)));
    }
    if !task.blocks.is_empty() {
        lines.push(format!("Blocks: {}", hashes(&task.blocks)));
    }
    if !task.metadata.is_empty() {
        lines.push(format!("Metadata: {}", python_value_repr(&JsonValue::Object(task.metadata.clone()))));
    }
    Ok(lines.join("\n"))
}

/// The `TaskList` text.
pub fn list_tasks(tasks: &TaskContext) -> String {
    if tasks.tasks.is_empty() {
        return "No tasks available.".to_owned();
    }
    tasks
        .tasks
        .iter()
        .map(|t| {
            let owner = t.owner.as_deref().filter(|o| !o.is_empty()).map(|o| format!("({o})")).unwrap_or_default();
            let blocked = if t.blocked_by.is_empty() {
                String::new()
            } else {
                format!("[blocked by {}]", t.blocked_by.join(", "))
            };
            format!("{} [{}] {}{owner}{blocked}", t.id, state_str(t.state), t.subject)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Applies a `TaskUpdate`; returns the model text, or the error text for an unknown id.
pub fn update_task(tasks: &mut TaskContext, p: TaskUpdateParams) -> Result<String, String> {
    let id = p.task_id.clone();
    let Some(index) = tasks.tasks.iter().position(|t| t.id == id) else {
        return Err(format!("TaskNotFoundError: The task (id={id}) does not exist."));
    };
    let mut fields: Vec<&str> = Vec::new();
    if let Some(subject) = p.subject.filter(|s| !s.is_empty()) {
        tasks.tasks[index].subject = subject;
        fields.push("subject");
    }
    if let Some(description) = p.description {
        tasks.tasks[index].description = description;
        fields.push("description");
    }
    if let Some(add) = p.add_blocks.filter(|a| !a.is_empty())
        && link_all(tasks, add.iter().map(|other| (id.as_str(), other.as_str())))
    {
        fields.push("add_blocks");
    }
    if let Some(add) = p.add_blocked_by
        && link_all(tasks, add.iter().map(|other| (other.as_str(), id.as_str())))
    {
        fields.push("add_blocked_by");
    }
    match p.status {
        Some(TaskUpdateStatus::Deleted) => {
            tasks.tasks.remove(index);
            for t in &mut tasks.tasks {
                t.blocks.retain(|b| *b != id);
                t.blocked_by.retain(|b| *b != id);
            }
            return Ok(format!("Task (id={id}) has been deleted."));
        }
        Some(s) => {
            tasks.tasks[index].state = match s {
                TaskUpdateStatus::Pending => TaskState::Pending,
                TaskUpdateStatus::InProgress => TaskState::InProgress,
                _ => TaskState::Completed,
            };
            fields.push("status");
        }
        None => {}
    }
    if let Some(owner) = p.owner {
        tasks.tasks[index].owner = Some(owner);
        fields.push("owner");
    }
    if let Some(meta) = p.metadata.filter(|m| !m.is_empty()) {
        let target = &mut tasks.tasks[index].metadata;
        for (k, v) in meta {
            if v.is_null() {
                target.shift_remove(&k);
            } else {
                target.insert(k, v);
            }
        }
        fields.push("metadata");
    }
    let mut text = if fields.is_empty() {
        format!(
            "No updates were made to the task (id={id}). Make sure you provided at least one field to update and \
             the values are correct."
        )
    } else {
        format!("Update task (id={id}) {}.", fields.join(", "))
    };
    if tasks.tasks[index].state == TaskState::Completed {
        text.push_str(
            "\n\nTask completed. Call TaskList now to find your next available task or see if your work unblocked \
             others.",
        );
    }
    Ok(text)
}

/// Adds `blocker -> blocked` edges (both ends) for existing, distinct, not-yet-linked tasks.
/// Returns whether any edge was added.
fn link_all<'a>(tasks: &mut TaskContext, edges: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
    let mut any = false;
    for (blocker, blocked) in edges {
        if blocker == blocked {
            continue;
        }
        let (Some(a), Some(b)) =
            (tasks.tasks.iter().position(|t| t.id == blocker), tasks.tasks.iter().position(|t| t.id == blocked))
        else {
            continue;
        };
        let mut added = false;
        if !tasks.tasks[a].blocks.iter().any(|x| x == blocked) {
            tasks.tasks[a].blocks.push(blocked.to_owned());
            added = true;
        }
        if !tasks.tasks[b].blocked_by.iter().any(|x| x == blocker) {
            tasks.tasks[b].blocked_by.push(blocker.to_owned());
            added = true;
        }
        any |= added;
    }
    any
}

fn hashes(ids: &[String]) -> String {
    ids.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")
}

fn state_str(s: TaskState) -> &'static str {
    match s {
        TaskState::Pending => "pending",
        TaskState::InProgress => "in_progress",
        TaskState::Completed => "completed",
    }
}

macro_rules! task_tool {
    ($ty:ident, $name:literal, $desc:path, $args:ty, |$p:ident, $ctx:ident| $body:expr) => {
        #[doc = concat!("The `", $name, "` tool.")]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $ty;

        impl Tool for $ty {
            type Args = $args;
            fn name(&self) -> &str {
                $name
            }
            fn description(&self) -> String {
                $desc.to_owned()
            }
            fn is_concurrency_safe(&self) -> bool {
                true
            }
            fn is_read_only(&self) -> bool {
                true
            }
            fn check_permissions(&self, _: &Self::Args, _: &PermissionCheckContext<'_>) -> PermissionDecision {
                PermissionDecision::allow(concat!("Permission granted for ", $name))
            }
            async fn call(&self, $p: Self::Args, $ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
                let result: Result<String, String> = $body;
                match result {
                    Ok(text) => Ok(ToolStream::text(text)),
                    Err(text) => Err(ToolError::new(ToolErrorKind::Execution, text)),
                }
            }
        }
    };
}

task_tool!(TaskCreate, "TaskCreate", descriptions::TASK_CREATE, TaskCreateParams, |p, ctx| {
    Ok(ctx.state.with(|s| create_task(&mut s.tasks_context, p)))
});
task_tool!(TaskGet, "TaskGet", descriptions::TASK_GET, TaskGetParams, |p, ctx| {
    ctx.state.with(|s| get_task(&s.tasks_context, &p.task_id))
});
task_tool!(TaskList, "TaskList", descriptions::TASK_LIST, TaskListParams, |_p, ctx| {
    Ok(ctx.state.with(|s| list_tasks(&s.tasks_context)))
});
task_tool!(TaskUpdate, "TaskUpdate", descriptions::TASK_UPDATE, TaskUpdateParams, |p, ctx| {
    ctx.state.with(|s| update_task(&mut s.tasks_context, p))
});

/// The four task tools, erased, in 2.0.4's order.
pub fn task_tools() -> Vec<std::sync::Arc<dyn crate::tool::DynTool>> {
    vec![TaskCreate.into_dyn_tool(), TaskGet.into_dyn_tool(), TaskList.into_dyn_tool(), TaskUpdate.into_dyn_tool()]
}
