//! `Msg` and `Usage` (`agentscope.message._base`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::block::{BlockType, ContentBlock, TextBlock};
use crate::id::{generate_id, now_iso};
use crate::json::JsonMap;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user: text and data blocks only.
    User,
    /// The agent: any block.
    Assistant,
    /// The system prompt: text blocks only.
    System,
}

crate::str_enum!(Role { User => "user", Assistant => "assistant", System => "system" });

impl Role {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
        }
    }
}

/// Token usage of a model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "Usage")]
pub struct Usage {
    /// Prompt tokens.
    #[serde(deserialize_with = "crate::json::lax_int::deserialize")]
    pub input_tokens: i64,
    /// Completion tokens.
    #[serde(deserialize_with = "crate::json::lax_int::deserialize")]
    pub output_tokens: i64,
}

// Small and read once per model reply: inlined, it reads as fast as the plain derive did.
crate::map_only!(
    #[inline(always)]
    Usage,
    "a Usage object",
    Serialize
);

/// A message: who, what (content blocks), and when.
///
/// ```
/// use as_message::{Msg, Role};
/// let m = Msg::user("alice", "hello");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.get_text_content("\n").as_deref(), Some("hello"));
/// let back: Msg = as_message::from_json(&as_message::to_json(&m)).unwrap();
/// assert_eq!(back, m);
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(try_from = "MsgWire")]
pub struct Msg {
    /// Sender name.
    pub name: String,
    /// Content blocks.
    pub content: Vec<ContentBlock>,
    /// Role.
    pub role: Role,
    /// Message id.
    pub id: String,
    /// Free-form metadata.
    pub metadata: JsonMap,
    /// Creation time, a naive local ISO string (never parsed).
    pub created_at: String,
    /// Completion time, if finished.
    pub finished_at: Option<String>,
    /// Token usage of the model calls behind it.
    pub usage: Option<Usage>,
}

/// The derived write side of [`Msg`] (its `Serialize` is hand-written, see [`crate::WriteJson`]).
#[derive(Serialize)]
#[serde(rename = "Msg")]
struct MsgOut<'a> {
    name: &'a str,
    content: &'a [ContentBlock],
    role: Role,
    id: &'a str,
    metadata: &'a JsonMap,
    created_at: &'a str,
    finished_at: &'a Option<String>,
    usage: &'a Option<Usage>,
}

impl crate::DerivedSerialize for Msg {
    fn derived_serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        MsgOut {
            name: &self.name,
            content: &self.content,
            role: self.role,
            id: &self.id,
            metadata: &self.metadata,
            created_at: &self.created_at,
            finished_at: &self.finished_at,
            usage: &self.usage,
        }
        .serialize(s)
    }
}

impl Serialize for Msg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::serialize_fast(self, s)
    }
}

/// The wire form of [`Msg`] (read side: defaults filled, then role rules checked).
#[derive(Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "Msg")]
struct MsgWire {
    name: String,
    content: Vec<ContentBlock>,
    role: Role,
    #[serde(default = "generate_id")]
    #[schemars(transform = crate::schema::generated_default)]
    id: String,
    #[serde(default, deserialize_with = "crate::json::free_form::deserialize")]
    metadata: JsonMap,
    #[serde(default = "now_iso")]
    #[schemars(transform = crate::schema::generated_default)]
    created_at: String,
    #[serde(default)]
    finished_at: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

crate::map_only!(MsgWire, "a Msg object");

impl TryFrom<MsgWire> for Msg {
    type Error = String;

    fn try_from(w: MsgWire) -> Result<Self, Self::Error> {
        let msg = Msg {
            name: w.name,
            content: w.content,
            role: w.role,
            id: w.id,
            metadata: w.metadata,
            created_at: w.created_at,
            finished_at: w.finished_at,
            usage: w.usage,
        };
        msg.check_role().map_err(|e| format!("invalid value: {e}"))?;
        Ok(msg)
    }
}

impl Msg {
    /// Builds a message with a fresh id, `created_at = now` and no usage.
    /// Does not check the role rules (see [`Msg::check_role`]).
    pub fn new(name: impl Into<String>, role: Role, content: Vec<ContentBlock>) -> Self {
        Self::with_id(generate_id(), name, role, content)
    }

