#![doc = include_str!("../README.md")]

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use as_message::{Msg, generate_id};
use as_state::AgentState;
use as_storage::{
    Capabilities, DEFAULT_MAX_RECORD_BYTES, ImportMode, ImportOutcome, Owner, PageRequest, Result, Revision,
    SessionCursor, SessionKey, SessionMeta, SessionPage, SessionRecord, SessionSummary, StorageBase, StorageError,
    StorageErrorKind, Timestamp, UpsertSession, check_message_depth, check_record_depth, check_size,
    encode_checked_record, message_range, validate_id, validate_import,
};
use async_trait::async_trait;

const BACKEND: &str = "json-dir";

/// Fresh ids a create without an id tries before it gives up with `Conflict`: two uuids never
/// collide, so only an id factory that repeats itself ([`as_message::set_id_factory`]) runs out.
const MAX_FRESH_ID_ATTEMPTS: usize = 32;

/// Sessions as JSON files: `<root>/<hex user id>/sessions/<hex session id>/record.json` holds
/// the record and `…/messages.jsonl` its message log, one compact `Msg` per line. Hex ids longer
/// than 120 characters are split into nested directories (a 256-byte id is 512 hex characters,
/// over the usual 255-byte file name limit: the conformance suite caught exactly that).
#[derive(Debug, Clone)]
pub struct JsonDirStorage {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    max_record_bytes: usize,
    /// 0 new, 1 open, 2 closed.
    lifecycle: AtomicU8,
    /// Serializes every read-modify-write of this instance (in-process only).
    lock: Mutex<()>,
}

impl JsonDirStorage {
    /// A store rooted at `root` (created by `open`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Inner {
                root: root.into(),
                max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
                lifecycle: AtomicU8::new(0),
                lock: Mutex::new(()),
            }),
        }
    }

    /// Sets the largest record or message accepted, in bytes.
    pub fn with_max_record_bytes(self, max: usize) -> Self {
        let root = self.inner.root.clone();
        Self {
            inner: Arc::new(Inner { root, max_record_bytes: max, lifecycle: AtomicU8::new(0), lock: Mutex::new(()) }),
        }
    }

    /// Runs `f` on a blocking thread, holding this store's lock: file I/O never blocks the
    /// async runtime, and no lock is held across an `.await`.
    async fn run<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match self.inner.lifecycle.load(Ordering::Acquire) {
            1 => {}
            0 => return Err(StorageError::new(StorageErrorKind::Unavailable, BACKEND, op, "not open")),
            _ => return Err(StorageError::new(StorageErrorKind::Unavailable, BACKEND, op, "closed")),
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let _guard = inner.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&inner)
        })
        .await
        .map_err(|e| StorageError::new(StorageErrorKind::Backend, BACKEND, op, "worker failed").with_source(e))?
    }
}

/// Map I/O errors to contract kinds at the edge: they never cross the trait as `io::Error`.
fn io_err(op: &'static str, e: io::Error) -> StorageError {
    let kind = match e.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::NotConnected => StorageErrorKind::Unavailable,
        _ => StorageErrorKind::Backend,
    };
    StorageError::new(kind, BACKEND, op, e.to_string()).with_source(e)
}

fn bad_json(op: &'static str, e: as_message::MessageError) -> StorageError {
    StorageError::new(StorageErrorKind::Serialization, BACKEND, op, e.to_string()).with_source(e)
}

/// Ids pass `validate_id` but may still contain `/` or be `..`: never use them as file names raw.
/// Hex-encode, in path segments of at most 120 characters.
fn id_path(id: &str) -> PathBuf {
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    let mut p = PathBuf::new();
    for chunk in hex.as_bytes().chunks(120) {
        p.push(String::from_utf8_lossy(chunk).as_ref());
    }
    p
}

