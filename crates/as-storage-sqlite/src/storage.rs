//! `SqliteStorage`: the [`StorageBase`] implementation.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use as_message::Msg;
use as_state::AgentState;
use as_storage::{
    Capabilities, ImportMode, ImportOutcome, Owner, PageRequest, Result, Revision, SavedTurn, SessionConfig,
    SessionKey, SessionMeta, SessionPage, SessionRecord, SessionSource, SessionSummary, StorageBase, StorageError,
    StorageErrorKind, Timestamp, UpsertSession, check_envelope_depth, check_message_depth, check_state_depth,
    encode_checked_record, encode_envelope, validate_id, validate_import,
};
use async_trait::async_trait;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{BACKEND, OpError, SqliteError, SqliteErrorKind};
use crate::options::SqliteOptions;
use crate::pool::Inner;

/// Session storage in one SQLite file.
///
/// Cheap to clone (clones share the connection pool). Every call runs its SQLite work on a blocking
/// thread with a pooled connection, so the async runtime never waits on the file. `update_session_state`
/// and `upsert_message` encode the state (or message) to JSON on the calling task first and move only
/// those bytes to the blocking thread, never a copy of the state. Writes are short transactions
/// (`BEGIN IMMEDIATE` for read-modify-write); the compare-and-set of
/// [`StorageBase::update_session_state`] holds across processes sharing the file.
///
/// Needs a Tokio runtime with a time driver (`enable_time()` or `enable_all()`, as `#[tokio::main]`
/// and `#[tokio::test]` build): a call that has to wait for a busy pool bounds that wait with
/// [`SqliteOptions::acquire_timeout`], and Tokio panics when such a timer is made on a runtime
/// without one. A call that finds a free connection arms no timer.
#[derive(Clone)]
pub struct SqliteStorage {
    inner: Arc<Inner>,
}

impl fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.inner.path)
            .field("open", &self.inner.is_open())
            .field("options", &self.inner.opts)
            .finish()
    }
}

impl SqliteStorage {
    /// `(id, JSON)` of each message, each checked against the size limit before any I/O.
    fn encode_log(&self, op: &'static str, messages: &[Msg]) -> Result<Vec<(String, String)>> {
        let max = self.inner.opts.max_record_bytes;
        messages
            .iter()
            .map(|m| {
                check_message_depth(BACKEND, op, m)?;
                let json = as_message::to_json(m);
                check_size(op, max, "a message", json.len()).map_err(|e| e.into_storage(op))?;
                Ok((m.id.clone(), json))
            })
            .collect()
    }

    /// A store on the file at `path` with default options. Nothing is opened until
    /// [`StorageBase::open`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_options(path, SqliteOptions::default())
    }

    /// A store on the file at `path` with `options`. Nothing is opened until [`StorageBase::open`].
    pub fn with_options(path: impl Into<PathBuf>, options: SqliteOptions) -> Self {
        Self { inner: Arc::new(Inner::new(path.into(), options)) }
    }

    /// Builds and opens a store on `path` with default options.
    pub async fn open_path(path: impl Into<PathBuf>) -> Result<Self> {
        let s = Self::new(path);
        s.open().await?;
        Ok(s)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options in use.
    pub fn options(&self) -> &SqliteOptions {
        &self.inner.opts
    }

    /// The schema version of the open file.
    pub async fn schema_version(&self) -> Result<i64> {
        self.inner
            .run_read("schema_version", |conn, inner| {
                let map = |e| inner.map(e);
                Ok(crate::schema::current_version(conn, &map)?.unwrap_or(0))
            })
            .await
    }

    /// Runs `PRAGMA integrity_check`; an empty list means the file is sound.
    pub async fn integrity_check(&self) -> Result<Vec<String>> {
        self.inner
            .run_read("integrity_check", |conn, inner| {
                let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(|e| inner.map(e))?;
                let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(|e| inner.map(e))?;
                let mut problems = Vec::new();
                for row in rows {
                    let line = row.map_err(|e| inner.map(e))?;
                    if line != "ok" {
                        problems.push(line);
                    }
                }
                Ok(problems)
            })
            .await
    }
}

/// Commits a write transaction.
fn commit(tx: rusqlite::Transaction<'_>, inner: &Inner, op: &'static str) -> Result<(), OpError> {
    tx.commit().map_err(|e| commit_failed(op, inner.map(e)))
}

/// What a failed `COMMIT` reports. An I/O error may come after the commit frame reached the WAL
/// (a failed sync, say), so the write may have landed: that is the contract's `Unavailable` whose
/// outcome is unknown (whole or absent; re-read), never a plain error promising nothing was written.
/// Other failures (`SQLITE_FULL`, `SQLITE_BUSY`) roll the transaction back and keep their kind.
fn commit_failed(op: &'static str, e: SqliteError) -> OpError {
    if e.kind() != SqliteErrorKind::Io {
        return e.into();
    }
    let message = format!("the commit failed, so whether it was written is unknown (read it again to know): {e}");
    OpError::Storage(StorageError::new(StorageErrorKind::Unavailable, BACKEND, op, message).with_source(e))
}

fn err(kind: StorageErrorKind, op: &'static str, message: impl Into<String>) -> OpError {
    OpError::Storage(StorageError::new(kind, BACKEND, op, message))
}

