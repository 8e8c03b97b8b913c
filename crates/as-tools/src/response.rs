//! Streaming tool results: [`ToolChunk`]s (deltas) and the final [`ToolResponse`].

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;

use as_message::{JsonMap, Source, TextBlock, TextOrData, ToolResultState, generate_id};
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

    /// Merges one chunk as 2.0.4's `ToolResponse.append_chunk` does:
    ///
    /// * a block whose id a block of the response has (the last such, counting the blocks this
    ///   chunk added) is merged into it: text is concatenated; base64 data is decoded, joined and
    ///   re-encoded, or, when either part is not valid base64 for Python's
    ///   `base64.b64decode(…, validate=True)` (unpadded, say), the texts are concatenated; the
    ///   chunk's non-empty `name` and `media_type` replace the block's;
    /// * a block of the other kind (text and data) with that id is appended under a new id, so
    ///   neither is lost;
    /// * any other block is appended;
    /// * an `error`, `interrupted` or `denied` chunk state overwrites the state; metadata is
    ///   dict-merged;
    /// * consecutive text blocks are then merged ([`ToolResponse::merge_consecutive_text`]), after
    ///   **every** chunk, so text streamed under alternating ids stays in order (`a`, `b`, `c`
    ///   under ids `out`, `err`, `out` read `abc`).
    ///
    /// # Errors
    ///
    /// Data with a URL source cannot be merged (2.0.4 raises `ValueError`): the error's text is
    /// 2.0.4's, the blocks before that one are merged, and the chunk's state and metadata are not.
    /// [`crate::Toolkit::call_tool`] then ends the call with an error result, as 2.0.4 does for
    /// any exception.
    pub fn append_chunk(&mut self, chunk: &ToolChunk) -> Result<(), ToolError> {
        let mut index: HashMap<String, usize> =
            self.content.iter().enumerate().map(|(i, b)| (block_id(b).to_owned(), i)).collect();
        for block in &chunk.content {
            let Some(at) = index.get(block_id(block)).copied() else {
                self.content.push(block.clone());
                index.insert(block_id(block).to_owned(), self.content.len() - 1);
                continue;
            };
            match (&mut self.content[at], block) {
                (TextOrData::Text(old), TextOrData::Text(new)) => old.text.push_str(&new.text),
                (TextOrData::Data(old), TextOrData::Data(new)) => match (&mut old.source, &new.source) {
                    (Source::Base64(a), Source::Base64(b)) => {
                        a.data = merge_base64(&a.data, &b.data);
                        if !b.media_type.is_empty() {
                            a.media_type.clone_from(&b.media_type);
                        }
                        if new.name.as_deref().is_some_and(|n| !n.is_empty()) {
                            old.name.clone_from(&new.name);
                        }
                    }
                    (a, b) => {
                        return Err(ToolError::execution(format!(
                            "Cannot append DataBlock with URL source or different source types: {} vs {}",
                            source_str(a),
                            source_str(b)
                        )));
                    }
                },
                _ => {
                    let mut copy = block.clone();
                    match &mut copy {
                        TextOrData::Text(t) => t.id = generate_id(),
                        TextOrData::Data(d) => d.id = generate_id(),
                    }
                    self.content.push(copy);
                }
            }
        }
        if matches!(chunk.state, ToolResultState::Error | ToolResultState::Interrupted | ToolResultState::Denied) {
            self.state = chunk.state;
        }
        for (k, v) in &chunk.metadata {
            self.metadata.insert(k.clone(), v.clone());
        }
        self.merge_consecutive_text();
        Ok(())
    }

    /// Merges consecutive text blocks into the first of them ([`ToolResponse::append_chunk`] does
    /// this after every chunk).
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

/// 2.0.4's `_merge_base64_chunks`: both parts decoded, joined and re-encoded; when either is not
/// valid base64 ([`python_b64decode`]), the texts are concatenated.
fn merge_base64(existing: &str, incoming: &str) -> String {
    match (python_b64decode(existing), python_b64decode(incoming)) {
        (Some(mut bytes), Some(more)) => {
            bytes.extend(more);
            B64.encode(bytes)
        }
        _ => format!("{existing}{incoming}"),
    }
}

/// Python 3.11's `base64.b64decode(s, validate=True)` (`binascii.a2b_base64` in strict mode):
/// only the standard alphabet; no leading `=`, no data after padding has started; a quad cut short
/// needs its padding (`aGVsbG8` fails), after which nothing may follow; excess `=` after a whole
/// quad and non-zero trailing bits are accepted (`QR==` is `A`). `None` where Python raises.
fn python_b64decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let bytes = s.as_bytes();
    if bytes.first() == Some(&b'=') {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let (mut quad, mut left, mut pads, mut padding) = (0u8, 0u8, 0u8, false);
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'=' {
            padding = true;
            if quad >= 2 {
                pads += 1;
                if quad + pads >= 4 {
                    return (i + 1 == bytes.len()).then_some(out);
                }
            }
            continue;
        }
        let v = value(c)?;
        if padding {
            return None;
        }
        pads = 0;
        match quad {
            0 => left = v,
            1 => {
                out.push((left << 2) | (v >> 4));
                left = v & 0x0f;
            }
            2 => {
                out.push((left << 4) | (v >> 2));
                left = v & 0x03;
            }
            _ => out.push((left << 6) | v),
        }
        quad = (quad + 1) % 4;
    }
    (quad == 0).then_some(out)
}

/// `str()` of a 2.0.4 source model, as its `ValueError` shows it.
fn source_str(source: &Source) -> String {
    match source {
        Source::Base64(b) => format!(
            "type='base64' data={} media_type={}",
            crate::util::python_repr(&b.data),
            crate::util::python_repr(&b.media_type)
        ),
        Source::Url(u) => {
            format!(
                "type='url' url=AnyUrl({}) media_type={}",
                crate::util::python_repr(&u.url),
                crate::util::python_repr(&u.media_type)
            )
        }
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
