//! `AgentEvent`: the closed set of events a reply streams (and the three a client sends back),
//! serialized exactly like AgentScope 2.0.4's `agentscope.event` models.
//!
//! Every event writes `id`, `created_at`, `metadata`, `type`, then its own fields, in that order;
//! reading dispatches on `type` (the way `TypeAdapter(AgentEvent)` does).

use std::fmt;
use std::marker::PhantomData;

use as_message::{
    JsonMap, PermissionRule, Role, TextOrBlocks, ToolCallBlock, ToolResultBlock, ToolResultState, generate_id, now_iso,
};
use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The `type` tag of every event, as written on the wire (`"REPLY_START"`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    /// [`ReplyStartEvent`]
    ReplyStart,
    /// [`ReplyEndEvent`]
    ReplyEnd,
    /// [`ModelCallStartEvent`]
    ModelCallStart,
    /// [`ModelCallEndEvent`]
    ModelCallEnd,
    /// [`TextBlockStartEvent`]
    TextBlockStart,
    /// [`TextBlockDeltaEvent`]
    TextBlockDelta,
    /// [`TextBlockEndEvent`]
    TextBlockEnd,
    /// [`ThinkingBlockStartEvent`]
    ThinkingBlockStart,
    /// [`ThinkingBlockDeltaEvent`]
    ThinkingBlockDelta,
    /// [`ThinkingBlockEndEvent`]
    ThinkingBlockEnd,
    /// [`DataBlockStartEvent`]
    DataBlockStart,
    /// [`DataBlockDeltaEvent`]
    DataBlockDelta,
    /// [`DataBlockEndEvent`]
    DataBlockEnd,
    /// [`HintBlockEvent`]
    HintBlock,
    /// [`ToolCallStartEvent`]
    ToolCallStart,
    /// [`ToolCallDeltaEvent`]
    ToolCallDelta,
    /// [`ToolCallEndEvent`]
    ToolCallEnd,
    /// [`ToolResultStartEvent`]
    ToolResultStart,
    /// [`ToolResultTextDeltaEvent`]
    ToolResultTextDelta,
    /// [`ToolResultDataDeltaEvent`]
    ToolResultDataDelta,
    /// [`ToolResultEndEvent`]
    ToolResultEnd,
    /// [`ExceedMaxItersEvent`]
    ExceedMaxIters,
    /// [`RequireUserConfirmEvent`]
    RequireUserConfirm,
    /// [`UserConfirmResultEvent`]
    UserConfirmResult,
    /// [`RequireExternalExecutionEvent`]
    RequireExternalExecution,
    /// [`ExternalExecutionResultEvent`]
    ExternalExecutionResult,
    /// [`UserInterruptEvent`]
    UserInterrupt,
    /// [`CustomEvent`]
    Custom,
}

/// Why a reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFinishedReason {
    /// The model gave a final answer.
    Completed,
    /// Cancelled, or interrupted by a [`UserInterruptEvent`].
    Interrupted,
    /// `ReActConfig::max_iters` reasoning-acting rounds ran without a final answer.
    ExceedMaxIters,
}

/// Why a model call ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelFinishedReason {
    /// The response is complete.
    #[default]
    Completed,
    /// The call was cancelled; the response holds what had arrived.
    Interrupted,
}

/// Implemented by every event struct: its wire tag.
pub trait EventTag {
    /// The `type` value.
    const TYPE: EventType;
}

/// The `type` field of an event struct: a zero-sized marker that writes the struct's tag and,
/// when read, accepts only that tag (or its absence).
pub struct TypeTag<T>(PhantomData<fn() -> T>);

impl<T> TypeTag<T> {
    /// The marker.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for TypeTag<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for TypeTag<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TypeTag<T> {}

impl<T> PartialEq for TypeTag<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T: EventTag> fmt::Debug for TypeTag<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", T::TYPE)
    }
}

impl<T: EventTag> Serialize for TypeTag<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        T::TYPE.serialize(s)
    }
}

