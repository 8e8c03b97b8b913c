//! [`SessionRunner`]: the seed page's `chat_turn`, made safe.
//!
//! One turn: take the (optional) session lock, load the record or create it (never an update before the
//! create; the create carries no state, so a session another runner created since the read is continued,
//! not reset), force `state.session_id` to the session's id, run the reply while streaming its events to the
//! caller, then persist the state with a conditional update (the revision loaded at the start; a concurrent
//! writer gives [`AgentErrorKind::Conflict`](crate::AgentErrorKind::Conflict), never a silent overwrite) and the
//! turn's messages to the message log. The state is persisted whatever way the reply ended: completed, parked,
//! interrupted (cancel token), max iterations, or a reply error (then the error is returned after persisting).
//! A turn that was rejected before it changed anything (wrong `reply_id`, a message while parked, ...) or was a
//! no-op (an interrupt while nothing is parked; a run with no input while the session is parked, which 2.0.4's
//! chat service skips) writes nothing. That is decided from the reply's start flag
//! ([`crate::ReplyStream::started`]: set once the input passed its checks, the only point from which a reply
//! changes the state), not by comparing states, so no copy of the state is kept. The error kind alone would
//! not do: a middleware hook may fail with any kind after the reply changed the state. A resume or an
//! interrupt sent to a session that does not exist creates nothing. A final write that fails returns
//! [`AgentError::Unsaved`](crate::AgentError::Unsaved) holding the turn ([`SessionRunner::save_unsaved`] tries
//! again); a conflict whose stored state is this turn's own (a write whose answer was lost) counts as saved.
//! A turn (and [`SessionRunner::update_state`], [`SessionRunner::save_unsaved`]) first waits, for at most
//! [`PENDING_WRITE_WAIT`], for the writes of the same session still running on this runner (a turn whose
//! future was dropped is written in the background), so a client that disconnects and sends its next
//! message at once continues from that write instead of racing it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use as_message::Msg;
use as_state::AgentState;
use as_storage::{Revision, SessionConfig, SessionKey, SessionRecord, SharedStorage, UpsertSession};
use async_trait::async_trait;
use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, ReplyInput};
use crate::error::{AgentError, Result, UnsavedTurn};
use crate::event::AgentEvent;
use crate::reply_msg::MsgEventExt;
use crate::stream::{ReplyStatus, StartFlag, UnsentSlot};

/// A held session lock; released explicitly (and, best effort, by the implementation when dropped).
///
/// A lock with an expiry can be lost while held (the holder was paused past its lease, or could not
/// renew it): then another runner may already run the session. The runner watches [`LockGuard::lost`]
/// during the reply and checks [`LockGuard::is_lost`] before the final write: a turn whose lock was
/// lost is interrupted (no further tool calls run) and not written; it ends with
/// [`AgentError::Unsaved`](crate::AgentError::Unsaved) (kind `Conflict`), which
/// [`SessionRunner::save_unsaved`] can write under the lock again. The defaults (never lost) suit a
/// lock without an expiry.
#[async_trait]
pub trait LockGuard: Send + Sync {
    /// Releases the lock (only if it is still ours).
    async fn release(self: Box<Self>) -> Result<()>;

    /// Whether the lock may no longer be ours (taken over, expired, or not renewed in time).
    fn is_lost(&self) -> bool {
        false
    }

    /// Resolves once [`LockGuard::is_lost`] turns true; never, by default.
    async fn lost(&self) {
        std::future::pending::<()>().await;
    }
}

/// A per-session mutual exclusion across processes (for example Redis `agentscope:session:lock:{sid}`,
/// `SET NX EX` with a token). `as-agent` only defines the hook; backends implement it.
#[async_trait]
pub trait SessionLock: Send + Sync + fmt::Debug {
    /// Waits for and takes the lock of `key`'s session; [`AgentErrorKind::Lock`](crate::AgentErrorKind::Lock)
    /// when it cannot be taken.
    async fn acquire(&self, key: &SessionKey) -> Result<Box<dyn LockGuard>>;
}

/// How long a turn waits for the writes of its session still running on the same runner (see the
/// module docs) before it goes on without them (their conditional writes then decide which wins).
pub const PENDING_WRITE_WAIT: Duration = Duration::from_secs(30);

/// What a turn did.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// How the reply ended.
    pub status: ReplyStatus,
    /// The reply's final message (`Agent::reply`'s value), if any.
    pub message: Option<Msg>,
    /// The state as persisted.
    pub state: AgentState,
    /// The record's revision after the write (unchanged when nothing was written).
    pub revision: Revision,
    /// Whether the session was created by this turn.
    pub created: bool,
    /// Set when the state was saved but the message log could not be written afterwards (the
    /// log then lacks some of this turn's messages). The turn itself happened: do not retry it.
    pub log_error: Option<String>,
}

