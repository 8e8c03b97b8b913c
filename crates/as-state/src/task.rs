//! Plan-mode tasks (`agentscope.state._task`).

use as_message::{JsonMap, generate_id, now_iso};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Progress of a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Not started.
    #[default]
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

as_message::str_enum!(TaskState { Pending => "pending", InProgress => "in_progress", Completed => "completed" });

/// A plan-mode task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "Task")]
pub struct Task {
    /// Short title.
    pub subject: String,
    /// What to do.
    pub description: String,
    /// Free-form metadata (required on the wire).
    #[serde(deserialize_with = "as_message::free_form::deserialize")]
    pub metadata: JsonMap,
    /// Creation time, a naive local ISO string.
    #[serde(default = "now_iso")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub created_at: String,
    /// Progress.
    #[serde(default)]
    pub state: TaskState,
    /// Task id.
    #[serde(default = "generate_id")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub id: String,
    /// Who works on it.
    #[serde(default)]
    pub owner: Option<String>,
    /// Ids of tasks this task blocks.
    #[serde(default)]
    pub blocks: Vec<String>,
    /// Ids of tasks that block this one.
    #[serde(default)]
    pub blocked_by: Vec<String>,
}

as_message::map_only!(Task, "a Task object", Serialize);

impl Task {
    /// A pending task with a fresh id and empty metadata.
    pub fn new(subject: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            description: description.into(),
            metadata: JsonMap::new(),
            created_at: now_iso(),
            state: TaskState::Pending,
            id: generate_id(),
            owner: None,
            blocks: Vec::new(),
            blocked_by: Vec::new(),
        }
    }
}

/// The plan-mode task list persisted in `AgentState.tasks_context`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "TaskContext")]
pub struct TaskContext {
    /// Tasks, in creation order.
    #[serde(default)]
    pub tasks: Vec<Task>,
}

as_message::map_only!(TaskContext, "a TaskContext object", Serialize);
