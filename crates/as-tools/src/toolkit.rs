//! [`Toolkit`]: registration, tool groups, the `reset_tools` meta tool, schemas for the model,
//! lookup, argument parsing and the streaming `call_tool`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use as_message::{JsonMap, JsonValue, ToolResultState, json};
use async_trait::async_trait;
use futures::FutureExt;
use futures::stream::{BoxStream, StreamExt};

use crate::args::{parse_arguments, validate_arguments};
use crate::context::ToolCallContext;
use crate::error::{ToolError, ToolErrorKind};
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::{ToolChunk, ToolOutput, ToolResponse, ToolStream};
use crate::schema::pydantic_shape;
use crate::tool::{DynTool, IntoDynTool};

/// The reserved name of the always-active group.
pub const BASIC_GROUP: &str = "basic";

/// The text of an interrupted tool call (2.0.4).
pub const INTERRUPTED_TEXT: &str = "<system-reminder>The tool call has been interrupted by the user.</system-reminder>";

/// A named group of tools, activated through `reset_tools` (`tool_context.activated_groups`).
#[derive(Clone, Debug)]
pub struct ToolGroup {
    /// Unique name (not `basic`).
    pub name: String,
    /// Shown to the model as the `reset_tools` property description.
    pub description: String,
    /// Returned by `reset_tools` when the group is activated.
    pub instructions: Option<String>,
    /// The tools.
    pub tools: Vec<Arc<dyn DynTool>>,
}

impl ToolGroup {
    /// An empty group.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), description: description.into(), instructions: None, tools: Vec::new() }
    }

    /// Sets the instructions.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl IntoDynTool) -> Self {
        self.tools.push(tool.into_dyn_tool());
        self
    }
}

/// The tools an agent can use.
///
/// ```
/// use as_tools::{Toolkit, ToolGroup, FunctionTool, ToolError, ToolErrorKind};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct City {
///     /// The city name.
///     city: String,
/// }
/// let weather = FunctionTool::new("get_weather", "Get the weather.", |a: City, _| async move {
///     Ok::<_, ToolError>(format!("Sunny in {}", a.city))
/// });
/// let mut toolkit = Toolkit::new();
/// toolkit.add_group(ToolGroup::new("weather", "Weather tools.").tool(weather)).unwrap();
///
/// // Inactive: the model sees only reset_tools, and a call says how to activate the group.
/// assert_eq!(toolkit.schemas(&[]).len(), 1);
/// let err = toolkit.check_tool_available("get_weather", &[]).unwrap_err();
/// assert_eq!(err.kind(), ToolErrorKind::InactiveGroup);
/// assert_eq!(toolkit.check_tool_available("nope", &[]).unwrap_err().kind(), ToolErrorKind::NotFound);
/// assert!(toolkit.check_tool_available("get_weather", &["weather".to_string()]).is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct Toolkit {
    basic: Vec<Arc<dyn DynTool>>,
    groups: Vec<ToolGroup>,
    reset: Option<Arc<dyn DynTool>>,
}

impl Default for Toolkit {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a tool name was found.
#[derive(Clone, Debug)]
pub enum ToolLookup {
    /// In the basic group, an active group, or the meta tool.
    Available(Arc<dyn DynTool>),
    /// Only in inactive groups (the first such group is named).
    Inactive {
        /// The tool.
        tool: Arc<dyn DynTool>,
        /// Its group.
        group: String,
    },
    /// Nowhere.
    Unknown,
}

impl Toolkit {
    /// An empty toolkit.
    pub fn new() -> Self {
        Self { basic: Vec::new(), groups: Vec::new(), reset: None }
    }

    /// Registers a tool in the basic group; a tool with the same name is replaced.
    pub fn register(&mut self, tool: impl IntoDynTool) -> &mut Self {
        let tool = tool.into_dyn_tool();
        if let Some(slot) = self.basic.iter_mut().find(|t| t.name() == tool.name()) {
            tracing::warn!(tool = tool.name(), "replacing an already registered tool");
            *slot = tool;
        } else {
            self.basic.push(tool);
        }
        self
    }