/// Runs chat turns over any storage backend.
///
/// ```
/// use std::sync::Arc;
/// use as_agent::{Agent, ReplyInput, ReplyStatus, SessionRunner};
/// use as_model::{ScriptedModel, ScriptedTurn};
/// use as_storage::{InMemoryStorage, SessionConfig, SessionKey, StorageBase};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let storage = Arc::new(InMemoryStorage::new());
/// storage.open().await?;
/// let runner = SessionRunner::new(storage.clone(), SessionConfig::new("ws-1"));
/// let model = Arc::new(ScriptedModel::new("scripted", [ScriptedTurn::new().text("Hi!")]));
/// let agent = Agent::builder("Friday", "You are helpful.", model).build()?;
/// let key = SessionKey::new("user-1", "agent-1", "session-1");
/// let mut seen = Vec::new();
/// let turn = runner.run_turn(&agent, &key, ReplyInput::user_text("Hello"), &mut |e| seen.push(e.event_type())).await?;
/// assert_eq!(turn.status, ReplyStatus::Completed);
/// assert!(turn.created);
/// let stored = storage.get_session(&key).await?.unwrap();
/// assert_eq!(stored.state, turn.state);
/// assert_eq!(stored.state.session_id, "session-1");
/// assert_eq!(storage.list_messages(&key, 0, 0).await?.len(), 2);
/// # Ok::<(), as_agent::AgentError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SessionRunner {
    storage: SharedStorage,
    config: SessionConfig,
    lock: Option<Arc<dyn SessionLock>>,
    background: Background,
}

impl fmt::Debug for SessionRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionRunner")
            .field("storage", &self.storage.backend_name())
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}

impl SessionRunner {
    /// A runner over `storage`; sessions it creates get `config`.
    pub fn new(storage: SharedStorage, config: SessionConfig) -> Self {
        Self { storage, config, lock: None, background: Background::default() }
    }

    /// Takes `lock` around every turn.
    pub fn with_lock(mut self, lock: Arc<dyn SessionLock>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// The storage.
    pub fn storage(&self) -> &SharedStorage {
        &self.storage
    }

    /// Runs one turn; see the module docs.
    pub async fn run_turn(
        &self,
        agent: &Agent,
        key: &SessionKey,
        input: ReplyInput,
        on_event: &mut (dyn FnMut(&AgentEvent) + Send),
    ) -> Result<TurnOutcome> {
        self.run_turn_with_cancel(agent, key, input, on_event, CancellationToken::new()).await
    }

    /// [`SessionRunner::run_turn`], interruptible through `cancel` (the interrupted state is persisted).
    ///
    /// Prefer the token to stop a turn: the reply then streams its closing events and the state is written
    /// before this returns. Dropping the future instead stops the reply at once; the state (left consistent by
    /// the reply) is then written by a background task on the current tokio runtime, with the same conditional
    /// update ([`SessionRunner::wait_background_writes`] awaits those). A turn's final write always runs in its
    /// own task, so dropping the future while it is under way does not cut it short either. The session lock
    /// is released only after the write, in both cases. The next turn of the session on this runner waits for
    /// that write (at most [`PENDING_WRITE_WAIT`]) before it loads the session.
    ///
    /// A dropped reply emits no closing events: the message log gets its reply message as the state saved it
    /// (the partial model output, every open call closed with an `interrupted` result), not only what the
    /// events taken had built; and the agent's middlewares never see its `REPLY_END` (see
    /// [`crate::Middleware::on_event`]).
    pub async fn run_turn_with_cancel(
        &self,
        agent: &Agent,
        key: &SessionKey,
        input: ReplyInput,
        on_event: &mut (dyn FnMut(&AgentEvent) + Send),
        cancel: CancellationToken,
    ) -> Result<TurnOutcome> {
        key.validate()?;
        // A new message the agent would reject creates no session (nor takes the lock).
        if let ReplyInput::Messages(msgs) = &input {
            crate::agent::check_input_messages(msgs)?;
        }
        // `cancel` also stops the wait for the lock (a user's Ctrl-C while another process runs
        // the session): nothing was loaded, so nothing is written. A lock whose acquisition is
        // given up midway is taken back by the lock implementation.
        // The writes of this session still running here (a dropped turn's) land before the load.
        let guard = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(AgentError::Interrupted),
            guard = async {
                self.background.settled(key).await;
                self.acquire(key).await
            } => guard?,
        };
        // The guard goes with the turn's write: the lock is released only after the write, also
        // when this future is dropped (then both happen in a background task).
        self.turn_locked(agent, key, input, on_event, cancel, guard).await
    }

    async fn turn_locked(
        &self,
        agent: &Agent,
        key: &SessionKey,
        input: ReplyInput,
        on_event: &mut (dyn FnMut(&AgentEvent) + Send),
        cancel: CancellationToken,
        guard: Option<Box<dyn LockGuard>>,
    ) -> Result<TurnOutcome> {
        let (record, created, mut reply_msg) = match self.load(key, &input).await {
            Ok(loaded) => loaded,
            Err(e) => {
                release(guard, key).await;
                return Err(e);
            }
        };
        let revision = record.revision();
        let mut state = record.state;
        state.session_id.clone_from(&key.session_id);
        if is_no_input(&input) && agent.is_parked(&state) {
            // 2.0.4's chat service (`_chat.py` step 6): a run with no input (a wake-up) is skipped
            // while the agent is parked on calls to confirm or execute outside; the resume goes on
            // from there. A no-op: nothing is written (`reply(None)` itself is refused while parked).
            release(guard, key).await;
            return Ok(TurnOutcome {
                status: ReplyStatus::NoOp,
                message: None,
                state,
                revision,
                created,
                log_error: None,
            });
        }
        if let Some(id) = answered_meanwhile(&input, &state, agent.name()) {
            // The calls this answers were parked when the caller looked, but another writer answered
            // them before this turn took the lock: it lost a race, its input is not invalid.
            release(guard, key).await;
            return Err(AgentError::Storage(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Conflict,
                self.storage.backend_name(),
                "run_turn",
                format!(
                    "another process answered tool call {id:?} of session {} meanwhile; this answer was not used",
                    key.session_id
                ),
            )));
        }
        if let (Some(m), Some(ev)) = (reply_msg.as_mut(), incoming_event(&input)) {
            m.append_event(&ev);
        }
        let inputs: Vec<Msg> = match &input {
            ReplyInput::Messages(msgs) => msgs.clone(),
            _ => Vec::new(),
        };