/// The session id whose `record.json` is at `path` below `user_dir`: the inverse of [`id_path`].
fn session_id_of(user_dir: &Path, path: &Path) -> Option<String> {
    let dir = path.parent()?.strip_prefix(user_dir).ok()?;
    let hex: String = dir.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    decode_hex(&hex)
}

/// The hex-decoded id of a directory path's segments.
fn decode_hex(hex: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

/// The users below `dir` (whose path so far spells `hex`) that have at least one record.
fn find_users(dir: &Path, hex: &str, out: &mut std::collections::BTreeSet<String>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "sessions" {
            let mut records = Vec::new();
            find_records(&entry.path(), &mut records)?;
            if let Some(user) = decode_hex(hex).filter(|_| !records.is_empty()) {
                out.insert(user);
            }
        } else if name.bytes().all(|b| b.is_ascii_hexdigit()) {
            find_users(&entry.path(), &format!("{hex}{name}"), out)?;
        }
    }
    Ok(())
}

/// Every `record.json` below `dir` (session directories may nest: see [`id_path`]).
fn find_records(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            find_records(&path, out)?;
        } else if entry.file_name() == "record.json" {
            out.push(path);
        }
    }
    Ok(())
}

impl Inner {
    fn user_dir(&self, user: &str) -> PathBuf {
        // "sessions" is not hex, so it never collides with a segment of a longer user id.
        self.root.join(id_path(user)).join("sessions")
    }

    fn record_path(&self, user: &str, session: &str) -> PathBuf {
        self.user_dir(user).join(id_path(session)).join("record.json")
    }

    fn messages_path(&self, user: &str, session: &str) -> PathBuf {
        self.user_dir(user).join(id_path(session)).join("messages.jsonl")
    }

    fn read(&self, op: &'static str, path: &Path) -> Result<Option<Vec<u8>>> {
        match fs::read(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(op, e)),
        }
    }

    /// Write-then-rename: a reader sees the old file or the new one, never half of one.
    fn write_atomic(&self, op: &'static str, path: &Path, bytes: &[u8]) -> Result<()> {
        let tmp = self.stage(op, path, bytes)?;
        fs::rename(&tmp, path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err(op, e)
        })
    }

    /// Writes `bytes` to a new temporary file next to `path` (synced), for a later [`fs::rename`]:
    /// the slow, failure-prone part of a write done before anything visible changes.
    fn stage(&self, op: &'static str, path: &Path, bytes: &[u8]) -> Result<PathBuf> {
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| io_err(op, e))?;
        let tmp = dir.join(format!(".tmp-{}", generate_id()));
        let written = fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(op, e));
        }
        Ok(tmp)
    }

    /// Moves `path` aside (to a name no reader looks at), if it exists; `Ok(None)` if it did not.
    fn set_aside(&self, op: &'static str, path: &Path) -> Result<Option<PathBuf>> {
        let aside = path.with_file_name(format!(".old-{}", generate_id()));
        match fs::rename(path, &aside) {
            Ok(()) => Ok(Some(aside)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(op, e)),
        }
    }

    /// The envelope of `key`'s record, if it exists and belongs to `key`'s agent.
    fn meta(&self, op: &'static str, key: &SessionKey) -> Result<Option<(SessionMeta, Vec<u8>)>> {
        let Some(bytes) = self.read(op, &self.record_path(&key.user_id, &key.session_id))? else { return Ok(None) };
        let meta: SessionMeta = as_message::from_json_slice(&bytes).map_err(|e| bad_json(op, e))?;
        Ok((meta.agent_id == key.agent_id).then_some((meta, bytes)))
    }

    fn messages(&self, op: &'static str, key: &SessionKey) -> Result<Vec<String>> {
        let bytes = self.read(op, &self.messages_path(&key.user_id, &key.session_id))?.unwrap_or_default();
        let text = String::from_utf8(bytes).map_err(|e| {
            StorageError::new(StorageErrorKind::Serialization, BACKEND, op, "message log is not UTF-8").with_source(e)
        })?;
        Ok(text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
    }

    /// Creates the session `req` asks for under `id`, which has no record (the caller checked,
    /// holding the lock).
    fn create(&self, op: &'static str, req: UpsertSession, id: String) -> Result<SessionRecord> {
        let now = Timestamp::now();
        let meta = SessionMeta {
            id,
            updated_at: now,
            created_at: now,
            user_id: req.owner.user_id,
            agent_id: req.owner.agent_id,
            source: req.source,
            source_schedule_id: req.source_schedule_id,
            team_id: None,
            config: req.config,
        };
        let state = req.state.unwrap_or_default();
        // Refused before anything is touched (write_record checks again, cheaply).
        check_record_depth(BACKEND, op, &meta, &state)?;
        // A message log without a record (a crash in the middle of an import) must not leak
        // into the new session: it goes first, and if it cannot go, nothing is created.
        match fs::remove_file(self.messages_path(&meta.user_id, &meta.id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(op, e)),
            _ => {}
        }
        self.write_record(op, &meta, &state)?;
        Ok(SessionRecord::from_parts(meta, state))
    }

    fn write_record(&self, op: &'static str, meta: &SessionMeta, state: &AgentState) -> Result<()> {
        // encode_record writes state.session_id as meta.id: the one-session-id invariant.
        let (json, _) = encode_checked_record(BACKEND, op, meta, state)?;
        check_size(BACKEND, op, json.len(), self.max_record_bytes)?;
        self.write_atomic(op, &self.record_path(&meta.user_id, &meta.id), json.as_bytes())
    }
}

