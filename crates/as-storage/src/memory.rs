//! `InMemoryStorage`: the whole contract in one process, for tests, demos and the `memory` URL.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use as_message::Msg;
use as_state::AgentState;
use async_trait::async_trait;

use crate::error::{Result, StorageError, StorageErrorKind};
use crate::helpers::{
    DEFAULT_MAX_RECORD_BYTES, SessionCursor, check_message_depth, check_size, encode_checked_record, message_range,
};
use crate::key::{Owner, SessionKey, validate_id};
use crate::record::{Revision, SessionMeta, SessionRecord};
use crate::storage::{
    Capabilities, ImportMode, ImportOutcome, PageRequest, SavedTurn, SessionPage, SessionSummary, StorageBase,
    UpsertSession, validate_import,
};
use crate::timestamp::Timestamp;

const BACKEND: &str = "memory";

/// Fresh ids a create without an id tries before it gives up with `Conflict` (as the Redis
/// backend does): a collision of two uuids is practically impossible, so running out means an id
/// factory ([`as_message::set_id_factory`]) that keeps answering ids already taken.
const MAX_FRESH_ID_ATTEMPTS: usize = 32;

const NEW: u8 = 0;
const OPEN: u8 = 1;
const CLOSED: u8 = 2;

/// A session store in process memory.
///
/// It keeps what the network backends keep: the canonical JSON bytes of every record and
/// message (so reads parse and writes serialize, as they would against Redis), plus a parsed
/// envelope ([`SessionMeta`]) per record so listings never touch the state.
/// Every operation takes one short-lived lock; serialization and parsing happen outside it,
/// and a write re-checks the revision it started from before it commits (so concurrent writers
/// never lose an update silently: a plain write retries, a conditional one reports `Conflict`).
///
/// Nothing survives the process: of the [`Capabilities`], `durable`, `cross_process` and `ttl` are `false`;
/// `atomic_turns` is `true`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> as_storage::Result<()> {
/// use as_storage::{InMemoryStorage, Owner, SessionConfig, SharedStorage, UpsertSession};
/// let store: SharedStorage = std::sync::Arc::new(InMemoryStorage::new());
/// store.open().await?;
/// let rec = store.upsert_session(UpsertSession::new(Owner::new("u1", "a1"), SessionConfig::new("ws"))).await?;
/// assert_eq!(rec.state.session_id, rec.id);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InMemoryStorage {
    max_record_bytes: usize,
    lifecycle: AtomicU8,
    inner: Mutex<Inner>,
}

/// Sessions are keyed by `(user_id, session_id)`, like the Redis layout, so one user's session
/// id belongs to exactly one agent.
type RecordKey = (String, String);

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<RecordKey, Entry>,
    /// Per owner: `(created_at, id)`, iterated backwards for newest first.
    index: HashMap<Owner, BTreeSet<(Timestamp, String)>>,
}

#[derive(Debug)]
struct Entry {
    meta: SessionMeta,
    bytes: Arc<str>,
    message_count: u64,
    /// `(message id, canonical JSON)`, oldest first.
    messages: Vec<(String, Arc<str>)>,
}

/// What [`InMemoryStorage::commit_update`] writes.
struct Update {
    meta: SessionMeta,
    bytes: String,
    message_count: u64,
    /// To upsert into the log, in order.
    messages: Vec<(String, Arc<str>)>,
}

impl Default for InMemoryStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryStorage {
    /// An empty store with the default size limit ([`DEFAULT_MAX_RECORD_BYTES`]).
    /// Call [`StorageBase::open`] before use.
    pub fn new() -> Self {
        Self { max_record_bytes: DEFAULT_MAX_RECORD_BYTES, lifecycle: AtomicU8::new(NEW), inner: Mutex::default() }
    }

    /// Sets the largest record or message accepted, in bytes.
    pub fn with_max_record_bytes(mut self, max: usize) -> Self {
        self.max_record_bytes = max;
        self
    }

