//! [`ReplyStream`]: the events of one reply, produced by driving the reply future as the caller
//! polls. Each event is an await point of the reply, so dropping the stream after any event stops
//! the reply exactly there (and the state is left consistent, see [`crate::Agent::reply_stream`]).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use as_message::{ContentBlock, Msg, Usage};
use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::error::{AgentError, Result};
use crate::event::AgentEvent;

/// How a reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyStatus {
    /// A final answer (`REPLY_END(completed)`).
    Completed,
    /// Parked on tool confirmations or external executions (no `REPLY_END`); resume with the
    /// result events carrying the state's `reply_id`.
    Parked,
    /// Cancelled, dropped or interrupted by a [`crate::UserInterruptEvent`] (`REPLY_END(interrupted)`).
    Interrupted,
    /// `max_iters` rounds ran (`EXCEED_MAX_ITERS`, `REPLY_END(exceed_max_iters)`).
    ExceedMaxIters,
    /// Nothing happened: a [`crate::UserInterruptEvent`] while nothing is parked, or, from the
    /// [`crate::SessionRunner`], a run with no input ([`crate::ReplyInput::none`]) while the session
    /// is parked (skipped, as 2.0.4's chat service skips wake-ups of a parked agent).
    NoOp,
}

/// The end of a reply: its status and the final message (`reply()`'s return value).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyOutcome {
    /// How it ended.
    pub status: ReplyStatus,
    /// The final message: the answer (id = `reply_id`, the last model response's blocks, the
    /// reply's accumulated usage), or the waiting / interruption / max-iterations notice (never
    /// stored in the context). `None` for [`ReplyStatus::NoOp`].
    pub message: Option<Msg>,
}

#[derive(Debug, Default)]
struct QueueInner {
    items: VecDeque<AgentEvent>,
}

/// Set once a reply got past its input checks: from then on it may change the state. Until then the state
/// is exactly as it was passed in (a rejected reply, or a no-op, never sets it). A cheap shared flag, so the
/// session runner can decide whether to write without comparing states.
#[derive(Clone, Debug, Default)]
pub(crate) struct StartFlag(Arc<AtomicBool>);

impl StartFlag {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The partial output of a model call that a reply saved to the state without its events: the reply
/// stopped (dropped, or failed) while the model call was under way, after the caller took its
/// `MODEL_CALL_START` (see [`crate::SessionRunner`], which logs it in place of the events it took of
/// that call).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnsentOutput {
    /// The blocks as saved to the reply message of the context (call ids as the events named them).
    pub(crate) content: Vec<ContentBlock>,
    /// The call's usage as saved (no `MODEL_CALL_END` carried it).
    pub(crate) usage: Option<Usage>,
}

/// Where a stopped reply leaves its [`UnsentOutput`], to read after the stream is gone.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnsentSlot(Arc<Mutex<Option<UnsentOutput>>>);

impl UnsentSlot {
    fn lock(&self) -> MutexGuard<'_, Option<UnsentOutput>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set(&self, output: UnsentOutput) {
        *self.lock() = Some(output);
    }

    pub(crate) fn take(&self) -> Option<UnsentOutput> {
        self.lock().take()
    }
}

/// The events emitted by the reply future and not yet taken by the stream, the reply's [`StartFlag`], and its
/// [`UnsentSlot`].
#[derive(Clone, Debug, Default)]
pub(crate) struct EventQueue {
    inner: Arc<Mutex<QueueInner>>,
    started: StartFlag,
    unsent: UnsentSlot,
}

impl EventQueue {
    fn lock(&self) -> MutexGuard<'_, QueueInner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the reply passed its input checks (see [`StartFlag`]).
    pub(crate) fn mark_started(&self) {
        self.started.set();
    }

    /// Records the partial model output a stopped reply saved without events (see [`UnsentOutput`]).
    pub(crate) fn record_unsent(&self, output: UnsentOutput) {
        self.unsent.set(output);
    }

    /// Queues `event` without waiting.
    pub(crate) fn push(&self, event: AgentEvent) {
        self.lock().items.push_back(event);
    }

    /// Waits until the caller took every queued event (an await point after each event).
    pub(crate) fn drained(&self) -> Drained<'_> {
        Drained(self)
    }

    fn pop(&self) -> Option<AgentEvent> {
        self.lock().items.pop_front()
    }

    /// Whether an event not yet taken by the caller satisfies `pred`.
    pub(crate) fn holds(&self, pred: impl Fn(&AgentEvent) -> bool) -> bool {
        self.lock().items.iter().any(pred)
    }
}

