//! The storage trait and its request/response types.

use std::fmt;
use std::sync::Arc;

use as_message::Msg;
use as_state::AgentState;
use async_trait::async_trait;

use crate::error::Result;
use crate::key::{Owner, SessionKey};
use crate::record::{Revision, SessionConfig, SessionRecord, SessionSource};
use crate::timestamp::Timestamp;

/// What a backend supports. The conformance suite reads this to decide which scenarios apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Keys expire (sliding TTL).
    pub ttl: bool,
    /// Several processes can share the store safely.
    pub cross_process: bool,
    /// State survives a process restart.
    pub durable: bool,
    /// [`StorageBase::save_turn`] writes the state and the messages as one all-or-nothing write
    /// (not the default implementation's two steps).
    pub atomic_turns: bool,
}

impl Capabilities {
    /// No optional capability.
    pub const fn none() -> Self {
        Self { ttl: false, cross_process: false, durable: false, atomic_turns: false }
    }

    /// Sets `ttl`.
    pub const fn with_ttl(mut self, v: bool) -> Self {
        self.ttl = v;
        self
    }

    /// Sets `cross_process`.
    pub const fn with_cross_process(mut self, v: bool) -> Self {
        self.cross_process = v;
        self
    }

    /// Sets `durable`.
    pub const fn with_durable(mut self, v: bool) -> Self {
        self.durable = v;
        self
    }

    /// Sets `atomic_turns`.
    pub const fn with_atomic_turns(mut self, v: bool) -> Self {
        self.atomic_turns = v;
        self
    }
}

/// Arguments of [`StorageBase::upsert_session`].
#[derive(Clone, Debug)]
pub struct UpsertSession {
    /// The owner.
    pub owner: Owner,
    /// `None` (or empty): create with a fresh id. An id that does not exist: create under that id.
    /// An existing id: update.
    pub session_id: Option<String>,
    /// The config (replaces the whole stored config on update).
    pub config: SessionConfig,
    /// On create, the initial state (`None`: a fresh one); on update, the new state (`None`: keep).
    pub state: Option<AgentState>,
    /// Origin (create only).
    pub source: SessionSource,
    /// The schedule that created it (create only).
    pub source_schedule_id: Option<String>,
}

impl UpsertSession {
    /// A create-or-update for `owner` with `config` and no explicit id or state.
    pub fn new(owner: Owner, config: SessionConfig) -> Self {
        Self { owner, session_id: None, config, state: None, source: SessionSource::User, source_schedule_id: None }
    }

    /// Checks what [`StorageBase::upsert_session`] needs before any I/O: the owner, and the
    /// session id and schedule id when they are given and not empty (empty means "a fresh id" and
    /// "no schedule"), with [`crate::validate_id`]. Backends call it first.
    pub fn validate(&self) -> Result<()> {
        self.owner.validate()?;
        for (what, id) in [("session_id", &self.session_id), ("source_schedule_id", &self.source_schedule_id)] {
            if let Some(id) = id.as_deref().filter(|s| !s.is_empty()) {
                crate::validate_id(what, id)?;
            }
        }
        Ok(())
    }

    /// Targets the session `id`.
    pub fn with_session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Sets the state.
    pub fn with_state(mut self, state: AgentState) -> Self {
        self.state = Some(state);
        self
    }

    /// Marks the session as created by `schedule_id`.
    pub fn with_schedule(mut self, schedule_id: impl Into<String>) -> Self {
        self.source = SessionSource::Schedule;
        self.source_schedule_id = Some(schedule_id.into());
        self
    }
}

/// A page request for [`StorageBase::list_sessions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Most sessions to return (at least 1 is used). Records that cannot be read are reported
    /// in [`SessionPage::errors`]; whether they take a place of the page is the backend's choice
    /// (SQLite's do, Redis's do not), so a page may hold fewer than `limit` sessions and still
    /// have a next one.
    pub limit: usize,
    /// The `next_cursor` of the previous page; `None` for the first page.
    pub cursor: Option<String>,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self { limit: 50, cursor: None }
    }
}

impl PageRequest {
    /// The first page of `limit` items.
    pub fn first(limit: usize) -> Self {
        Self { limit, cursor: None }
    }
}