fn not_found(op: &'static str, key: &SessionKey) -> OpError {
    err(StorageErrorKind::NotFound, op, format!("session '{}' not found", key.session_id))
}

fn corrupt(op: &'static str, what: &str, e: impl fmt::Display) -> OpError {
    err(StorageErrorKind::Serialization, op, format!("stored {what} is not valid: {e}"))
}

/// A failed read of a session's row (or its messages). A value of the wrong type in a column (a
/// BLOB where text belongs: a damaged file, or one written by something else) is the
/// `Serialization` error a listing reports for it, naming the session; anything else is the file's error.
fn read_failed(op: &'static str, inner: &Inner, session_id: &str, e: rusqlite::Error) -> OpError {
    match e {
        rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => corrupt(op, &format!("column of session '{session_id}'"), e),
        e => inner.map(e).into(),
    }
}

/// The sortable form of a timestamp (fixed width, so text order is time order). An aware time
/// whose UTC instant falls outside years 1-9999 (`9999-12-31T23:00:00-05:00`) is clamped to that
/// range, where the four-digit year keeps the width: such sessions sort at the ends, among
/// themselves by id.
fn sort_key(t: &Timestamp) -> String {
    let (lo, hi) = (chrono::NaiveDateTime::MIN, chrono::NaiveDateTime::MAX);
    let first = chrono::NaiveDate::from_ymd_opt(1, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)).unwrap_or(lo);
    let last = chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_micro_opt(23, 59, 59, 999_999))
        .unwrap_or(hi);
    t.sort_key().clamp(first, last).format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

fn parse_ts(op: &'static str, s: &str) -> Result<Timestamp, OpError> {
    s.parse::<Timestamp>().map_err(|e| corrupt(op, "timestamp", e))
}

fn parse_source(op: &'static str, s: &str) -> Result<SessionSource, OpError> {
    match s {
        "user" => Ok(SessionSource::User),
        "schedule" => Ok(SessionSource::Schedule),
        other => Err(corrupt(op, "source", format!("unknown source {other:?}"))),
    }
}

fn check_size(op: &'static str, max: usize, what: &str, len: usize) -> Result<(), OpError> {
    if len > max {
        return Err(err(
            StorageErrorKind::TooLarge,
            op,
            format!("{what} is {len} bytes, over the limit of {max} bytes; nothing was written"),
        ));
    }
    Ok(())
}

/// The envelope columns of a session row, enough to rebuild a [`SessionMeta`] without the state.
struct MetaRow {
    pk: i64,
    id: String,
    user_id: String,
    agent_id: String,
    created_at: String,
    updated_at: String,
    source: String,
    source_schedule_id: Option<String>,
    team_id: Option<String>,
    config: String,
}

const META_COLUMNS: &str =
    "pk, id, user_id, agent_id, created_at, updated_at, source, source_schedule_id, team_id, config";

impl MetaRow {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            pk: r.get(0)?,
            id: r.get(1)?,
            user_id: r.get(2)?,
            agent_id: r.get(3)?,
            created_at: r.get(4)?,
            updated_at: r.get(5)?,
            source: r.get(6)?,
            source_schedule_id: r.get(7)?,
            team_id: r.get(8)?,
            config: r.get(9)?,
        })
    }

    /// Looks the session up under its exact owner.
    fn load(conn: &Connection, inner: &Inner, key: &SessionKey, op: &'static str) -> Result<Option<Self>, OpError> {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS} FROM sessions WHERE user_id = ?1 AND id = ?2 AND agent_id = ?3"
            ))
            .map_err(|e| inner.map(e))?;
        stmt.query_row(params![key.user_id, key.session_id, key.agent_id], Self::from_row)
            .optional()
            .map_err(|e| read_failed(op, inner, &key.session_id, e))
    }

    fn meta(&self, op: &'static str) -> Result<SessionMeta, OpError> {
        let config: SessionConfig = as_message::from_json(&self.config).map_err(|e| corrupt(op, "config", e))?;
        Ok(SessionMeta {
            id: self.id.clone(),
            updated_at: parse_ts(op, &self.updated_at)?,
            created_at: parse_ts(op, &self.created_at)?,
            user_id: self.user_id.clone(),
            agent_id: self.agent_id.clone(),
            source: parse_source(op, &self.source)?,
            source_schedule_id: self.source_schedule_id.clone(),
            team_id: self.team_id.clone(),
            config,
        })
    }
}

/// A record ready to be written: the canonical bytes and the columns kept beside them.
struct Encoded {
    record: String,
    updated_at: String,
    message_count: i64,
    name: String,
    config: String,
}

fn encode(op: &'static str, inner: &Inner, meta: &SessionMeta, state: &AgentState) -> Result<Encoded, OpError> {
    let (record, _) = encode_checked_record(BACKEND, op, meta, state)?;
    check_size(op, inner.opts.max_record_bytes, "the session record", record.len())?;
    Ok(Encoded {
        record,
        updated_at: meta.updated_at.to_string(),
        message_count: i64::try_from(state.context.len()).unwrap_or(i64::MAX),
        name: meta.config.name.clone(),
        config: as_message::to_json(&meta.config),
    })
}