    /// Builder form of [`Toolkit::register`].
    pub fn with(mut self, tool: impl IntoDynTool) -> Self {
        self.register(tool);
        self
    }

    /// Adds a named group. Errors on the reserved name `basic` or a duplicate name.
    pub fn add_group(&mut self, group: ToolGroup) -> Result<&mut Self, ToolError> {
        if group.name == BASIC_GROUP {
            return Err(ToolError::new(ToolErrorKind::Registration, "the group name 'basic' is reserved"));
        }
        if self.groups.iter().any(|g| g.name == group.name) {
            return Err(ToolError::new(
                ToolErrorKind::Registration,
                format!("a tool group named '{}' already exists", group.name),
            ));
        }
        self.groups.push(group);
        self.reset = Some(Arc::new(ResetTools::new(&self.groups)));
        Ok(self)
    }

    /// The named groups, in registration order.
    pub fn groups(&self) -> &[ToolGroup] {
        &self.groups
    }

    /// The tools the model may call with these groups active, in 2.0.4's order:
    /// `reset_tools` (if any named group exists), the basic tools, then the tools of active
    /// groups in group order (a later duplicate name replaces the earlier tool in place).
    pub fn available_tools(&self, activated_groups: &[String]) -> Vec<Arc<dyn DynTool>> {
        let mut out: Vec<Arc<dyn DynTool>> = Vec::new();
        let mut push = |t: &Arc<dyn DynTool>| {
            if let Some(slot) = out.iter_mut().find(|o| o.name() == t.name()) {
                *slot = Arc::clone(t);
            } else {
                out.push(Arc::clone(t));
            }
        };
        if let Some(reset) = &self.reset {
            push(reset);
        }
        self.basic.iter().for_each(&mut push);
        for g in &self.groups {
            if activated_groups.contains(&g.name) {
                g.tools.iter().for_each(&mut push);
            }
        }
        out
    }

    /// The tool schemas for the model: `[{"type":"function","function":{"name","description","parameters"}}]`.
    pub fn schemas(&self, activated_groups: &[String]) -> Vec<JsonValue> {
        self.available_tools(activated_groups)
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name(), "description": t.description(), "parameters": t.parameters()}
                })
            })
            .collect()
    }

    /// Finds `name` in any group, active or not (used for batching).
    pub fn get_tool(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        match self.lookup(name, &[]) {
            ToolLookup::Available(t) | ToolLookup::Inactive { tool: t, .. } => Some(t),
            ToolLookup::Unknown => None,
        }
    }

    /// Finds `name`, telling apart unknown tools and tools of inactive groups.
    pub fn lookup(&self, name: &str, activated_groups: &[String]) -> ToolLookup {
        if let Some(t) = self.available_tools(activated_groups).into_iter().find(|t| t.name() == name) {
            return ToolLookup::Available(t);
        }
        for g in &self.groups {
            if let Some(t) = g.tools.iter().find(|t| t.name() == name) {
                return ToolLookup::Inactive { tool: Arc::clone(t), group: g.name.clone() };
            }
        }
        ToolLookup::Unknown
    }

    /// The tool if the model may call it now; else `NotFound` (2.0.4's text) or `InactiveGroup`.
    pub fn check_tool_available(&self, name: &str, activated_groups: &[String]) -> Result<Arc<dyn DynTool>, ToolError> {
        match self.lookup(name, activated_groups) {
            ToolLookup::Available(t) => Ok(t),
            ToolLookup::Inactive { group, .. } => Err(ToolError::inactive_group(name, &group)),
            ToolLookup::Unknown => Err(ToolError::not_found(name)),
        }
    }

    /// Availability, then [`parse_arguments`] and [`validate_arguments`]: everything the agent
    /// checks before the permission engine. Each error is an observation for the model.
    pub fn prepare(
        &self,
        name: &str,
        raw_input: &str,
        activated_groups: &[String],
    ) -> Result<(Arc<dyn DynTool>, JsonMap), ToolError> {
        let tool = self.check_tool_available(name, activated_groups)?;
        let input = parse_arguments(raw_input)?;
        validate_arguments(name, tool.parameters(), &input)?;
        Ok((tool, input))
    }

    /// Runs a prepared call: every chunk unchanged, then exactly one accumulated
    /// [`ToolResponse`] (id = `ctx.tool_call_id`).
    ///
    /// Never fails: an `Err` from the tool (or a panic inside it, or a chunk that cannot be merged:
    /// see [`ToolResponse::append_chunk`]) becomes an error chunk with the error's text; cancelling `ctx.cancel` stops the tool (its stream is dropped, which
    /// for Bash kills the process group) and yields an `interrupted` chunk with
    /// [`INTERRUPTED_TEXT`]. Dropping the returned stream also drops the tool's stream.
    pub fn call_tool(
        &self,
        tool: Arc<dyn DynTool>,
        input: JsonMap,
        ctx: ToolCallContext,
    ) -> BoxStream<'static, ToolOutput> {
        call_tool_stream(tool, input, ctx)
    }

    /// 2.0.4's `call_tool(tool_call, state)`: looks the tool up with the groups active in
    /// `ctx.state`, parses and validates `raw_input`, then [`Toolkit::call_tool`]. Lookup and
    /// input errors give an error chunk and response. No permission check is done here.
    pub fn call(&self, name: &str, raw_input: &str, ctx: ToolCallContext) -> BoxStream<'static, ToolOutput> {
        let activated = ctx.state.with(|p| p.tool_context.activated_groups.clone());
        match self.prepare(name, raw_input, &activated) {
            Ok((tool, input)) => self.call_tool(tool, input, ctx),
            Err(e) => error_stream(ctx.tool_call_id, e),
        }
    }
}