    /// [`Msg::new`] with a given id: no id is drawn from the id factory (which a deterministic
    /// factory, as in tests against Python's seeded ids, would notice).
    pub fn with_id(id: impl Into<String>, name: impl Into<String>, role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            name: name.into(),
            content,
            role,
            id: id.into(),
            metadata: JsonMap::new(),
            created_at: now_iso(),
            finished_at: None,
            usage: None,
        }
    }

    /// `UserMsg(name, text)`: one text block, `finished_at = created_at`.
    pub fn user(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::user_blocks(name, vec![ContentBlock::Text(TextBlock::new(text))])
    }

    /// A user message with the given blocks (text and data only are valid), `finished_at = created_at`.
    pub fn user_blocks(name: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        let mut m = Self::new(name, Role::User, content);
        m.finished_at = Some(m.created_at.clone());
        m
    }

    /// `AssistantMsg(name, text)`: one text block, `finished_at = None`.
    pub fn assistant(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(name, Role::Assistant, vec![ContentBlock::Text(TextBlock::new(text))])
    }

    /// `SystemMsg(name, text)`: one text block, `finished_at = created_at`.
    pub fn system(name: impl Into<String>, text: impl Into<String>) -> Self {
        let mut m = Self::new(name, Role::System, vec![ContentBlock::Text(TextBlock::new(text))]);
        m.finished_at = Some(m.created_at.clone());
        m
    }

    /// Checks the role rules: user messages hold only text and data blocks, system messages only text.
    pub fn check_role(&self) -> Result<(), &'static str> {
        match self.role {
            Role::User if self.content.iter().any(|b| !matches!(b, ContentBlock::Text(_) | ContentBlock::Data(_))) => {
                Err("User message can only contain text blocks or data blocks.")
            }
            Role::System if self.content.iter().any(|b| !matches!(b, ContentBlock::Text(_))) => {
                Err("System message can only contain text blocks.")
            }
            _ => Ok(()),
        }
    }

    /// The ids of the message's tool results, in block order (a call is answered in a message
    /// when one of them is its id).
    ///
    /// ```
    /// use as_message::{ContentBlock, Msg, Role, ToolResultBlock, ToolResultState};
    /// let m = Msg::new("friday", Role::Assistant, vec![ContentBlock::ToolResult(
    ///     ToolResultBlock::new("call_1", "Read", "ok", ToolResultState::Success),
    /// )]);
    /// assert_eq!(m.tool_result_ids().collect::<Vec<_>>(), ["call_1"]);
    /// ```
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r.id.as_str()),
            _ => None,
        })
    }

    /// The `.text` of the text blocks joined by `separator`; `None` when there is no text block.
    /// Thinking, hint and tool-result text is excluded.
    pub fn get_text_content(&self, separator: &str) -> Option<String> {
        let mut texts = self.content.iter().filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        });
        let first = texts.next()?;
        let mut out = first.to_owned();
        for t in texts {
            out.push_str(separator);
            out.push_str(t);
        }
        Some(out)
    }

    /// The blocks whose type is in `filter` (all blocks for `None`), in order.
    pub fn get_content_blocks(&self, filter: Option<&[BlockType]>) -> Vec<&ContentBlock> {
        match filter {
            None => self.content.iter().collect(),
            Some(types) => self.content.iter().filter(|b| types.contains(&b.block_type())).collect(),
        }
    }

    /// With `None`, whether there is any block; otherwise whether any block's type is in `filter`.
    pub fn has_content_blocks(&self, filter: Option<&[BlockType]>) -> bool {
        match filter {
            None => !self.content.is_empty(),
            Some(types) => self.content.iter().any(|b| types.contains(&b.block_type())),
        }
    }
}