impl<'de, T: EventTag> Deserialize<'de> for TypeTag<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let tag = EventType::deserialize(d)?;
        if tag == T::TYPE {
            Ok(Self::new())
        } else {
            Err(D::Error::custom(format!("expected type {:?}, got {tag:?}", T::TYPE)))
        }
    }
}

impl<T: EventTag> JsonSchema for TypeTag<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("{:?}Tag", T::TYPE).into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let tag = serde_json::to_value(T::TYPE).unwrap_or(Value::Null);
        schemars::json_schema!({ "type": "string", "const": tag })
    }
}

fn serialize_tool_calls<S: Serializer>(calls: &[ToolCallBlock], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(calls.len()))?;
    for c in calls {
        seq.serialize_element(&TaggedToolCall(c))?;
    }
    seq.end()
}

fn serialize_tool_results<S: Serializer>(results: &[ToolResultBlock], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(results.len()))?;
    for r in results {
        seq.serialize_element(&TaggedToolResult(r))?;
    }
    seq.end()
}

/// Writes a tool call with its `"type":"tool_call"` tag first, as a standalone pydantic block does.
struct TaggedToolCall<'a>(&'a ToolCallBlock);

impl Serialize for TaggedToolCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let c = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("type", "tool_call")?;
        m.serialize_entry("id", &c.id)?;
        m.serialize_entry("name", &c.name)?;
        m.serialize_entry("input", &c.input)?;
        m.serialize_entry("state", &c.state)?;
        m.serialize_entry("suggested_rules", &c.suggested_rules)?;
        m.end()
    }
}

/// Writes a tool result with its `"type":"tool_result"` tag first.
struct TaggedToolResult<'a>(&'a ToolResultBlock);

impl Serialize for TaggedToolResult<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("type", "tool_result")?;
        m.serialize_entry("id", &r.id)?;
        m.serialize_entry("name", &r.name)?;
        m.serialize_entry("output", &r.output)?;
        m.serialize_entry("state", &r.state)?;
        m.serialize_entry("metadata", &r.metadata)?;
        m.end()
    }
}

fn default_role() -> Role {
    Role::Assistant
}

macro_rules! events {
    ($(
        $(#[$doc:meta])*
        $variant:ident => $name:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $(#[serde($($fattr:tt)*)])*
                $field:ident : $ty:ty
            ),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
            pub struct $name {
                /// Event id (a fresh id per event).
                #[serde(default = "generate_id")]
                #[schemars(transform = as_message::schema::generated_default)]
                pub id: String,
                /// Creation time (naive local ISO, like Python's `datetime.now().isoformat()`).
                #[serde(default = "now_iso")]
                #[schemars(transform = as_message::schema::generated_default)]
                pub created_at: String,
                /// Free-form metadata (tool metadata on `TOOL_RESULT_END`).
                #[serde(default)]
                pub metadata: JsonMap,
                /// The wire tag.
                #[serde(rename = "type", default)]
                pub r#type: TypeTag<$name>,
                $(
                    $(#[doc = $fdoc])*
                    $(#[serde($($fattr)*)])*
                    pub $field: $ty,
                )*
            }

            impl EventTag for $name {
                const TYPE: EventType = EventType::$variant;
            }

            impl $name {
                /// Builds the event with a fresh id, `created_at = now` and empty metadata.
                #[allow(clippy::too_many_arguments)]
                pub fn new($($field: impl Into<$ty>),*) -> Self {
                    Self {
                        id: generate_id(),
                        created_at: now_iso(),
                        metadata: JsonMap::new(),
                        r#type: TypeTag::new(),
                        $($field: $field.into(),)*
                    }
                }
            }

            impl From<$name> for AgentEvent {
                fn from(e: $name) -> Self {
                    AgentEvent::$variant(e)
                }
            }
        )*

        /// Every event of AgentScope 2.0.4, closed: the wire set is fixed by 2.0.4, so matches on
        /// it may be exhaustive.
        ///
        /// Serialized as the inner struct (base fields, `type`, own fields); read by `type`.
        #[derive(Clone, Debug, PartialEq, JsonSchema)]
        #[schemars(untagged)]
        pub enum AgentEvent {
            $(
                $(#[$doc])*
                $variant($name),
            )*
        }

        impl AgentEvent {
            /// The wire tag.
            pub fn event_type(&self) -> EventType {
                match self {
                    $(Self::$variant(_) => EventType::$variant,)*
                }
            }

            /// The event id.
            pub fn id(&self) -> &str {
                match self {
                    $(Self::$variant(e) => &e.id,)*
                }
            }

            /// The creation time.
            pub fn created_at(&self) -> &str {
                match self {
                    $(Self::$variant(e) => &e.created_at,)*
                }
            }

            /// The metadata.
            pub fn metadata(&self) -> &JsonMap {
                match self {
                    $(Self::$variant(e) => &e.metadata,)*
                }
            }
        }

        impl Serialize for AgentEvent {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Self::$variant(e) => e.serialize(s),)*
                }
            }
        }

        impl<'de> Deserialize<'de> for AgentEvent {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let value = Value::deserialize(d)?;
                let tag = match value.get("type") {
                    Some(Value::String(t)) => t.clone(),
                    Some(_) => return Err(D::Error::custom("event `type` must be a string")),
                    None => return Err(D::Error::missing_field("type")),
                };
                let kind: EventType = serde_json::from_value(Value::String(tag.clone()))
                    .map_err(|_| D::Error::custom(format!("unknown event type {tag:?}")))?;
                match kind {
                    $(EventType::$variant => as_message::from_value(value)
                        .map(Self::$variant)
                        .map_err(|e| D::Error::custom(e.to_string())),)*
                }
            }
        }
    };
}