/// Inserts a session row (the record and its listing columns); returns its `pk`.
fn insert_session_row(
    tx: &rusqlite::Transaction<'_>,
    inner: &Inner,
    meta: &SessionMeta,
    enc: &Encoded,
) -> Result<i64, OpError> {
    tx.query_row(
        "INSERT INTO sessions (user_id, agent_id, id, created_at, created_sort, updated_at, source, \
         source_schedule_id, team_id, name, config, message_count, size, record) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING pk",
        params![
            meta.user_id,
            meta.agent_id,
            meta.id,
            meta.created_at.to_string(),
            sort_key(&meta.created_at),
            enc.updated_at,
            meta.source.as_str(),
            meta.source_schedule_id,
            meta.team_id,
            enc.name,
            enc.config,
            enc.message_count,
            enc.record.len() as i64,
            enc.record,
        ],
        |r| r.get(0),
    )
    .map_err(|e| inner.map(e).into())
}

/// A state encoded on the async side, so that only bytes move into the blocking pool (never a copy of the
/// state): its canonical JSON exactly as [`encode_record`] embeds it in the record of `session_id`.
struct EncodedState {
    json: String,
    message_count: i64,
}

/// `{"session_id":<id>`: how the state JSON starts (`session_id` is `AgentState`'s first field).
fn session_id_head(id: &str) -> String {
    format!("{{\"session_id\":{}", as_message::to_json(id))
}

fn encoding_bug(op: &'static str, what: &str) -> OpError {
    err(StorageErrorKind::Backend, op, format!("internal encoding error: {what}; nothing was written"))
}

impl EncodedState {
    fn new(op: &'static str, session_id: &str, state: &AgentState) -> Result<Self, OpError> {
        check_state_depth(BACKEND, op, state)?;
        let mut json = as_message::to_json(state);
        if state.session_id != session_id {
            // `encode_record` writes the record's id as `state.session_id`: do the same, in place.
            let head = session_id_head(&state.session_id);
            if !json.starts_with(&head) {
                return Err(encoding_bug(op, "the state JSON does not start with its session_id"));
            }
            json.replace_range(..head.len(), &session_id_head(session_id));
        }
        Ok(Self { json, message_count: i64::try_from(state.context.len()).unwrap_or(i64::MAX) })
    }
}

/// [`encode`] with a state encoded beforehand: `encode_record(meta, state)`, byte for byte (the
/// envelope, then the state, which is the record's last field).
fn encode_with_state(
    op: &'static str,
    inner: &Inner,
    meta: &SessionMeta,
    state: &EncodedState,
) -> Result<Encoded, OpError> {
    // The state-write path does not go through `encode_checked_record`: its two checks of the envelope.
    as_storage::check_record_timestamps(BACKEND, op, meta)?;
    let head = encode_envelope(meta);
    check_envelope_depth(BACKEND, op, &head)?;
    let mut record = String::with_capacity(head.len() + state.json.len() + 1);
    record.push_str(&head);
    record.push_str(&state.json);
    record.push('}');
    check_size(op, inner.opts.max_record_bytes, "the session record", record.len())?;
    Ok(Encoded {
        record,
        updated_at: meta.updated_at.to_string(),
        message_count: state.message_count,
        name: meta.config.name.clone(),
        config: as_message::to_json(&meta.config),
    })
}

fn write_update(conn: &Connection, inner: &Inner, pk: i64, expected_rev: &str, enc: &Encoded) -> Result<bool, OpError> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE sessions SET updated_at = ?1, name = ?2, config = ?3, message_count = ?4, size = ?5, record = ?6 \
             WHERE pk = ?7 AND updated_at = ?8",
        )
        .map_err(|e| inner.map(e))?;
    let n = stmt
        .execute(params![
            enc.updated_at,
            enc.name,
            enc.config,
            enc.message_count,
            enc.record.len() as i64,
            enc.record,
            pk,
            expected_rev
        ])
        .map_err(|e| inner.map(e))?;
    Ok(n == 1)
}

fn upsert_blocking(conn: &mut Connection, inner: &Inner, mut req: UpsertSession) -> Result<SessionRecord, OpError> {
    const OP: &str = "upsert_session";
    let session_id = req.session_id.take().filter(|s| !s.is_empty());
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let existing = match &session_id {
        Some(id) => tx
            .query_row(
                &format!("SELECT {META_COLUMNS}, record FROM sessions WHERE user_id = ?1 AND id = ?2"),
                params![req.owner.user_id, id],
                |r| Ok((MetaRow::from_row(r)?, r.get::<_, String>(10)?)),
            )
            .optional()
            .map_err(|e| read_failed(OP, inner, id, e))?,
        None => None,
    };
    let record = if let Some((row, text)) = existing {
        if row.agent_id != req.owner.agent_id {
            return Err(err(
                StorageErrorKind::AlreadyExists,
                OP,
                format!("session id '{}' is already used by another agent of this user", row.id),
            ));
        }
        let mut meta = row.meta(OP)?;
        let state = match req.state {
            Some(s) => s,
            None => {
                let old: SessionRecord = as_storage::decode_record(&text).map_err(|e| corrupt(OP, "record", e))?;
                old.state
            }
        };
        meta.config = req.config;
        meta.updated_at = Timestamp::now_after(&meta.updated_at);
        let enc = encode(OP, inner, &meta, &state)?;
        if !write_update(&tx, inner, row.pk, &row.updated_at, &enc)? {
            return Err(err(StorageErrorKind::Backend, OP, "the row changed inside a write transaction"));
        }
        SessionRecord::from_parts(meta, state)
    } else {
        let id = match session_id {
            Some(id) => id,
            None => fresh_id(&tx, inner, &req.owner.user_id)?,
        };
        let meta = SessionMeta::created(id, &req);
        let state = req.state.unwrap_or_default();
        let enc = encode(OP, inner, &meta, &state)?;
        insert_session_row(&tx, inner, &meta, &enc)?;
        SessionRecord::from_parts(meta, state)
    };
    commit(tx, inner, OP)?;
    Ok(record)
}