/// One line of a session listing; built without parsing the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// `config.name`.
    pub name: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last write time.
    pub updated_at: Timestamp,
    /// Origin.
    pub source: SessionSource,
    /// Messages in `state.context` (`None` when the backend cannot tell without parsing).
    pub message_count: Option<u64>,
    /// Size of the stored record in bytes.
    pub size_bytes: u64,
}

/// A stored record that could not be read during a listing.
#[derive(Debug)]
pub struct ListError {
    /// The session id whose record is bad.
    pub session_id: String,
    /// Why.
    pub error: crate::StorageError,
}

/// A page of sessions, newest first (by `created_at`, then id).
#[derive(Debug, Default)]
pub struct SessionPage {
    /// The sessions of this page.
    pub sessions: Vec<SessionSummary>,
    /// Records that could not be read (reported, not fatal).
    pub errors: Vec<ListError>,
    /// Pass this as `cursor` for the next page; `None` at the end.
    pub next_cursor: Option<String>,
}

/// How [`StorageBase::import_record`] treats a session id the user already has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImportMode {
    /// Write only when the user has no session with that id; otherwise fail with
    /// [`crate::StorageErrorKind::AlreadyExists`] and write nothing.
    #[default]
    CreateOnly,
    /// Replace an existing session of the **same owner** (record, index entries and message
    /// log) as one write. A session id of the same user owned by another agent is still
    /// `AlreadyExists`: an import never takes an id over from another agent.
    Overwrite,
}

/// What [`StorageBase::import_record`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImportOutcome {
    /// The session did not exist and was written.
    Created,
    /// The session existed (same owner) and was replaced ([`ImportMode::Overwrite`]).
    Replaced,
}