events! {
    /// `REPLY_START`: a new reply began (not sent when a parked reply resumes).
    ReplyStart => ReplyStartEvent {
        /// The session.
        session_id: String,
        /// The new reply id (also the id of the reply's context message).
        reply_id: String,
        /// The agent's name.
        name: String,
        /// Always `assistant`.
        #[serde(default = "default_role")]
        role: Role,
    }
    /// `REPLY_END`: the reply is over.
    ReplyEnd => ReplyEndEvent {
        /// The session.
        session_id: String,
        /// The reply.
        reply_id: String,
        /// Why it ended.
        finished_reason: ReplyFinishedReason,
    }
    /// `MODEL_CALL_START`: a reasoning step calls the model.
    ModelCallStart => ModelCallStartEvent {
        /// The reply.
        reply_id: String,
        /// The model's name.
        model_name: String,
    }
    /// `MODEL_CALL_END`: the model call finished (tokens are 0 without usage).
    ModelCallEnd => ModelCallEndEvent {
        /// The reply.
        reply_id: String,
        /// Prompt tokens.
        #[serde(deserialize_with = "as_message::lax_int::deserialize")]
        input_tokens: i64,
        /// Completion tokens.
        #[serde(deserialize_with = "as_message::lax_int::deserialize")]
        output_tokens: i64,
        /// Completed, or interrupted by a cancellation.
        #[serde(default)]
        finished_reason: ModelFinishedReason,
    }
    /// `TEXT_BLOCK_START`.
    TextBlockStart => TextBlockStartEvent {
        /// The reply.
        reply_id: String,
        /// Block id (generated by the agent, not the model's).
        block_id: String,
    }
    /// `TEXT_BLOCK_DELTA`.
    TextBlockDelta => TextBlockDeltaEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
        /// Text to append.
        delta: String,
    }
    /// `TEXT_BLOCK_END`.
    TextBlockEnd => TextBlockEndEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
    }
    /// `THINKING_BLOCK_START`.
    ThinkingBlockStart => ThinkingBlockStartEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
    }
    /// `THINKING_BLOCK_DELTA`.
    ThinkingBlockDelta => ThinkingBlockDeltaEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
        /// Reasoning text to append.
        delta: String,
    }
    /// `THINKING_BLOCK_END`.
    ThinkingBlockEnd => ThinkingBlockEndEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
    }
    /// `DATA_BLOCK_START`: a base64 data block begins.
    DataBlockStart => DataBlockStartEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
        /// MIME type.
        media_type: String,
    }
    /// `DATA_BLOCK_DELTA`: more base64 data.
    DataBlockDelta => DataBlockDeltaEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
        /// Base64 data.
        data: String,
        /// MIME type.
        media_type: String,
    }
    /// `DATA_BLOCK_END`.
    DataBlockEnd => DataBlockEndEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
    }
    /// `HINT_BLOCK`: a hint (application layer only; the agent loop never emits it).
    HintBlock => HintBlockEvent {
        /// The reply.
        reply_id: String,
        /// Block id.
        block_id: String,
        /// Who sent it.
        #[serde(default)]
        source: Option<String>,
        /// The hint.
        hint: TextOrBlocks,
    }
    /// `TOOL_CALL_START`: the model began a tool call.
    ToolCallStart => ToolCallStartEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// The tool name.
        tool_call_name: String,
    }
    /// `TOOL_CALL_DELTA`: a fragment of the call's JSON arguments.
    ToolCallDelta => ToolCallDeltaEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// JSON fragment.
        delta: String,
    }
    /// `TOOL_CALL_END`.
    ToolCallEnd => ToolCallEndEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
    }
    /// `TOOL_RESULT_START`: a tool call's result begins.
    ToolResultStart => ToolResultStartEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// The tool name.
        tool_call_name: String,
    }
    /// `TOOL_RESULT_TEXT_DELTA`.
    ToolResultTextDelta => ToolResultTextDeltaEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// Text to append.
        delta: String,
    }
    /// `TOOL_RESULT_DATA_DELTA`: a data block of a tool result (base64 `data` or a `url`).
    ToolResultDataDelta => ToolResultDataDeltaEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// A fresh block id per event.
        block_id: String,
        /// MIME type.
        media_type: String,
        /// Base64 data.
        #[serde(default)]
        data: Option<String>,
        /// URL.
        #[serde(default)]
        url: Option<String>,
    }
    /// `TOOL_RESULT_END`: the result is complete (its metadata is the event's `metadata`).
    ToolResultEnd => ToolResultEndEvent {
        /// The reply.
        reply_id: String,
        /// The call id.
        tool_call_id: String,
        /// Outcome.
        state: ToolResultState,
    }
    /// `EXCEED_MAX_ITERS`: the loop bound was reached.
    ExceedMaxIters => ExceedMaxItersEvent {
        /// The reply.
        reply_id: String,
        /// The agent's name.
        name: String,
    }
    /// `REQUIRE_USER_CONFIRM`: the reply is parked until the user confirms the call (one per event).
    RequireUserConfirm => RequireUserConfirmEvent {
        /// The reply.
        reply_id: String,
        /// The call, in state `asking`, with its suggested rules.
        #[serde(serialize_with = "serialize_tool_calls")]
        tool_calls: Vec<ToolCallBlock>,
    }
    /// `USER_CONFIRM_RESULT` (client → agent): the user's decisions; must carry the parked reply id.
    UserConfirmResult => UserConfirmResultEvent {
        /// The parked reply.
        reply_id: String,
        /// One decision per answered call (a subset is allowed).
        confirm_results: Vec<ConfirmResult>,
    }
    /// `REQUIRE_EXTERNAL_EXECUTION`: the reply is parked until the client runs the call (one per event).
    RequireExternalExecution => RequireExternalExecutionEvent {
        /// The reply.
        reply_id: String,
        /// The call, in state `submitted`.
        #[serde(serialize_with = "serialize_tool_calls")]
        tool_calls: Vec<ToolCallBlock>,
    }
    /// `EXTERNAL_EXECUTION_RESULT` (client → agent): results of externally executed calls.
    ExternalExecutionResult => ExternalExecutionResultEvent {
        /// The parked reply.
        reply_id: String,
        /// The results (a subset is allowed).
        #[serde(serialize_with = "serialize_tool_results")]
        execution_results: Vec<ToolResultBlock>,
    }
    /// `USER_INTERRUPT` (client → agent): close a parked reply; a no-op when nothing is parked.
    UserInterrupt => UserInterruptEvent {
        /// The parked reply.
        reply_id: String,
    }
    /// `CUSTOM`: an application event (`state_updated`, ...).
    Custom => CustomEvent {
        /// The event name.
        name: String,
        /// Its payload.
        #[serde(default)]
        value: JsonMap,
    }
}