/// Fresh ids a create without an id tries before it gives up with `Conflict` (as the memory and
/// Redis backends do): a collision of two uuids is practically impossible, so running out means an
/// id factory ([`as_message::set_id_factory`]) that keeps answering ids already taken.
const MAX_FRESH_ID_ATTEMPTS: usize = 32;

/// A generated session id no session of `user_id` holds (whatever its agent: ids are unique per
/// user). Called inside the write transaction, so the id is still free when it is inserted.
fn fresh_id(tx: &rusqlite::Transaction<'_>, inner: &Inner, user_id: &str) -> Result<String, OpError> {
    const OP: &str = "upsert_session";
    let mut stmt =
        tx.prepare_cached("SELECT 1 FROM sessions WHERE user_id = ?1 AND id = ?2").map_err(|e| inner.map(e))?;
    for _ in 0..MAX_FRESH_ID_ATTEMPTS {
        let id = as_storage::generate_session_id(BACKEND, OP)?;
        if !stmt.exists(params![user_id, id]).map_err(|e| inner.map(e))? {
            return Ok(id);
        }
    }
    Err(err(
        StorageErrorKind::Conflict,
        OP,
        format!("{MAX_FRESH_ID_ATTEMPTS} generated session ids were all taken (does the id factory repeat itself?)"),
    ))
}

fn update_state_blocking(
    conn: &mut Connection,
    inner: &Inner,
    key: &SessionKey,
    state: &EncodedState,
    expected: Option<&Revision>,
    op: &'static str,
) -> Result<Revision, OpError> {
    // Optimistic pass: read the envelope and encode the (possibly large) state without holding
    // the write lock, then write with a single conditional UPDATE (atomic on its own).
    if let Some((_, rev)) = write_state(conn, inner, key, state, expected, op)? {
        return Ok(rev);
    }
    // Someone wrote (or deleted) in between. Under the write lock a conditional write now
    // conflicts (the stored revision moved away from `expected`) and a plain one is redone.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let (_, rev) = write_state(&tx, inner, key, state, expected, op)?.ok_or_else(|| changed_in_tx(op))?;
    commit(tx, inner, op)?;
    Ok(rev)
}

/// Reads `key`'s envelope, checks `expected` against it, and writes `state` over it with one
/// conditional `UPDATE`: the row's key and the new revision, or `None` when the row changed since
/// it was read.
fn write_state(
    conn: &Connection,
    inner: &Inner,
    key: &SessionKey,
    state: &EncodedState,
    expected: Option<&Revision>,
    op: &'static str,
) -> Result<Option<(i64, Revision)>, OpError> {
    let row = MetaRow::load(conn, inner, key, op)?.ok_or_else(|| not_found(op, key))?;
    if let Some(exp) = expected
        && exp.0 != row.updated_at
    {
        return Err(conflict(op, key, exp, &row.updated_at));
    }
    let mut meta = row.meta(op)?;
    meta.updated_at = Timestamp::now_after(&meta.updated_at);
    let enc = encode_with_state(op, inner, &meta, state)?;
    Ok(write_update(conn, inner, row.pk, &row.updated_at, &enc)?.then_some((row.pk, Revision(enc.updated_at))))
}

/// A conditional write that failed although its transaction holds the write lock.
fn changed_in_tx(op: &'static str) -> OpError {
    err(StorageErrorKind::Backend, op, "the row changed inside a write transaction")
}

fn conflict(op: &'static str, key: &SessionKey, expected: &Revision, stored: &str) -> OpError {
    err(
        StorageErrorKind::Conflict,
        op,
        format!("session '{}' is at revision {stored}, not the expected {expected}", key.session_id),
    )
}

fn get_blocking(conn: &mut Connection, inner: &Inner, key: &SessionKey) -> Result<Option<SessionRecord>, OpError> {
    let mut stmt = conn
        .prepare_cached("SELECT record FROM sessions WHERE user_id = ?1 AND id = ?2 AND agent_id = ?3")
        .map_err(|e| inner.map(e))?;
    // Parse straight from SQLite's buffer: no copy of a record that may be megabytes long.
    // Not UTF-8: the byte reader reports the error the JSON text would get.
    let parsed = stmt
        .query_row(params![key.user_id, key.session_id, key.agent_id], |r| {
            let bytes = r.get_ref(0)?.as_bytes()?;
            Ok(match std::str::from_utf8(bytes) {
                Ok(text) => as_storage::decode_record(text),
                Err(_) => as_message::from_json_slice::<SessionRecord>(bytes),
            })
        })
        .optional()
        .map_err(|e| read_failed("get_session", inner, &key.session_id, e))?;
    match parsed {
        None => Ok(None),
        Some(r) => Ok(Some(r.map_err(|e| corrupt("get_session", "record", e))?)),
    }
}

