//! Content blocks (`agentscope.message._block`).
//!
//! Blocks serialize with their `type` tag first, then their fields in declaration order.
//! Reading dispatches on `type`; a block without `type` is read as pydantic 2's smart union reads it:
//! against each kind in AgentScope's union order (text, thinking, hint, tool_call, tool_result, data),
//! the kind whose declared fields the object sets most (nested blocks' fields counted) winning, then
//! the most exact (no enum, no URL), then the earlier.

use schemars::JsonSchema;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer, StrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::id::generate_id;
use crate::json::{JsonMap, ValueSeed, error_at, nested, type_name};
use crate::permission::PermissionRule;
use crate::read::Numbers;

/// The `type` tag of a content block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlockType {
    /// [`TextBlock`]
    Text,
    /// [`ThinkingBlock`]
    Thinking,
    /// [`HintBlock`]
    Hint,
    /// [`ToolCallBlock`]
    ToolCall,
    /// [`ToolResultBlock`]
    ToolResult,
    /// [`DataBlock`]
    Data,
}

crate::str_enum!(BlockType {
    Text => "text",
    Thinking => "thinking",
    Hint => "hint",
    ToolCall => "tool_call",
    ToolResult => "tool_result",
    Data => "data",
});

impl BlockType {
    /// The wire tag (`"tool_call"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Thinking => "thinking",
            Self::Hint => "hint",
            Self::ToolCall => "tool_call",
            Self::ToolResult => "tool_result",
            Self::Data => "data",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "text" => Self::Text,
            "thinking" => Self::Thinking,
            "hint" => Self::Hint,
            "tool_call" => Self::ToolCall,
            "tool_result" => Self::ToolResult,
            "data" => Self::Data,
            _ => return None,
        })
    }
}

/// Plain text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "TextBlock")]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Block id.
    #[serde(default = "generate_id")]
    #[schemars(transform = crate::schema::generated_default)]
    pub id: String,
}

crate::map_only!(TextBlock, "a TextBlock object", Serialize);

impl TextBlock {
    /// A text block with a fresh id.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), id: generate_id() }
    }
}

/// Model reasoning. Unknown keys (e.g. Anthropic's `signature`) are kept, in order, after `id`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ThinkingBlock {
    /// The reasoning text.
    pub thinking: String,
    /// Block id.
    #[serde(default = "generate_id")]
    #[schemars(transform = crate::schema::generated_default)]
    pub id: String,
    /// Extra provider fields, kept verbatim.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl ThinkingBlock {
    /// A thinking block with a fresh id and no extras.
    pub fn new(thinking: impl Into<String>) -> Self {
        Self { thinking: thinking.into(), id: generate_id(), extra: JsonMap::new() }
    }
}

impl<'de> Deserialize<'de> for ThinkingBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // From the text: the extras are free-form (see `as_message::free_form`).
        let map = crate::json::object_from(d, Numbers::Raw)?;
        thinking_from_map(map)
    }
}

fn thinking_from_map<E: serde::de::Error>(mut map: JsonMap) -> Result<ThinkingBlock, E> {
    map.shift_remove("type");
    let thinking = match map.shift_remove("thinking") {
        Some(Value::String(s)) => s,
        Some(other) => return Err(error_at("thinking", format!("expected a string, got {}", type_name(&other)))),
        None => return Err(E::missing_field("thinking")),
    };
    let id = match map.shift_remove("id") {
        Some(Value::String(s)) => s,
        Some(other) => return Err(error_at("id", format!("expected a string, got {}", type_name(&other)))),
        None => generate_id(),
    };
    let mut extra = map;
    extra.values().try_for_each(crate::json::check_number_digits).map_err(|e| error_at("extra", e))?;
    extra.values_mut().for_each(crate::json::canonicalize_numbers);
    Ok(ThinkingBlock { thinking, id, extra })
}

