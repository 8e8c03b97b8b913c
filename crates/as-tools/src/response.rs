//! Streaming tool results: [`ToolChunk`]s (deltas) and the final [`ToolResponse`].

use std::fmt;
use std::pin::Pin;

use as_message::{Base64Source, JsonMap, Source, TextBlock, TextOrData, ToolResultState, generate_id};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use futures::stream::{self, BoxStream, Stream, StreamExt};

use crate::error::ToolError;

/// One streamed piece of a tool's output. Chunks carry **deltas**: blocks with the same id are
/// merged into the final [`ToolResponse`].
#[derive(Clone, Debug, PartialEq)]
pub struct ToolChunk {
    /// Text and data blocks (deltas).
    pub content: Vec<TextOrData>,
    /// `running` normally; `error`/`interrupted`/`denied` overwrite the final state.
    pub state: ToolResultState,
    /// Unused by the toolkit (kept for parity with 2.0.4).
    pub is_last: bool,
    /// Merged into the response metadata.
    pub metadata: JsonMap,
    /// Chunk id.
    pub id: String,
}

impl ToolChunk {
    /// A running chunk with these blocks.
    pub fn new(content: Vec<TextOrData>) -> Self {
        Self { content, state: ToolResultState::Running, is_last: true, metadata: JsonMap::new(), id: generate_id() }
    }

    /// A running chunk with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![TextOrData::Text(TextBlock::new(text))])
    }

    /// A chunk with one text block and the given state.
    pub fn with_state(text: impl Into<String>, state: ToolResultState) -> Self {
        Self { state, ..Self::text(text) }
    }

    /// Sets the metadata.
    pub fn metadata(mut self, metadata: JsonMap) -> Self {
        self.metadata = metadata;
        self
    }
}

/// The final, accumulated result of a tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResponse {
    /// Merged blocks.
    pub content: Vec<TextOrData>,
    /// `success` unless a chunk said `error`/`interrupted`/`denied`.
    pub state: ToolResultState,
    /// Merged metadata.
    pub metadata: JsonMap,
    /// The tool call id.
    pub id: String,
}

impl ToolResponse {
    /// An empty successful response for call `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { content: Vec::new(), state: ToolResultState::Success, metadata: JsonMap::new(), id: id.into() }
    }

    /// Merges one chunk (2.0.4 `append_chunk`): blocks with the same id are concatenated (text)
    /// or decoded, joined and re-encoded (base64 data); new blocks are appended; a non-running
    /// chunk state other than `success` overwrites the state; metadata is dict-merged.
    pub fn append_chunk(&mut self, chunk: &ToolChunk) {
        for block in &chunk.content {
            let existing = self.content.iter_mut().find(|b| block_id(b) == block_id(block));
            match (existing, block) {
                (Some(TextOrData::Text(old)), TextOrData::Text(new)) => old.text.push_str(&new.text),
                (Some(TextOrData::Data(old)), TextOrData::Data(new)) => {
                    if let (Source::Base64(a), Source::Base64(b)) = (&mut old.source, &new.source) {
                        let mut bytes = B64.decode(a.data.as_bytes()).unwrap_or_default();
                        bytes.extend(B64.decode(b.data.as_bytes()).unwrap_or_default());
                        *a = Base64Source { data: B64.encode(&bytes), media_type: a.media_type.clone() };
                    } else {
                        old.source = new.source.clone();
                    }
                }
                (Some(slot), _) => *slot = block.clone(),
                (None, _) => self.content.push(block.clone()),
            }
        }
        if matches!(chunk.state, ToolResultState::Error | ToolResultState::Interrupted | ToolResultState::Denied) {
            self.state = chunk.state;
        }
        for (k, v) in &chunk.metadata {
            self.metadata.insert(k.clone(), v.clone());
        }
    }

    /// Merges consecutive text blocks (done once, after the last chunk).
    pub fn merge_consecutive_text(&mut self) {
        let mut out: Vec<TextOrData> = Vec::with_capacity(self.content.len());
        for block in self.content.drain(..) {
            match (out.last_mut(), block) {
                (Some(TextOrData::Text(prev)), TextOrData::Text(t)) => prev.text.push_str(&t.text),
                (_, b) => out.push(b),
            }
        }
        self.content = out;
    }

    /// The text blocks joined (no separator).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                TextOrData::Text(t) => Some(t.text.as_str()),
                TextOrData::Data(_) => None,
            })
            .collect()
    }
}

fn block_id(b: &TextOrData) -> &str {
    match b {
        TextOrData::Text(t) => &t.id,
        TextOrData::Data(d) => &d.id,
    }
}

/// One item of [`crate::Toolkit::call_tool`]'s stream: chunks first, then exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolOutput {
    /// A streamed delta (forward it as `TOOL_RESULT_*_DELTA` events).
    Chunk(ToolChunk),
    /// The final accumulated response; always the last item.
    Response(ToolResponse),
}

/// What a tool's `call` returns: a stream of chunks; an `Err` item ends the call with an error
/// result whose text is the error's [`ToolError::model_text`].
pub struct ToolStream(BoxStream<'static, Result<ToolChunk, ToolError>>);

impl ToolStream {
    /// A stream of these chunks.
    pub fn new(stream: impl Stream<Item = Result<ToolChunk, ToolError>> + Send + 'static) -> Self {
        Self(stream.boxed())
    }

    /// A one-chunk stream.
    pub fn once(chunk: ToolChunk) -> Self {
        Self::new(stream::once(async move { Ok(chunk) }))
    }

    /// A one-chunk stream with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::once(ToolChunk::text(text))
    }

    /// A stream yielding these chunks in order.
    pub fn from_chunks(chunks: Vec<ToolChunk>) -> Self {
        Self::new(stream::iter(chunks.into_iter().map(Ok)))
    }

    /// The inner stream.
    pub fn into_inner(self) -> BoxStream<'static, Result<ToolChunk, ToolError>> {
        self.0
    }
}

impl fmt::Debug for ToolStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolStream")
    }
}

impl Stream for ToolStream {
    type Item = Result<ToolChunk, ToolError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        self.0.as_mut().poll_next(cx)
    }
}

/// Values a typed or function tool may return; converted as 2.0.4's `FunctionTool` does
/// (a string becomes a text block, a chunk passes through, other JSON is dumped as text).
pub trait IntoToolStream {
    /// Converts.
    fn into_tool_stream(self) -> ToolStream;
}

impl IntoToolStream for ToolStream {
    fn into_tool_stream(self) -> ToolStream {
        self
    }
}

impl IntoToolStream for ToolChunk {
    fn into_tool_stream(self) -> ToolStream {
        ToolStream::once(self)
    }
}

impl IntoToolStream for String {
    fn into_tool_stream(self) -> ToolStream {
        ToolStream::text(self)
    }
}

impl IntoToolStream for &'static str {
    fn into_tool_stream(self) -> ToolStream {
        ToolStream::text(self)
    }
}

impl IntoToolStream for serde_json::Value {
    fn into_tool_stream(self) -> ToolStream {
        match self {
            serde_json::Value::String(s) => ToolStream::text(s),
            other => ToolStream::text(crate::util::python_dumps(&other)),
        }
    }
}

impl IntoToolStream for Vec<ToolChunk> {
    fn into_tool_stream(self) -> ToolStream {
        ToolStream::from_chunks(self)
    }
}