fn get_raw_blocking(conn: &mut Connection, inner: &Inner, key: &SessionKey) -> Result<Option<String>, OpError> {
    let mut stmt = conn
        .prepare_cached("SELECT record FROM sessions WHERE user_id = ?1 AND id = ?2 AND agent_id = ?3")
        .map_err(|e| inner.map(e))?;
    let bytes: Option<Vec<u8>> = stmt
        .query_row(params![key.user_id, key.session_id, key.agent_id], |r| Ok(r.get_ref(0)?.as_bytes()?.to_vec()))
        .optional()
        .map_err(|e| read_failed("get_session_raw", inner, &key.session_id, e))?;
    bytes.map(|b| String::from_utf8(b).map_err(|e| corrupt("get_session_raw", "record", e))).transpose()
}

/// The cursor is `created_sort|id` of the last item of the previous page. Ids may contain `|`,
/// but the fixed-width sort key never does, so the first `|` separates the two.
/// Anything else (a sort key that is not one this store writes, or no id) is `InvalidInput`.
fn parse_cursor(c: &str) -> Result<(String, String), OpError> {
    c.split_once('|')
        .filter(|(a, b)| !b.is_empty() && a.parse::<Timestamp>().is_ok_and(|t| sort_key(&t) == *a))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| err(StorageErrorKind::InvalidInput, "list_sessions", format!("invalid cursor {c:?}")))
}

/// The first page of an owner's sessions, newest first (`?3`: how many rows).
const LIST_FIRST: &str = "SELECT id, name, created_at, updated_at, source, message_count, size, created_sort \
     FROM sessions WHERE user_id = ?1 AND agent_id = ?2 ORDER BY created_sort DESC, id DESC LIMIT ?3";

/// A later page: the rows after the cursor `(?3, ?4)` in the same order (`?5`: how many rows). The
/// row-value comparison lets SQLite seek to the cursor in `sessions_by_owner`.
const LIST_AFTER: &str = "SELECT id, name, created_at, updated_at, source, message_count, size, created_sort \
     FROM sessions WHERE user_id = ?1 AND agent_id = ?2 AND (created_sort, id) < (?3, ?4) \
     ORDER BY created_sort DESC, id DESC LIMIT ?5";

fn list_blocking(
    conn: &mut Connection,
    inner: &Inner,
    owner: &Owner,
    page: &PageRequest,
) -> Result<SessionPage, OpError> {
    const OP: &str = "list_sessions";
    let limit = page.limit.max(1);
    // One more than the page, to know whether another follows (saturating: `limit` may be huge).
    let fetch = i64::try_from(limit).ok().and_then(|l| l.checked_add(1)).unwrap_or(i64::MAX);
    let cursor = page.cursor.as_deref().map(parse_cursor).transpose()?;
    // A page after a cursor seeks to it in the index: one range scan, not a walk from the newest.
    let mut stmt =
        conn.prepare_cached(if cursor.is_some() { LIST_AFTER } else { LIST_FIRST }).map_err(|e| inner.map(e))?;
    type Columns = (String, String, String, String, i64, i64);
    // The id and the sort key (what the cursor needs) are read as text whatever their type; a
    // value of the wrong type in any other column makes that row an error item, not a failed page.
    let read_row = |r: &rusqlite::Row<'_>| {
        let text = |i: usize| -> rusqlite::Result<String> {
            Ok(match r.get_ref(i)? {
                ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
                ValueRef::Integer(n) => n.to_string(),
                ValueRef::Real(x) => x.to_string(),
                ValueRef::Null => String::new(),
            })
        };
        let columns: rusqlite::Result<Columns> =
            (|| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))();
        Ok((text(0)?, text(7)?, columns))
    };
    let rows = match &cursor {
        Some((after_sort, after_id)) => {
            stmt.query_map(params![owner.user_id, owner.agent_id, after_sort, after_id, fetch], &read_row)
        }
        None => stmt.query_map(params![owner.user_id, owner.agent_id, fetch], &read_row),
    }
    .map_err(|e| inner.map(e))?;
    let mut out = SessionPage::default();
    let mut last: Option<(String, String)> = None;
    let mut seen = 0usize;
    for row in rows {
        let (id, sort, columns) = row.map_err(|e| inner.map(e))?;
        seen += 1;
        if seen > limit {
            out.next_cursor = last.take().map(|(s, i)| format!("{s}|{i}"));
            break;
        }
        last = Some((sort, id.clone()));
        let summary = (|| -> Result<SessionSummary, OpError> {
            let (name, created, updated, source, count, size) =
                columns.map_err(|e| corrupt(OP, "listing column", e))?;
            Ok(SessionSummary {
                id: id.clone(),
                name,
                created_at: parse_ts(OP, &created)?,
                updated_at: parse_ts(OP, &updated)?,
                source: parse_source(OP, &source)?,
                message_count: u64::try_from(count).ok(),
                size_bytes: u64::try_from(size).unwrap_or(0),
            })
        })();
        match summary {
            Ok(s) => out.sessions.push(s),
            Err(e) => out.errors.push(as_storage::ListError { session_id: id, error: e.into_storage(OP) }),
        }
    }
    Ok(out)
}