/// Inline base64 data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "Base64Source")]
pub struct Base64Source {
    /// Base64 text (not validated, like 2.0.4).
    pub data: String,
    /// MIME type, free text.
    pub media_type: String,
}

crate::map_only!(Base64Source, "a Base64Source object", Serialize);

/// Data referenced by URL. The URL is normalised by WHATWG rules on construction and on read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "UrlSource")]
pub struct UrlSource {
    /// The normalised URL.
    #[serde(deserialize_with = "deserialize_url")]
    pub url: String,
    /// MIME type, free text.
    pub media_type: String,
}

crate::map_only!(UrlSource, "a UrlSource object", Serialize);

impl UrlSource {
    /// Builds a URL source, normalising the URL (`https://example.com` becomes `https://example.com/`).
    ///
    /// ```
    /// let s = as_message::UrlSource::new("HTTP://Example.COM:80/x", "text/html").unwrap();
    /// assert_eq!(s.url, "http://example.com/x");
    /// assert!(as_message::UrlSource::new("relative/path", "text/html").is_err());
    /// ```
    pub fn new(url: &str, media_type: impl Into<String>) -> crate::Result<Self> {
        let url = normalize_url(url)
            .map_err(|m| crate::MessageError::new(crate::MessageErrorKind::InvalidValue, "url", m))?;
        Ok(Self { url, media_type: media_type.into() })
    }
}

/// Normalises a URL as pydantic's `AnyUrl` does (WHATWG, via the `url` crate).
pub fn normalize_url(raw: &str) -> Result<String, String> {
    // The WHATWG trim: C0 controls and space only (DEL is percent-encoded inside, not trimmed).
    let trimmed = raw.trim_matches(|c: char| c <= ' ');
    url::Url::parse(trimmed).map(|u| u.as_str().to_owned()).map_err(|e| format!("invalid url {raw:?}: {e}"))
}

fn deserialize_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    normalize_url(&s).map_err(|m| D::Error::custom(format!("invalid value: {m}")))
}

/// Where a data block's bytes are.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(transform = crate::schema::optional_tag)]
pub enum Source {
    /// Inline base64.
    Base64(Base64Source),
    /// A URL.
    Url(UrlSource),
}

impl<'de> Deserialize<'de> for Source {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = crate::json::object_from(d, Numbers::Raw)?;
        let kind = match map.get("type") {
            Some(Value::String(t)) => Some(t.clone()),
            Some(other) => return Err(error_at("type", format!("expected a string, got {}", type_name(other)))),
            None => None,
        };
        match kind.as_deref() {
            Some("base64") => nested(Value::Object(map)).map(Source::Base64),
            Some("url") => nested(Value::Object(map)).map(Source::Url),
            Some(other) => {
                Err(error_at("type", format!("unknown source type {other:?}, expected \"base64\" or \"url\"")))
            }
            // pydantic's smart union: the member that validates best (see `smart_union`); when none
            // does, the error of the one the keys point to.
            None => {
                let base64 = nested::<_, D::Error>(Value::Object(map.clone())).map(Source::Base64);
                let url = nested::<_, D::Error>(Value::Object(map.clone())).map(Source::Url);
                let fallback_is_base64 = map.contains_key("data");
                let candidates = [base64, url].into_iter().filter_map(Result::ok).map(|s| (source_score(&s, &map), s));
                match smart_union(candidates) {
                    Some(source) => Ok(source),
                    None if fallback_is_base64 => nested(Value::Object(map)).map(Source::Base64),
                    None => nested(Value::Object(map)).map(Source::Url),
                }
            }
        }
    }
}

/// An image, audio, file or other data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "DataBlock")]
pub struct DataBlock {
    /// Block id (written before `source`).
    #[serde(default = "generate_id")]
    #[schemars(transform = crate::schema::generated_default)]
    pub id: String,
    /// The data.
    pub source: Source,
    /// Optional file name.
    #[serde(default)]
    pub name: Option<String>,
}

crate::map_only!(DataBlock, "a DataBlock object", Serialize);

