//! [`ScriptedModel`]: an offline [`ChatModel`] replaying scripted, chunked responses (feature `test-utils`).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use as_message::{ContentBlock, DataBlock, JsonMap, Msg, TextBlock, ThinkingBlock, ToolCallBlock, generate_id};
use async_trait::async_trait;
use tokio::sync::Notify;

use crate::error::{ModelError, ModelErrorKind, Result};
use crate::model::ChatModel;
use crate::request::ChatRequest;
use crate::request::ToolSchema;
use crate::response::{ChatChunk, ChatResponse, ChatUsage, FinishReason};
use crate::stream::ChatStream;
use crate::tokens::HeuristicTokenCounter;

enum Step {
    Chunk(ChatChunk),
    Pause,
    Fail(ModelError),
}

/// One scripted model call: the chunks it streams, in order.
///
/// ```
/// use as_model::ScriptedTurn;
/// let turn = ScriptedTurn::new()
///     .thinking("Let me check.")
///     .text_chunks(["It is ", "sunny."])
///     .tool_call_chunks("call_1", "get_weather", [r#"{"city": "#, r#""Paris"}"#])
///     .usage(100, 20);
/// assert_eq!(turn.chunk_count(), 5);
/// ```
#[derive(Default)]
pub struct ScriptedTurn {
    steps: Vec<Step>,
    fail_call: Option<ModelError>,
    finish: Option<FinishReason>,
    usage: Option<ChatUsage>,
}

impl fmt::Debug for ScriptedTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedTurn")
            .field("chunks", &self.chunk_count())
            .field("fails", &self.fail_call.is_some())
            .finish()
    }
}

impl ScriptedTurn {
    /// An empty turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn whose call fails with `err` before any chunk.
    pub fn error(err: ModelError) -> Self {
        Self { fail_call: Some(err), ..Self::default() }
    }

    /// Adds a raw chunk of delta blocks.
    pub fn chunk(mut self, content: Vec<ContentBlock>) -> Self {
        self.steps.push(Step::Chunk(ChatChunk::new(content)));
        self
    }

    /// Adds one text block in one chunk.
    pub fn text(self, text: impl Into<String>) -> Self {
        self.text_chunks([text.into()])
    }

    /// Adds one text block streamed as these pieces (one chunk each).
    pub fn text_chunks<S: Into<String>>(mut self, pieces: impl IntoIterator<Item = S>) -> Self {
        let id = generate_id();
        for p in pieces {
            self.steps.push(Step::Chunk(ChatChunk::new(vec![ContentBlock::Text(TextBlock {
                text: p.into(),
                id: id.clone(),
            })])));
        }
        self
    }

    /// Adds one thinking block in one chunk.
    pub fn thinking(self, thinking: impl Into<String>) -> Self {
        self.thinking_chunks([thinking.into()])
    }

    /// Adds one thinking block streamed as these pieces.
    pub fn thinking_chunks<S: Into<String>>(mut self, pieces: impl IntoIterator<Item = S>) -> Self {
        let id = generate_id();
        for p in pieces {
            let b = ThinkingBlock { thinking: p.into(), id: id.clone(), extra: JsonMap::new() };
            self.steps.push(Step::Chunk(ChatChunk::new(vec![ContentBlock::Thinking(b)])));
        }
        self
    }

    /// Adds a tool call with its whole JSON arguments in one chunk.
    pub fn tool_call(self, id: impl Into<String>, name: impl Into<String>, input: impl Into<String>) -> Self {
        self.tool_call_chunks(id, name, [input.into()])
    }

    /// Adds a tool call whose JSON arguments stream as these fragments (one chunk each, id and name repeated).
    pub fn tool_call_chunks<S: Into<String>>(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        fragments: impl IntoIterator<Item = S>,
    ) -> Self {
        let (id, name) = (id.into(), name.into());
        for f in fragments {
            let b = ToolCallBlock::new(id.clone(), name.clone(), f.into());
            self.steps.push(Step::Chunk(ChatChunk::new(vec![ContentBlock::ToolCall(b)])));
        }
        self
    }

