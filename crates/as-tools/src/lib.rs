//! Tools for AgentScope agents, wire-compatible with AgentScope Python 2.0.4: typed and erased
//! tools, the [`Toolkit`] with tool groups and `reset_tools`, argument repair and validation,
//! the [`PermissionEngine`], plan-mode task tools and built-in file and shell tools.
//!
//! # The pieces
//!
//! * [`DynTool`] is the object-safe `#[async_trait]` tool the toolkit holds as
//!   `Arc<dyn DynTool>`; [`Tool`] is the typed form (arguments are a `serde` + `schemars`
//!   type; the JSON schema is derived, never hand-written), erased by [`IntoDynTool`];
//!   [`FunctionTool`] wraps an async closure.
//! * A call streams [`ToolChunk`]s (deltas) and ends with one [`ToolResponse`]
//!   ([`Toolkit::call_tool`] yields [`ToolOutput`]s). Every failure — unknown tool, inactive
//!   group, bad JSON, schema violation, tool error, panic, cancellation — becomes a result for
//!   the model, never an `Err` out of the loop.
//! * Tools change `tool_context` and `tasks_context` through a [`SharedToolState`] in their
//!   [`ToolCallContext`] (see the [`context`] module docs for why and how to lease the parts
//!   out of `AgentState`).
//! * [`PermissionEngine::check_permission`] decides ALLOW / DENY / ASK from the session's
//!   `PermissionContext` (passed on each call, never cached).
//!
//! # Example: one call, as the agent runs it
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use as_message::PermissionContext;
//! use as_state::AgentState;
//! use as_tools::{FunctionTool, PermissionEngine, SharedToolState, ToolCallContext, ToolError, ToolOutput, Toolkit};
//! use futures::StreamExt;
//!
//! /// Echo params.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Echo {
//!     /// What to echo.
//!     text: String,
//! }
//! let toolkit = Toolkit::new().with(
//!     FunctionTool::new("echo", "Echo the text.", |a: Echo, _| async move { Ok::<_, ToolError>(format!("echo: {}", a.text)) })
//!         .read_only(true),
//! );
//! let mut state = AgentState::default();
//!
//! // 1. availability + repaired, validated arguments (errors are observations for the model)
//! let (tool, input) = toolkit.prepare("echo", r#"{"text": "repaired"#, &state.tool_context.activated_groups).unwrap();
//! // 2. permission: a function tool asks in default mode
//! let engine = PermissionEngine::new("/tmp");
//! let decision = engine.check_permission(&state.permission_context, tool.as_ref(), &input).await;
//! assert!(decision.needs_confirmation());
//! assert_eq!(decision.message, "Permission required for echo");
//! // 3. (user confirmed) run it with the state parts leased out of AgentState
//! let lease = SharedToolState::lease(&mut state.tool_context, &mut state.tasks_context);
//! let ctx = ToolCallContext::new("call_1", lease.shared().clone(), "/tmp");
//! let outputs: Vec<ToolOutput> = toolkit.call_tool(tool, input, ctx).collect().await;
//! drop(lease);
//! let ToolOutput::Response(resp) = outputs.last().unwrap() else { panic!() };
//! assert_eq!(resp.text(), "echo: repaired");
//! assert_eq!(resp.state, as_message::ToolResultState::Success);
//! # });
//! ```

mod args;
pub mod builtin;
pub mod context;
mod error;
mod permission;
mod response;
mod schema;
pub mod task_tools;
mod tool;
mod toolkit;
mod util;

pub use args::{MAX_REPAIR_DEPTH, parse_and_validate, parse_arguments, repair_json, validate_arguments};
pub use context::{SharedToolState, StateLease, ToolCallContext, ToolStateParts};
pub use error::{Result, ToolError, ToolErrorKind};
pub use permission::{
    PermissionCheckContext, PermissionDecision, PermissionEngine, bash_rule_matches, fnmatch, split_command_segments,
};
pub use response::{IntoToolStream, ToolChunk, ToolOutput, ToolResponse, ToolStream};
pub use schema::{parameters_schema, pydantic_shape, without_description};
pub use tool::{DynTool, ExternalTool, FunctionTool, IntoDynTool, Tool, TypedTool, default_suggestion};
pub use toolkit::{BASIC_GROUP, INTERRUPTED_TEXT, RESET_TOOLS_DESCRIPTION, ToolGroup, ToolLookup, Toolkit};

/// Re-exported for cancelling calls ([`ToolCallContext::cancel`]).
pub use tokio_util::sync::CancellationToken;
