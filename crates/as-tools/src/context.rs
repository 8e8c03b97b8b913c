//! What a running tool can see and change.
//!
//! # Design: shared parts, not the whole state
//!
//! Tools change three parts of `AgentState`: the read-file cache and the activated groups
//! (`tool_context`) and the plan-mode tasks (`tasks_context`). Concurrency-safe tools (Read,
//! Glob, Grep, the task tools, `reset_tools`) run **concurrently** in one batch, so a `&mut`
//! borrow cannot be handed to each of them. Instead the two parts live in a
//! [`SharedToolState`] (an `Arc<Mutex<ToolStateParts>>`, a `std` mutex that is never held across
//! an `.await`) for the duration of a batch:
//!
//! * [`SharedToolState::lease`] moves the parts out of the state's fields into the shared cell
//!   and returns a [`StateLease`] guard; dropping the guard (also when the reply future is
//!   dropped or cancelled) moves them back. While leased, the fields in `AgentState` hold
//!   defaults, so do not persist the state before the lease is dropped.
//! * Or [`SharedToolState::from_state`] (a clone) plus [`SharedToolState::write_back`].
//!
//! The permission context is *not* shared: permission checks happen before a call runs, on
//! the agent's own `&PermissionContext` ([`crate::PermissionEngine::check_permission`]). A
//! read-only snapshot of it may travel with the call ([`ToolCallContext::with_permission`]), so
//! that a tool whose call reaches more paths than its arguments name (the Glob and Grep walks)
//! can honour the deny rules for each path it meets.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use as_message::PermissionContext;
use as_state::{AgentState, TaskContext, ToolContext};
use tokio_util::sync::CancellationToken;

/// The parts of `AgentState` tools may read and change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolStateParts {
    /// Read-file cache and activated groups.
    pub tool_context: ToolContext,
    /// Plan-mode tasks.
    pub tasks_context: TaskContext,
}

/// A cheaply clonable handle on [`ToolStateParts`] shared by the calls of a batch.
#[derive(Clone, Debug, Default)]
pub struct SharedToolState {
    inner: Arc<Mutex<ToolStateParts>>,
}

impl SharedToolState {
    /// A handle owning these parts.
    pub fn new(parts: ToolStateParts) -> Self {
        Self { inner: Arc::new(Mutex::new(parts)) }
    }

    /// A handle on a **copy** of the state's parts; see [`SharedToolState::write_back`].
    pub fn from_state(state: &AgentState) -> Self {
        Self::new(ToolStateParts {
            tool_context: state.tool_context.clone(),
            tasks_context: state.tasks_context.clone(),
        })
    }

    /// Copies the current parts into `state`.
    pub fn write_back(&self, state: &mut AgentState) {
        let parts = self.snapshot();
        state.tool_context = parts.tool_context;
        state.tasks_context = parts.tasks_context;
    }

    /// Moves the two fields into a new shared cell; the returned guard moves them back on drop.
    ///
    /// ```
    /// use as_state::AgentState;
    /// use as_tools::SharedToolState;
    ///
    /// let mut state = AgentState::default();
    /// {
    ///     let lease = SharedToolState::lease(&mut state.tool_context, &mut state.tasks_context);
    ///     lease.shared().with(|p| p.tool_context.activated_groups.push("web".into()));
    /// }
    /// assert_eq!(state.tool_context.activated_groups, ["web"]);
    /// ```
    pub fn lease<'s>(tool_context: &'s mut ToolContext, tasks_context: &'s mut TaskContext) -> StateLease<'s> {
        let parts =
            ToolStateParts { tool_context: std::mem::take(tool_context), tasks_context: std::mem::take(tasks_context) };
        StateLease { tool_context, tasks_context, shared: Self::new(parts) }
    }

    /// Runs `f` with exclusive access to the parts. Never `.await` inside `f`.
    pub fn with<R>(&self, f: impl FnOnce(&mut ToolStateParts) -> R) -> R {
        f(&mut self.lock())
    }