/// The user's decision on one `asking` tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfirmResult {
    /// Approved or not.
    pub confirmed: bool,
    /// The call (its id selects the parked call; its input may be edited, its name may not change).
    #[serde(serialize_with = "serialize_tool_call")]
    pub tool_call: ToolCallBlock,
    /// Rules to add to the permission context (e.g. "always allow").
    #[serde(default)]
    pub rules: Option<Vec<PermissionRule>>,
}

fn serialize_tool_call<S: Serializer>(call: &ToolCallBlock, s: S) -> Result<S::Ok, S::Error> {
    TaggedToolCall(call).serialize(s)
}

impl UserConfirmResultEvent {
    /// The result that counts for each call id: the last one listed (2.0.4 keys the results by id).
    pub fn effective_results(&self) -> std::collections::HashMap<&str, &ConfirmResult> {
        self.confirm_results.iter().map(|r| (r.tool_call.id.as_str(), r)).collect()
    }
}

impl ConfirmResult {
    /// An approval of `tool_call` as it is, with no rule.
    pub fn approve(tool_call: ToolCallBlock) -> Self {
        Self { confirmed: true, tool_call, rules: None }
    }

    /// A denial.
    pub fn deny(tool_call: ToolCallBlock) -> Self {
        Self { confirmed: false, tool_call, rules: None }
    }
}