#[async_trait]
impl StorageBase for JsonDirStorage {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    fn capabilities(&self) -> Capabilities {
        // Files survive a restart; the lock does not span processes.
        Capabilities::none().with_durable(true)
    }

    async fn open(&self) -> Result<()> {
        fs::create_dir_all(&self.inner.root).map_err(|e| io_err("open", e))?;
        // Opening again after `close` reopens the same directory (the contract's Lifecycle clause).
        self.inner.lifecycle.store(1, Ordering::Release);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.inner.lifecycle.store(2, Ordering::Release);
        Ok(())
    }

    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord> {
        const OP: &str = "upsert_session";
        req.validate()?;
        let Some(id) = req.session_id.clone().filter(|id| !id.is_empty()) else {
            // A fresh id, generated here (on the caller's thread, where a scoped id factory
            // applies) and checked like a given one: a session under an id no key can address
            // could never be read again. A taken one (only a factory that repeats itself gives
            // one) is never updated: another is tried.
            for _ in 0..MAX_FRESH_ID_ATTEMPTS {
                let id = as_storage::generate_session_id(BACKEND, OP)?;
                let req = req.clone();
                let created = self
                    .run(OP, move |db| match db.read(OP, &db.record_path(&req.owner.user_id, &id))? {
                        Some(_) => Ok(None),
                        None => db.create(OP, req, id).map(Some),
                    })
                    .await?;
                if let Some(rec) = created {
                    return Ok(rec);
                }
            }
            let why = format!("{MAX_FRESH_ID_ATTEMPTS} generated session ids were all taken");
            return Err(StorageError::new(StorageErrorKind::Conflict, BACKEND, OP, why));
        };
        self.run(OP, move |db| {
            let path = db.record_path(&req.owner.user_id, &id);
            if let Some(bytes) = db.read(OP, &path)? {
                let old: SessionRecord = as_message::from_json_slice(&bytes).map_err(|e| bad_json(OP, e))?;
                if old.agent_id != req.owner.agent_id {
                    return Err(StorageError::new(
                        StorageErrorKind::AlreadyExists,
                        BACKEND,
                        OP,
                        "id owned by another agent",
                    ));
                }
                let mut meta = old.meta();
                meta.config = req.config;
                meta.updated_at = Timestamp::now_after(&old.updated_at);
                let state = req.state.unwrap_or(old.state);
                db.write_record(OP, &meta, &state)?;
                return Ok(SessionRecord::from_parts(meta, state));
            }
            db.create(OP, req, id)
        })
        .await
    }

    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
        const OP: &str = "update_session_state";
        key.validate()?;
        let (key, state, expected) = (key.clone(), state.clone(), expected.cloned());
        self.run(OP, move |db| {
            let Some((mut meta, _)) = db.meta(OP, &key)? else {
                return Err(StorageError::new(StorageErrorKind::NotFound, BACKEND, OP, "no such session"));
            };
            if expected.is_some_and(|e| e != meta.revision()) {
                return Err(StorageError::new(StorageErrorKind::Conflict, BACKEND, OP, "revision moved on"));
            }
            meta.updated_at = Timestamp::now_after(&meta.updated_at);
            db.write_record(OP, &meta, &state)?;
            Ok(meta.revision())
        })
        .await
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>> {
        const OP: &str = "get_session";
        key.validate()?;
        let key = key.clone();
        self.run(OP, move |db| match db.meta(OP, &key)? {
            Some((_, bytes)) => as_message::from_json_slice(&bytes).map(Some).map_err(|e| bad_json(OP, e)),
            None => Ok(None),
        })
        .await
    }