/// Future of [`EventQueue::drained`]. It is only ever polled by [`ReplyStream::poll_next`], which
/// drains the queue right after a `Pending`, so no waker is needed.
pub(crate) struct Drained<'q>(&'q EventQueue);

impl Future for Drained<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0.lock().items.is_empty() { Poll::Ready(()) } else { Poll::Pending }
    }
}

type ReplyFuture<'a> = Pin<Box<dyn Future<Output = Result<ReplyOutcome>> + Send + 'a>>;

/// The events of a running reply (`Agent::reply_stream`).
///
/// * Poll it to run the reply; each item is an event (or, once, the error that stopped it).
/// * [`ReplyStream::cancel_token`] interrupts it at the next await point: the partial model output is kept,
///   every open tool call is closed with an `interrupted` result, and `REPLY_END(interrupted)` is streamed.
/// * Dropping it stops the reply at once; the state is still left consistent and resumable (partial output
///   saved, open calls closed), only without the closing events (no middleware hook sees them either).
/// * After the last item, [`ReplyStream::outcome`] holds how it ended and the final message.
pub struct ReplyStream<'a> {
    fut: Option<ReplyFuture<'a>>,
    queue: EventQueue,
    cancel: CancellationToken,
    outcome: Option<ReplyOutcome>,
    error: Option<AgentError>,
}

impl fmt::Debug for ReplyStream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyStream").field("running", &self.fut.is_some()).field("outcome", &self.outcome).finish()
    }
}

impl<'a> ReplyStream<'a> {
    pub(crate) fn new(fut: ReplyFuture<'a>, queue: EventQueue, cancel: CancellationToken) -> Self {
        Self { fut: Some(fut), queue, cancel, outcome: None, error: None }
    }

    /// The token that interrupts this reply (cancel it from anywhere).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Interrupts the reply at its next await point.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// How the reply ended, once the stream is exhausted (`None` before, or after an error).
    pub fn outcome(&self) -> Option<&ReplyOutcome> {
        self.outcome.as_ref()
    }

    /// Whether the reply got past its input checks, so that it may have changed the state.
    ///
    /// `false` means the state is exactly as it was passed in: the stream was not polled yet, the reply was
    /// rejected (a wrong `reply_id`, a new message while calls are parked, an invalid input, an unexpected
    /// resume event: see [`crate::AgentErrorKind`]), or it was a no-op ([`ReplyStatus::NoOp`]). `true` means
    /// the state was (or is being) changed, even if the reply then failed: persist it.
    pub fn started(&self) -> bool {
        self.queue.started.get()
    }

    /// The flag behind [`ReplyStream::started`], to read after the stream is gone.
    pub(crate) fn start_flag(&self) -> StartFlag {
        self.queue.started.clone()
    }

    /// The slot where a stopped reply leaves the partial model output it saved without events.
    pub(crate) fn unsent_slot(&self) -> UnsentSlot {
        self.queue.unsent.clone()
    }

    /// Takes the outcome (see [`ReplyStream::outcome`]).
    pub fn into_outcome(self) -> Option<ReplyOutcome> {
        self.outcome
    }

    /// Runs the reply to its end, handing each event to `on_event`, and returns the outcome.
    pub async fn run_to_end(mut self, mut on_event: impl FnMut(AgentEvent) + Send) -> Result<ReplyOutcome> {
        use futures::StreamExt as _;
        while let Some(item) = self.next().await {
            on_event(item?);
        }
        self.outcome.ok_or(AgentError::NoFinalMessage)
    }
}

impl Stream for ReplyStream<'_> {
    type Item = Result<AgentEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(ev) = this.queue.pop() {
            return Poll::Ready(Some(Ok(ev)));
        }
        if let Some(e) = this.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        let Some(fut) = this.fut.as_mut() else { return Poll::Ready(None) };
        match fut.as_mut().poll(cx) {
            Poll::Pending => match this.queue.pop() {
                Some(ev) => Poll::Ready(Some(Ok(ev))),
                None => Poll::Pending,
            },
            Poll::Ready(result) => {
                this.fut = None;
                match result {
                    Ok(outcome) => {
                        this.outcome = Some(outcome);
                        Poll::Ready(this.queue.pop().map(Ok))
                    }
                    Err(e) => match this.queue.pop() {
                        // Events queued before the error are delivered first, then the error.
                        Some(ev) => {
                            this.error = Some(e);
                            Poll::Ready(Some(Ok(ev)))
                        }
                        None => Poll::Ready(Some(Err(e))),
                    },
                }
            }
        }
    }
}