    /// The configured size limit.
    pub fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }

    fn ready(&self, op: &'static str) -> Result<()> {
        match self.lifecycle.load(Ordering::Acquire) {
            OPEN => Ok(()),
            NEW => Err(err(StorageErrorKind::Unavailable, op, "the store is not open (call open first)")),
            _ => Err(err(StorageErrorKind::Unavailable, op, "the store is closed")),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave half a write: every mutation below is a
        // single insert/remove after all fallible work, so a poisoned map is still consistent.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the envelope and stored bytes of a session owned by `key`'s owner.
    fn snapshot(&self, key: &SessionKey) -> Option<(SessionMeta, Arc<str>)> {
        let inner = self.lock();
        let e = inner.sessions.get(&rk(key)).filter(|e| e.meta.agent_id == key.agent_id)?;
        Some((e.meta.clone(), e.bytes.clone()))
    }

    /// Replaces the record of `key` (and upserts `update.messages` into its log) if its revision
    /// is still `from`. `Ok(false)`: it moved on.
    fn commit_update(&self, op: &'static str, key: &SessionKey, from: &Timestamp, update: Update) -> Result<bool> {
        let mut inner = self.lock();
        let Some(e) = inner.sessions.get_mut(&rk(key)).filter(|e| e.meta.agent_id == key.agent_id) else {
            return Err(not_found(op, key));
        };
        if e.meta.updated_at != *from {
            return Ok(false);
        }
        e.meta = update.meta;
        e.bytes = update.bytes.into();
        e.message_count = update.message_count;
        for (id, json) in update.messages {
            upsert_last(&mut e.messages, id, json);
        }
        Ok(true)
    }

    /// `update_session_state` plus the messages, under one lock (`save_turn`'s atomic form).
    async fn write_turn(
        &self,
        op: &'static str,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<Revision> {
        key.validate()?;
        self.ready(op)?;
        let mut encoded = Vec::with_capacity(messages.len());
        for m in messages {
            check_message_depth(BACKEND, op, m)?;
            let json = as_message::to_json(m);
            check_size(BACKEND, op, json.len(), self.max_record_bytes)?;
            encoded.push((m.id.clone(), Arc::<str>::from(json)));
        }
        loop {
            let Some((old, _)) = self.snapshot(key) else { return Err(not_found(op, key)) };
            if let Some(exp) = expected
                && *exp != old.revision()
            {
                return Err(err(
                    StorageErrorKind::Conflict,
                    op,
                    format!("session {:?} is at revision {}, expected {exp}", key.session_id, old.revision()),
                ));
            }
            let mut meta = old.clone();
            meta.updated_at = Timestamp::now_after(&old.updated_at);
            let (bytes, _) = encode_checked_record(BACKEND, op, &meta, state)?;
            check_size(BACKEND, op, bytes.len(), self.max_record_bytes)?;
            let rev = meta.revision();
            let update = Update { meta, bytes, message_count: state.context.len() as u64, messages: encoded.clone() };
            match self.commit_update(op, key, &old.updated_at, update) {
                Ok(true) => return Ok(rev),
                Ok(false) if expected.is_some() => {
                    return Err(err(
                        StorageErrorKind::Conflict,
                        op,
                        format!("session {:?} was written concurrently", key.session_id),
                    ));
                }
                Ok(false) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    async fn create(&self, req: UpsertSession, id: String) -> Result<Option<SessionRecord>> {
        let meta = SessionMeta::created(id.clone(), &req);
        let state = req.state.clone().unwrap_or_default();
        let (bytes, _) = encode_checked_record(BACKEND, "upsert_session", &meta, &state)?;
        check_size(BACKEND, "upsert_session", bytes.len(), self.max_record_bytes)?;
        let mut inner = self.lock();
        let k = (meta.user_id.clone(), id.clone());
        if let Some(e) = inner.sessions.get(&k) {
            if e.meta.agent_id == req.owner.agent_id {
                // Created concurrently under the same owner: the caller retries as an update.
                return Ok(None);
            }
            return Err(err(
                StorageErrorKind::AlreadyExists,
                "upsert_session",
                format!("session {id:?} of user {:?} belongs to another agent", meta.user_id),
            ));
        }
        let entry = Entry {
            meta: meta.clone(),
            bytes: bytes.into(),
            message_count: state.context.len() as u64,
            messages: Vec::new(),
        };
        inner.sessions.insert(k, entry);
        inner.index.entry(req.owner.clone()).or_default().insert((meta.created_at, id));
        drop(inner);
        Ok(Some(SessionRecord::from_parts(meta, state)))
    }

    async fn update(&self, req: &UpsertSession, key: &SessionKey) -> Result<Option<SessionRecord>> {
        loop {
            let Some((old, bytes)) = self.snapshot(key) else { return Ok(None) };
            let state = match &req.state {
                Some(s) => s.clone(),
                None => parse_record(&bytes, "upsert_session")?.state,
            };
            let mut meta = old.clone();
            meta.config = req.config.clone();
            meta.updated_at = Timestamp::now_after(&old.updated_at);
            let (bytes, _) = encode_checked_record(BACKEND, "upsert_session", &meta, &state)?;
            check_size(BACKEND, "upsert_session", bytes.len(), self.max_record_bytes)?;
            let update =
                Update { meta: meta.clone(), bytes, message_count: state.context.len() as u64, messages: Vec::new() };
            match self.commit_update("upsert_session", key, &old.updated_at, update) {
                Ok(true) => return Ok(Some(SessionRecord::from_parts(meta, state))),
                Ok(false) => continue,
                // Deleted meanwhile: fall back to create-under-this-id, as if we had come later.
                Err(e) if e.kind() == StorageErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
}

fn rk(key: &SessionKey) -> RecordKey {
    (key.user_id.clone(), key.session_id.clone())
}

fn err(kind: StorageErrorKind, op: &'static str, msg: impl Into<String>) -> StorageError {
    StorageError::new(kind, BACKEND, op, msg)
}

fn not_found(op: &'static str, key: &SessionKey) -> StorageError {
    err(StorageErrorKind::NotFound, op, format!("session {:?} not found", key.session_id))
}

fn parse_record(bytes: &str, op: &'static str) -> Result<SessionRecord> {
    crate::decode_record(bytes).map_err(|e| err(StorageErrorKind::Serialization, op, e.to_string()).with_source(e))
}

#[async_trait]
impl StorageBase for InMemoryStorage {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none().with_atomic_turns(true)
    }

    async fn open(&self) -> Result<()> {
        // A closed store reopens with the sessions it held, like the durable backends.
        self.lifecycle.store(OPEN, Ordering::Release);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.lifecycle.store(CLOSED, Ordering::Release);
        Ok(())
    }

    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord> {
        req.validate()?;
        self.ready("upsert_session")?;
        let explicit = req.session_id.clone().filter(|s| !s.is_empty());
        let Some(id) = explicit else {
            // A fresh id: a collision is practically impossible, but stay correct anyway.
            for _ in 0..MAX_FRESH_ID_ATTEMPTS {
                let id = crate::generate_session_id(BACKEND, "upsert_session")?;
                match self.create(req.clone(), id).await {
                    Ok(Some(rec)) => return Ok(rec),
                    Ok(None) => continue,
                    Err(e) if e.kind() == StorageErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            return Err(err(
                StorageErrorKind::Conflict,
                "upsert_session",
                format!(
                    "{MAX_FRESH_ID_ATTEMPTS} generated session ids were all taken (does the id factory repeat itself?)"
                ),
            ));
        };
        let key = req.owner.session(id.clone());
        loop {
            if let Some(rec) = self.update(&req, &key).await? {
                return Ok(rec);
            }
            if let Some(rec) = self.create(req.clone(), id.clone()).await? {
                return Ok(rec);
            }
        }
    }

    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
        self.write_turn("update_session_state", key, state, expected, &[]).await
    }

    /// One write under the store's lock: the state and every message, or nothing.
    async fn save_turn(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<SavedTurn> {
        self.write_turn("save_turn", key, state, expected, messages).await.map(SavedTurn::new)
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>> {
        key.validate()?;
        self.ready("get_session")?;
        match self.snapshot(key) {
            Some((_, bytes)) => parse_record(&bytes, "get_session").map(Some),
            None => Ok(None),
        }
    }

    async fn get_session_raw(&self, key: &SessionKey) -> Result<Option<String>> {
        key.validate()?;
        self.ready("get_session_raw")?;
        Ok(self.snapshot(key).map(|(_, bytes)| bytes.to_string()))
    }

    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        owner.validate()?;
        self.ready("list_sessions")?;
        let cursor = page.cursor.as_deref().map(|c| SessionCursor::decode(BACKEND, c)).transpose()?;
        let limit = page.limit.max(1);
        let inner = self.lock();
        let Some(ids) = inner.index.get(owner) else { return Ok(SessionPage::default()) };
        let mut sessions = Vec::with_capacity(limit.min(ids.len()));
        let mut more = false;
        let candidates = ids.iter().rev().filter(|(c, id)| cursor.as_ref().is_none_or(|cur| cur.is_before(c, id)));
        for (_, id) in candidates {
            if sessions.len() == limit {
                more = true;
                break;
            }
            let Some(e) = inner.sessions.get(&(owner.user_id.clone(), id.clone())) else { continue };
            sessions.push(SessionSummary {
                id: e.meta.id.clone(),
                name: e.meta.config.name.clone(),
                created_at: e.meta.created_at,
                updated_at: e.meta.updated_at,
                source: e.meta.source,
                message_count: Some(e.message_count),
                size_bytes: e.bytes.len() as u64,
            });
        }
        drop(inner);
        let next_cursor = if more {
            sessions.last().map(|s| SessionCursor { created_at: s.created_at, id: s.id.clone() }.encode())
        } else {
            None
        };
        Ok(SessionPage { sessions, errors: Vec::new(), next_cursor })
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        key.validate()?;
        self.ready("delete_session")?;
        let mut inner = self.lock();
        let k = rk(key);
        if inner.sessions.get(&k).is_none_or(|e| e.meta.agent_id != key.agent_id) {
            return Ok(false);
        }
        if let Some(e) = inner.sessions.remove(&k) {
            let owner = key.owner();
            if let Some(set) = inner.index.get_mut(&owner) {
                set.remove(&(e.meta.created_at, e.meta.id));
                if set.is_empty() {
                    inner.index.remove(&owner);
                }
            }
        }
        Ok(true)
    }

    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        const OP: &str = "upsert_message";
        key.validate()?;
        self.ready(OP)?;
        check_message_depth(BACKEND, OP, msg)?;
        let json = as_message::to_json(msg);
        check_size(BACKEND, OP, json.len(), self.max_record_bytes)?;
        let mut inner = self.lock();
        let Some(e) = inner.sessions.get_mut(&rk(key)).filter(|e| e.meta.agent_id == key.agent_id) else {
            return Err(not_found(OP, key));
        };
        upsert_last(&mut e.messages, msg.id.clone(), json.into());
        Ok(())
    }

    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        const OP: &str = "get_message";
        key.validate()?;
        self.ready(OP)?;
        let found = {
            let inner = self.lock();
            inner
                .sessions
                .get(&rk(key))
                .filter(|e| e.meta.agent_id == key.agent_id)
                .and_then(|e| e.messages.iter().rev().find(|(id, _)| id == message_id).map(|(_, j)| j.clone()))
        };
        found.map(|j| parse_msg(&j, OP)).transpose()
    }

    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        const OP: &str = "list_messages";
        key.validate()?;
        self.ready(OP)?;
        let slice: Vec<Arc<str>> = {
            let inner = self.lock();
            match inner.sessions.get(&rk(key)).filter(|e| e.meta.agent_id == key.agent_id) {
                Some(e) => {
                    e.messages[message_range(e.messages.len(), offset, limit)].iter().map(|m| m.1.clone()).collect()
                }
                None => Vec::new(),
            }
        };
        slice.iter().map(|j| parse_msg(j, OP)).collect()
    }

    async fn import_record(&self, record: &SessionRecord, messages: &[Msg], mode: ImportMode) -> Result<ImportOutcome> {
        const OP: &str = "import_record";
        validate_import(record)?;
        self.ready(OP)?;
        let meta = record.meta();
        let (bytes, _) = encode_checked_record(BACKEND, OP, &meta, &record.state)?;
        check_size(BACKEND, OP, bytes.len(), self.max_record_bytes)?;
        let mut log = Vec::with_capacity(messages.len());
        for m in messages {
            check_message_depth(BACKEND, OP, m)?;
            let json = as_message::to_json(m);
            check_size(BACKEND, OP, json.len(), self.max_record_bytes)?;
            log.push((m.id.clone(), Arc::<str>::from(json)));
        }
        let owner = Owner::new(meta.user_id.clone(), meta.agent_id.clone());
        let k = (meta.user_id.clone(), meta.id.clone());
        let mut inner = self.lock();
        let outcome = match inner.sessions.get(&k) {
            None => ImportOutcome::Created,
            Some(e) if e.meta.agent_id != meta.agent_id => {
                return Err(err(
                    StorageErrorKind::AlreadyExists,
                    OP,
                    format!("session {:?} of user {:?} belongs to another agent", meta.id, meta.user_id),
                ));
            }
            Some(_) if mode == ImportMode::CreateOnly => {
                return Err(err(
                    StorageErrorKind::AlreadyExists,
                    OP,
                    format!("session {:?} of user {:?} already exists", meta.id, meta.user_id),
                ));
            }
            Some(_) => ImportOutcome::Replaced,
        };
        if let Some(old) = inner.sessions.remove(&k)
            && let Some(set) = inner.index.get_mut(&owner)
        {
            set.remove(&(old.meta.created_at, old.meta.id));
        }
        inner.index.entry(owner).or_default().insert((meta.created_at, meta.id.clone()));
        let entry =
            Entry { message_count: record.state.context.len() as u64, meta, bytes: bytes.into(), messages: log };
        inner.sessions.insert(k, entry);
        Ok(outcome)
    }

    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>> {
        validate_id("user_id", user_id)?;
        self.ready("list_agents")?;
        let inner = self.lock();
        let agents: BTreeSet<String> = inner
            .index
            .iter()
            .filter(|(o, set)| o.user_id == user_id && !set.is_empty())
            .map(|(o, _)| o.agent_id.clone())
            .collect();
        Ok(agents.into_iter().collect())
    }

    async fn list_users(&self) -> Result<Vec<String>> {
        self.ready("list_users")?;
        let inner = self.lock();
        let users: BTreeSet<String> =
            inner.index.iter().filter(|(_, set)| !set.is_empty()).map(|(o, _)| o.user_id.clone()).collect();
        Ok(users.into_iter().collect())
    }
}

/// `upsert_message`'s rule: replace the last message when its id is `id`, else append.
fn upsert_last(log: &mut Vec<(String, Arc<str>)>, id: String, json: Arc<str>) {
    match log.last_mut() {
        Some(last) if last.0 == id => last.1 = json,
        _ => log.push((id, json)),
    }
}

fn parse_msg(json: &str, op: &'static str) -> Result<Msg> {
    as_message::from_json(json).map_err(|e| err(StorageErrorKind::Serialization, op, e.to_string()).with_source(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionConfig;

    fn req() -> UpsertSession {
        UpsertSession::new(Owner::new("u", "a"), SessionConfig::new("ws"))
    }

    #[tokio::test]
    async fn must_be_opened_and_reopens_with_its_sessions() {
        let s = InMemoryStorage::new();
        assert_eq!(s.upsert_session(req()).await.unwrap_err().kind(), StorageErrorKind::Unavailable);
        s.open().await.unwrap();
        let rec = s.upsert_session(req()).await.unwrap();
        s.close().await.unwrap();
        assert_eq!(s.upsert_session(req()).await.unwrap_err().kind(), StorageErrorKind::Unavailable);
        s.open().await.unwrap();
        let key = Owner::new("u", "a").session(rec.id.clone());
        assert_eq!(s.get_session(&key).await.unwrap().map(|r| r.id), Some(rec.id));
    }

    /// After a record whose `updated_at` is the last microsecond Python holds, the next revision is
    /// in year 10000: every write is refused, nothing written, and the record stays readable.
    #[tokio::test]
    async fn a_write_past_the_end_of_pythons_range_is_refused() {
        let s = InMemoryStorage::new();
        s.open().await.unwrap();
        let mut rec = s.upsert_session(req()).await.unwrap();
        rec.updated_at = "9999-12-31T23:59:59.999999".parse().unwrap();
        s.import_record(&rec, &[], ImportMode::Overwrite).await.unwrap();
        let key = Owner::new("u", "a").session(rec.id.clone());
        let kinds = [
            s.update_session_state(&key, &AgentState::default(), None).await.map(drop),
            s.save_turn(&key, &AgentState::default(), None, &[Msg::user("user", "hi")]).await.map(drop),
            s.upsert_session(req().with_session_id(rec.id.clone())).await.map(drop),
        ]
        .map(|r| r.unwrap_err().kind());
        assert_eq!(kinds, [StorageErrorKind::InvalidInput; 3]);
        assert_eq!(s.get_session(&key).await.unwrap(), Some(rec.clone()));
        assert!(s.list_messages(&key, 0, 0).await.unwrap().is_empty());
        // Nor is a record with a time Python cannot hold imported.
        let mut outside = rec.clone();
        outside.created_at = rec.updated_at.next_micro();
        let e = s.import_record(&outside, &[], ImportMode::Overwrite).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::InvalidInput);
        assert_eq!(s.get_session(&key).await.unwrap(), Some(rec));
    }

    #[tokio::test]
    async fn stores_canonical_bytes_and_summaries_without_parsing() {
        let s = InMemoryStorage::new().with_max_record_bytes(1 << 20);
        assert_eq!(s.max_record_bytes(), 1 << 20);
        s.open().await.unwrap();
        let mut st = AgentState::default();
        st.context.push(Msg::user("user", "hi"));
        let rec = s.upsert_session(req().with_state(st)).await.unwrap();
        let bytes = s.snapshot(&Owner::new("u", "a").session(rec.id.clone())).unwrap().1;
        assert_eq!(&*bytes, rec.to_canonical_json());
        let page = s.list_sessions(&Owner::new("u", "a"), &PageRequest::default()).await.unwrap();
        assert_eq!(page.sessions[0].message_count, Some(1));
        assert_eq!(page.sessions[0].size_bytes, bytes.len() as u64);
    }
}