fn error_stream(id: String, e: ToolError) -> BoxStream<'static, ToolOutput> {
    let chunk = ToolChunk::with_state(e.model_text(), ToolResultState::Error);
    let mut resp = ToolResponse::new(id);
    // One text block under a new id: nothing to merge it with, so it cannot fail.
    let _ = resp.append_chunk(&chunk);
    futures::stream::iter([ToolOutput::Chunk(chunk), ToolOutput::Response(resp)]).boxed()
}

fn call_tool_stream(tool: Arc<dyn DynTool>, input: JsonMap, ctx: ToolCallContext) -> BoxStream<'static, ToolOutput> {
    let (tx, rx) = futures::channel::mpsc::unbounded::<ToolOutput>();
    let id = ctx.tool_call_id.clone();
    let cancel = ctx.cancel.clone();
    let fut = async move {
        let mut resp = ToolResponse::new(id);
        // As in 2.0.4, the chunk goes out whether or not it merges; a merge that fails (URL data
        // under an id already used) ends the call with an error result.
        let emit = |resp: &mut ToolResponse, chunk: ToolChunk| {
            let merged = resp.append_chunk(&chunk);
            let _ = tx.unbounded_send(ToolOutput::Chunk(chunk));
            merged
        };
        let run = async {
            let stream = AssertUnwindSafe(tool.call(input, ctx)).catch_unwind().await;
            let mut stream = match stream {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(ToolError::execution(format!("the tool '{}' panicked", tool.name()))),
            };
            loop {
                match AssertUnwindSafe(stream.next()).catch_unwind().await {
                    Ok(Some(Ok(chunk))) => emit(&mut resp, chunk)?,
                    Ok(Some(Err(e))) => return Err(e),
                    Ok(None) => return Ok(()),
                    Err(_) => return Err(ToolError::execution(format!("the tool '{}' panicked", tool.name()))),
                }
            }
        };
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ToolError::new(ToolErrorKind::Interrupted, INTERRUPTED_TEXT)),
            r = run => r,
        };
        // These chunks are one text block under a new id: nothing to merge them with, so they
        // cannot fail.
        let _ = match outcome {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ToolErrorKind::Interrupted => {
                emit(&mut resp, ToolChunk::with_state(INTERRUPTED_TEXT, ToolResultState::Interrupted))
            }
            Err(e) => emit(&mut resp, ToolChunk::with_state(e.model_text(), ToolResultState::Error)),
        };
        let _ = tx.unbounded_send(ToolOutput::Response(resp));
    };
    // Drive the call while the consumer polls: merge the driver future with the receiver.
    let driver = futures::stream::once(fut).filter_map(|()| async { None::<ToolOutput> });
    futures::stream::select(driver, rx).boxed()
}