        // Owns the state and what the turn must write; if this future is dropped mid-reply, its `Drop`
        // still writes them (in a background task, with the same conditional update).
        let mut pending = PendingWrite {
            armed: true,
            state,
            started: StartFlag::default(),
            unsent: UnsentSlot::default(),
            revision,
            log: ReplyLog { msg: reply_msg, model_from: None },
            inputs,
            storage: Arc::clone(&self.storage),
            key: key.clone(),
            background: Arc::clone(&self.background),
            guard,
        };
        // The reply's own token: the caller's cancels it, and so does a lost lock (without
        // cancelling the caller's token, which may outlive this turn).
        let interrupt = cancel.child_token();
        let mut stream = agent.reply_stream_with_cancel(&mut pending.state, input, interrupt.clone());
        pending.started = stream.start_flag();
        pending.unsent = stream.unsent_slot();
        let mut reply_error = None;
        let mut lock_lost = false;
        {
            // A lost lock interrupts the reply (it then streams its closing events); see `LockGuard`.
            let lost = async {
                match pending.guard.as_deref() {
                    Some(g) => g.lost().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(lost);
            loop {
                let item = tokio::select! {
                    item = stream.next() => item,
                    () = &mut lost, if !lock_lost => {
                        tracing::warn!(session = %key, "the session lock was lost during the turn: interrupting it");
                        lock_lost = true;
                        interrupt.cancel();
                        continue;
                    }
                };
                let Some(item) = item else { break };
                match item {
                    Ok(ev) => {
                        pending.log.apply(&ev);
                        on_event(&ev);
                    }
                    Err(e) => {
                        reply_error = Some(e);
                        break;
                    }
                }
            }
        }
        let started = stream.started();
        let outcome = stream.into_outcome();
        // The stream is gone: the state is consistent (its guard closed what it had to).
        pending.armed = false;
        let (write, guard) = pending.take();

        if !started {
            // Rejected before it changed anything (or a no-op): the state is as loaded, write nothing.
            release(guard, key).await;
            if let Some(e) = reply_error {
                return Err(e);
            }
            let outcome = outcome.ok_or(AgentError::NoFinalMessage)?;
            let (state, revision) = (write.state, write.revision);
            return Ok(TurnOutcome {
                status: outcome.status,
                message: outcome.message,
                state,
                revision,
                created,
                log_error: None,
            });
        }
        // The write (then the lock release) runs in its own task: if this future is dropped while
        // it is under way, it still completes, in order, and `wait_background_writes` sees it.
        let (revision, log_error, write) = self.write_detached(write, key.clone(), guard, lock_lost).await?;
        if let Some(e) = reply_error {
            return Err(e);
        }
        let outcome = outcome.ok_or(AgentError::NoFinalMessage)?;
        Ok(TurnOutcome {
            status: outcome.status,
            message: outcome.message,
            state: write.state,
            revision,
            created,
            log_error,
        })
    }

    /// Loads the session, or creates it ([`SessionRunner::create`]: a create-only write, so a
    /// session another runner created since the read is loaded, never overwritten), and for a
    /// resume the reply message of the log to continue.
    async fn load(&self, key: &SessionKey, input: &ReplyInput) -> Result<(SessionRecord, bool, Option<Msg>)> {
        let (record, created) = match self.storage.get_session(key).await? {
            Some(r) => (r, false),
            // A resume or an interrupt of a session that does not exist: the agent rejects it (or it
            // is a no-op) on a fresh state, which is not stored: a rejected turn creates nothing.
            None if !matches!(input, ReplyInput::Messages(_)) => return Ok((self.fresh_record(key), false, None)),
            None => self.create(key).await?,
        };
        // The reply message of the log: rebuilt from the events (2.0.4's Msg.append_event). A resume
        // continues the stored one (or, if the log lacks it, the context's copy).
        let reply_msg = match input {
            ReplyInput::Confirm(_) | ReplyInput::External(_) | ReplyInput::Interrupt(_) => {
                let state = &record.state;
                let stored = self.storage.get_message(key, &state.reply_id).await?;
                let in_context = state.context.iter().rev().find(|m| m.id == state.reply_id);
                match (stored, in_context) {
                    // The log's copy is behind the state (a turn whose log write failed after its
                    // state was saved): continue from the context's. (A context copy that a
                    // compression cut to its tail is not behind: the log's copy is the whole message.)
                    (Some(logged), Some(current)) if log_behind(&logged, current) => {
                        Some(with_started_results(current.clone()))
                    }
                    (Some(mut logged), Some(current)) => {
                        restart_unanswered_results(&mut logged, current);
                        Some(logged)
                    }
                    (Some(logged), None) => Some(logged),
                    (None, current) => current.cloned().map(with_started_results),
                }
            }
            ReplyInput::Messages(_) => None,
        };
        Ok((record, created, reply_msg))
    }

    /// A new session `key` as this runner creates it: its config, a fresh state, created now.
    fn fresh_record(&self, key: &SessionKey) -> SessionRecord {
        let req = UpsertSession::new(key.owner(), self.config.clone());
        SessionRecord::from_parts(as_storage::SessionMeta::created(key.session_id.clone(), &req), AgentState::default())
    }

    /// Creates the session `key` for a first turn, or loads it when another runner created it
    /// meanwhile (then `false`). With a store that has `import_record`, a create-only write: the
    /// other runner's session is never touched (an upsert would replace its config and bump its
    /// revision, failing that runner's turn). Without it, `upsert_session`.
    async fn create(&self, key: &SessionKey) -> Result<(SessionRecord, bool)> {
        let record = self.fresh_record(key);
        match self.storage.import_record(&record, &[], as_storage::ImportMode::CreateOnly).await {
            Ok(_) => return Ok((record, true)),
            // (A create re-sent after its answer was lost, by a client that re-sends, lands here
            // too and then reports `created = false` for its own session: harmless.)
            Err(e) if e.kind() == as_storage::StorageErrorKind::AlreadyExists => {
                // Created meanwhile: continue that session (absent again: it is another agent's).
                return match self.storage.get_session(key).await? {
                    Some(r) => Ok((r, false)),
                    None => Err(e.into()),
                };
            }
            Err(e) if e.kind() == as_storage::StorageErrorKind::Unsupported => {}
            Err(e) => return Err(e.into()),
        }
        let req = UpsertSession::new(key.owner(), self.config.clone()).with_session_id(key.session_id.clone());
        let r = self.storage.upsert_session(req).await?;
        let created = r.updated_at == r.created_at;
        Ok((r, created))
    }

    /// Persists `write` and then releases `guard`, in a task of the current runtime (inline when
    /// there is none); returns the new revision, the message log's error if only that failed, and
    /// the write (for its state).
    async fn write_detached(
        &self,
        write: Write,
        key: SessionKey,
        guard: Option<Box<dyn LockGuard>>,
        lock_lost: bool,
    ) -> Result<(Revision, Option<String>, Write)> {
        let storage = Arc::clone(&self.storage);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let result = write.persist_held(&storage, &key, guard.as_deref(), lock_lost).await;
            release(guard, &key).await;
            let (revision, log_error) = result.map_err(|e| unsaved(e, write.clone()))?;
            return Ok((revision, log_error, write));
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pending = self.background.begin(&key);
        let task = rt.spawn(async move {
            // A panicking backend fails the write, not the task: the turn is still handed back (`Unsaved`).
            let persist = std::panic::AssertUnwindSafe(write.persist_held(&storage, &key, guard.as_deref(), lock_lost));
            let result = futures::FutureExt::catch_unwind(persist).await.unwrap_or_else(|_| {
                Err(AgentError::Storage(as_storage::StorageError::new(
                    as_storage::StorageErrorKind::Backend,
                    storage.backend_name(),
                    "save_turn",
                    "the storage panicked while writing the turn (it may or may not have landed)",
                )))
            });
            release(guard, &key).await;
            // Done before the turn hears of it: its next turn never waits for it.
            drop(pending);
            let _ = tx.send((result, write));
        });
        let id = task.id();
        self.background.track(task);
        let received = rx.await;
        // Still here: this turn saw its write through, it is nobody's background write.
        lock(&self.background.tasks).retain(|t| t.id() != id);
        let (result, write) = received.map_err(|_| {
            AgentError::Storage(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Backend,
                self.storage.backend_name(),
                "save_turn",
                "the task writing the turn ended without a result (the runtime shut down, or releasing the lock panicked)",
            ))
        })?;
        let (revision, log_error) = result.map_err(|e| unsaved(e, write.clone()))?;
        Ok((revision, log_error, write))
    }