/// The session storage contract. Backends implement it; everyone else holds an
/// `Arc<dyn StorageBase>` ([`SharedStorage`]).
///
/// # Contract
///
/// Every clause below is checked by a scenario of the conformance suite
/// (`as_storage::conformance`, feature `conformance`), named in brackets, except **Listing is
/// cheap**: not parsing states is a cost, which no scenario can observe through the trait, and a
/// record that cannot be read can only be planted behind the backend's back, so each backend tests
/// that part itself (the Redis and SQLite backends do).
///
/// * **Lifecycle.** Call [`StorageBase::open`] before use and [`StorageBase::close`] after; both are
///   idempotent. Methods called on a closed store fail with `Unavailable` (a store that was
///   never opened may fail the same way; [`crate::InMemoryStorage`] does); the optional methods may
///   answer `Unsupported` instead. `open` after `close` reopens the store, and what it held
///   before is there again (records, message logs and listing entries) \[`lifecycle`\].
/// * **Ids.** Every id (a non-empty `source_schedule_id` included) is checked with
///   [`crate::validate_id`] before any I/O, and before the store's own state is looked at (a bad id
///   is `InvalidKey` on a closed store too); a bad one fails with
///   [`crate::StorageErrorKind::InvalidKey`] and nothing is read or written. Every id it accepts
///   (up to [`crate::MAX_ID_BYTES`], with dots, `@` or non-ASCII letters) is usable. Message ids are
///   data inside the log, not keys, and are not checked: any text (`tool:call:1`, one with spaces or
///   quotes, the empty one, as AgentScope 2.0.4 takes them) is written, found by `get_message` and
///   replaced as the log's last message like any other \[`invalid_ids_are_rejected`\]. A fresh session id
///   the backend generates is checked the same way ([`crate::generate_session_id`]: an application's id
///   factory may return one no key can address), `InvalidKey` and nothing written; no scenario checks it
///   (the factory is process-wide), so each bundled backend tests it in a test binary of its own.
/// * **Addressing and ownership.** A session is addressed by `(user_id, agent_id, session_id)`;
///   session ids are unique per user (as in the 2.0.4 Redis layout). Every method sees a session
///   only under the exact owner that created it: a wrong `agent_id` (or `user_id`) behaves as if
///   the session did not exist (`None`, `NotFound`, `false`, empty), and never changes it. Of
///   several agents of a user creating one session id at the same time, exactly one creates it and
///   the others get `AlreadyExists` \[`ownership_is_exact`, `list_is_scoped_to_owner`,
///   `concurrent_creates_of_one_id_have_one_winner`\].
/// * **Not found.** `get_session` and `get_message` return `None`; `update_session_state` and
///   `upsert_message` fail with `NotFound` and create nothing; `delete_session` returns `false`;
///   `list_messages` of a missing session is empty \[`get_missing_is_none`,
///   `update_missing_is_not_found`, `messages_require_session`\].
/// * **One session id.** What is stored always has `state.session_id == id`, whatever the caller
///   passed: backends write through [`crate::encode_record`] (or build records with
///   [`crate::SessionRecord::from_parts`]), which substitute the record's id \[`state_session_id_is_forced`\].
/// * **Atomicity.** Every write is all-or-nothing; no reader ever sees half a write, a record
///   without its index entry, or an index entry or message log outliving a completed delete; an
///   update (or a message write) racing a delete never brings the record (or its log) back; a
///   message write never overwrites another writer's message \[`concurrent_readers_see_whole_writes`,
///   `delete_racing_update_leaves_no_zombie`, `delete_cascades`, `concurrent_message_writers_overwrite_nothing`,
///   `message_racing_delete_leaves_no_log`\].
/// * **Revisions.** Each record's revision is its stored `updated_at` ([`Revision`]); a create sets
///   `updated_at` equal to `created_at` (so a caller can tell from the returned record whether its
///   upsert created the session; on every path: a fresh id, an explicit one, one whose session was
///   deleted), every write of the record makes it strictly greater than before
///   (except a verbatim [`StorageBase::import_record`], which writes the `updated_at` it is given,
///   older or not: a compare-and-set from a revision read before an overwrite may then succeed), so
///   no two writes return the same revision, however concurrent, unconditional and behind the
///   stored `updated_at` the clock is; the revision a write returns is the one a following read
///   sees \[`create_and_get_roundtrip`, `create_with_explicit_or_empty_id`, `revisions_strictly_increase`,
///   `concurrent_readers_see_whole_writes`, `concurrent_plain_writes_get_distinct_revisions`\].
/// * **Compare-and-set.** `update_session_state` with `expected` writes only when the stored
///   revision equals it, otherwise fails with `Conflict` and writes nothing; of N concurrent
///   conditional writers from the same revision exactly one wins \[`cas_rejects_stale_revision`,
///   `concurrent_cas_writers_lose_no_update`\].
/// * **Ordering.** `list_sessions` is newest first (`created_at` descending, then id descending,
///   also across page boundaries) with a stable cursor; a cursor the store cannot read is
///   `InvalidInput`, never taken for the first page; messages are kept in append order
///   \[`list_is_newest_first`, `list_pagination_is_stable`, `list_ties_are_ordered_by_id`\].
/// * **Turns.** [`StorageBase::save_turn`] leaves what `update_session_state` then `upsert_message`
///   of each message would leave, and a failed state update (`Conflict`, `NotFound`) writes no
///   message; of N concurrent conditional `save_turn`s from one revision exactly one wins and the
///   log holds exactly the winner's messages. With [`crate::Capabilities::atomic_turns`], any failure
///   (`TooLarge` of a message included) leaves the state and the log as they were, except an
///   `Unavailable` whose outcome is unknown (the request was sent), after which the turn is whole or
///   absent
///   \[`save_turn_is_update_then_messages`, `save_turn_is_conditional`, `save_turn_is_all_or_nothing`,
///   `save_turn_failure_at_any_write_leaves_nothing` (needs the factory's fault hook)\].
/// * **Size.** A record (or message) over the backend's configured limit fails with
///   [`crate::StorageErrorKind::TooLarge`] and nothing is written \[`too_large_is_rejected_before_writing`\].
/// * **Depth.** A record (its envelope and state) or message nested deeper than
///   [`as_message::MAX_JSON_DEPTH`] levels, which no reader (here or in AgentScope 2.0.4) reads back,
///   fails with [`crate::StorageErrorKind::InvalidInput`] and nothing is written; one at the limit is
///   written and reads back (backends encode with [`crate::encode_checked_record`] or call
///   [`crate::check_record_depth`], and call [`crate::check_message_depth`]) \[`too_deep_is_rejected_before_writing`\].
/// * **Timestamps.** Every timestamp a backend writes is one Python's `datetime` holds (years 1 to
///   9999, [`crate::Timestamp::in_python_range`]), which AgentScope 2.0.4 and this crate read back.
///   A write whose next revision would leave that range (after a record whose `updated_at` is
///   9999-12-31T23:59:59.999999: `update_session_state`, `save_turn`, an `upsert_session` that
///   updates) fails with [`crate::StorageErrorKind::InvalidInput`] and writes nothing, state nor
///   message; the record stays readable and deletable. `import_record` of a record with a timestamp
///   outside that range fails the same way, writing nothing (backends encode with
///   [`crate::encode_checked_record`] or call [`crate::check_record_timestamps`])
///   \[`timestamps_stay_in_python_range`\].
/// * **Raw reads.** [`StorageBase::get_session_raw`] sees exactly what
///   [`StorageBase::get_session`] sees (the same ownership, `None` alike), and its text reads back
///   as that record \[`get_session_raw_is_the_record`\].
/// * **Listing is cheap.** A listing reads summaries without parsing states; a record that
///   cannot be read is reported in [`SessionPage::errors`] instead of failing the page, on one
///   page of a listing rather than on every page (where is the backend's choice: SQLite reports
///   it at its place in the order, Redis on the first page).
/// * **Expiry** (optional, [`crate::Capabilities::ttl`]). With a TTL configured, a session that
///   is not written for that long disappears with its message log and its listing entry; writes
///   restart the TTL (of the record, its message log and its listing entry alike: a session whose
///   state alone is written stays whole), reads do not \[`ttl_expires_idle_sessions`,
///   `ttl_restarts_on_writes`\].
/// * **Verbatim import** (optional, [`StorageBase::import_record`]). A backend either reports
///   `Unsupported` (the default implementation) or writes the record exactly as given: every
///   field, `created_at`, `updated_at`, `source`, `source_schedule_id` and `team_id` included,
///   reads back equal (with `state.session_id` forced to the id), together with its index
///   entries and its message log, all or nothing \[`import_record_is_verbatim`\]. With
///   [`ImportMode::CreateOnly`] an existing id of the user is `AlreadyExists` and nothing is
///   written; [`ImportMode::Overwrite`] replaces a session of the same owner (its old message log
///   included) and still refuses an id owned by another agent \[`import_record_modes`\]. Ids are
///   validated (`InvalidKey`, nothing written) and size limits apply (`TooLarge`, nothing
///   written) \[`import_record_validates`\].
/// * **Agents of a user** (optional, [`StorageBase::list_agents`]). A backend either reports
///   `Unsupported` (the default) or returns, sorted ascending and without duplicates, the
///   agent ids under which the user has at least one session: another user's agents are never
///   listed, and an agent whose sessions were all deleted is no longer listed. (A backend whose
///   keys expire may still list an agent whose sessions all expired; its listing is then empty.)
///   The user id is validated \[`list_agents_is_scoped_and_sorted`\].
/// * **Users** (optional, [`StorageBase::list_users`]). A backend either reports `Unsupported`
///   (the default) or returns, sorted ascending and without duplicates, every user id with at
///   least one session; a user whose sessions were all deleted is no longer listed (with the same
///   expiry caveat as agents) \[`list_users_is_complete_and_sorted`\].
#[async_trait]
pub trait StorageBase: Send + Sync + fmt::Debug {
    /// The backend's short name (`"memory"`, `"redis"`, `"sqlite"`).
    fn backend_name(&self) -> &'static str;