    /// Adds a data block in one chunk.
    pub fn data(mut self, block: DataBlock) -> Self {
        self.steps.push(Step::Chunk(ChatChunk::new(vec![ContentBlock::Data(block)])));
        self
    }

    /// Reports this usage at the end of the stream.
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(ChatUsage::new(input_tokens, output_tokens));
        self
    }

    /// Reports this finish reason at the end (default: `ToolCalls` when the turn has tool calls, else `Stop`).
    pub fn finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish = Some(reason);
        self
    }

    /// Parks the stream here (after the chunks added so far) until [`PauseGate::resume`], so a test can cancel
    /// mid-stream. [`PauseGate::wait_paused`] returns once the stream is parked.
    pub fn pause(mut self) -> Self {
        self.steps.push(Step::Pause);
        self
    }

    /// The stream fails here with `err` (after the chunks added so far).
    pub fn fail(mut self, err: ModelError) -> Self {
        self.steps.push(Step::Fail(err));
        self
    }

    /// The number of content chunks.
    pub fn chunk_count(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Chunk(_))).count()
    }

    fn has_tool_calls(&self) -> bool {
        self.steps.iter().any(|s| match s {
            Step::Chunk(c) => c.content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))),
            _ => false,
        })
    }
}

/// Lets a test wait until a [`ScriptedTurn::pause`] point is reached, and release it.
#[derive(Clone, Debug, Default)]
pub struct PauseGate {
    reached: Arc<Notify>,
    release: Arc<Notify>,
}

impl PauseGate {
    /// Resolves once a stream is parked at a pause point (immediately if one already is and nobody waited).
    pub async fn wait_paused(&self) {
        self.reached.notified().await;
    }

    /// Lets the parked stream continue.
    pub fn resume(&self) {
        self.release.notify_one();
    }
}