    /// Tries the final write of a turn again (after [`AgentError::Unsaved`]), under the session lock
    /// when the runner has one: the turn's conditional `save_turn` (state and message log) against
    /// the revision the turn loaded (a stored state equal to the turn's counts as saved). A `Conflict`
    /// means someone else wrote the session since: reload and decide (running the turn again
    /// repeats its tools' side effects).
    pub async fn save_unsaved(&self, key: &SessionKey, turn: UnsavedTurn) -> Result<Revision> {
        let write = Write { state: turn.state, revision: turn.revision, messages: turn.messages };
        // Under the session lock like a turn, so it never races a turn that holds it, nor a write of
        // the session still running here.
        self.background.settled(key).await;
        let guard = self.acquire(key).await?;
        let result = write.persist_held(&self.storage, key, guard.as_deref(), false).await;
        release(guard, key).await;
        let (revision, log_error) = result.map_err(|e| unsaved(e, write))?;
        if let Some(e) = log_error {
            tracing::warn!(session = %key, error = %e, "the state was saved but the message log was not");
        }
        Ok(revision)
    }

    /// Changes a stored session's state between turns (a setting such as the permission mode) under
    /// the session lock, like a turn, so it never makes a running turn's final write conflict after
    /// its tools ran. The state is read under the lock and written back conditionally; returns it.
    /// A session that does not exist is a storage `NotFound`.
    pub async fn update_state(
        &self,
        key: &SessionKey,
        change: impl FnOnce(&mut AgentState) + Send,
    ) -> Result<AgentState> {
        key.validate()?;
        self.background.settled(key).await;
        let guard = self.acquire(key).await?;
        let result = async {
            let Some(record) = self.storage.get_session(key).await? else {
                return Err(AgentError::Storage(as_storage::StorageError::new(
                    as_storage::StorageErrorKind::NotFound,
                    self.storage.backend_name(),
                    "update_session_state",
                    format!("session {key} does not exist"),
                )));
            };
            let revision = record.revision();
            let mut state = record.state;
            change(&mut state);
            self.storage.update_session_state(key, &state, Some(&revision)).await?;
            Ok(state)
        }
        .await;
        release(guard, key).await;
        result
    }

