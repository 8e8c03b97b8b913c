//! What a model call is asked: messages, tool schemas, tool choice, cancellation.

use as_message::{JsonMap, Msg};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{ModelError, ModelErrorKind, Result};

/// A tool the model may call: a name, a description and the JSON Schema of its parameters.
///
/// ```
/// use as_model::ToolSchema;
/// let t = ToolSchema::new("get_weather", "Get the weather.", serde_json::json!({
///     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]
/// }));
/// assert_eq!(t.to_function_value()["function"]["name"], "get_weather");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool name.
    pub name: String,
    /// What the tool does (shown to the model).
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
}

impl ToolSchema {
    /// A schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self { name: name.into(), description: description.into(), parameters }
    }

    /// The OpenAI function-tool form, as 2.0.4's `Toolkit.get_tool_schemas()` returns it:
    /// `{"type":"function","function":{"name","description","parameters"}}`.
    pub fn to_function_value(&self) -> Value {
        let mut function = JsonMap::new();
        function.insert("name".into(), Value::String(self.name.clone()));
        function.insert("description".into(), Value::String(self.description.clone()));
        function.insert("parameters".into(), self.parameters.clone());
        let mut outer = JsonMap::new();
        outer.insert("type".into(), Value::String("function".into()));
        outer.insert("function".into(), Value::Object(function));
        Value::Object(outer)
    }

    /// Reads the OpenAI function-tool form (`{"type":"function","function":{...}}`) or the bare
    /// `{"name","description","parameters"}` form.
    pub fn from_function_value(v: &Value) -> Result<Self> {
        let f = v.get("function").unwrap_or(v);
        let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
            ModelError::new(ModelErrorKind::InvalidRequest, "as-model", "tool schema without a string `name`")
        })?;
        let description = f.get("description").and_then(Value::as_str).unwrap_or_default();
        let parameters = f.get("parameters").cloned().unwrap_or_else(|| Value::Object(JsonMap::new()));
        Ok(Self::new(name, description, parameters))
    }
}

/// How the model may use the tools: 2.0.4's `ToolChoice.mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// 2.0.4's `ToolChoice{mode, tools}`: `tools` (when set) filters the schemas that are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolChoice {
    /// The mode.
    pub mode: ToolChoiceMode,
    /// Only these tools are sent (`None`: all).
    pub tools: Option<Vec<String>>,
}

impl ToolChoice {
    /// `auto`.
    pub fn auto() -> Self {
        Self { mode: ToolChoiceMode::Auto, tools: None }
    }

    /// `none`.
    pub fn none() -> Self {
        Self { mode: ToolChoiceMode::None, tools: None }
    }

    /// `required`.
    pub fn required() -> Self {
        Self { mode: ToolChoiceMode::Required, tools: None }
    }

    /// Forces the tool `name`.
    pub fn tool(name: impl Into<String>) -> Self {
        Self { mode: ToolChoiceMode::Tool(name.into()), tools: None }
    }

    /// Restricts the tools that are sent to `names`.
    pub fn with_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// 2.0.4's `_validate_tool_choice` plus the `tools` filter: checks every named tool exists in `schemas`
    /// and returns the schemas to send.
    pub fn apply<'a>(&self, schemas: &'a [ToolSchema]) -> Result<Vec<&'a ToolSchema>> {
        let known = |n: &str| schemas.iter().any(|s| s.name == n);
        if let ToolChoiceMode::Tool(name) = &self.mode
            && !known(name)
        {
            return Err(ModelError::new(
                ModelErrorKind::InvalidRequest,
                "as-model",
                format!("tool choice names the unknown tool {name:?}"),
            ));
        }
        match &self.tools {
            None => Ok(schemas.iter().collect()),
            Some(names) => {
                if let Some(missing) = names.iter().find(|n| !known(n)) {
                    return Err(ModelError::new(
                        ModelErrorKind::InvalidRequest,
                        "as-model",
                        format!("tool choice lists the unknown tool {missing:?}"),
                    ));
                }
                Ok(schemas.iter().filter(|s| names.contains(&s.name)).collect())
            }
        }
    }
}

/// One model call's input.
///
/// Build it with [`ChatRequest::new`] and the `with_*` methods (the struct is `#[non_exhaustive]` so fields can be
/// added without breaking callers).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The conversation, system message first (2.0.4 passes `[SystemMsg, summary?, *context]`).
    pub messages: Vec<Msg>,
    /// The tools offered.
    pub tools: Vec<ToolSchema>,
    /// How the tools may be used (`None`: the provider's default, i.e. auto).
    pub tool_choice: Option<ToolChoice>,
    /// Cancelling this token interrupts the call: before the stream starts the call yields an empty
    /// interrupted response; mid-stream the stream ends and its response is marked interrupted.
    pub cancel: CancellationToken,
}

impl ChatRequest {
    /// A request for `messages`, no tools, a fresh cancellation token.
    pub fn new(messages: Vec<Msg>) -> Self {
        Self { messages, ..Self::default() }
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<ToolSchema>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Uses `token` for cancellation.
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The tools to send after the tool choice's filter, validated (see [`ToolChoice::apply`]).
    pub fn effective_tools(&self) -> Result<Vec<&ToolSchema>> {
        match &self.tool_choice {
            Some(c) => c.apply(&self.tools),
            None => Ok(self.tools.iter().collect()),
        }
    }
}

/// A structured-output request (used by context compression): the messages and the JSON Schema the answer must
/// satisfy.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StructuredOutputRequest {
    /// The conversation.
    pub messages: Vec<Msg>,
    /// The JSON Schema of the wanted object.
    pub schema: Value,
    /// Cancellation, as in [`ChatRequest::cancel`].
    pub cancel: CancellationToken,
}

impl StructuredOutputRequest {
    /// A request.
    pub fn new(messages: Vec<Msg>, schema: Value) -> Self {
        Self { messages, schema, cancel: CancellationToken::new() }
    }

    /// Uses `token` for cancellation.
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
}