fn delete_blocking(conn: &mut Connection, inner: &Inner, key: &SessionKey) -> Result<bool, OpError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let pk: Option<i64> = tx
        .query_row(
            "DELETE FROM sessions WHERE user_id = ?1 AND id = ?2 AND agent_id = ?3 RETURNING pk",
            params![key.user_id, key.session_id, key.agent_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| inner.map(e))?;
    if let Some(pk) = pk {
        tx.execute("DELETE FROM messages WHERE session_pk = ?1", [pk]).map_err(|e| inner.map(e))?;
    }
    commit(tx, inner, "delete_session")?;
    Ok(pk.is_some())
}

fn session_pk(conn: &Connection, inner: &Inner, key: &SessionKey) -> Result<Option<i64>, OpError> {
    let mut stmt = conn
        .prepare_cached("SELECT pk FROM sessions WHERE user_id = ?1 AND id = ?2 AND agent_id = ?3")
        .map_err(|e| inner.map(e))?;
    Ok(stmt
        .query_row(params![key.user_id, key.session_id, key.agent_id], |r| r.get(0))
        .optional()
        .map_err(|e| inner.map(e))?)
}

/// `json` is the message's canonical JSON (encoded on the async side), `msg_id` its id.
fn upsert_message_blocking(
    conn: &mut Connection,
    inner: &Inner,
    key: &SessionKey,
    msg_id: &str,
    json: &str,
) -> Result<(), OpError> {
    const OP: &str = "upsert_message";
    check_size(OP, inner.opts.max_record_bytes, "the message", json.len())?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let pk = session_pk(&tx, inner, key)?.ok_or_else(|| not_found(OP, key))?;
    upsert_message_in(&tx, inner, pk, msg_id, json)?;
    commit(tx, inner, OP)?;
    Ok(())
}

/// `save_turn` in one `IMMEDIATE` transaction: the conditional state update, then every message.
fn save_turn_blocking(
    conn: &mut Connection,
    inner: &Inner,
    key: &SessionKey,
    state: &EncodedState,
    expected: Option<&Revision>,
    log: &[(String, String)],
) -> Result<Revision, OpError> {
    const OP: &str = "save_turn";
    if log.is_empty() {
        return update_state_blocking(conn, inner, key, state, expected, OP);
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let (pk, rev) = write_state(&tx, inner, key, state, expected, OP)?.ok_or_else(|| changed_in_tx(OP))?;
    for (id, json) in log {
        upsert_message_in(&tx, inner, pk, id, json)?;
    }
    commit(tx, inner, OP)?;
    Ok(rev)
}

/// `upsert_message`'s rule inside the caller's transaction: replace the session's last message
/// when its id is `msg_id`, else append.
fn upsert_message_in(tx: &Connection, inner: &Inner, pk: i64, msg_id: &str, json: &str) -> Result<(), OpError> {
    let last: Option<(i64, String)> = tx
        .prepare_cached("SELECT seq, msg_id FROM messages WHERE session_pk = ?1 ORDER BY seq DESC LIMIT 1")
        .and_then(|mut s| s.query_row([pk], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| inner.map(e))?;
    match last {
        Some((seq, id)) if id == msg_id => {
            tx.execute("UPDATE messages SET msg = ?1 WHERE session_pk = ?2 AND seq = ?3", params![json, pk, seq])
                .map_err(|e| inner.map(e))?;
        }
        other => {
            let seq = other.map_or(0, |(s, _)| s + 1);
            tx.execute(
                "INSERT INTO messages (session_pk, seq, msg_id, msg) VALUES (?1, ?2, ?3, ?4)",
                params![pk, seq, msg_id, json],
            )
            .map_err(|e| inner.map(e))?;
        }
    }
    Ok(())
}

fn parse_msg(op: &'static str, text: &str) -> Result<Msg, OpError> {
    as_message::from_json(text).map_err(|e| corrupt(op, "message", e))
}

fn get_message_blocking(
    conn: &mut Connection,
    inner: &Inner,
    key: &SessionKey,
    id: &str,
) -> Result<Option<Msg>, OpError> {
    let text: Option<String> = conn
        .prepare_cached(
            "SELECT m.msg FROM messages m JOIN sessions s ON s.pk = m.session_pk \
             WHERE s.user_id = ?1 AND s.id = ?2 AND s.agent_id = ?3 AND m.msg_id = ?4 ORDER BY m.seq DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row(params![key.user_id, key.session_id, key.agent_id, id], |r| r.get(0)).optional())
        .map_err(|e| read_failed("get_message", inner, &key.session_id, e))?;
    text.map(|t| parse_msg("get_message", &t)).transpose()
}

fn list_messages_blocking(
    conn: &mut Connection,
    inner: &Inner,
    key: &SessionKey,
    offset: i64,
    limit: i64,
) -> Result<Vec<Msg>, OpError> {
    const OP: &str = "list_messages";
    // One read transaction, so the length and the rows come from the same snapshot.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(|e| inner.map(e))?;
    let Some(pk) = session_pk(&tx, inner, key)? else {
        return Ok(Vec::new());
    };
    let len: i64 = tx
        .prepare_cached("SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE session_pk = ?1")
        .and_then(|mut s| s.query_row([pk], |r| r.get(0)))
        .map_err(|e| inner.map(e))?;
    // Exactly `LRANGE offset offset+limit-1` (so `0, 0` is everything); seqs are 0..len.
    let range = as_storage::message_range(usize::try_from(len).unwrap_or(0), offset, limit);
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let (from, to) = (range.start as i64, range.end as i64 - 1);
    let mut stmt = tx
        .prepare_cached("SELECT msg FROM messages WHERE session_pk = ?1 AND seq BETWEEN ?2 AND ?3 ORDER BY seq")
        .map_err(|e| inner.map(e))?;
    let rows = stmt.query_map(params![pk, from, to], |r| r.get::<_, String>(0)).map_err(|e| inner.map(e))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(parse_msg(OP, &row.map_err(|e| read_failed(OP, inner, &key.session_id, e))?)?);
    }
    Ok(out)
}

/// `import_record`: one write transaction replaces (or creates) the row and the whole message log.
/// The message JSON is encoded (and size-checked) by the caller, before the transaction.
fn import_blocking(
    conn: &mut Connection,
    inner: &Inner,
    record: &SessionRecord,
    messages: &[(String, String)],
    mode: ImportMode,
) -> Result<ImportOutcome, OpError> {
    const OP: &str = "import_record";
    let meta = record.meta();
    let enc = encode(OP, inner, &meta, &record.state)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| inner.map(e))?;
    let existing: Option<(i64, String)> = tx
        .query_row(
            "SELECT pk, agent_id FROM sessions WHERE user_id = ?1 AND id = ?2",
            params![meta.user_id, meta.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| inner.map(e))?;
    let outcome = match existing {
        None => ImportOutcome::Created,
        Some((_, agent)) if agent != meta.agent_id => {
            return Err(err(
                StorageErrorKind::AlreadyExists,
                OP,
                format!("session id '{}' is already used by another agent of this user", meta.id),
            ));
        }
        Some(_) if mode == ImportMode::CreateOnly => {
            return Err(err(StorageErrorKind::AlreadyExists, OP, format!("session '{}' already exists", meta.id)));
        }
        Some((pk, _)) => {
            tx.execute("DELETE FROM messages WHERE session_pk = ?1", [pk]).map_err(|e| inner.map(e))?;
            tx.execute("DELETE FROM sessions WHERE pk = ?1", [pk]).map_err(|e| inner.map(e))?;
            ImportOutcome::Replaced
        }
    };
    let pk = insert_session_row(&tx, inner, &meta, &enc)?;
    {
        let mut stmt = tx
            .prepare_cached("INSERT INTO messages (session_pk, seq, msg_id, msg) VALUES (?1, ?2, ?3, ?4)")
            .map_err(|e| inner.map(e))?;
        for (seq, (id, json)) in messages.iter().enumerate() {
            stmt.execute(params![pk, seq as i64, id, json]).map_err(|e| inner.map(e))?;
        }
    }
    commit(tx, inner, OP)?;
    Ok(outcome)
}

fn list_agents_blocking(conn: &mut Connection, inner: &Inner, user_id: &str) -> Result<Vec<String>, OpError> {
    // `sessions_by_owner` starts with (user_id, agent_id): an index-only scan, already in order.
    let mut stmt = conn
        .prepare_cached("SELECT DISTINCT agent_id FROM sessions WHERE user_id = ?1 ORDER BY agent_id")
        .map_err(|e| inner.map(e))?;
    let rows = stmt.query_map([user_id], |r| r.get::<_, String>(0)).map_err(|e| inner.map(e))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.map_err(|e| inner.map(e))?);
    }
    Ok(out)
}