    async fn get_session_raw(&self, key: &SessionKey) -> Result<Option<String>> {
        const OP: &str = "get_session_raw";
        key.validate()?;
        let key = key.clone();
        self.run(OP, move |db| match db.meta(OP, &key)? {
            Some((_, bytes)) => String::from_utf8(bytes).map(Some).map_err(|e| {
                StorageError::new(StorageErrorKind::Serialization, BACKEND, OP, "record is not UTF-8").with_source(e)
            }),
            None => Ok(None),
        })
        .await
    }

    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        const OP: &str = "list_sessions";
        owner.validate()?;
        let cursor = page.cursor.as_deref().map(|c| SessionCursor::decode(BACKEND, c)).transpose()?;
        let (owner, limit) = (owner.clone(), page.limit.max(1));
        self.run(OP, move |db| {
            let mut out = SessionPage::default();
            let mut paths = Vec::new();
            match find_records(&db.user_dir(&owner.user_id), &mut paths) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
                Err(e) => return Err(io_err(OP, e)),
            }
            let mut all = Vec::new();
            for path in paths {
                let Some(bytes) = db.read(OP, &path)? else { continue };
                // Only the envelope is built; the state is skipped by the parser.
                match as_message::from_json_slice::<SessionMeta>(&bytes) {
                    Ok(m) if m.agent_id == owner.agent_id => all.push((m, bytes.len() as u64)),
                    Ok(_) => {}
                    Err(e) => {
                        let session_id = session_id_of(&db.user_dir(&owner.user_id), &path)
                            .unwrap_or_else(|| path.display().to_string());
                        out.errors.push(as_storage::ListError { session_id, error: bad_json(OP, e) });
                    }
                }
            }
            all.sort_by(|(a, _), (b, _)| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
            let mut rest =
                all.into_iter().filter(|(m, _)| cursor.as_ref().is_none_or(|c| c.is_before(&m.created_at, &m.id)));
            for (m, size) in rest.by_ref().take(limit) {
                out.sessions.push(SessionSummary {
                    id: m.id,
                    name: m.config.name,
                    created_at: m.created_at,
                    updated_at: m.updated_at,
                    source: m.source,
                    message_count: None, // would need the state: this backend does not know cheaply
                    size_bytes: size,
                });
            }
            if rest.next().is_some() {
                out.next_cursor =
                    out.sessions.last().map(|s| SessionCursor { created_at: s.created_at, id: s.id.clone() }.encode());
            }
            Ok(out)
        })
        .await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        const OP: &str = "delete_session";
        key.validate()?;
        let key = key.clone();
        self.run(OP, move |db| {
            if db.meta(OP, &key)?.is_none() {
                return Ok(false);
            }
            // All or nothing: the record is moved aside first (one rename: the session is gone at
            // once), then the log is removed; if it cannot be, the record is put back and the
            // session is as it was. A crash in between leaves only a log without a record, which
            // the next create of the id removes.
            let record = db.record_path(&key.user_id, &key.session_id);
            let Some(aside) = db.set_aside(OP, &record)? else { return Ok(false) };
            match fs::remove_file(db.messages_path(&key.user_id, &key.session_id)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    let _ = fs::rename(&aside, &record);
                    return Err(io_err(OP, e));
                }
                _ => {}
            }
            // Named so no reader looks at it: a leftover is garbage, not data.
            let _ = fs::remove_file(aside);
            Ok(true)
        })
        .await
    }

    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        const OP: &str = "upsert_message";
        key.validate()?;
        check_message_depth(BACKEND, OP, msg)?;
        let json = as_message::to_json(msg);
        check_size(BACKEND, OP, json.len(), self.inner.max_record_bytes)?;
        let (key, id) = (key.clone(), msg.id.clone());
        self.run(OP, move |db| {
            if db.meta(OP, &key)?.is_none() {
                return Err(StorageError::new(StorageErrorKind::NotFound, BACKEND, OP, "no such session"));
            }
            let mut lines = db.messages(OP, &key)?;
            let last_id = lines.last().and_then(|l| as_message::from_json::<Msg>(l).ok()).map(|m| m.id);
            if last_id.as_deref() == Some(id.as_str()) {
                lines.pop();
            }
            lines.push(json);
            let mut text = lines.join("\n");
            text.push('\n');
            db.write_atomic(OP, &db.messages_path(&key.user_id, &key.session_id), text.as_bytes())
        })
        .await
    }

    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        const OP: &str = "get_message";
        key.validate()?;
        let (key, message_id) = (key.clone(), message_id.to_owned());
        self.run(OP, move |db| {
            if db.meta(OP, &key)?.is_none() {
                return Ok(None);
            }
            for line in db.messages(OP, &key)?.iter().rev() {
                let m: Msg = as_message::from_json(line).map_err(|e| bad_json(OP, e))?;
                if m.id == message_id {
                    return Ok(Some(m));
                }
            }
            Ok(None)
        })
        .await
    }

    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        const OP: &str = "list_messages";
        key.validate()?;
        let key = key.clone();
        self.run(OP, move |db| {
            if db.meta(OP, &key)?.is_none() {
                return Ok(Vec::new());
            }
            let lines = db.messages(OP, &key)?;
            lines[message_range(lines.len(), offset, limit)]
                .iter()
                .map(|l| as_message::from_json(l).map_err(|e| bad_json(OP, e)))
                .collect()
        })
        .await
    }

    /// Optional method: the record file is written with the record's own timestamps (no
    /// `now_after`), and the message log file is replaced whole. Both are staged first, then
    /// renamed into place, the record last, so a new session only appears once both are in place
    /// (a crash in between leaves an orphan log, which the next create of that id removes).
    async fn import_record(&self, record: &SessionRecord, messages: &[Msg], mode: ImportMode) -> Result<ImportOutcome> {
        const OP: &str = "import_record";
        validate_import(record)?;
        let mut log = String::new();
        for m in messages {
            check_message_depth(BACKEND, OP, m)?;
            let json = as_message::to_json(m);
            check_size(BACKEND, OP, json.len(), self.inner.max_record_bytes)?;
            log.push_str(&json);
            log.push('\n');
        }
        let meta = record.meta();
        let (json, _) = encode_checked_record(BACKEND, OP, &meta, &record.state)?;
        check_size(BACKEND, OP, json.len(), self.inner.max_record_bytes)?;
        self.run(OP, move |db| {
            let path = db.record_path(&meta.user_id, &meta.id);
            let outcome = match db.read(OP, &path)? {
                None => ImportOutcome::Created,
                Some(bytes) => {
                    let old: SessionMeta = as_message::from_json_slice(&bytes).map_err(|e| bad_json(OP, e))?;
                    if old.agent_id != meta.agent_id || mode == ImportMode::CreateOnly {
                        return Err(StorageError::new(StorageErrorKind::AlreadyExists, BACKEND, OP, "id in use"));
                    }
                    ImportOutcome::Replaced
                }
            };
            // Both files are written (and synced) before anything visible changes, so a full disk
            // fails the import with the old session intact. Then three renames: the old log aside,
            // the new log in, the record in; a failing one undoes the others.
            let log_path = db.messages_path(&meta.user_id, &meta.id);
            let new_record = db.stage(OP, &path, json.as_bytes())?;
            let new_log = if log.is_empty() {
                None
            } else {
                match db.stage(OP, &log_path, log.as_bytes()) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        let _ = fs::remove_file(&new_record);
                        return Err(e);
                    }
                }
            };
            let discard = |new_log: &Option<PathBuf>| {
                let _ = fs::remove_file(&new_record);
                if let Some(p) = new_log {
                    let _ = fs::remove_file(p);
                }
            };
            // The old record goes aside first (the session is absent from then until the new
            // record is in: never an old record with a new or missing log), then the old log,
            // then the new log and the new record go in. A crash leaves at worst an absent
            // session and a log without a record, which the next create of the id removes.
            let old_record = match db.set_aside(OP, &path) {
                Ok(a) => a,
                Err(e) => {
                    discard(&new_log);
                    return Err(e);
                }
            };
            let old_log = match db.set_aside(OP, &log_path) {
                Ok(a) => a,
                Err(e) => {
                    if let Some(r) = &old_record {
                        let _ = fs::rename(r, &path);
                    }
                    discard(&new_log);
                    return Err(e);
                }
            };
            let swapped = match &new_log {
                Some(p) => fs::rename(p, &log_path),
                None => Ok(()),
            }
            .and_then(|()| fs::rename(&new_record, &path));
            if let Err(e) = swapped {
                if new_log.is_some() {
                    let _ = fs::remove_file(&log_path);
                }
                if let Some(a) = &old_log {
                    let _ = fs::rename(a, &log_path);
                }
                if let Some(r) = &old_record {
                    let _ = fs::rename(r, &path);
                }
                discard(&new_log);
                return Err(io_err(OP, e));
            }
            for aside in [old_log, old_record].into_iter().flatten() {
                let _ = fs::remove_file(aside);
            }
            Ok(outcome)
        })
        .await
    }

    /// Optional method: reads the envelopes of the user's records.
    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>> {
        const OP: &str = "list_agents";
        validate_id("user_id", user_id)?;
        let user = user_id.to_owned();
        self.run(OP, move |db| {
            let mut paths = Vec::new();
            match find_records(&db.user_dir(&user), &mut paths) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io_err(OP, e)),
            }
            let mut agents = std::collections::BTreeSet::new();
            for path in paths {
                let Some(bytes) = db.read(OP, &path)? else { continue };
                if let Ok(m) = as_message::from_json_slice::<SessionMeta>(&bytes) {
                    agents.insert(m.agent_id);
                }
            }
            Ok(agents.into_iter().collect())
        })
        .await
    }

    /// Optional method: the user directories that hold at least one record.
    async fn list_users(&self) -> Result<Vec<String>> {
        const OP: &str = "list_users";
        self.run(OP, move |db| {
            let mut users = std::collections::BTreeSet::new();
            match find_users(&db.root, "", &mut users) {
                Ok(()) => Ok(users.into_iter().collect()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(io_err(OP, e)),
            }
        })
        .await
    }
}