impl AgentEvent {
    /// The reply this event belongs to (`None` for [`CustomEvent`]).
    pub fn reply_id(&self) -> Option<&str> {
        Some(match self {
            Self::ReplyStart(e) => &e.reply_id,
            Self::ReplyEnd(e) => &e.reply_id,
            Self::ModelCallStart(e) => &e.reply_id,
            Self::ModelCallEnd(e) => &e.reply_id,
            Self::TextBlockStart(e) => &e.reply_id,
            Self::TextBlockDelta(e) => &e.reply_id,
            Self::TextBlockEnd(e) => &e.reply_id,
            Self::ThinkingBlockStart(e) => &e.reply_id,
            Self::ThinkingBlockDelta(e) => &e.reply_id,
            Self::ThinkingBlockEnd(e) => &e.reply_id,
            Self::DataBlockStart(e) => &e.reply_id,
            Self::DataBlockDelta(e) => &e.reply_id,
            Self::DataBlockEnd(e) => &e.reply_id,
            Self::HintBlock(e) => &e.reply_id,
            Self::ToolCallStart(e) => &e.reply_id,
            Self::ToolCallDelta(e) => &e.reply_id,
            Self::ToolCallEnd(e) => &e.reply_id,
            Self::ToolResultStart(e) => &e.reply_id,
            Self::ToolResultTextDelta(e) => &e.reply_id,
            Self::ToolResultDataDelta(e) => &e.reply_id,
            Self::ToolResultEnd(e) => &e.reply_id,
            Self::ExceedMaxIters(e) => &e.reply_id,
            Self::RequireUserConfirm(e) => &e.reply_id,
            Self::UserConfirmResult(e) => &e.reply_id,
            Self::RequireExternalExecution(e) => &e.reply_id,
            Self::ExternalExecutionResult(e) => &e.reply_id,
            Self::UserInterrupt(e) => &e.reply_id,
            Self::Custom(_) => return None,
        })
    }

    /// Whether a client sends this event to the agent (confirm, external result, interrupt).
    pub fn is_incoming(&self) -> bool {
        matches!(self, Self::UserConfirmResult(_) | Self::ExternalExecutionResult(_) | Self::UserInterrupt(_))
    }
}