fn list_users_blocking(conn: &mut Connection, inner: &Inner) -> Result<Vec<String>, OpError> {
    // `sessions_by_owner` starts with user_id: an index-only scan, already in order.
    let mut stmt =
        conn.prepare_cached("SELECT DISTINCT user_id FROM sessions ORDER BY user_id").map_err(|e| inner.map(e))?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(|e| inner.map(e))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.map_err(|e| inner.map(e))?);
    }
    Ok(out)
}

fn validated_key(op: &'static str, key: &SessionKey) -> Result<SessionKey> {
    key.validate().map_err(|e| StorageError::new(e.kind(), BACKEND, op, e.message().to_owned()))?;
    Ok(key.clone())
}

#[async_trait]
impl StorageBase for SqliteStorage {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none().with_cross_process(true).with_durable(true).with_atomic_turns(true)
    }

    async fn open(&self) -> Result<()> {
        self.inner.open().await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await;
        Ok(())
    }

    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord> {
        const OP: &str = "upsert_session";
        req.validate().map_err(|e| StorageError::new(e.kind(), BACKEND, OP, e.message().to_owned()))?;
        self.inner.run(OP, move |conn, inner| upsert_blocking(conn, inner, req)).await
    }

    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
        const OP: &str = "update_session_state";
        let key = validated_key(OP, key)?;
        self.inner.ready(OP)?;
        // Encoded here, so only the bytes move to the blocking pool (no copy of the state).
        let state = EncodedState::new(OP, &key.session_id, state).map_err(|e| e.into_storage(OP))?;
        let expected = expected.cloned();
        self.inner
            .run(OP, move |conn, inner| update_state_blocking(conn, inner, &key, &state, expected.as_ref(), OP))
            .await
    }

    /// One `IMMEDIATE` transaction: the state and every message are committed together or not at all.
    async fn save_turn(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<SavedTurn> {
        const OP: &str = "save_turn";
        let key = validated_key(OP, key)?;
        self.inner.ready(OP)?;
        let log = self.encode_log(OP, messages)?;
        let state = EncodedState::new(OP, &key.session_id, state).map_err(|e| e.into_storage(OP))?;
        let expected = expected.cloned();
        self.inner
            .run(OP, move |conn, inner| save_turn_blocking(conn, inner, &key, &state, expected.as_ref(), &log))
            .await
            .map(SavedTurn::new)
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>> {
        let key = validated_key("get_session", key)?;
        self.inner.run_read("get_session", move |conn, inner| get_blocking(conn, inner, &key)).await
    }

    async fn get_session_raw(&self, key: &SessionKey) -> Result<Option<String>> {
        let key = validated_key("get_session_raw", key)?;
        self.inner.run_read("get_session_raw", move |conn, inner| get_raw_blocking(conn, inner, &key)).await
    }

    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        const OP: &str = "list_sessions";
        owner.validate().map_err(|e| StorageError::new(e.kind(), BACKEND, OP, e.message().to_owned()))?;
        let owner = owner.clone();
        let page = page.clone();
        self.inner.run_read(OP, move |conn, inner| list_blocking(conn, inner, &owner, &page)).await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        let key = validated_key("delete_session", key)?;
        self.inner.run("delete_session", move |conn, inner| delete_blocking(conn, inner, &key)).await
    }

    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        let key = validated_key("upsert_message", key)?;
        self.inner.ready("upsert_message")?;
        check_message_depth(BACKEND, "upsert_message", msg)?;
        // Encoded here, so only the bytes move to the blocking pool (no copy of the message).
        let (id, json) = (msg.id.clone(), as_message::to_json(msg));
        self.inner
            .run("upsert_message", move |conn, inner| upsert_message_blocking(conn, inner, &key, &id, &json))
            .await
    }

    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        let key = validated_key("get_message", key)?;
        let id = message_id.to_owned();
        self.inner.run_read("get_message", move |conn, inner| get_message_blocking(conn, inner, &key, &id)).await
    }

    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        let key = validated_key("list_messages", key)?;
        self.inner
            .run_read("list_messages", move |conn, inner| list_messages_blocking(conn, inner, &key, offset, limit))
            .await
    }

    async fn import_record(&self, record: &SessionRecord, messages: &[Msg], mode: ImportMode) -> Result<ImportOutcome> {
        const OP: &str = "import_record";
        validate_import(record).map_err(|e| StorageError::new(e.kind(), BACKEND, OP, e.message().to_owned()))?;
        self.inner.ready(OP)?;
        let log = self.encode_log(OP, messages)?;
        let record = record.clone();
        self.inner.run(OP, move |conn, inner| import_blocking(conn, inner, &record, &log, mode)).await
    }

    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>> {
        const OP: &str = "list_agents";
        validate_id("user_id", user_id)
            .map_err(|e| StorageError::new(e.kind(), BACKEND, OP, e.message().to_owned()))?;
        let user = user_id.to_owned();
        self.inner.run_read(OP, move |conn, inner| list_agents_blocking(conn, inner, &user)).await
    }

    async fn list_users(&self) -> Result<Vec<String>> {
        self.inner.run_read("list_users", list_users_blocking).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An I/O error from `COMMIT` (a failed fsync of the WAL, say) may come after the commit frame
    /// was written: the contract's "failed, nothing written" cannot be promised, only `Unavailable`
    /// with an unknown outcome. A full disk at commit is rolled back (nothing written) and stays as it was.
    #[test]
    fn an_io_error_from_commit_is_unavailable_with_an_unknown_outcome() {
        let failure = |code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        let path = Path::new("s.db");
        let io = SqliteError::from_rusqlite(failure(rusqlite::ffi::SQLITE_IOERR_FSYNC), path);
        let e = commit_failed("save_turn", io).into_storage("save_turn");
        assert_eq!(e.kind(), StorageErrorKind::Unavailable, "{e}");
        assert!(e.message().contains("unknown"), "{e}");
        assert_eq!(e.operation(), "save_turn");
        assert_eq!(crate::SqliteError::from_storage(&e).map(|s| s.kind()), Some(crate::SqliteErrorKind::Io));
        let full = SqliteError::from_rusqlite(failure(rusqlite::ffi::SQLITE_FULL), path);
        let e = commit_failed("save_turn", full).into_storage("save_turn");
        assert_eq!(e.kind(), StorageErrorKind::Backend, "{e}");
    }

    /// Both listing queries read `sessions_by_owner` in its order (no sort), and a later page
    /// seeks to its cursor instead of walking the owner's sessions from the newest.
    #[test]
    fn listing_pages_seek_in_the_owner_index() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::pool::initialize(&dir.path().join("s.db"), &SqliteOptions::default()).unwrap();
        let plan = |sql: &str, n: usize| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let params: Vec<i64> = vec![1; n];
            let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        let first = plan(LIST_FIRST, 3);
        assert!(first.contains("INDEX sessions_by_owner (user_id=? AND agent_id=?)"), "{first}");
        let after = plan(LIST_AFTER, 5);
        assert!(
            after.contains("INDEX sessions_by_owner (user_id=? AND agent_id=? AND (created_sort,id)<(?,?))"),
            "{after}"
        );
        for p in [first, after] {
            assert!(!p.contains("TEMP B-TREE"), "{p}");
        }
    }
}
