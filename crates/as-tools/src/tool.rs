//! The tool traits: [`DynTool`] (object-safe, what the toolkit holds), [`Tool`] (typed, with
//! `schemars`-derived arguments, erased by [`IntoDynTool`]) and [`FunctionTool`] (an async
//! closure).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use as_message::{JsonMap, JsonValue, PermissionBehavior, PermissionRule};
use async_trait::async_trait;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::context::ToolCallContext;
use crate::error::{ToolError, ToolErrorKind};
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::{IntoToolStream, ToolStream};
use crate::schema::parameters_schema;

/// The erased tool the toolkit and the agent hold as `Arc<dyn DynTool>` (2.0.4 `ToolBase`).
///
/// Implement [`Tool`] instead unless the schema is only known at run time.
/// Inputs are the parsed, schema-validated argument object.
#[async_trait]
pub trait DynTool: Send + Sync + 'static {
    /// The name the model calls.
    fn name(&self) -> &str;
    /// The description shown to the model.
    fn description(&self) -> &str;
    /// The JSON schema of the arguments (`type: object`, pydantic-shaped, no titles).
    fn parameters(&self) -> &JsonValue;
    /// May run concurrently with other concurrency-safe calls of a batch.
    fn is_concurrency_safe(&self) -> bool;
    /// Never changes anything (explore mode allows it).
    fn is_read_only(&self) -> bool;
    /// Whether this invocation is read-only (defaults to [`DynTool::is_read_only`]).
    fn check_read_only(&self, input: &JsonMap) -> bool {
        let _ = input;
        self.is_read_only()
    }
    /// Runs outside the process: the agent hands the call to the client instead of calling it.
    fn is_external(&self) -> bool {
        false
    }
    /// The tool's own permission opinion (step 3 of the engine). Defaults to a non-safety ASK,
    /// which falls through to the allow rules.
    async fn check_permissions(&self, input: &JsonMap, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        let _ = (input, ctx);
        PermissionDecision::ask(format!("Permission required for {}", self.name()))
    }
    /// Whether a rule with non-empty `rule_content` matches this invocation. `list` is the list
    /// the rule sits in (`Deny`, `Ask` or `Allow`), so a tool can match conservatively: Bash
    /// matches deny/ask rules if *any* command segment matches, allow rules only if *every*
    /// segment does. Defaults to false (only name-level rules apply).
    fn match_rule(
        &self,
        rule_content: &str,
        list: PermissionBehavior,
        input: &JsonMap,
        ctx: &PermissionCheckContext<'_>,
    ) -> bool {
        let _ = (rule_content, list, input, ctx);
        false
    }
    /// The index of the first of `rule_contents` (non-empty contents of rules that sit in `list`,
    /// in order) that matches this invocation, as [`DynTool::match_rule`] decides each. The
    /// default asks `match_rule` rule by rule; a tool whose matching starts with costly work that
    /// does not depend on the rule (Bash reads the command) overrides it to do that work once.
    fn first_matching_rule(
        &self,
        rule_contents: &[&str],
        list: PermissionBehavior,
        input: &JsonMap,
        ctx: &PermissionCheckContext<'_>,
    ) -> Option<usize> {
        rule_contents.iter().position(|rule| self.match_rule(rule, list, input, ctx))
    }
    /// Rules to suggest when asking the user. Defaults to one allow rule for the whole tool.
    fn generate_suggestions(&self, input: &JsonMap, ctx: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        let _ = (input, ctx);
        vec![default_suggestion(self.name())]
    }
    /// Runs the tool. Failures are returned (as `Err` or `Err` stream items) and become error
    /// results for the model.
    async fn call(&self, input: JsonMap, ctx: ToolCallContext) -> Result<ToolStream, ToolError>;
}

impl fmt::Debug for dyn DynTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynTool").field("name", &self.name()).finish_non_exhaustive()
    }
}

/// `PermissionRule(tool_name=name, rule_content=None, behavior=allow, source="suggested")`.
pub fn default_suggestion(name: &str) -> PermissionRule {
    PermissionRule::new(name, None, PermissionBehavior::Allow, "suggested")
}