    /// Takes the session lock, when the runner has one.
    async fn acquire(&self, key: &SessionKey) -> Result<Option<Box<dyn LockGuard>>> {
        match &self.lock {
            Some(l) => Ok(Some(l.acquire(key).await?)),
            None => Ok(None),
        }
    }

    /// Waits for the writes of turns whose futures were dropped (see [`SessionRunner::run_turn_with_cancel`]),
    /// mid-reply or during their final write, and for the writes of turns still running. Returns how many it
    /// waited for; a failed write is logged (a conflict means someone else wrote first).
    pub async fn wait_background_writes(&self) -> usize {
        let handles: Vec<tokio::task::JoinHandle<()>> = std::mem::take(&mut *lock(&self.background.tasks));
        let n = handles.len();
        for h in handles {
            let _ = h.await;
        }
        n
    }
}

/// Releases a turn's lock. The turn's outcome does not depend on it (the lock expires on its own),
/// so a failure is logged, not returned.
async fn release(guard: Option<Box<dyn LockGuard>>, key: &SessionKey) {
    if let Some(g) = guard
        && let Err(e) = g.release().await
    {
        tracing::warn!(session = %key, error = %e, "releasing the session lock failed; it will expire");
    }
}

type Background = Arc<Writes>;

/// A runner's write tasks: all of them, for [`SessionRunner::wait_background_writes`], and per
/// session the ones not finished yet, which the session's next turn waits for.
#[derive(Default)]
struct Writes {
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Each unfinished write of a session, by id, with its token (cancelled once it is done). An
    /// entry goes when its write ends, so the map holds only the sessions being written.
    pending: std::sync::Mutex<HashMap<SessionKey, Vec<(u64, CancellationToken)>>>,
    next_id: AtomicU64,
}

impl Writes {
    /// Keeps `task` for [`SessionRunner::wait_background_writes`], dropping the handles of finished
    /// tasks first (so a long-running server does not accumulate them).
    fn track(&self, task: tokio::task::JoinHandle<()>) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Registers a write of `key` about to be spawned. The guard marks it done when dropped: by the
    /// task once it wrote, or with the task's future if the task panics or never runs.
    fn begin(self: &Arc<Self>, key: &SessionKey) -> PendingGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let done = CancellationToken::new();
        lock(&self.pending).entry(key.clone()).or_default().push((id, done.clone()));
        PendingGuard { writes: Arc::clone(self), key: key.clone(), id, done }
    }

    /// Waits, for at most [`PENDING_WRITE_WAIT`], until the writes of `key` registered by now are done.
    async fn settled(&self, key: &SessionKey) {
        let waiting: Vec<CancellationToken> =
            lock(&self.pending).get(key).map(|w| w.iter().map(|(_, t)| t.clone()).collect()).unwrap_or_default();
        if waiting.is_empty() {
            return;
        }
        let all = futures::future::join_all(waiting.iter().map(CancellationToken::cancelled));
        if tokio::time::timeout(PENDING_WRITE_WAIT, all).await.is_err() {
            tracing::warn!(
                session = %key,
                "an earlier turn's write of the session is still running; going on (the conditional writes decide)"
            );
        }
    }
}

