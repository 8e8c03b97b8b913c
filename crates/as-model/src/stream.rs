//! [`ChatStream`]: a stream of deltas that accumulates the response and knows whether it finished.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::error::{ModelError, Result};
use crate::response::{ChatChunk, ChatResponse, FinishReason};

/// Where a [`ChatStream`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamStatus {
    /// Deltas may still arrive.
    Streaming,
    /// The provider finished the response normally.
    Completed,
    /// Cancelled (token) or dropped before the end.
    Interrupted,
    /// The provider failed mid-stream (the error was yielded).
    Failed,
}

#[derive(Debug)]
struct Shared {
    response: ChatResponse,
    status: StreamStatus,
}

impl Shared {
    fn snapshot(&self) -> ChatResponse {
        let mut r = self.response.clone();
        if self.status != StreamStatus::Completed {
            r.finish_reason = FinishReason::Interrupted;
        }
        r
    }
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A streaming model call.
///
/// It is a [`Stream`] of [`ChatChunk`] deltas (only chunks with content are yielded; usage and finish reason are
/// folded in silently) that accumulates them into a [`ChatResponse`] as it goes. The response is only ever reported
/// as complete when the provider finished it: [`ChatStream::response`] (and [`ResponseHandle::snapshot`]) report
/// [`FinishReason::Interrupted`] while streaming, after cancellation, after a mid-stream error and after the
/// stream was dropped. So a half-streamed tool call is never presented as complete.
///
/// Cancellation: when the request's [`CancellationToken`] fires, the next poll ends the stream (`None`) and the
/// accumulated response is marked interrupted. Dropping the stream does the same for any [`ResponseHandle`] taken
/// earlier.
pub struct ChatStream {
    inner: Option<BoxStream<'static, Result<ChatChunk>>>,
    shared: Arc<Mutex<Shared>>,
    cancelled: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.shared);
        f.debug_struct("ChatStream").field("status", &s.status).field("blocks", &s.response.content.len()).finish()
    }
}

impl ChatStream {
    /// Wraps a provider's delta stream. The stream must end (`None`) only when the response is complete; a
    /// truncated transport must yield an error instead.
    pub fn new(inner: BoxStream<'static, Result<ChatChunk>>, cancel: CancellationToken) -> Self {
        Self {
            inner: Some(inner),
            shared: Arc::new(Mutex::new(Shared {
                response: ChatResponse::new(Vec::new()),
                status: StreamStatus::Streaming,
            })),
            cancelled: Some(Box::pin(cancel.cancelled_owned())),
        }
    }

    /// Wraps a provider's delta stream, with no cancellation token.
    pub fn from_stream(inner: impl Stream<Item = Result<ChatChunk>> + Send + 'static) -> Self {
        let mut s = Self::new(Box::pin(inner), CancellationToken::new());
        s.cancelled = None;
        s
    }

    /// A stream replaying a whole (non-streamed) response as one chunk, then completing with its finish reason.
    /// Providers configured not to stream return this, so callers have one code path.
    pub fn from_response(response: ChatResponse) -> Self {
        let chunk = ChatChunk {
            content: response.content.clone(),
            usage: response.usage.clone(),
            finish_reason: Some(response.finish_reason.clone()),
            id: Some(response.id.clone()),
        };
        let interrupted = response.is_interrupted();
        let mut s = Self::from_stream(futures::stream::iter([Ok(chunk)]));
        if interrupted {
            s.inner = None;
            let mut g = lock(&s.shared);
            g.response = response;
            g.status = StreamStatus::Interrupted;
        }
        s
    }

    /// An already interrupted, empty stream: what a call cancelled before its stream started returns.
    pub fn interrupted() -> Self {
        Self::from_response(ChatResponse::interrupted(Vec::new()))
    }

    /// Uses `token` for cancellation (replacing any previous token).
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancelled = Some(Box::pin(token.cancelled_owned()));
        self
    }

    /// The current status.
    pub fn status(&self) -> StreamStatus {
        lock(&self.shared).status
    }

    /// The response accumulated so far; marked interrupted unless the stream completed.
    pub fn response(&self) -> ChatResponse {
        lock(&self.shared).snapshot()
    }

    /// A handle that keeps reading the accumulated response after the stream is dropped.
    pub fn handle(&self) -> ResponseHandle {
        ResponseHandle { shared: Arc::clone(&self.shared) }
    }

    /// Stops reading now (as a cancellation would) and returns the response: complete if the provider had
    /// already finished, otherwise the partial response marked interrupted.
    pub fn interrupt(mut self) -> ChatResponse {
        self.stop(StreamStatus::Interrupted);
        self.response()
    }

    /// Reads the stream to its end. Returns the complete response, or, when the token fired, the partial response
    /// marked interrupted. A provider error mid-stream is returned as `Err` (the partial response stays readable
    /// through a [`ResponseHandle`]).
    pub async fn collect(mut self) -> Result<ChatResponse> {
        use futures::StreamExt as _;
        while let Some(item) = self.next().await {
            item?;
        }
        Ok(self.response())
    }

    fn stop(&mut self, status: StreamStatus) {
        self.inner = None;
        let mut g = lock(&self.shared);
        if g.status == StreamStatus::Streaming {
            g.status = status;
        }
    }
}