/// The `reset_tools` meta tool: its input is the **final** set of active named groups.
struct ResetTools {
    description: String,
    parameters: JsonValue,
    groups: Vec<(String, Option<String>)>,
}

/// 2.0.4's `reset_tools` description.
pub const RESET_TOOLS_DESCRIPTION: &str = "This tool allows you to reset your equipped tools based on your current task requirements. These tools are organized into different groups, and you can activate/deactivate them by specifying the boolean values for each group in the input.\n\n**Important: The input booleans are the final state of their corresponding tool groups, not incremental changes.** Any group not explicitly set to True will be deactivated, regardless of its previous state.\n\n**Best practice**: Actively manage your tool groups\u{2014}\u{2014}activate only what you need for the current task, and promptly deactivate groups as soon as they are no longer needed to conserve context space.\n\nThis tool will return the usage instructions for the activated tool groups, which you **MUST pay attention to and follow**. You can also reuse this tool to re-check the instructions.";

impl ResetTools {
    fn new(groups: &[ToolGroup]) -> Self {
        let bool_schema = crate::schema::parameters_schema::<bool>();
        let mut props = JsonMap::new();
        for g in groups {
            let mut p = match bool_schema.clone() {
                JsonValue::Object(m) => m,
                _ => JsonMap::new(),
            };
            p.insert("default".into(), JsonValue::Bool(false));
            p.insert("description".into(), JsonValue::String(g.description.clone()));
            props.insert(g.name.clone(), JsonValue::Object(p));
        }
        let parameters = pydantic_shape(json!({"properties": props, "type": "object"}));
        Self {
            description: RESET_TOOLS_DESCRIPTION.to_owned(),
            parameters,
            groups: groups.iter().map(|g| (g.name.clone(), g.instructions.clone())).collect(),
        }
    }

    fn render(&self, active: &[String]) -> String {
        if active.is_empty() {
            return "All tool groups are currently deactivated.".to_owned();
        }
        let mut out = format!("The currently activated tool group(s): {}.", active.join(", "));
        let instructions: Vec<(&String, &Option<String>)> =
            active.iter().filter_map(|a| self.groups.iter().find(|(n, _)| n == a).map(|(n, i)| (n, i))).collect();
        if instructions.iter().any(|(_, i)| i.is_some()) {
            out.push_str("\n<tool-instructions>\nThe tool instructions are a collection of suggestions, rules and notifications about how to use the tools in the activated groups.\n");
            for (name, ins) in instructions {
                if let Some(text) = ins.as_deref().filter(|t| !t.is_empty()) {
                    out.push_str(&format!("<group name=\"{name}\">{text}</group>"));
                }
            }
            out.push_str("\n</tool-instructions>");
        }
        out
    }
}

#[async_trait]
impl DynTool for ResetTools {
    fn name(&self) -> &str {
        "reset_tools"
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &JsonValue {
        &self.parameters
    }
    fn is_concurrency_safe(&self) -> bool {
        true
    }
    /// It only changes the agent's own tool selection, never the world, so explore (plan) mode
    /// allows it, like the task tools.
    fn is_read_only(&self) -> bool {
        true
    }
    async fn check_permissions(&self, _input: &JsonMap, _ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        PermissionDecision::allow("Permission granted for reset_tools")
    }
    async fn call(&self, input: JsonMap, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        let active: Vec<String> = input
            .iter()
            .filter(|(k, v)| v.as_bool() == Some(true) && self.groups.iter().any(|(n, _)| n == *k))
            .map(|(k, _)| k.clone())
            .collect();
        ctx.state.with(|p| p.tool_context.activated_groups = active.clone());
        Ok(ToolStream::text(self.render(&active)))
    }
}