impl DataBlock {
    /// A data block with a fresh id.
    pub fn new(source: Source, name: Option<String>) -> Self {
        Self { id: generate_id(), source, name }
    }
}

/// A text or data block: what hints, tool outputs and summaries may hold.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(transform = crate::schema::optional_tag)]
pub enum TextOrData {
    /// Text.
    Text(TextBlock),
    /// Data.
    Data(DataBlock),
}

impl<'de> Deserialize<'de> for TextOrData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor::<TextOrData>::new("a text or data block object"))
    }
}

impl<'de> Tagged<'de> for TextOrData {
    fn from_tag<A: MapAccess<'de>>(tag: &str, rest: A) -> Result<Self, A::Error> {
        // `rest` can only be a map, so the blocks' derived readers (`X::deserialize`, map or array) are called directly.
        let rest = MapAccessDeserializer::new(rest);
        match tag {
            "text" => TextBlock::deserialize(rest).map(Self::Text),
            "data" => DataBlock::deserialize(rest).map(Self::Data),
            other => Err(error_at(
                "type",
                format!("block type {other:?} is not allowed here, expected \"text\" or \"data\""),
            )),
        }
    }

    fn from_buffered<E: serde::de::Error>(map: JsonMap) -> Result<Self, E> {
        text_or_data_from_map(map)
    }
}

fn text_or_data_from_map<E: serde::de::Error>(map: JsonMap) -> Result<TextOrData, E> {
    match map.get("type") {
        Some(Value::String(t)) if t == "text" => nested(Value::Object(map)).map(TextOrData::Text),
        Some(Value::String(t)) if t == "data" => nested(Value::Object(map)).map(TextOrData::Data),
        Some(Value::String(t)) => {
            Err(error_at("type", format!("block type {t:?} is not allowed here, expected \"text\" or \"data\"")))
        }
        Some(other) => Err(error_at("type", format!("expected a string, got {}", type_name(other)))),
        // pydantic's smart union: the member that validates best (see `smart_union`); when none does,
        // the error of the one the keys point to.
        None => {
            let text = nested::<_, E>(Value::Object(map.clone())).map(TextOrData::Text);
            let data = nested::<_, E>(Value::Object(map.clone())).map(TextOrData::Data);
            let candidates = [text, data].into_iter().filter_map(Result::ok).map(|b| (text_or_data_score(&b, &map), b));
            match smart_union(candidates) {
                Some(block) => Ok(block),
                None if map.contains_key("text") => nested(Value::Object(map)).map(TextOrData::Text),
                None => nested(Value::Object(map)).map(TextOrData::Data),
            }
        }
    }
}

/// A string, or a list of text and data blocks (hint content, tool output, summary).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TextOrBlocks {
    /// A plain string.
    Text(String),
    /// A list of blocks.
    Blocks(Vec<TextOrData>),
}