impl Stream for ChatStream {
    type Item = Result<ChatChunk, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.inner.is_none() {
            return Poll::Ready(None);
        }
        if let Some(c) = this.cancelled.as_mut()
            && c.as_mut().poll(cx).is_ready()
        {
            this.stop(StreamStatus::Interrupted);
            return Poll::Ready(None);
        }
        loop {
            let Some(inner) = this.inner.as_mut() else { return Poll::Ready(None) };
            match inner.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.stop(StreamStatus::Completed);
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.stop(StreamStatus::Failed);
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Some(Ok(chunk))) => {
                    lock(&this.shared).response.apply(&chunk);
                    if !chunk.is_empty() {
                        return Poll::Ready(Some(Ok(chunk)));
                    }
                }
            }
        }
    }
}

impl Drop for ChatStream {
    fn drop(&mut self) {
        self.stop(StreamStatus::Interrupted);
    }
}

/// Reads a [`ChatStream`]'s accumulated response, also after the stream was dropped (then the response is
/// marked interrupted unless it had completed).
#[derive(Clone, Debug)]
pub struct ResponseHandle {
    shared: Arc<Mutex<Shared>>,
}

impl ResponseHandle {
    /// The response so far; marked interrupted unless the stream completed.
    pub fn snapshot(&self) -> ChatResponse {
        lock(&self.shared).snapshot()
    }

    /// The stream's status.
    pub fn status(&self) -> StreamStatus {
        lock(&self.shared).status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use as_message::{ContentBlock, TextBlock, ToolCallBlock};
    use futures::StreamExt;

    fn chunks() -> Vec<Result<ChatChunk>> {
        vec![
            Ok(ChatChunk::new(vec![ContentBlock::Text(TextBlock { text: "Hi".into(), id: "b".into() })])),
            Ok(ChatChunk::new(vec![ContentBlock::ToolCall(ToolCallBlock::new("c1", "get", "{\"a\""))])),
            Ok(ChatChunk::new(vec![ContentBlock::ToolCall(ToolCallBlock::new("c1", "", ": 1}"))])),
            Ok(ChatChunk::default().with_finish_reason(FinishReason::ToolCalls)),
        ]
    }

    #[tokio::test]
    async fn completes_and_swallows_carrier_chunks() {
        let mut s = ChatStream::from_stream(futures::stream::iter(chunks()));
        let mut n = 0;
        while let Some(c) = s.next().await {
            c.unwrap();
            n += 1;
            if n < 3 {
                assert!(s.response().is_interrupted(), "a streaming response is never complete");
            }
        }
        assert_eq!(n, 3);
        assert_eq!(s.status(), StreamStatus::Completed);
        let r = s.response();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.executable_tool_calls()[0].input, "{\"a\": 1}");
    }

    #[tokio::test]
    async fn cancel_marks_partial_interrupted() {
        let token = CancellationToken::new();
        let pending = futures::stream::iter(chunks().into_iter().take(2)).chain(futures::stream::pending());
        let mut s = ChatStream::new(Box::pin(pending), token.clone());
        s.next().await.unwrap().unwrap();
        s.next().await.unwrap().unwrap();
        let waiter = tokio::spawn(async move {
            let r = s.next().await;
            (r.is_none(), s.response())
        });
        token.cancel();
        let (ended, r) = waiter.await.unwrap();
        assert!(ended);
        assert!(r.is_interrupted());
        assert_eq!(r.text(), "Hi");
        assert_eq!(r.tool_calls().next().unwrap().input, "{\"a\"");
        assert!(r.executable_tool_calls().is_empty());
    }

    #[tokio::test]
    async fn drop_and_error_leave_interrupted_snapshot() {
        let mut s = ChatStream::from_stream(futures::stream::iter(chunks()));
        let h = s.handle();
        s.next().await.unwrap().unwrap();
        drop(s);
        assert_eq!(h.status(), StreamStatus::Interrupted);
        assert!(h.snapshot().is_interrupted());
        assert_eq!(h.snapshot().text(), "Hi");

        let err = crate::ModelError::new(crate::ModelErrorKind::Transport, "t", "cut");
        let items = vec![chunks().remove(0), Err(err)];
        let s = ChatStream::from_stream(futures::stream::iter(items));
        let h = s.handle();
        assert_eq!(s.collect().await.unwrap_err().kind(), crate::ModelErrorKind::Transport);
        assert_eq!(h.status(), StreamStatus::Failed);
        assert!(h.snapshot().is_interrupted());
    }

    #[tokio::test]
    async fn from_response_replays_once() {
        let r = ChatResponse::new(vec![ContentBlock::text("whole")]).with_finish_reason(FinishReason::Length);
        let mut s = ChatStream::from_response(r.clone());
        assert_eq!(s.next().await.unwrap().unwrap().content, r.content);
        assert!(s.next().await.is_none());
        let got = s.response();
        assert_eq!(got.finish_reason, FinishReason::Length);
        assert_eq!(got.content, r.content);
        let s = ChatStream::interrupted();
        let got = s.collect().await.unwrap();
        assert!(got.is_interrupted() && got.content.is_empty());
    }
}