/// A registered write of one session ([`Writes::begin`]); dropping it marks the write done.
struct PendingGuard {
    writes: Background,
    key: SessionKey,
    id: u64,
    done: CancellationToken,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        let mut pending = lock(&self.writes.pending);
        if let Some(writes) = pending.get_mut(&self.key) {
            writes.retain(|(id, _)| *id != self.id);
            if writes.is_empty() {
                pending.remove(&self.key);
            }
        }
        drop(pending);
        self.done.cancel();
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a turn writes at its end.
#[derive(Clone)]
struct Write {
    state: AgentState,
    revision: Revision,
    /// The turn's messages for the log: its inputs, then the reply message.
    messages: Vec<Msg>,
}

/// The context's copy of a parked reply message, as the log's would be: a call submitted for
/// external execution had its `TOOL_RESULT_START` event, which put an empty running result in
/// the log's message (the context gets the result only when it arrives). Without it, the result
/// event and the deltas that follow would both add the output.
fn with_started_results(mut msg: Msg) -> Msg {
    use as_message::{ContentBlock, TextOrBlocks, ToolCallState, ToolResultBlock, ToolResultState};
    let started: Vec<ContentBlock> = crate::run::unanswered(&msg)
        .into_iter()
        .filter(|c| c.state == ToolCallState::Submitted)
        .map(|c| {
            ContentBlock::ToolResult(ToolResultBlock::new(
                c.id.clone(),
                c.name.clone(),
                TextOrBlocks::Blocks(Vec::new()),
                ToolResultState::Running,
            ))
        })
        .collect();
    msg.content.extend(started);
    msg
}

/// Empties the log copy's results of calls the state still waits for (as `TOOL_RESULT_START` left
/// them): output there came from a resume that was dropped before the result reached the state,
/// and it streams again when the result is sent again. Only calls the state's copy holds: the rest
/// of the log's copy was compressed out of the context (its calls were all answered then).
fn restart_unanswered_results(logged: &mut Msg, current: &Msg) {
    use as_message::{ContentBlock, TextOrBlocks, ToolResultState};
    let answered: std::collections::HashSet<&str> = current.tool_result_ids().collect();
    let waiting: std::collections::HashSet<&str> = current
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if !answered.contains(c.id.as_str()) => Some(c.id.as_str()),
            _ => None,
        })
        .collect();
    for b in &mut logged.content {
        if let ContentBlock::ToolResult(r) = b
            && waiting.contains(r.id.as_str())
        {
            r.output = TextOrBlocks::Blocks(Vec::new());
            r.state = ToolResultState::Running;
            r.metadata.clear();
        }
    }
}

/// Whether `logged` (the message log's copy of a reply message) is behind `current` (the state's
/// copy): the state's tool calls, with their states, are not the last calls of the log's copy.
/// The state's copy may hold fewer calls than the log's, its tail, when a compression during the
/// reply split the message (§9.2): that is not behind. A call the log lacks, or one in another
/// state, is.
fn log_behind(logged: &Msg, current: &Msg) -> bool {
    use as_message::ContentBlock;
    let calls = |m: &Msg| -> Vec<(String, as_message::ToolCallState)> {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some((c.id.clone(), c.state)),
                _ => None,
            })
            .collect()
    };
    !calls(logged).ends_with(&calls(current))
}

/// A failed final write as [`AgentError::Unsaved`] (a storage failure; anything else as it is).
fn unsaved(e: AgentError, write: Write) -> AgentError {
    match e {
        AgentError::Storage(error) => AgentError::Unsaved(Box::new(UnsavedTurn {
            error,
            state: write.state,
            revision: write.revision,
            messages: write.messages,
        })),
        other => other,
    }
}

impl Write {
    /// [`Write::persist`], unless the turn's lock was lost (`lost`, or the guard says so now):
    /// another runner may hold the session, so nothing is written and the turn ends unsaved
    /// (a `Conflict`: [`SessionRunner::save_unsaved`] writes it under the lock again).
    async fn persist_held(
        &self,
        storage: &SharedStorage,
        key: &SessionKey,
        guard: Option<&dyn LockGuard>,
        lost: bool,
    ) -> Result<(Revision, Option<String>)> {
        if lost || guard.is_some_and(LockGuard::is_lost) {
            return Err(AgentError::Storage(as_storage::StorageError::new(
                as_storage::StorageErrorKind::Conflict,
                storage.backend_name(),
                "save_turn",
                format!(
                    "the session lock of {key} was lost during the turn (another runner may hold the session), \
                     so nothing was written"
                ),
            )));
        }
        self.persist(storage, key).await
    }