/// An offline [`ChatModel`] that replays [`ScriptedTurn`]s, one per call, and records every request.
///
/// ```
/// use as_model::{ChatModel, ChatRequest, ScriptedModel, ScriptedTurn};
/// use as_message::Msg;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let model = ScriptedModel::new("scripted-1", [ScriptedTurn::new().text_chunks(["Hel", "lo"]).usage(10, 2)]);
/// let r = model.call(ChatRequest::new(vec![Msg::user("user", "hi")])).await?;
/// assert_eq!(r.text(), "Hello");
/// assert_eq!(model.requests()[0].messages[0].get_text_content("").as_deref(), Some("hi"));
/// # Ok::<(), as_model::ModelError>(()) }).unwrap();
/// ```
pub struct ScriptedModel {
    name: String,
    context_size: usize,
    streaming: bool,
    turns: Mutex<VecDeque<ScriptedTurn>>,
    requests: Mutex<Vec<ChatRequest>>,
    gate: PauseGate,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("turns_left", &self.remaining_turns())
            .field("calls", &lock(&self.requests).len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ScriptedModel {
    /// A streaming model named `name` that plays `turns` in order.
    pub fn new(name: impl Into<String>, turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Self {
            name: name.into(),
            context_size: 32768,
            streaming: true,
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            gate: PauseGate::default(),
        }
    }

    /// Sets the context size.
    pub fn with_context_size(mut self, n: usize) -> Self {
        self.context_size = n;
        self
    }

    /// `false`: each call returns its whole response as one chunk ([`ChatStream::from_response`]); pauses and
    /// mid-stream failures still apply before it is returned.
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Appends a turn.
    pub fn push_turn(&self, turn: ScriptedTurn) {
        lock(&self.turns).push_back(turn);
    }

    /// Turns not played yet.
    pub fn remaining_turns(&self) -> usize {
        lock(&self.turns).len()
    }

    /// Every request received so far, in order (messages, tools, tool choice).
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// The gate of [`ScriptedTurn::pause`] points.
    pub fn pause_gate(&self) -> PauseGate {
        self.gate.clone()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    fn provider(&self) -> &'static str {
        "scripted"
    }

    fn count_tokens_of_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        HeuristicTokenCounter.count_parts(parts, tools)
    }
    fn context_size(&self) -> usize {
        self.context_size
    }

    async fn stream(&self, request: ChatRequest) -> Result<ChatStream> {
        request.effective_tools()?;
        let cancel = request.cancel.clone();
        lock(&self.requests).push(request);
        if cancel.is_cancelled() {
            return Ok(ChatStream::interrupted());
        }
        let Some(turn) = lock(&self.turns).pop_front() else {
            return Err(ModelError::new(ModelErrorKind::Provider, "scripted", "the scripted model has no turn left"));
        };
        if let Some(err) = turn.fail_call {
            return Err(err);
        }
        let finish = turn.finish.clone().unwrap_or(if turn.has_tool_calls() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        let mut steps: VecDeque<Step> = turn.steps.into();
        let mut tail = ChatChunk::default().with_finish_reason(finish);
        tail.usage = turn.usage;
        steps.push_back(Step::Chunk(tail));
        let gate = self.gate.clone();
        let inner = futures::stream::unfold((steps, gate), |(mut steps, gate)| async move {
            loop {
                match steps.pop_front()? {
                    Step::Chunk(c) => return Some((Ok(c), (steps, gate))),
                    Step::Fail(e) => {
                        steps.clear();
                        return Some((Err(e), (steps, gate)));
                    }
                    Step::Pause => {
                        gate.reached.notify_one();
                        gate.release.notified().await;
                    }
                }
            }
        });
        let stream = ChatStream::new(Box::pin(inner), cancel.clone());
        if self.streaming {
            return Ok(stream);
        }
        let response: ChatResponse = stream.collect().await?;
        Ok(ChatStream::from_response(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamStatus;
    use as_message::Msg;
    use futures::StreamExt;
    use tokio_util::sync::CancellationToken;

    fn req() -> ChatRequest {
        ChatRequest::new(vec![Msg::user("user", "hi")])
    }

    #[tokio::test]
    async fn replays_chunks_and_records_requests() {
        let turn = ScriptedTurn::new()
            .thinking("Hm.")
            .text("Checking.")
            .tool_call_chunks("call_1", "get_weather", [r#"{"city": "#, r#""Paris"}"#])
            .usage(100, 20);
        let model = ScriptedModel::new("m", [turn, ScriptedTurn::new().text("Sunny.")]);
        let mut s = model.stream(req()).await.unwrap();
        let mut deltas = vec![];
        while let Some(c) = s.next().await {
            deltas.push(c.unwrap());
        }
        assert_eq!(deltas.len(), 4);
        let r = s.response();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.usage, Some(ChatUsage::new(100, 20)));
        assert_eq!(r.thinking(), "Hm.");
        assert_eq!(r.executable_tool_calls()[0].input, r#"{"city": "Paris"}"#);
        let r2 = model.call(req()).await.unwrap();
        assert_eq!((r2.text().as_str(), r2.finish_reason.clone()), ("Sunny.", FinishReason::Stop));
        assert_eq!(model.requests().len(), 2);
        let err = model.call(req()).await.unwrap_err();
        assert_eq!(err.kind(), ModelErrorKind::Provider);
    }

    #[tokio::test]
    async fn pause_then_cancel_gives_interrupted_partial() {
        let turn = ScriptedTurn::new().text("Part").tool_call_chunks("c", "f", [r#"{"a": "#]).pause().tool_call_chunks(
            "c",
            "f",
            ["1}"],
        );
        let model = Arc::new(ScriptedModel::new("m", [turn]));
        let gate = model.pause_gate();
        let token = CancellationToken::new();
        let m2 = Arc::clone(&model);
        let t2 = token.clone();
        let task = tokio::spawn(async move { m2.call(req().with_cancel(t2)).await });
        gate.wait_paused().await;
        token.cancel();
        let r = task.await.unwrap().unwrap();
        assert!(r.is_interrupted());
        assert_eq!(r.text(), "Part");
        assert_eq!(r.tool_calls().next().unwrap().input, r#"{"a": "#);
        assert!(r.executable_tool_calls().is_empty());
    }

    #[tokio::test]
    async fn pause_resume_completes_and_failures_propagate() {
        let model = ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().text("a").pause().text("b"),
                ScriptedTurn::new().text("x").fail(ModelError::new(ModelErrorKind::Transport, "scripted", "cut")),
                ScriptedTurn::error(ModelError::new(ModelErrorKind::Auth, "scripted", "no")),
            ],
        );
        let gate = model.pause_gate();
        let (r, ()) = tokio::join!(model.call(req()), async {
            gate.wait_paused().await;
            gate.resume();
        });
        let r = r.unwrap();
        assert!(!r.is_interrupted());
        assert_eq!(r.content.len(), 2);
        let s = model.stream(req()).await.unwrap();
        let h = s.handle();
        assert_eq!(s.collect().await.unwrap_err().kind(), ModelErrorKind::Transport);
        assert_eq!(h.status(), StreamStatus::Failed);
        assert_eq!(h.snapshot().text(), "x");
        assert_eq!(model.call(req()).await.unwrap_err().kind(), ModelErrorKind::Auth);
    }

    #[tokio::test]
    async fn cancelled_before_start_and_non_streaming() {
        let model = ScriptedModel::new("m", [ScriptedTurn::new().text_chunks(["a", "b"])]).with_streaming(false);
        let token = CancellationToken::new();
        token.cancel();
        let r = model.call(req().with_cancel(token)).await.unwrap();
        assert!(r.is_interrupted() && r.content.is_empty());
        assert_eq!(model.remaining_turns(), 1, "a cancelled call consumes no turn");
        let mut s = model.stream(req()).await.unwrap();
        let only = s.next().await.unwrap().unwrap();
        assert_eq!(only.content.len(), 1);
        assert!(s.next().await.is_none());
        assert_eq!(s.response().text(), "ab");
    }

    #[tokio::test]
    async fn structured_output_default() {
        let model = ScriptedModel::new(
            "m",
            [
                ScriptedTurn::new().tool_call("c", crate::STRUCTURED_OUTPUT_TOOL, r#"{"task_overview": "x"}"#),
                ScriptedTurn::new().tool_call("c", crate::STRUCTURED_OUTPUT_TOOL, r#"{}"#),
            ],
        );
        let schema = serde_json::json!({"type": "object", "required": ["task_overview"]});
        let so = crate::StructuredOutputRequest::new(vec![Msg::user("user", "go")], schema.clone());
        let r = model.generate_structured_output(so.clone()).await.unwrap();
        assert_eq!(r.content["task_overview"], "x");
        let sent = &model.requests()[0];
        assert_eq!(sent.tools[0].name, crate::STRUCTURED_OUTPUT_TOOL);
        assert_eq!(sent.messages[0].content.len(), 2, "the reminder is appended to the last user message");
        // 2.0.4's texts, verbatim (agentscope/model/_base.py, generate_structured_output).
        assert_eq!(
            sent.messages[0].get_text_content("").unwrap_or_default(),
            "go<system-reminder>Now you **MUST** call the tool named 'generate_structured_output' to generate the \
             structured output required by the user. DON'T do anything else.</system-reminder>"
        );
        assert_eq!(sent.tools[0].description, "Call this function to generate structured output required by the user.");
        let e = model.generate_structured_output(so).await.unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::InvalidResponse);
    }
}