/// A tool with typed arguments whose schema comes from `schemars`.
///
/// Erase it with [`IntoDynTool::into_dyn_tool`] (or register it on a toolkit directly).
pub trait Tool: Send + Sync + 'static {
    /// The arguments; the parameter schema is derived from this type (its doc comment becomes
    /// the schema description, field doc comments the property descriptions).
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// The name the model calls.
    fn name(&self) -> &str;
    /// The description shown to the model.
    fn description(&self) -> String;
    /// The parameter schema: by default [`parameters_schema`] of [`Tool::Args`] (derived, never
    /// hand-written). Override only to post-process it, e.g. with [`crate::without_description`].
    fn parameters(&self) -> JsonValue {
        parameters_schema::<Self::Args>()
    }
    /// See [`DynTool::is_concurrency_safe`].
    fn is_concurrency_safe(&self) -> bool {
        false
    }
    /// See [`DynTool::is_read_only`].
    fn is_read_only(&self) -> bool {
        false
    }
    /// See [`DynTool::check_read_only`].
    fn check_read_only(&self, args: &Self::Args) -> bool {
        let _ = args;
        self.is_read_only()
    }
    /// See [`DynTool::check_permissions`].
    fn check_permissions(&self, args: &Self::Args, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        let _ = (args, ctx);
        PermissionDecision::ask(format!("Permission required for {}", self.name()))
    }
    /// See [`DynTool::match_rule`].
    fn match_rule(
        &self,
        rule_content: &str,
        list: PermissionBehavior,
        args: &Self::Args,
        ctx: &PermissionCheckContext<'_>,
    ) -> bool {
        let _ = (rule_content, list, args, ctx);
        false
    }
    /// See [`DynTool::first_matching_rule`]: by default [`Tool::match_rule`] rule by rule. An
    /// override must answer exactly as that default does.
    fn first_matching_rule(
        &self,
        rule_contents: &[&str],
        list: PermissionBehavior,
        args: &Self::Args,
        ctx: &PermissionCheckContext<'_>,
    ) -> Option<usize> {
        rule_contents.iter().position(|rule| self.match_rule(rule, list, args, ctx))
    }
    /// See [`DynTool::generate_suggestions`].
    fn generate_suggestions(&self, args: &Self::Args, ctx: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        let _ = (args, ctx);
        vec![default_suggestion(self.name())]
    }
    /// Runs the tool.
    fn call(
        &self,
        args: Self::Args,
        ctx: ToolCallContext,
    ) -> impl Future<Output = Result<ToolStream, ToolError>> + Send;
}

/// Deserializes validated input into typed arguments. An argument that is an integral float (`5.0`)
/// is read as the integer when the input does not parse as it is: `jsonschema` takes `5.0` for an
/// `integer` and pydantic reads it as 5 (2.0.4 runs such a call), where serde's integers refuse it.
pub(crate) fn parse_args<A: DeserializeOwned>(name: &str, input: &JsonMap) -> Result<A, ToolError> {
    serde_json::from_value(JsonValue::Object(input.clone())).or_else(|e| {
        integral_floats_as_integers(input)
            .and_then(|input| serde_json::from_value(JsonValue::Object(input)).ok())
            .ok_or_else(|| {
                ToolError::new(ToolErrorKind::InvalidInput, format!("Input validation failed for tool '{name}': {e}"))
            })
    })
}

/// `input` with each top-level integral float (`5.0`, `-3.0`) made the integer it is, or `None`
/// when it holds none (that fits an `i64` or a `u64`).
fn integral_floats_as_integers(input: &JsonMap) -> Option<JsonMap> {
    // 2^63 and 2^64, exactly representable.
    const I64_MIN: f64 = -9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    let integer = |value: &JsonValue| -> Option<JsonValue> {
        let float = value.as_f64().filter(|_| value.is_f64())?;
        if float.fract() != 0.0 || !float.is_finite() {
            return None;
        }
        // In range and integral: the casts are exact.
        let number = if (0.0..U64_END).contains(&float) {
            serde_json::Number::from(float as u64)
        } else if (I64_MIN..0.0).contains(&float) {
            serde_json::Number::from(float as i64)
        } else {
            return None;
        };
        Some(JsonValue::Number(number))
    };
    let mut changed = false;
    let out = input
        .iter()
        .map(|(key, value)| {
            let value = integer(value).inspect(|_| changed = true).unwrap_or_else(|| value.clone());
            (key.clone(), value)
        })
        .collect();
    changed.then_some(out)
}