    /// The turn's conditional write: the state and the message log (inputs, then the reply
    /// message) with [`as_storage::StorageBase::save_turn`], one all-or-nothing write on the
    /// bundled backends, so a runner whose revision is stale appends nothing either.
    ///
    /// Once the state is written the turn has happened: a failure of the message log after that
    /// (only a backend without atomic turns can report one) is returned beside the new revision
    /// (and logged), not as the turn's error, so a caller never retries a turn whose state was saved.
    async fn persist(&self, storage: &SharedStorage, key: &SessionKey) -> Result<(Revision, Option<String>)> {
        let messages = &self.messages;
        match storage.save_turn(key, &self.state, Some(&self.revision), messages).await {
            Ok(saved) => {
                let log_error = saved.log_error.map(|e| {
                    tracing::error!(session = %key, error = %e, "the state was saved but the message log was not");
                    format!("message log: {e}")
                });
                Ok((saved.revision, log_error))
            }
            // A write re-sent after its answer was lost (a reconnecting client) reports a conflict
            // although its first run landed: when what is stored is this very state (its fresh
            // reply_id makes another writer's equal state a same-bytes case), the turn is saved.
            Err(e) if e.kind() == as_storage::StorageErrorKind::Conflict => match storage.get_session(key).await? {
                Some(rec) if rec.state == self.state => {
                    Ok((rec.revision(), complete_log(storage, key, messages).await))
                }
                _ => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }
}

/// After a re-sent write whose first run landed: an atomic `save_turn`
/// ([`as_storage::Capabilities::atomic_turns`]) wrote the messages with the state, so nothing is
/// left to do (and the log may have moved on since). A two-step one stopped at the state: the
/// messages are written unless the log already ends with exactly them (whole messages, after
/// `upsert_message`'s rule folds repeated ids into their last version; a resume's reply message
/// has the id of the parked version the log ends with, so ids alone would not tell). Returns a
/// log failure.
async fn complete_log(storage: &SharedStorage, key: &SessionKey, messages: &[Msg]) -> Option<String> {
    if storage.capabilities().atomic_turns {
        return None;
    }
    let mut folded: Vec<&Msg> = Vec::with_capacity(messages.len());
    for m in messages {
        match folded.last_mut() {
            Some(last) if last.id == m.id => *last = m,
            _ => folded.push(m),
        }
    }
    if folded.is_empty() {
        return None;
    }
    let n = i64::try_from(folded.len()).unwrap_or(i64::MAX);
    let tail = match storage.list_messages(key, -n, n).await {
        Ok(tail) => tail,
        Err(e) => return Some(format!("message log: {e}")),
    };
    if tail.iter().eq(folded.iter().copied()) {
        return None;
    }
    for m in messages {
        if let Err(e) = storage.upsert_message(key, m).await {
            tracing::error!(session = %key, error = %e, "the state was saved but the message log was not");
            return Some(format!("message log: message {}: {e}", m.id));
        }
    }
    None
}

/// Holds a turn's state while the reply runs; persists it from `Drop` when the turn future is dropped.
struct PendingWrite {
    armed: bool,
    state: AgentState,
    /// The reply's start flag: unset, the state is as loaded and there is nothing to write.
    started: StartFlag,
    /// The partial model output the reply saved without events, if it stopped during a model call.
    unsent: UnsentSlot,
    revision: Revision,
    /// The reply message for the log, built from the events taken (see [`PendingWrite::reply_for_log`]).
    log: ReplyLog,
    inputs: Vec<Msg>,
    storage: SharedStorage,
    key: SessionKey,
    background: Background,
    /// The session lock, released after the write.
    guard: Option<Box<dyn LockGuard>>,
}

/// The log's reply message, built from the events the caller took (2.0.4's `Msg.append_event`).
struct ReplyLog {
    msg: Option<Msg>,
    /// While a model call is under way (its `MODEL_CALL_START` taken, not its `MODEL_CALL_END`):
    /// where its output starts in `msg`.
    model_from: Option<usize>,
}

impl ReplyLog {
    /// Applies an event the caller took.
    fn apply(&mut self, ev: &AgentEvent) {
        if let AgentEvent::ReplyStart(s) = ev {
            self.msg = Some(Msg::from_reply_start(s));
            return;
        }
        let Some(m) = self.msg.as_mut() else { return };
        m.append_event(ev);
        match ev {
            AgentEvent::ModelCallStart(e) if e.reply_id == m.id => self.model_from = Some(m.content.len()),
            AgentEvent::ModelCallEnd(e) if e.reply_id == m.id => self.model_from = None,
            _ => {}
        }
    }
}

impl PendingWrite {
    /// The reply message to log, once the reply is gone: the one built from the events taken, made
    /// the state's (spec §14.6.5: the log's reply Msg and the session state are written together).
    ///
    /// They differ when the reply stopped without its closing events (its future dropped, or an error):
    /// the reply then left the state consistent by itself, with no events. The output of a model call
    /// under way is logged as saved ([`UnsentOutput`], in place of what its events had built so far),
    /// and the tool calls and results are made the state's copy's ([`reconcile_calls`]).
    fn reply_for_log(&mut self) -> Option<Msg> {
        let mut msg = self.log.msg.take()?;
        if let (Some(from), Some(output)) = (self.log.model_from.take(), self.unsent.take()) {
            msg.content.truncate(from);
            msg.content.extend(output.content);
            if let Some(u) = output.usage {
                crate::reply_msg::add_usage(&mut msg.usage, u.input_tokens, u.output_tokens);
            }
        }
        if let Some(current) = self.state.context.iter().rev().find(|m| m.id == msg.id) {
            reconcile_calls(&mut msg, current);
        }
        Some(msg)
    }

    fn take(&mut self) -> (Write, Option<Box<dyn LockGuard>>) {
        let reply = self.reply_for_log();
        let write = Write {
            state: std::mem::take(&mut self.state),
            revision: self.revision.clone(),
            messages: std::mem::take(&mut self.inputs).into_iter().chain(reply).collect(),
        };
        (write, self.guard.take())
    }
}

/// Makes the tool calls and results of `logged` (the log's reply message) those of `current` (the
/// state's copy, which may hold only its tail after a compression): each call gets the state's
/// state (a call the log lacks is added), and each result the log lacks, or has only started (its
/// `TOOL_RESULT_END` never came), becomes the state's. A result the log has whole is kept: the
/// context's copy may be truncated (§9.3). A turn that ended with its closing events changes
/// nothing here.
fn reconcile_calls(logged: &mut Msg, current: &Msg) {
    use as_message::{ContentBlock, ToolResultState};
    for block in &current.content {
        match block {
            ContentBlock::ToolCall(c) => {
                let found = logged.content.iter_mut().find_map(|b| match b {
                    ContentBlock::ToolCall(l) if l.id == c.id => Some(l),
                    _ => None,
                });
                match found {
                    Some(l) => l.state = c.state,
                    None => logged.content.push(block.clone()),
                }
            }
            ContentBlock::ToolResult(r) => {
                let found =
                    logged.content.iter_mut().find(|b| matches!(b, ContentBlock::ToolResult(l) if l.id == r.id));
                match found {
                    Some(ContentBlock::ToolResult(l)) if l.state != ToolResultState::Running => {}
                    Some(l) => *l = block.clone(),
                    None => logged.content.push(block.clone()),
                }
            }
            _ => {}
        }
    }
}

impl Drop for PendingWrite {
    fn drop(&mut self) {
        if !self.armed {
            // The turn took its write and its lock guard (or dropped the guard: best-effort release).
            return;
        }
        let (write, guard) = self.take();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            if self.started.get() {
                tracing::error!(session = %self.key, "turn dropped outside a tokio runtime: its state was not saved");
            }
            return;
        };
        let started = self.started.get();
        let (storage, key) = (Arc::clone(&self.storage), self.key.clone());
        // Registered now, before the task runs: the session's next turn waits for it.
        let pending = self.background.begin(&key);
        // Unstarted: nothing to write, only the lock to release (after nothing, so at once).
        let task = handle.spawn(async move {
            if started && let Err(e) = write.persist_held(&storage, &key, guard.as_deref(), false).await {
                tracing::error!(session = %key, error = %e, "saving a dropped turn failed");
            }
            release(guard, &key).await;
            drop(pending);
        });
        self.background.track(task);
    }
}

/// The first call a confirmation or external result answers that the stored state no longer
/// waits for because it is already finished (answered by another writer since the caller loaded
/// the session). A call the state never had is left to the agent (an unexpected event).
///
/// Only the answered reply's calls count (spec §4, §7: ids are matched against the parked message):
/// the message the answer's `reply_id` names and the agent's messages at the end of the context
/// (2.0.4 parks calls in the last own message whatever its id). Call ids repeat across replies
/// (providers number calls per response), so an older reply's finished call with the same id says
/// nothing; nor does a finished call whose id the parked message still waits for.
fn answered_meanwhile(input: &ReplyInput, state: &AgentState, name: &str) -> Option<String> {
    use as_message::{ContentBlock, Role, ToolCallState};
    let (reply_id, ids): (&str, Vec<&str>) = match input {
        ReplyInput::Confirm(e) => (&e.reply_id, e.confirm_results.iter().map(|r| r.tool_call.id.as_str()).collect()),
        ReplyInput::External(e) => (&e.reply_id, e.execution_results.iter().map(|r| r.id.as_str()).collect()),
        _ => return None,
    };
    let waiting: std::collections::HashSet<&str> =
        crate::run::own_unanswered(state, name).into_iter().map(|c| c.id.as_str()).collect();
    let own_tail = state.context.iter().rev().take_while(|m| m.role == Role::Assistant && m.name == name);
    let named = state.context.iter().rev().find(|m| m.id == reply_id);
    let finished = |id: &str| {
        own_tail
            .clone()
            .chain(named)
            .flat_map(|m| m.content.iter())
            .any(|b| matches!(b, ContentBlock::ToolCall(c) if c.id == id && c.state == ToolCallState::Finished))
    };
    ids.into_iter().find(|id| !waiting.contains(id) && finished(id)).map(str::to_owned)
}

/// Whether `input` is a run with no input (`reply(None)`).
fn is_no_input(input: &ReplyInput) -> bool {
    matches!(input, ReplyInput::Messages(msgs) if msgs.is_empty())
}

fn incoming_event(input: &ReplyInput) -> Option<AgentEvent> {
    match input {
        ReplyInput::Confirm(e) => Some(AgentEvent::UserConfirmResult(e.clone())),
        ReplyInput::External(e) => Some(AgentEvent::ExternalExecutionResult(e.clone())),
        ReplyInput::Interrupt(e) => Some(AgentEvent::UserInterrupt(e.clone())),
        ReplyInput::Messages(_) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use futures::FutureExt as _;

    use super::*;

    /// A session's next turn waits for its registered writes, and only its own session's; the
    /// registry forgets a write once it is done (also when its task never ran: the guard drops).
    #[tokio::test]
    async fn a_pending_write_is_waited_for_by_its_session_only_and_then_forgotten() {
        let writes = Background::default();
        let (a, b) = (SessionKey::new("u", "a", "s1"), SessionKey::new("u", "a", "s2"));
        let first = writes.begin(&a);
        let second = writes.begin(&a);
        assert!(writes.settled(&b).now_or_never().is_some(), "another session does not wait");
        assert!(writes.settled(&a).now_or_never().is_none(), "its session waits");
        drop(first);
        assert!(writes.settled(&a).now_or_never().is_none(), "until every write is done");
        let waiting = tokio::spawn({
            let writes = Arc::clone(&writes);
            let a = a.clone();
            async move { writes.settled(&a).await }
        });
        drop(second);
        waiting.await.unwrap();
        assert!(lock(&writes.pending).is_empty(), "no entry left");
    }
}