    /// What the backend supports.
    fn capabilities(&self) -> Capabilities;

    /// Connects / opens files. Idempotent.
    async fn open(&self) -> Result<()>;

    /// Releases resources it owns. Idempotent.
    async fn close(&self) -> Result<()>;

    /// Creates or updates a session.
    ///
    /// * No id, or an empty id: create with a fresh id.
    /// * An id with no session under this owner: create under that id. If the id is taken by
    ///   another owner: `AlreadyExists`.
    /// * An existing session: replace `config` wholesale, replace `state` when given, bump
    ///   `updated_at`; `source` and `source_schedule_id` are ignored; `created_at` and `team_id` kept.
    ///
    /// Returns the record as stored.
    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord>;

    /// The per-turn hot path: replaces the state only and bumps `updated_at`.
    ///
    /// * `expected = None`: last writer wins, atomically.
    /// * `expected = Some(rev)`: compare-and-set; fails with `Conflict` (nothing written) when the
    ///   stored revision differs.
    /// * A missing session fails with `NotFound` and nothing is created (a delete that happened
    ///   meanwhile is never undone).
    ///
    /// Returns the new revision.
    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision>;

    /// Saves a turn: [`StorageBase::update_session_state`]`(key, state, expected)`, then each of
    /// `messages` in order as [`StorageBase::upsert_message`] writes it (appended, or replacing
    /// the log's last message when the ids are equal, so a message listed twice in a row is
    /// written once, as its last version).
    ///
    /// With [`Capabilities::atomic_turns`] the backend does both as **one** all-or-nothing write:
    /// a `Conflict` (a stale `expected`), `NotFound`, `TooLarge` or `InvalidInput` (the record or
    /// any message), a corrupt log or a failure leaves the state and the log exactly as they were.
    /// One kind of error is the exception: `Unavailable` after the request was sent (a timeout, a
    /// connection lost before the answer) cannot say whether the write landed. It is then whole or
    /// absent, never half: re-read to know which. So a writer
    /// whose compare-and-set fails (a runner that lost its session lock, say) cannot append to the
    /// log either, and a crash never leaves a saved state without its messages.
    ///
    /// The default implementation is the two steps in sequence: a failure of the state update is
    /// the call's error and writes no message; a message write that fails after the state was
    /// written stops the log there and is reported in [`SavedTurn::log_error`], beside the new
    /// revision (the turn's state *was* saved, so the caller must not retry it as a whole).
    ///
    /// Pass `expected` for exactly-once messages: without it a backend retries a write that lost to
    /// another writer, and when the "loser" was its own earlier run (a command a client re-sent
    /// after its answer was lost: Redis Cluster clients do) the messages are written twice. With
    /// it, that case is a `Conflict` and the caller can check what landed (the agent runner does),
    /// or a success when the backend recognises its own re-sent write (the Redis backend does: the
    /// record and the log's tail are exactly this turn's), with the messages written once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> as_storage::Result<()> {
    /// use as_message::Msg;
    /// use as_storage::{InMemoryStorage, Owner, SessionConfig, StorageBase, UpsertSession};
    ///
    /// let store = InMemoryStorage::new();
    /// store.open().await?;
    /// let owner = Owner::new("alice", "friday");
    /// let rec = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await?;
    /// let key = owner.session(rec.id.clone());
    ///
    /// let mut state = rec.state.clone();
    /// let question = Msg::user("alice", "hi");
    /// let answer = Msg::assistant("friday", "hello");
    /// state.context.extend([question.clone(), answer.clone()]);
    /// let saved = store.save_turn(&key, &state, Some(&rec.revision()), &[question, answer]).await?;
    /// assert!(saved.log_error.is_none());
    /// assert_eq!(store.list_messages(&key, 0, 0).await?.len(), 2);
    ///
    /// // A writer still holding the old revision changes nothing, the log included.
    /// let stale = store.save_turn(&key, &state, Some(&rec.revision()), &[Msg::user("alice", "late")]).await;
    /// assert_eq!(stale.unwrap_err().kind(), as_storage::StorageErrorKind::Conflict);
    /// assert_eq!(store.list_messages(&key, 0, 0).await?.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    async fn save_turn(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<SavedTurn> {
        // A message no reader would take back is refused before the state is written (the depth
        // clause: nothing written), as atomic backends refuse it.
        for m in messages {
            crate::check_message_depth(self.backend_name(), "save_turn", m)?;
        }
        let revision = self.update_session_state(key, state, expected).await?;
        for m in messages {
            if let Err(e) = self.upsert_message(key, m).await {
                return Ok(SavedTurn { revision, log_error: Some(e) });
            }
        }
        Ok(SavedTurn::new(revision))
    }

    /// The record, or `None` when absent (or owned by someone else).
    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>>;

    /// The record's JSON text exactly as stored (unknown fields, key order and number spelling
    /// of another writer included), or `None` as for [`StorageBase::get_session`]. For
    /// administration (`sessions show`). The default implementation is the canonical encoding of
    /// [`StorageBase::get_session`]'s record, for backends that do not keep the text.
    async fn get_session_raw(&self, key: &SessionKey) -> Result<Option<String>> {
        Ok(self.get_session(key).await?.map(|r| r.to_canonical_json()))
    }

    /// A page of the owner's sessions, newest first (`created_at` descending, then id
    /// descending), with a stable cursor: sessions created after the first page never
    /// appear on later pages and no session is repeated or skipped.
    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage>;

    /// Deletes the session, its index entries and its message log, all or nothing.
    /// Returns whether it existed.
    async fn delete_session(&self, key: &SessionKey) -> Result<bool>;

    /// Appends `msg` to the session's message log, or replaces the last message when its id
    /// equals `msg.id` (atomically: another writer's message is never overwritten).
    /// `NotFound` when the session does not exist.
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()>;

    /// The newest message with that id, or `None` (also when the session does not exist).
    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>>;

    /// Messages in chronological order: exactly what Redis `LRANGE messages offset offset+limit-1`
    /// returns (see [`crate::message_range`]): negative offsets count from the end, and
    /// `offset = 0, limit = 0` is everything. Empty when the session does not exist.
    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>>;

    /// Writes `record` verbatim (for `sessions import` and migrations between backends): every
    /// field as given, timestamps included, plus its index entries and, as its message log,
    /// exactly `messages` (in order), in one all-or-nothing write. `state.session_id` is stored as
    /// the record's id. See [`ImportMode`] for an id that exists already.
    ///
    /// Unlike [`StorageBase::upsert_session`] this does not bump `updated_at`; the revision of
    /// the imported record is its `updated_at` as given.
    ///
    /// The default implementation fails with [`crate::StorageErrorKind::Unsupported`] (so a backend
    /// written before this method existed keeps compiling); callers may fall back to
    /// `upsert_session` + `upsert_message`, which is not lossless.
    async fn import_record(&self, record: &SessionRecord, messages: &[Msg], mode: ImportMode) -> Result<ImportOutcome> {
        let _ = (record, messages, mode);
        Err(crate::StorageError::new(
            crate::StorageErrorKind::Unsupported,
            self.backend_name(),
            "import_record",
            "this backend cannot write records verbatim",
        ))
    }

    /// The agent ids under which `user_id` has at least one session, sorted ascending, without
    /// duplicates. The default implementation fails with
    /// [`crate::StorageErrorKind::Unsupported`].
    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>> {
        let _ = user_id;
        Err(crate::StorageError::new(
            crate::StorageErrorKind::Unsupported,
            self.backend_name(),
            "list_agents",
            "this backend cannot list the agents of a user",
        ))
    }

    /// The user ids that have at least one session, sorted ascending, without duplicates (for
    /// administration: `sessions validate` without `--user`). The default implementation fails
    /// with [`crate::StorageErrorKind::Unsupported`].
    async fn list_users(&self) -> Result<Vec<String>> {
        Err(crate::StorageError::new(
            crate::StorageErrorKind::Unsupported,
            self.backend_name(),
            "list_users",
            "this backend cannot list its users",
        ))
    }
}