impl Default for TextOrBlocks {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl From<&str> for TextOrBlocks {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for TextOrBlocks {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl TextOrBlocks {
    /// The text: the string itself, or the texts of the text blocks joined by `\n`.
    pub fn text(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Blocks(b) => b
                .iter()
                .filter_map(|b| match b {
                    TextOrData::Text(t) => Some(t.text.as_str()),
                    TextOrData::Data(_) => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// True for `""` and `[]`.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Text(s) => s.is_empty(),
            Self::Blocks(b) => b.is_empty(),
        }
    }
}

impl<'de> Deserialize<'de> for TextOrBlocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TextOrBlocks;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of text/data blocks")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TextOrBlocks, E> {
                Ok(TextOrBlocks::Text(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<TextOrBlocks, E> {
                Ok(TextOrBlocks::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextOrBlocks, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(b) = seq.next_element::<TextOrData>()? {
                    out.push(b);
                }
                Ok(TextOrBlocks::Blocks(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A system reminder or other hint injected into the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "HintBlock")]
pub struct HintBlock {
    /// The hint: a string or text/data blocks.
    pub hint: TextOrBlocks,
    /// Block id.
    #[serde(default = "generate_id")]
    #[schemars(transform = crate::schema::generated_default)]
    pub id: String,
    /// Who sent it (a name, `"system"`, or none).
    #[serde(default)]
    pub source: Option<String>,
}

crate::map_only!(HintBlock, "a HintBlock object", Serialize);

/// Lifecycle of a tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallState {
    /// Not yet checked.
    #[default]
    Pending,
    /// Waiting for the user's confirmation.
    Asking,
    /// Allowed to run.
    Allowed,
    /// Handed to an external executor.
    Submitted,
    /// Done (a result exists or it was refused).
    Finished,
}

crate::str_enum!(ToolCallState {
    Pending => "pending",
    Asking => "asking",
    Allowed => "allowed",
    Submitted => "submitted",
    Finished => "finished",
});

/// Outcome of a tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultState {
    /// Completed normally.
    Success,
    /// Failed; the output explains.
    Error,
    /// Cancelled or interrupted by the user.
    Interrupted,
    /// Refused by the permission engine or the user.
    Denied,
    /// Still streaming.
    #[default]
    Running,
}

crate::str_enum!(ToolResultState {
    Success => "success",
    Error => "error",
    Interrupted => "interrupted",
    Denied => "denied",
    Running => "running",
});

/// A tool call made by the model. `input` is the raw JSON text of the arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "ToolCallBlock")]
pub struct ToolCallBlock {
    /// Provider tool-call id (required).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The raw JSON text of the arguments (possibly incomplete while streaming).
    pub input: String,
    /// Lifecycle state.
    #[serde(default)]
    pub state: ToolCallState,
    /// Rules suggested to the user when asking for confirmation.
    #[serde(default)]
    pub suggested_rules: Vec<PermissionRule>,
}

crate::map_only!(ToolCallBlock, "a ToolCallBlock object", Serialize);

impl ToolCallBlock {
    /// A pending call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            input: input.into(),
            state: ToolCallState::Pending,
            suggested_rules: Vec::new(),
        }
    }
}

/// The result of a tool call; `id` equals the call's id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "ToolResultBlock")]
pub struct ToolResultBlock {
    /// The paired call's id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Output: a string or text/data blocks.
    pub output: TextOrBlocks,
    /// Outcome.
    #[serde(default)]
    pub state: ToolResultState,
    /// Free-form metadata.
    #[serde(default, deserialize_with = "crate::json::free_form::deserialize")]
    pub metadata: JsonMap,
}

crate::map_only!(ToolResultBlock, "a ToolResultBlock object", Serialize);

impl ToolResultBlock {
    /// A finished result with a text output.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        output: impl Into<TextOrBlocks>,
        state: ToolResultState,
    ) -> Self {
        Self { id: id.into(), name: name.into(), output: output.into(), state, metadata: JsonMap::new() }
    }
}

/// Any content block of a [`crate::Msg`].
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(transform = crate::schema::optional_tag)]
pub enum ContentBlock {
    /// Text.
    Text(TextBlock),
    /// Reasoning.
    Thinking(ThinkingBlock),
    /// Hint.
    Hint(HintBlock),
    /// Tool call.
    ToolCall(ToolCallBlock),
    /// Tool result.
    ToolResult(ToolResultBlock),
    /// Data.
    Data(DataBlock),
}

impl ContentBlock {
    /// The block's `type` tag.
    pub fn block_type(&self) -> BlockType {
        match self {
            Self::Text(_) => BlockType::Text,
            Self::Thinking(_) => BlockType::Thinking,
            Self::Hint(_) => BlockType::Hint,
            Self::ToolCall(_) => BlockType::ToolCall,
            Self::ToolResult(_) => BlockType::ToolResult,
            Self::Data(_) => BlockType::Data,
        }
    }

