//! Chat completion responses and stream chunks: our own serde types (plain structs, no untagged enums, so they
//! deserialize under serde_json's `arbitrary_precision`) and the per-stream state that turns chunks into deltas.

use std::collections::HashSet;

use as_message::{ContentBlock, JsonMap, TextBlock, ThinkingBlock, ToolCallBlock, generate_id};
use as_model::{ChatChunk, ChatResponse, ChatUsage, FinishReason, ModelError, ModelErrorKind};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
struct WireChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    message: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireChunk {
    #[serde(default)]
    id: Option<String>,
    /// Absent or `null` (some servers send `"choices": null` with the usage chunk): none.
    #[serde(default, deserialize_with = "null_as_empty")]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

fn usage_of(u: &WireUsage) -> ChatUsage {
    let mut usage = ChatUsage::new(u.prompt_tokens.unwrap_or(0), u.completion_tokens.unwrap_or(0));
    usage.cache_input_tokens = u.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
    usage
}

/// Where reasoning is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningField {
    /// `reasoning_content`, else `reasoning` (OpenAI-compatible servers: vLLM, Ollama, DeepSeek, ...).
    ContentOrReasoning,
    /// Only `reasoning_content` (DashScope).
    ContentOnly,
}

/// The error message of an `{"error": ...}` object.
pub(crate) fn error_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            m.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| err.to_string())
        }
        other => other.to_string(),
    }
}

/// Per-stream state: one block id for text and one for thinking, tool calls keyed by `index`.
/// `Debug` shows the secret as `[REDACTED]`.
pub struct StreamState {
    provider: &'static str,
    reasoning: ReasoningField,
    text_id: String,
    thinking_id: String,
    /// This response's tool calls, in the order they opened.
    calls: Vec<Slot>,
    /// Tool-call ids in use (the request's history, then this response's calls).
    taken: HashSet<String>,
    saw_finish: bool,
    started: std::time::Instant,
    /// The API key, replaced by `[REDACTED]` in any server text copied into an error.
    secret: Option<String>,
}