/// Whether a rule in `list` matches input the tool cannot parse: a deny or ask rule does (what the
/// rule is about cannot be told, and 2.0.4 matches on the input as it is, so a deny rule must not
/// be dodged by an argument serde refuses), an allow rule does not.
fn fails_closed(list: PermissionBehavior) -> bool {
    matches!(list, PermissionBehavior::Deny | PermissionBehavior::Ask)
}

/// A [`Tool`] erased into a [`DynTool`] (its schema computed once).
pub struct TypedTool<T: Tool> {
    tool: T,
    description: String,
    parameters: JsonValue,
}

impl<T: Tool> TypedTool<T> {
    /// Wraps `tool`.
    pub fn new(tool: T) -> Self {
        let description = tool.description();
        Self { parameters: tool.parameters(), description, tool }
    }

    /// The typed tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

#[async_trait]
impl<T: Tool> DynTool for TypedTool<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &JsonValue {
        &self.parameters
    }
    fn is_concurrency_safe(&self) -> bool {
        self.tool.is_concurrency_safe()
    }
    fn is_read_only(&self) -> bool {
        self.tool.is_read_only()
    }
    fn check_read_only(&self, input: &JsonMap) -> bool {
        match parse_args::<T::Args>(self.tool.name(), input) {
            Ok(args) => self.tool.check_read_only(&args),
            Err(_) => false,
        }
    }
    async fn check_permissions(&self, input: &JsonMap, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        match parse_args::<T::Args>(self.tool.name(), input) {
            Ok(args) => self.tool.check_permissions(&args, ctx),
            Err(e) => PermissionDecision::ask(format!("Permission required for {}", self.tool.name()))
                .reason(e.message().to_owned()),
        }
    }
    fn match_rule(
        &self,
        rule_content: &str,
        list: PermissionBehavior,
        input: &JsonMap,
        ctx: &PermissionCheckContext<'_>,
    ) -> bool {
        match parse_args::<T::Args>(self.tool.name(), input) {
            Ok(args) => self.tool.match_rule(rule_content, list, &args, ctx),
            Err(_) => fails_closed(list),
        }
    }
    fn first_matching_rule(
        &self,
        rule_contents: &[&str],
        list: PermissionBehavior,
        input: &JsonMap,
        ctx: &PermissionCheckContext<'_>,
    ) -> Option<usize> {
        // The arguments are parsed once for all the rules.
        match parse_args::<T::Args>(self.tool.name(), input) {
            Ok(args) => self.tool.first_matching_rule(rule_contents, list, &args, ctx),
            Err(_) => (fails_closed(list) && !rule_contents.is_empty()).then_some(0),
        }
    }
    fn generate_suggestions(&self, input: &JsonMap, ctx: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        match parse_args::<T::Args>(self.tool.name(), input) {
            Ok(args) => self.tool.generate_suggestions(&args, ctx),
            Err(_) => Vec::new(),
        }
    }
    async fn call(&self, input: JsonMap, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        let args = parse_args::<T::Args>(self.tool.name(), &input)?;
        self.tool.call(args, ctx).await
    }
}

/// Anything the toolkit can hold: typed tools, function tools, or an `Arc<dyn DynTool>`.
pub trait IntoDynTool {
    /// Erases.
    fn into_dyn_tool(self) -> Arc<dyn DynTool>;
}

impl<T: Tool> IntoDynTool for T {
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        Arc::new(TypedTool::new(self))
    }
}

impl IntoDynTool for Arc<dyn DynTool> {
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        self
    }
}

impl IntoDynTool for FunctionTool {
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        Arc::new(self)
    }
}

type ErasedFn = dyn Fn(JsonMap, ToolCallContext) -> BoxFuture<'static, Result<ToolStream, ToolError>> + Send + Sync;

