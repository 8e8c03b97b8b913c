//! `AgentState` (`agentscope.state._state`).

use as_message::{ContentBlock, JsonMap, Msg, PermissionContext, Role, TextOrBlocks, ToolCallState, generate_id};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::task::TaskContext;
use crate::tool_context::ToolContext;

/// Everything a stateless agent needs to resume a session.
///
/// Field order, defaults and JSON bytes are those of AgentScope 2.0.4's `AgentState`.
///
/// ```
/// use as_state::AgentState;
/// let state = AgentState::default();
/// let json = as_message::to_json(&state);
/// assert_eq!(json.len(), 404);
/// let back: AgentState = as_message::from_json(&json).unwrap();
/// assert_eq!(back, state);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "AgentState")]
pub struct AgentState {
    /// The session this state belongs to.
    #[serde(default = "generate_id")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub session_id: String,
    /// Compressed earlier context, prepended to the model input (text, or text/data blocks).
    #[serde(default)]
    pub summary: TextOrBlocks,
    /// The uncompressed message history.
    #[serde(default)]
    pub context: Vec<Msg>,
    /// Id of the current reply and of its final message.
    #[serde(default = "generate_id")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub reply_id: String,
    /// The current ReAct iteration.
    #[serde(default, deserialize_with = "as_message::lax_int::deserialize")]
    pub cur_iter: i64,
    /// Permission mode and rules accepted by the user.
    #[serde(default)]
    pub permission_context: PermissionContext,
    /// Read-file cache and activated tool groups.
    #[serde(default)]
    pub tool_context: ToolContext,
    /// Plan-mode tasks.
    #[serde(default)]
    pub tasks_context: TaskContext,
    /// Middleware data kept across replies (`null` is rejected).
    #[serde(default, deserialize_with = "as_message::free_form::deserialize")]
    pub middle_context: JsonMap,
}

as_message::map_only!(AgentState, "an AgentState object", FastSerialize);

impl as_message::WriteJson for AgentState {
    fn write_json(&self, out: &mut String) {
        self.write_json_with_session_id(out, &self.session_id);
    }
}

impl AgentState {
    /// Appends the canonical JSON of this state with `session_id` written in place of
    /// `self.session_id` (how a stored record keeps one session id without cloning the state).
    ///
    /// ```
    /// use as_message::WriteJson;
    /// let state = as_state::AgentState::for_session("a");
    /// let (mut as_b, mut plain) = (String::new(), String::new());
    /// state.write_json_with_session_id(&mut as_b, "b");
    /// state.write_json(&mut plain);
    /// assert_eq!(as_b, plain.replacen(r#""session_id":"a""#, r#""session_id":"b""#, 1));
    /// ```
    pub fn write_json_with_session_id(&self, out: &mut String, session_id: &str) {
        use as_message::{WriteJson, write_json_int, write_json_map, write_json_str, write_json_value};
        out.push_str("{\"session_id\":");
        write_json_str(out, session_id);
        out.push_str(",\"summary\":");
        self.summary.write_json(out);
        out.push_str(",\"context\":");
        self.context.write_json(out);
        out.push_str(",\"reply_id\":");
        write_json_str(out, &self.reply_id);
        out.push_str(",\"cur_iter\":");
        write_json_int(out, self.cur_iter);
        out.push_str(",\"permission_context\":");
        write_json_value(out, &self.permission_context);
        out.push_str(",\"tool_context\":");
        write_json_value(out, &self.tool_context);
        out.push_str(",\"tasks_context\":");
        write_json_value(out, &self.tasks_context);
        out.push_str(",\"middle_context\":");
        write_json_map(out, &self.middle_context);
        out.push('}');
    }
}

impl Default for AgentState {
    fn default() -> Self {
        Self::for_session(generate_id())
    }
}

impl AgentState {
    /// A fresh state for `session_id` (ids are drawn in 2.0.4's order: no session id is drawn
    /// here, then the reply id).
    pub fn for_session(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            summary: TextOrBlocks::default(),
            context: Vec::new(),
            reply_id: generate_id(),
            cur_iter: 0,
            permission_context: PermissionContext::default(),
            tool_context: ToolContext::default(),
            tasks_context: TaskContext::default(),
            middle_context: JsonMap::new(),
        }
    }

    /// Appends `blocks` to the reply message.
    ///
    /// If the last message is the assistant's (same `name`) with `id == reply_id`, the blocks are
    /// appended to it in place; otherwise a new assistant message with `id = reply_id` is pushed.
    /// (As in 2.0.4, a different `name` creates a second message with the same id.)
    pub fn append_context(&mut self, name: &str, blocks: Vec<ContentBlock>) {
        if let Some(last) = self.context.last_mut()
            && last.role == Role::Assistant
            && last.name == name
            && last.id == self.reply_id
        {
            last.content.extend(blocks);
            return;
        }
        self.context.push(Msg::with_id(self.reply_id.clone(), name, Role::Assistant, blocks));
    }

    /// Whether the last message (the assistant `name`'s) has a tool call waiting for the user
    /// (`asking`) or for an external result (`submitted` with no result in that message).
    pub fn has_awaiting_tool_calls(&self, name: &str) -> bool {
        let Some(last) = self.context.last() else { return false };
        if last.role != Role::Assistant || last.name != name {
            return false;
        }
        let result_ids: Vec<&str> = last.tool_result_ids().collect();
        last.content.iter().any(|b| match b {
            ContentBlock::ToolCall(c) => {
                c.state == ToolCallState::Asking
                    || (c.state == ToolCallState::Submitted && !result_ids.contains(&c.id.as_str()))
            }
            _ => false,
        })
    }
}
