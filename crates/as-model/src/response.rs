//! What a model call returns: chunks while streaming, then a [`ChatResponse`].

use as_message::{ContentBlock, JsonMap, ToolCallBlock, Usage, generate_id, now_iso};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Token usage of one model call (2.0.4's `ChatUsage`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens (thinking included).
    pub output_tokens: u64,
    /// Wall time of the call, in seconds.
    pub time: f64,
    /// Tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cache_input_tokens: u64,
    /// Provider extras.
    #[serde(default)]
    pub metadata: Option<Value>,
}

impl ChatUsage {
    /// Usage with these token counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self { input_tokens, output_tokens, ..Self::default() }
    }

    /// The message-level [`Usage`] (what `Msg.usage` stores).
    pub fn to_usage(&self) -> Usage {
        Usage {
            input_tokens: i64::try_from(self.input_tokens).unwrap_or(i64::MAX),
            output_tokens: i64::try_from(self.output_tokens).unwrap_or(i64::MAX),
        }
    }
}

/// Why the model stopped.
///
/// AgentScope's events only know `completed` and `interrupted` ([`FinishReason::wire`]); the provider's reason is
/// kept for callers that care (2.0.4 ignores it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural stop (`stop`).
    #[default]
    Stop,
    /// The model asked for tool calls (`tool_calls`, `function_call`).
    ToolCalls,
    /// The output hit `max_tokens` (`length`); the last block may be cut.
    Length,
    /// The provider filtered the output (`content_filter`).
    ContentFilter,
    /// The call was cancelled, failed mid-stream or its stream was dropped: the content is partial and no tool
    /// call in it is complete.
    Interrupted,
    /// Another provider reason, verbatim.
    Other(String),
}

impl FinishReason {
    /// Maps an OpenAI-style `finish_reason` string.
    pub fn from_provider(s: &str) -> Self {
        match s {
            "stop" | "end_turn" => Self::Stop,
            "tool_calls" | "function_call" | "tool_use" => Self::ToolCalls,
            "length" | "max_tokens" => Self::Length,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The AgentScope wire value (`ModelCallEndEvent.finished_reason`): `"interrupted"` or `"completed"`.
    pub fn wire(&self) -> &'static str {
        if self.is_interrupted() { "interrupted" } else { "completed" }
    }

    /// True for [`FinishReason::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::Interrupted)
    }

    /// True when the provider cut the output short ([`FinishReason::Length`],
    /// [`FinishReason::ContentFilter`]): the last block may be incomplete.
    pub fn is_truncated(&self) -> bool {
        matches!(self, Self::Length | Self::ContentFilter)
    }
}

/// One streamed delta (2.0.4's delta `ChatResponse` with `is_last=False`).
///
/// `content` holds **delta** blocks with stable ids: a text block carries the new text only, a tool-call block
/// carries its id, its name and the new fragment of its JSON arguments in `input`. Chunks that only carry usage or
/// a finish reason are absorbed by [`crate::ChatStream`] and never reach the caller.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ChatChunk {
    /// Delta blocks.
    pub content: Vec<ContentBlock>,
    /// Usage so far (replaces the previous one).
    pub usage: Option<ChatUsage>,
    /// The provider's finish reason, on the chunk that carries it.
    pub finish_reason: Option<FinishReason>,
    /// The provider's response id, when it has one.
    pub id: Option<String>,
}

impl ChatChunk {
    /// A chunk with these delta blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self { content, ..Self::default() }
    }

    /// Sets the usage.
    pub fn with_usage(mut self, usage: ChatUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the finish reason.
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = Some(reason);
        self
    }

    /// Sets the response id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// True when the chunk has no content blocks.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }
}

/// A whole (or, when interrupted, partial) model response.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The response id (the provider's when it has one).
    pub id: String,
    /// When the response object was created (`now_iso()`).
    pub created_at: String,
    /// Accumulated blocks: text, thinking, tool calls (raw JSON arguments in `input`), data.
    pub content: Vec<ContentBlock>,
    /// Usage, when the provider reported it.
    pub usage: Option<ChatUsage>,
    /// Why the model stopped; [`FinishReason::Interrupted`] for a cancelled or broken call.
    pub finish_reason: FinishReason,
    /// Provider extras.
    pub metadata: JsonMap,
}