/// A tool made from an async closure over typed arguments (2.0.4 `FunctionTool`): concurrency
/// safe, not read-only, and every call asks unless a rule or the mode decides otherwise.
///
/// ```
/// use as_tools::{FunctionTool, ToolError};
///
/// /// Arguments of get_weather.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     /// The city name.
///     city: String,
/// }
///
/// let tool = FunctionTool::new("get_weather", "Get the current weather of a city.", |a: Weather, _ctx| async move {
///     Ok::<_, ToolError>(format!("Sunny in {}", a.city))
/// })
/// .read_only(true);
/// # let _ = tool;
/// ```
#[derive(Clone)]
pub struct FunctionTool {
    name: String,
    description: String,
    parameters: JsonValue,
    concurrency_safe: bool,
    read_only: bool,
    func: Arc<ErasedFn>,
}

impl fmt::Debug for FunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionTool").field("name", &self.name).finish_non_exhaustive()
    }
}

impl FunctionTool {
    /// A tool named `name` running `func` on arguments of type `A`.
    pub fn new<A, F, Fut, O>(name: impl Into<String>, description: impl Into<String>, func: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, ToolCallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: IntoToolStream,
    {
        let name = name.into();
        let tool_name = name.clone();
        let func = Arc::new(func);
        let erased: Arc<ErasedFn> = Arc::new(move |input: JsonMap, ctx: ToolCallContext| {
            let func = Arc::clone(&func);
            let tool_name = tool_name.clone();
            Box::pin(async move {
                let args = parse_args::<A>(&tool_name, &input)?;
                func(args, ctx).await.map(IntoToolStream::into_tool_stream)
            }) as BoxFuture<'static, _>
        });
        Self {
            name,
            description: description.into(),
            parameters: parameters_schema::<A>(),
            concurrency_safe: true,
            read_only: false,
            func: erased,
        }
    }

    /// Sets the read-only flag (default false).
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Sets the concurrency-safe flag (default true).
    pub fn concurrency_safe(mut self, yes: bool) -> Self {
        self.concurrency_safe = yes;
        self
    }
}

#[async_trait]
impl DynTool for FunctionTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &JsonValue {
        &self.parameters
    }
    fn is_concurrency_safe(&self) -> bool {
        self.concurrency_safe
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    async fn call(&self, input: JsonMap, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        (self.func)(input, ctx).await
    }
}

/// A tool executed **outside** the process (2.0.4 `is_external_tool`): the agent hands the call
/// to the client (`RequireExternalExecutionEvent`) and later receives its result. The schema is
/// derived from `A`; calling it in-process is an error result.
///
/// ```
/// /// Params of run_in_browser.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Script {
///     /// The script.
///     text: String,
/// }
/// let tool = as_tools::ExternalTool::new::<Script>("run_in_browser", "Run a script in the user's browser.").allow();
/// use as_tools::DynTool;
/// assert!(tool.is_external());
/// ```
#[derive(Clone, Debug)]
pub struct ExternalTool {
    name: String,
    description: String,
    parameters: JsonValue,
    concurrency_safe: bool,
    read_only: bool,
    allow: bool,
}

impl ExternalTool {
    /// An external tool with arguments `A`: not concurrency-safe, not read-only, asking.
    pub fn new<A: JsonSchema>(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: parameters_schema::<A>(),
            concurrency_safe: false,
            read_only: false,
            allow: false,
        }
    }

    /// Its own permission opinion becomes ALLOW (otherwise a non-safety ASK).
    pub fn allow(mut self) -> Self {
        self.allow = true;
        self
    }

    /// Sets the concurrency-safe flag.
    pub fn concurrency_safe(mut self, yes: bool) -> Self {
        self.concurrency_safe = yes;
        self
    }

    /// Sets the read-only flag.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
}

impl IntoDynTool for ExternalTool {
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        Arc::new(self)
    }
}

#[async_trait]
impl DynTool for ExternalTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &JsonValue {
        &self.parameters
    }
    fn is_concurrency_safe(&self) -> bool {
        self.concurrency_safe
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn is_external(&self) -> bool {
        true
    }
    async fn check_permissions(&self, _: &JsonMap, _: &PermissionCheckContext<'_>) -> PermissionDecision {
        if self.allow {
            PermissionDecision::allow(format!("Permission granted for {}", self.name))
        } else {
            PermissionDecision::ask(format!("Permission required for {}", self.name))
        }
    }
    async fn call(&self, _: JsonMap, _: ToolCallContext) -> Result<ToolStream, ToolError> {
        Err(ToolError::execution(format!(
            "The tool '{}' is executed outside the agent and cannot be called in-process.",
            self.name
        )))
    }
}