/// Checks what [`StorageBase::import_record`] needs before any I/O: the three ids (and the
/// schedule id when there is one and it is not empty) with [`crate::validate_id`]. Backends
/// call it first.
pub fn validate_import(record: &SessionRecord) -> Result<()> {
    crate::validate_id("user_id", &record.user_id)?;
    crate::validate_id("agent_id", &record.agent_id)?;
    crate::validate_id("session_id", &record.id)?;
    if let Some(s) = record.source_schedule_id.as_deref().filter(|s| !s.is_empty()) {
        crate::validate_id("source_schedule_id", s)?;
    }
    Ok(())
}

/// What [`StorageBase::save_turn`] wrote.
#[derive(Debug)]
#[non_exhaustive]
pub struct SavedTurn {
    /// The state's new revision (as [`StorageBase::update_session_state`] returns it).
    pub revision: Revision,
    /// The state was written but the message log was not, or only partly: the first failing
    /// message write's error. Only a backend without [`Capabilities::atomic_turns`] (the default
    /// implementation) reports this; an atomic one fails the whole call instead.
    pub log_error: Option<crate::StorageError>,
}

impl SavedTurn {
    /// A turn whose state and messages were all written.
    pub fn new(revision: Revision) -> Self {
        Self { revision, log_error: None }
    }
}

/// What everyone else holds.
pub type SharedStorage = Arc<dyn StorageBase>;