    /// A copy of the current parts.
    pub fn snapshot(&self) -> ToolStateParts {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, ToolStateParts> {
        // A panic while holding the lock cannot leave the parts half-written in a way that
        // matters more than losing them, so a poisoned lock is simply taken over.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Guard returned by [`SharedToolState::lease`]; moves the parts back into the state on drop.
#[derive(Debug)]
pub struct StateLease<'s> {
    tool_context: &'s mut ToolContext,
    tasks_context: &'s mut TaskContext,
    shared: SharedToolState,
}

impl StateLease<'_> {
    /// The shared handle to put into each [`ToolCallContext`].
    pub fn shared(&self) -> &SharedToolState {
        &self.shared
    }
}

impl Drop for StateLease<'_> {
    fn drop(&mut self) {
        let parts = std::mem::take(&mut *self.shared.lock());
        *self.tool_context = parts.tool_context;
        *self.tasks_context = parts.tasks_context;
    }
}

/// Everything a running tool call gets besides its arguments. Owned and `'static`, so a tool's
/// stream may keep it.
#[derive(Clone, Debug)]
pub struct ToolCallContext {
    /// The tool call id (also the response id).
    pub tool_call_id: String,
    /// The shared state parts.
    pub state: SharedToolState,
    /// The working directory: relative paths resolve against it and Bash runs in it.
    pub working_dir: PathBuf,
    /// Cancelled when the call must stop; the toolkit then yields an `interrupted` result.
    pub cancel: CancellationToken,
    /// The session's permission context as it was checked for this call, when the caller gives
    /// it: Glob and Grep skip the paths its Read, Grep and Glob deny rules match. `None` (the
    /// default) means no rules are applied while the call runs.
    pub permission: Option<Arc<PermissionContext>>,
}

impl ToolCallContext {
    /// A context for call `tool_call_id` running in `working_dir`, with a fresh token.
    pub fn new(tool_call_id: impl Into<String>, state: SharedToolState, working_dir: impl Into<PathBuf>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            state,
            working_dir: working_dir.into(),
            cancel: CancellationToken::new(),
            permission: None,
        }
    }

    /// Uses this cancellation token (e.g. a child of the reply's token).
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Gives the call the session's permission context (its deny rules bind the search walks).
    pub fn with_permission(mut self, permission: Arc<PermissionContext>) -> Self {
        self.permission = Some(permission);
        self
    }

    /// `path` made absolute against the working directory (no symlink resolution).
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() { p.to_path_buf() } else { self.working_dir.join(p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_restores_on_drop_even_when_unwinding() {
        let mut state = AgentState::default();
        state.tool_context.activated_groups.push("a".into());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let lease = SharedToolState::lease(&mut state.tool_context, &mut state.tasks_context);
            lease.shared().with(|p| {
                assert_eq!(p.tool_context.activated_groups, ["a"]);
                p.tool_context.activated_groups.push("b".into());
                p.tasks_context.tasks.push(as_state::Task::new("s", "d"));
            });
            panic!("reply dropped mid-batch");
        }));
        assert!(result.is_err());
        assert_eq!(state.tool_context.activated_groups, ["a", "b"]);
        assert_eq!(state.tasks_context.tasks.len(), 1);
    }

    #[test]
    fn copy_and_write_back() {
        let mut state = AgentState::default();
        let shared = SharedToolState::from_state(&state);
        shared.with(|p| p.tool_context.activated_groups.push("g".into()));
        assert!(state.tool_context.activated_groups.is_empty(), "a copy");
        shared.write_back(&mut state);
        assert_eq!(state.tool_context.activated_groups, ["g"]);
        let ctx = ToolCallContext::new("c", shared, "/w");
        assert_eq!(ctx.resolve("a/b"), PathBuf::from("/w/a/b"));
        assert_eq!(ctx.resolve("/x"), PathBuf::from("/x"));
    }
}