    /// The block's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Text(b) => &b.id,
            Self::Thinking(b) => &b.id,
            Self::Hint(b) => &b.id,
            Self::ToolCall(b) => &b.id,
            Self::ToolResult(b) => &b.id,
            Self::Data(b) => &b.id,
        }
    }

    /// A text block with a fresh id.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextBlock::new(text))
    }
}

impl From<TextOrData> for ContentBlock {
    fn from(b: TextOrData) -> Self {
        match b {
            TextOrData::Text(t) => Self::Text(t),
            TextOrData::Data(d) => Self::Data(d),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor::<ContentBlock>::new("a content block object"))
    }
}

impl<'de> Tagged<'de> for ContentBlock {
    fn from_tag<A: MapAccess<'de>>(tag: &str, rest: A) -> Result<Self, A::Error> {
        let Some(kind) = BlockType::parse(tag) else {
            return Err(error_at(
                "type",
                format!(
                    "unknown block type {tag:?}, expected one of text, thinking, hint, tool_call, tool_result, data"
                ),
            ));
        };
        // `rest` can only be a map, so the blocks' derived readers (`X::deserialize`, map or array) are called directly.
        let rest = MapAccessDeserializer::new(rest);
        Ok(match kind {
            BlockType::Text => Self::Text(TextBlock::deserialize(rest)?),
            BlockType::Thinking => Self::Thinking(ThinkingBlock::deserialize(rest)?),
            BlockType::Hint => Self::Hint(HintBlock::deserialize(rest)?),
            BlockType::ToolCall => Self::ToolCall(ToolCallBlock::deserialize(rest)?),
            BlockType::ToolResult => Self::ToolResult(ToolResultBlock::deserialize(rest)?),
            BlockType::Data => Self::Data(DataBlock::deserialize(rest)?),
        })
    }

    fn from_buffered<E: serde::de::Error>(map: JsonMap) -> Result<Self, E> {
        content_block_from_map(map)
    }
}

/// A block type read by [`TaggedVisitor`].
trait Tagged<'de>: Sized {
    /// Reads the block from the keys after a leading `"type": tag`.
    fn from_tag<A: MapAccess<'de>>(tag: &str, rest: A) -> Result<Self, A::Error>;
    /// Reads the block from all its keys (when `type` is missing or not first).
    fn from_buffered<E: serde::de::Error>(map: JsonMap) -> Result<Self, E>;
}

/// Reads a tagged block without buffering when `type` is the first key (what every writer does):
/// the tag picks the block type and the rest of the object streams into it. Otherwise the object is
/// buffered and dispatched like pydantic's union.
struct TaggedVisitor<T>(std::marker::PhantomData<T>, &'static str);

impl<T> TaggedVisitor<T> {
    fn new(expecting: &'static str) -> Self {
        Self(std::marker::PhantomData, expecting)
    }
}

/// The first key of a block: `type` (no allocation) or anything else.
enum FirstKey {
    Type,
    Other(String),
}

impl<'de> Deserialize<'de> for FirstKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FirstKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FirstKey, E> {
                Ok(if v == "type" { FirstKey::Type } else { FirstKey::Other(v.to_owned()) })
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<FirstKey, E> {
                Ok(if v == "type" { FirstKey::Type } else { FirstKey::Other(v) })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de, T: Tagged<'de>> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.1)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        // Values are buffered from their text (`ValueSeed`): serde_json's `Value` reader would take an
        // object with one of its private marker keys (in a tool result's metadata) for a number.
        let first = match map.next_key::<FirstKey>()? {
            None => return T::from_buffered(JsonMap::new()),
            Some(FirstKey::Type) => match map.next_value_seed(ValueSeed(Numbers::Raw))? {
                Value::String(tag) => return T::from_tag(&tag, AfterTag(map)),
                other => {
                    let mut buf = JsonMap::new();
                    buf.insert("type".to_owned(), other);
                    buf
                }
            },
            Some(FirstKey::Other(k)) => {
                let mut buf = JsonMap::new();
                let v = map.next_value_seed(ValueSeed(Numbers::Raw))?;
                buf.insert(k, v);
                buf
            }
        };
        let mut buf = first;
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value_seed(ValueSeed(Numbers::Raw))?;
            buf.insert(k, v);
        }
        T::from_buffered(buf)
    }
}