impl std::fmt::Debug for StreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("provider", &self.provider)
            .field("reasoning", &self.reasoning)
            .field("text_id", &self.text_id)
            .field("thinking_id", &self.thinking_id)
            .field("calls", &self.calls)
            .field("taken", &self.taken)
            .field("saw_finish", &self.saw_finish)
            .field("started", &self.started)
            .field("secret", &self.secret.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// One tool call being streamed.
#[derive(Debug)]
struct Slot {
    /// The wire `index`, when the server sends one.
    index: Option<u64>,
    /// The id the server gave (empty if none yet).
    wire_id: String,
    /// The id we use: the wire id, or a fresh one when it was missing or already taken.
    id: String,
    name: String,
}

impl StreamState {
    /// A fresh state.
    pub fn new(provider: &'static str, reasoning: ReasoningField) -> Self {
        Self {
            provider,
            reasoning,
            text_id: generate_id(),
            thinking_id: generate_id(),
            calls: Vec::new(),
            taken: HashSet::new(),
            saw_finish: false,
            started: std::time::Instant::now(),
            secret: None,
        }
    }

    /// Measures `usage.time` from `started` (when the call began, before the request was sent and any
    /// retries), as the non-streamed path does.
    pub fn with_started(mut self, started: std::time::Instant) -> Self {
        self.started = started;
        self
    }

    /// Redacts `secret` from server text copied into errors (an error object inside a 200 answer).
    pub fn with_secret(mut self, secret: Option<&str>) -> Self {
        self.secret = secret.map(str::to_owned);
        self
    }

    /// Declares the tool-call ids the conversation already uses. A provider that repeats an id (some
    /// compatible servers number calls `call_0`, `call_1`, … in every response) would otherwise make
    /// a new call look answered by an old result; such an id is replaced by a fresh one, as is an id
    /// that two calls of one response share.
    pub fn with_taken_ids(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.taken.extend(ids);
        self
    }

    /// Whether a finish reason was received.
    pub fn saw_finish(&self) -> bool {
        self.saw_finish
    }

    fn invalid(&self, msg: String) -> ModelError {
        ModelError::new(
            ModelErrorKind::InvalidResponse,
            self.provider,
            crate::error::redact(&msg, self.secret.as_deref()),
        )
    }

    /// The slot a tool-call delta continues, or a new one. Deltas are matched by `index`; a delta that
    /// starts another call (a function name with an id other than the slot's) opens a new one (some
    /// servers give every parallel call index 0), while a changed id without a name continues the
    /// call (some servers send a fresh id on every delta). Without an index, a delta with an id opens
    /// a new call unless a call has that id (servers that repeat it on every delta), and one without
    /// continues the last call when it is first in its chunk (later ones in the same chunk are
    /// further calls). In a whole (non-streamed) message every entry is a call of its own.
    fn slot(&mut self, index: Option<u64>, wire_id: &str, named: bool, pos: usize, whole: bool) -> usize {
        let found = if whole {
            None
        } else {
            match index {
                Some(i) => self.calls.iter().rposition(|c| c.index == Some(i)).filter(|&k| {
                    let have = &self.calls[k].wire_id;
                    !named || wire_id.is_empty() || have.is_empty() || have == wire_id
                }),
                None if !wire_id.is_empty() => self.calls.iter().rposition(|c| c.wire_id == wire_id),
                None if pos == 0 => self.calls.len().checked_sub(1),
                None => None,
            }
        };
        if let Some(k) = found {
            if self.calls[k].wire_id.is_empty() && !wire_id.is_empty() {
                self.calls[k].wire_id = wire_id.to_owned();
            }
            return k;
        }
        let mut id = if wire_id.is_empty() { format!("call_{}", generate_id()) } else { wire_id.to_owned() };
        if self.taken.contains(&id) {
            tracing::debug!(id = %id, "the provider reused a tool-call id; replaced by a fresh one");
            id = format!("call_{}", generate_id());
        }
        self.taken.insert(id.clone());
        self.calls.push(Slot { index, wire_id: wire_id.to_owned(), id, name: String::new() });
        self.calls.len() - 1
    }

    /// Parses one SSE `data:` payload (not `[DONE]`) into a delta chunk.
    pub fn parse_event(&mut self, data: &str) -> Result<ChatChunk, ModelError> {
        let wire: WireChunk = serde_json::from_str(data)
            .map_err(|e| self.invalid(format!("malformed stream chunk: {e}: {}", truncate(data, 200))))?;
        if let Some(err) = &wire.error {
            let msg = error_message(err);
            let kind = crate::error::kind_of_error_object(err, &msg);
            let msg = crate::error::redact(&msg, self.secret.as_deref());
            return Err(ModelError::new(kind, self.provider, format!("error in stream: {msg}")));
        }
        let mut chunk = ChatChunk::default();
        chunk.id = wire.id;
        if let Some(u) = &wire.usage {
            let mut usage = usage_of(u);
            usage.time = self.started.elapsed().as_secs_f64();
            chunk.usage = Some(usage);
        }
        for choice in wire.choices {
            // Some servers send `""` (or `"null"`) on every chunk: that is no finish reason, and taking it
            // for one would make a stream cut short look complete.
            if let Some(r) =
                choice.finish_reason.as_deref().filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("null"))
            {
                self.saw_finish = true;
                chunk.finish_reason = Some(FinishReason::from_provider(r));
            }
            let whole = choice.delta.is_none() && choice.message.is_some();
            let Some(delta) = choice.delta.or(choice.message) else { continue };
            let reasoning = match self.reasoning {
                ReasoningField::ContentOrReasoning => delta.reasoning_content.or(delta.reasoning),
                ReasoningField::ContentOnly => delta.reasoning_content,
            };
            if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
                chunk.content.push(ContentBlock::Thinking(ThinkingBlock {
                    thinking: r,
                    id: self.thinking_id.clone(),
                    extra: JsonMap::new(),
                }));
            }
            if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                chunk.content.push(ContentBlock::Text(TextBlock { text: t, id: self.text_id.clone() }));
            }
            for (pos, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                let function = call.function.unwrap_or_default();
                let named = function.name.as_deref().is_some_and(|n| !n.is_empty());
                let k = self.slot(call.index, call.id.as_deref().unwrap_or_default(), named, pos, whole);
                let slot = &mut self.calls[k];
                if let Some(n) = function.name.filter(|n| !n.is_empty())
                    && slot.name.is_empty()
                {
                    slot.name = n;
                }
                let args = function.arguments.unwrap_or_default();
                chunk.content.push(ContentBlock::ToolCall(ToolCallBlock::new(
                    slot.id.clone(),
                    slot.name.clone(),
                    args,
                )));
            }
        }
        Ok(chunk)
    }

    /// Parses a whole non-streamed completion body.
    pub fn parse_response(&mut self, body: &str) -> Result<ChatResponse, ModelError> {
        let chunk = self.parse_event(body)?;
        if !self.saw_finish && chunk.content.is_empty() {
            return Err(self.invalid(format!("completion without choices: {}", truncate(body, 200))));
        }
        let mut r = ChatResponse::new(Vec::new());
        r.apply(&chunk);
        Ok(r)
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let st = StreamState::new("p", ReasoningField::ContentOnly).with_secret(Some("sk-live-123"));
        let shown = format!("{st:?} {st:#?}");
        assert!(!shown.contains("sk-live-123"), "{shown}");
        assert!(shown.contains("[REDACTED]"), "{shown}");
        let none = format!("{:?}", StreamState::new("p", ReasoningField::ContentOnly));
        assert!(none.contains("secret: None"), "{none}");
    }

    #[test]
    fn a_reused_tool_call_id_is_replaced() {
        let mut st = StreamState::new("t", ReasoningField::ContentOrReasoning).with_taken_ids(["call_0".to_owned()]);
        let c = st
            .parse_event(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0","function":{"name":"f","arguments":"{}"}},{"index":1,"id":"call_1","function":{"name":"g","arguments":"{}"}},{"index":2,"id":"call_1","function":{"name":"h","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#)
            .unwrap();
        let mut r = ChatResponse::new(vec![]);
        r.apply(&c);
        let ids: Vec<&str> = r.tool_calls().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        assert_ne!(ids[0], "call_0", "taken by the history");
        assert_eq!(ids[1], "call_1", "a fresh id is kept");
        assert_ne!(ids[2], "call_1", "shared with an earlier call of the same response");
        assert_ne!(ids[0], ids[2]);
    }

    #[test]
    fn a_changed_id_without_a_name_continues_the_call() {
        let mut st = StreamState::new("t", ReasoningField::ContentOrReasoning);
        let a = st
            .parse_event(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"A","function":{"name":"bash","arguments":"{\"command\":\"rm -rf bu"}}]}}]}"#)
            .unwrap();
        let b = st
            .parse_event(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"B","function":{"arguments":"ild\"}"}}]},"finish_reason":"tool_calls"}]}"#)
            .unwrap();
        let mut r = ChatResponse::new(vec![]);
        r.apply(&a);
        r.apply(&b);
        let calls: Vec<_> = r.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.input.clone())).collect();
        assert_eq!(calls, vec![("A".into(), "bash".into(), r#"{"command":"rm -rf build"}"#.into())]);
    }

    #[test]
    fn calls_of_a_whole_message_stay_apart() {
        let mut st = StreamState::new("t", ReasoningField::ContentOrReasoning);
        let r = st
            .parse_response(r#"{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"{}"}},{"id":"x","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#)
            .unwrap();
        let calls: Vec<_> = r.tool_calls().map(|c| (c.name.clone(), c.input.clone())).collect();
        assert_eq!(calls, vec![("f".into(), "{}".into()), ("g".into(), "{}".into())]);
        let ids: Vec<_> = r.tool_calls().map(|c| c.id.clone()).collect();
        assert_ne!(ids[0], ids[1]);
    }

    #[test]
    fn tool_call_deltas_by_index() {
        let mut st = StreamState::new("t", ReasoningField::ContentOrReasoning);
        let a = st
            .parse_event(r#"{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"ci"}},{"index":1,"id":"call_b","function":{"name":"g","arguments":""}}]}}]}"#)
            .unwrap();
        let b = st.parse_event(r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":"ty\":1}"}}]},"finish_reason":"tool_calls"}]}"#).unwrap();
        let mut r = ChatResponse::new(vec![]);
        r.apply(&a);
        r.apply(&b);
        let calls: Vec<_> = r.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.input.clone())).collect();
        assert_eq!(
            calls,
            vec![("call_a".into(), "f".into(), "{\"city\":1}".into()), ("call_b".into(), "g".into(), "{}".into())]
        );
        assert!(st.saw_finish());
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn reasoning_fields_and_usage() {
        let mut st = StreamState::new("t", ReasoningField::ContentOrReasoning);
        let c = st.parse_event(r#"{"choices":[{"delta":{"reasoning":"hm"}}],"usage":{"prompt_tokens":12345678901234567890,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}}"#).unwrap();
        assert!(matches!(&c.content[0], ContentBlock::Thinking(t) if t.thinking == "hm"));
        let u = c.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens, u.cache_input_tokens), (12345678901234567890, 2, 3));
        let mut ds = StreamState::new("t", ReasoningField::ContentOnly);
        assert!(ds.parse_event(r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#).unwrap().content.is_empty());
        // A usage chunk with `"choices": null` (some servers) is a usage chunk, not a broken stream.
        let c =
            ds.parse_event(r#"{"id":"x","choices":null,"usage":{"prompt_tokens":4,"completion_tokens":5}}"#).unwrap();
        assert_eq!(c.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((4, 5)));
    }

    #[test]
    fn errors() {
        let mut st = StreamState::new("t", ReasoningField::ContentOnly);
        assert_eq!(st.parse_event("{nope").unwrap_err().kind(), ModelErrorKind::InvalidResponse);
        let e = st.parse_event(r#"{"error":{"message":"boom","code":500}}"#).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::ServerError, "a 5xx code in the body is a server error");
        assert!(e.message().contains("boom"));
        // Without a status, the code or type of the error object says what it is.
        for (body, kind) in [
            (
                r#"{"error":{"message":"slow down","code":"rate_limit_exceeded"}}"#,
                ModelErrorKind::RateLimited { retry_after: None },
            ),
            (r#"{"error":{"message":"x","code":429}}"#, ModelErrorKind::RateLimited { retry_after: None }),
            (r#"{"error":{"message":"x","code":"429"}}"#, ModelErrorKind::RateLimited { retry_after: None }),
            (r#"{"error":{"message":"x","code":"503"}}"#, ModelErrorKind::ServerError),
            (r#"{"error":{"message":"busy","type":"server_error"}}"#, ModelErrorKind::ServerError),
            (
                r#"{"error":{"message":"x","code":"Throttling.User"}}"#,
                ModelErrorKind::RateLimited { retry_after: None },
            ),
            (
                r#"{"error":{"message":"pay","code":"insufficient_quota","type":"rate_limit"}}"#,
                ModelErrorKind::Provider,
            ),
            (r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#, ModelErrorKind::Provider),
            (r#"{"error":"plain"}"#, ModelErrorKind::Provider),
        ] {
            assert_eq!(st.parse_event(body).unwrap_err().kind(), kind, "{body}");
        }
    }
}