impl Default for ChatResponse {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl ChatResponse {
    /// A completed response with these blocks and a fresh id.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self {
            id: generate_id(),
            created_at: now_iso(),
            content,
            usage: None,
            finish_reason: FinishReason::Stop,
            metadata: JsonMap::new(),
        }
    }

    /// An interrupted response holding `content` (2.0.4's `ChatResponse([], finished_reason=interrupted)` when
    /// empty).
    pub fn interrupted(content: Vec<ContentBlock>) -> Self {
        Self { finish_reason: FinishReason::Interrupted, ..Self::new(content) }
    }

    /// Sets the usage.
    pub fn with_usage(mut self, usage: ChatUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the finish reason.
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = reason;
        self
    }

    /// True when the call was interrupted: the content is partial.
    pub fn is_interrupted(&self) -> bool {
        self.finish_reason.is_interrupted()
    }

    /// Every tool-call block, complete or not.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(t) => Some(t),
            _ => None,
        })
    }

    /// The tool calls that may be executed: all of them for a completed response, **none** for an interrupted one
    /// (a half-streamed call is never presented as complete; BUG-1 of 2.0.4), and all but the
    /// [cut one](ChatResponse::truncated_tool_call) for a truncated one.
    pub fn executable_tool_calls(&self) -> Vec<&ToolCallBlock> {
        if self.is_interrupted() {
            return Vec::new();
        }
        let cut = self.truncated_tool_call().map(|c| c.id.as_str());
        self.tool_calls().filter(|c| Some(c.id.as_str()) != cut).collect()
    }

    /// The tool call whose arguments the provider cut off: the last block, when it is a tool call
    /// and the output was [truncated](FinishReason::is_truncated) (`max_tokens` reached while the
    /// model was writing the arguments). 2.0.4 runs it with whatever a repairing JSON parser makes
    /// of the fragment; it must not run.
    pub fn truncated_tool_call(&self) -> Option<&ToolCallBlock> {
        match self.content.last() {
            Some(ContentBlock::ToolCall(c)) if self.finish_reason.is_truncated() => Some(c),
            _ => None,
        }
    }

    /// The text blocks joined with `""`.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The thinking blocks joined with `""`.
    pub fn thinking(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Thinking(t) => Some(t.thinking.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Folds a delta into this response (2.0.4's `append_chat_response`): blocks are matched by type and id;
    /// text, thinking and tool-call input are concatenated, a tool call's empty name is filled in, data is
    /// replaced, and new blocks are appended in order of first appearance. Usage is replaced and the id follows
    /// the chunk's id.
    pub fn apply(&mut self, chunk: &ChatChunk) {
        for delta in &chunk.content {
            self.apply_block(delta);
        }
        if let Some(u) = &chunk.usage {
            self.usage = Some(u.clone());
        }
        if let Some(r) = &chunk.finish_reason {
            self.finish_reason = r.clone();
        }
        if let Some(id) = &chunk.id
            && &self.id != id
        {
            self.id.clone_from(id);
        }
    }

    fn apply_block(&mut self, delta: &ContentBlock) {
        let slot = self.content.iter_mut().rev().find(|b| b.block_type() == delta.block_type() && b.id() == delta.id());
        match (slot, delta) {
            (Some(ContentBlock::Text(acc)), ContentBlock::Text(d)) => acc.text.push_str(&d.text),
            (Some(ContentBlock::Thinking(acc)), ContentBlock::Thinking(d)) => {
                acc.thinking.push_str(&d.thinking);
                for (k, v) in &d.extra {
                    acc.extra.insert(k.clone(), v.clone());
                }
            }
            (Some(ContentBlock::ToolCall(acc)), ContentBlock::ToolCall(d)) => {
                acc.input.push_str(&d.input);
                if acc.name.is_empty() && !d.name.is_empty() {
                    acc.name.clone_from(&d.name);
                }
            }
            (Some(slot), d) => *slot = d.clone(),
            (None, d) => self.content.push(d.clone()),
        }
    }
}

/// A structured-output answer (2.0.4's `StructuredResponse`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StructuredResponse {
    /// The object the model produced (validated against the request's JSON Schema, as 2.0.4's
    /// `jsonschema.validate` does).
    pub content: JsonMap,
    /// The response id.
    pub id: String,
    /// Usage, when reported.
    pub usage: Option<ChatUsage>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
}

impl StructuredResponse {
    /// A structured response.
    pub fn new(content: JsonMap, id: String, usage: Option<ChatUsage>, finish_reason: FinishReason) -> Self {
        Self { content, id, usage, finish_reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use as_message::{TextBlock, ThinkingBlock};

    fn text(id: &str, t: &str) -> ContentBlock {
        ContentBlock::Text(TextBlock { text: t.into(), id: id.into() })
    }

    fn call(id: &str, name: &str, input: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCallBlock::new(id, name, input))
    }

    #[test]
    fn only_a_last_tool_call_of_a_truncated_response_is_cut() {
        let ids = |r: &ChatResponse| r.executable_tool_calls().iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        let calls = vec![call("a", "t", "{}"), call("b", "t", r#"{"x": "frag"#)];
        for (reason, cut) in [
            (FinishReason::Length, Some("b")),
            (FinishReason::ContentFilter, Some("b")),
            (FinishReason::ToolCalls, None),
            (FinishReason::Stop, None),
            (FinishReason::Other("eos".into()), None),
        ] {
            let r = ChatResponse { content: calls.clone(), finish_reason: reason.clone(), ..ChatResponse::default() };
            assert_eq!(r.truncated_tool_call().map(|c| c.id.as_str()), cut, "{reason:?}");
            assert_eq!(ids(&r), if cut.is_some() { vec!["a"] } else { vec!["a", "b"] }, "{reason:?}");
        }
        // Cut in a text block after the calls: every call is complete.
        let mut content = calls.clone();
        content.push(text("t1", "and then"));
        let r = ChatResponse { content, finish_reason: FinishReason::Length, ..ChatResponse::default() };
        assert!(r.truncated_tool_call().is_none());
        assert_eq!(ids(&r), ["a", "b"]);
        let r = ChatResponse { content: calls, finish_reason: FinishReason::Interrupted, ..ChatResponse::default() };
        assert!(ids(&r).is_empty());
    }

    #[test]
    fn apply_accumulates_by_type_and_id() {
        let mut r = ChatResponse::new(vec![]);
        r.apply(&ChatChunk::new(vec![ContentBlock::Thinking(ThinkingBlock {
            thinking: "Hm".into(),
            id: "t".into(),
            extra: JsonMap::new(),
        })]));
        r.apply(&ChatChunk::new(vec![text("x", "Hel"), call("c1", "get", "{\"ci")]));
        r.apply(&ChatChunk::new(vec![text("x", "lo"), call("c1", "", "ty\": 1}"), call("c2", "snap", "{}")]));
        r.apply(
            &ChatChunk::default()
                .with_usage(ChatUsage::new(3, 4))
                .with_finish_reason(FinishReason::ToolCalls)
                .with_id("resp"),
        );
        assert_eq!(r.text(), "Hello");
        assert_eq!(r.thinking(), "Hm");
        let calls: Vec<_> = r.tool_calls().map(|c| (c.id.as_str(), c.name.as_str(), c.input.as_str())).collect();
        assert_eq!(calls, vec![("c1", "get", "{\"city\": 1}"), ("c2", "snap", "{}")]);
        assert_eq!(r.usage, Some(ChatUsage::new(3, 4)));
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.id, "resp");
        assert_eq!(r.executable_tool_calls().len(), 2);
        r.finish_reason = FinishReason::Interrupted;
        assert!(r.executable_tool_calls().is_empty());
        assert_eq!(r.finish_reason.wire(), "interrupted");
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(FinishReason::from_provider("stop"), FinishReason::Stop);
        assert_eq!(FinishReason::from_provider("tool_calls"), FinishReason::ToolCalls);
        assert_eq!(FinishReason::from_provider("length"), FinishReason::Length);
        assert_eq!(FinishReason::from_provider("weird"), FinishReason::Other("weird".into()));
        assert_eq!(FinishReason::Length.wire(), "completed");
    }

    #[test]
    fn usage_converts() {
        assert_eq!(ChatUsage::new(5, 7).to_usage(), Usage { input_tokens: 5, output_tokens: 7 });
    }
}