/// The keys after a leading `"type": tag`, refusing a second `type`. pydantic reads the last one, which
/// may name another block type, so this read fails and the whole-document read, which reads repeated
/// keys as pydantic does (see `as_message::from_json`), decides.
struct AfterTag<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for AfterTag<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(NotType(seed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A key that is not `type`, handed to the key reader `K`.
struct NotType<K>(K);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for NotType<K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for NotType<K> {
    type Value = K::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<K::Value, E> {
        not_type(v)?;
        self.0.deserialize(BorrowedStrDeserializer::new(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<K::Value, E> {
        not_type(v)?;
        self.0.deserialize(StrDeserializer::new(v))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<K::Value, E> {
        not_type(&v)?;
        self.0.deserialize(StringDeserializer::new(v))
    }
}

fn not_type<E: serde::de::Error>(key: &str) -> Result<(), E> {
    if key == "type" { Err(E::duplicate_field("type")) } else { Ok(()) }
}

fn content_block_from_map<E: serde::de::Error>(map: JsonMap) -> Result<ContentBlock, E> {
    let kind = match map.get("type") {
        Some(Value::String(t)) => match BlockType::parse(t) {
            Some(k) => Some(k),
            None => {
                return Err(error_at(
                    "type",
                    format!(
                        "unknown block type {t:?}, expected one of text, thinking, hint, tool_call, tool_result, data"
                    ),
                ));
            }
        },
        Some(other) => return Err(error_at("type", format!("expected a string, got {}", type_name(other)))),
        None => None,
    };
    match kind {
        Some(k) => block_of_kind(k, map),
        None => {
            // pydantic's smart union over the members in AgentScope's order (see `smart_union`).
            let order = [
                BlockType::Text,
                BlockType::Thinking,
                BlockType::Hint,
                BlockType::ToolCall,
                BlockType::ToolResult,
                BlockType::Data,
            ];
            let candidates = order
                .into_iter()
                .filter_map(|k| block_of_kind::<E>(k, map.clone()).ok())
                .map(|b| (block_score(&b, &map), b));
            smart_union(candidates).ok_or_else(|| {
                E::custom(
                    "the object matches no content block type (text, thinking, hint, tool_call, tool_result, data)",
                )
            })
        }
    }
}

/// How well a union member matched an object, as pydantic 2's smart union ranks the members that
/// validate (pydantic-core's `validate_smart`): by how many declared fields the input set (the
/// fields of nested models counted too, extra keys not), then by exactness; the earlier member
/// wins a tie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Score {
    fields: usize,
    exactness: Exactness,
}

/// How exactly the input matched (pydantic-core's `Exactness`): an enum read from a string is
/// `Strict`, a URL (normalised) is `Lax`, everything else in a block `Exact`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Exactness {
    Lax,
    Strict,
    Exact,
}

impl Score {
    /// The input's keys among `declared`, all exact.
    fn declared(input: Option<&JsonMap>, declared: &[&str]) -> Self {
        let fields = input.map_or(0, |m| declared.iter().filter(|k| m.contains_key(**k)).count());
        Self { fields, exactness: Exactness::Exact }
    }

    fn floor(&mut self, exactness: Exactness) {
        self.exactness = self.exactness.min(exactness);
    }

    /// Adds a nested model's fields and floors to its exactness.
    fn add(&mut self, nested: Score) {
        self.fields += nested.fields;
        self.floor(nested.exactness);
    }
}

/// The best of the members that validated, given in union order: the most fields set, then the
/// most exact, the earlier on a tie.
fn smart_union<T>(candidates: impl Iterator<Item = (Score, T)>) -> Option<T> {
    let mut best: Option<(Score, T)> = None;
    for (score, value) in candidates {
        let better = best.as_ref().is_none_or(|(b, _)| {
            if b.fields == score.fields { b.exactness < score.exactness } else { b.fields < score.fields }
        });
        if better {
            best = Some((score, value));
        }
    }
    best.map(|(_, value)| value)
}

/// The score of a content block read from `input`.
fn block_score(block: &ContentBlock, input: &JsonMap) -> Score {
    let input = Some(input);
    match block {
        ContentBlock::Text(_) => Score::declared(input, &["type", "text", "id"]),
        ContentBlock::Thinking(_) => Score::declared(input, &["type", "thinking", "id"]),
        ContentBlock::Hint(h) => {
            let mut s = Score::declared(input, &["type", "hint", "id", "source"]);
            s.add(blocks_score(&h.hint, input.and_then(|m| m.get("hint"))));
            s
        }
        ContentBlock::ToolCall(c) => {
            let mut s = Score::declared(input, &["type", "id", "name", "input", "state", "suggested_rules"]);
            if input.is_some_and(|m| m.contains_key("state")) {
                s.floor(Exactness::Strict);
            }
            // A rule has four required fields, one of them an enum.
            for _ in &c.suggested_rules {
                s.add(Score { fields: 4, exactness: Exactness::Strict });
            }
            s
        }
        ContentBlock::ToolResult(r) => {
            let mut s = Score::declared(input, &["type", "id", "name", "output", "state", "metadata"]);
            if input.is_some_and(|m| m.contains_key("state")) {
                s.floor(Exactness::Strict);
            }
            s.add(blocks_score(&r.output, input.and_then(|m| m.get("output"))));
            s
        }
        ContentBlock::Data(d) => data_score(d, input),
    }
}

/// The nested blocks of a hint or a tool output (a string adds nothing).
fn blocks_score(value: &TextOrBlocks, input: Option<&Value>) -> Score {
    let mut s = Score { fields: 0, exactness: Exactness::Exact };
    if let (TextOrBlocks::Blocks(blocks), Some(Value::Array(items))) = (value, input) {
        for (block, item) in blocks.iter().zip(items) {
            if let Value::Object(item) = item {
                s.add(text_or_data_score(block, item));
            }
        }
    }
    s
}

fn text_or_data_score(block: &TextOrData, input: &JsonMap) -> Score {
    match block {
        TextOrData::Text(_) => Score::declared(Some(input), &["type", "text", "id"]),
        TextOrData::Data(d) => data_score(d, Some(input)),
    }
}

fn data_score(block: &DataBlock, input: Option<&JsonMap>) -> Score {
    let mut s = Score::declared(input, &["type", "id", "source", "name"]);
    if let Some(Value::Object(source)) = input.and_then(|m| m.get("source")) {
        s.add(source_score(&block.source, source));
    }
    s
}

fn source_score(source: &Source, input: &JsonMap) -> Score {
    match source {
        Source::Base64(_) => Score::declared(Some(input), &["type", "data", "media_type"]),
        Source::Url(_) => {
            let mut s = Score::declared(Some(input), &["type", "url", "media_type"]);
            s.floor(Exactness::Lax);
            s
        }
    }
}

fn block_of_kind<E: serde::de::Error>(k: BlockType, map: JsonMap) -> Result<ContentBlock, E> {
    Ok(match k {
        BlockType::Text => ContentBlock::Text(nested(Value::Object(map))?),
        BlockType::Thinking => ContentBlock::Thinking(thinking_from_map(map)?),
        BlockType::Hint => ContentBlock::Hint(nested(Value::Object(map))?),
        BlockType::ToolCall => ContentBlock::ToolCall(nested(Value::Object(map))?),
        BlockType::ToolResult => ContentBlock::ToolResult(nested(Value::Object(map))?),
        BlockType::Data => ContentBlock::Data(nested(Value::Object(map))?),
    })
}
