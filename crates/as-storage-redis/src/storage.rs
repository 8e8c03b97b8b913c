//! [`RedisStorage`]: the [`StorageBase`] implementation.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use as_message::Msg;
use as_state::AgentState;
use as_storage::{
    Capabilities, ImportMode, ImportOutcome, ListError, Owner, PageRequest, Revision, SavedTurn, SessionConfig,
    SessionCursor, SessionKey, SessionMeta, SessionPage, SessionRecord, SessionSource, SessionSummary, StorageBase,
    StorageError, StorageErrorKind, Timestamp, UpsertSession, check_message_depth, encode_checked_record,
    encode_envelope, validate_id, validate_import,
};
use async_trait::async_trait;
use bytes::Bytes;
use fred::prelude::{
    Builder, ClientLike, Config as FredConfig, Error as FredError, Expiration, KeysInterface, LuaInterface, Pool,
    ServerConfig, SetsInterface, Value,
};
use fred::types::scan::{ScanResult, ScanType, Scanner};
use serde::Deserialize;

use crate::config::{Connection, RedisStorageConfig, TtlPolicy};
use crate::error::{BACKEND, Fetched, bad_record, bad_value, err, map_fred, utf8, wrong_type};
use crate::keys::Keys;
use crate::scripts::{Lua, Scripts};

/// Most attempts of an optimistic (CAS) write before giving up with `Conflict`.
const MAX_CAS_ATTEMPTS: usize = 32;

/// Most cached record envelopes (the cache is cleared when it grows past this).
const MAX_CACHED: usize = 4096;
/// How long a staged record value may wait for its script (it is moved or deleted at once).
const STAGE_TTL_MS: i64 = 60_000;
/// Records up to this size are written by one `EVALSHA` carrying the value; larger ones are
/// staged with a `SET` and moved into place by the script (a value in `ARGV` is copied into Lua
/// and back, which costs more than the second command above about 16 KiB).
const INLINE_UPDATE_MAX_BYTES: usize = 16 * 1024;

/// Record keys per `MGET` in a listing. Each batch is summarised and its bytes dropped before the
/// next is fetched, so a listing holds at most this many records in memory, whatever the agent's
/// session count.
const MGET_CHUNK: usize = 256;

/// Waits before the next read of a CAS retry loop, after `failures` attempts that read the record
/// and still lost: not at all after the first, then a random 0–1, 0–2, 0–4, 0–8, 0–16 ms. Two
/// writers of one session that retry at once can fall into lockstep (each re-reads just as the
/// other writes, and the same one wins every time); the random wait breaks it.
async fn cas_backoff(failures: usize) {
    if failures == 0 {
        return;
    }
    let cap_ms = 1u64 << (failures - 1).min(4);
    match fastrand::u64(0..=cap_ms) {
        0 => tokio::task::yield_now().await,
        ms => tokio::time::sleep(Duration::from_millis(ms)).await,
    }
}

#[derive(Debug)]
enum State {
    /// Not opened yet (or closed): methods fail with `Unavailable`.
    Idle,
    /// Open with a pool.
    Open(Pool),
}

/// A record envelope this process has seen, with its CAS token.
#[derive(Clone, Debug)]
struct Cached {
    meta: SessionMeta,
    token: Bytes,
    exact: bool,
}

#[derive(Debug)]
struct Inner {
    config: RedisStorageConfig,
    /// A caller-provided pool (never closed by us).
    external: Option<Pool>,
    keys: Keys,
    scripts: Scripts,
    state: Mutex<State>,
    cache: Mutex<HashMap<String, Cached>>,
}

/// Session storage on Redis, sharing keys and bytes with AgentScope Python 2.0.4.
///
/// Build it from a [`RedisStorageConfig`] (URL or host/port) or around a caller's fred
/// [`Pool`]/[`fred::prelude::Client`] (which is then never closed), call
/// [`StorageBase::open`], and hold it as an `Arc<dyn StorageBase>`. Cloning is cheap and
/// clones share the connection.
///
/// Every write is one Lua script (atomic): create is `SET` + `SADD` (+ TTLs) together; updates
/// are compare-and-set on the stored envelope (so a concurrent writer, Python included, is
/// never overwritten blindly and a deleted session is never resurrected); the delete cascade is
/// all-or-nothing; `upsert_message` checks the tail id and writes in the same step.
#[derive(Clone, Debug)]
pub struct RedisStorage {
    inner: Arc<Inner>,
}

/// The CAS token for a stored value: its canonical envelope prefix, or the whole value when it
/// is not in canonical form.
///
/// The token is a copy: a slice would pin the whole reply buffer (the full record, and fred's
/// read buffer with it) in the envelope cache, so every large read would have to grow a fresh
/// buffer from scratch.
fn token_for(stored: &Bytes, meta: &SessionMeta) -> (Bytes, bool) {
    let prefix = encode_envelope(meta);
    if stored.starts_with(prefix.as_bytes()) {
        (Bytes::from(prefix), false)
    } else {
        (Bytes::copy_from_slice(stored), true)
    }
}

/// The result of the staged update script: its code (see `cas_write`), except -3, the staged
/// value gone when the script ran: evicted under memory pressure (with records that persist, it is
/// the only key with a TTL) or expired. Nothing was written and no other writer is involved, so
/// it is an error, not a lost race to retry (each retry would send the whole record again).
fn staged_update_code(op: &'static str, rkey: &str, code: Option<i64>) -> Result<i64, StorageError> {
    match code {
        Some(-3) => Err(err(
            StorageErrorKind::Backend,
            op,
            format!(
                "the record staged for {rkey} was gone before the update ran (evicted under memory pressure, \
                 or expired); nothing was written"
            ),
        )),
        Some(code) => Ok(code),
        None => Err(err(StorageErrorKind::Backend, op, format!("unexpected reply of the update script for {rkey}"))),
    }
}

/// A suffix no other staged write uses: a random per-process part (so two processes never
/// share a staging key) and a counter (no system call per write).
fn stage_suffix() -> String {
    static PROCESS: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| uuid::Uuid::new_v4().simple().to_string());
    format!("{process}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    as_message::to_json(s)
}

/// The canonical `"user_id":…,"agent_id":…,` fragment the scripts look for.
fn owner_fragment(user_id: &str, agent_id: &str) -> String {
    format!("\"user_id\":{},\"agent_id\":{},", json_str(user_id), json_str(agent_id))
}

fn str_value(s: impl Into<String>) -> Value {
    Value::String(s.into().into())
}

fn bytes_value(b: Bytes) -> Value {
    Value::Bytes(b)
}

fn int_value(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Only what a listing needs: the envelope plus the number of context messages.
#[derive(Deserialize)]
struct ListRecord {
    #[serde(default = "Timestamp::now")]
    updated_at: Timestamp,
    #[serde(default = "Timestamp::now")]
    created_at: Timestamp,
    user_id: String,
    agent_id: String,
    #[serde(default)]
    source: SessionSource,
    config: SessionConfig,
    #[serde(default)]
    state: Option<StateCount>,
}

#[derive(Deserialize, Default)]
struct StateCount {
    #[serde(default)]
    context: Count,
}

/// Counts the elements of a JSON array without building them.
#[derive(Default)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(V)
    }
}

/// The `source_schedule_id` of a record that cannot be decoded as a session record (a field
/// missing or of the wrong type elsewhere), when it is still a JSON object naming one as a string:
/// read as leniently as a record (repeated keys as pydantic reads them), every other field ignored.
/// Only an id a write would take ([`as_storage::validate_id`]) names an index key: a corrupt one
/// (`{x}`, which moves a cluster key's hash slot) would make the delete itself fail.
fn schedule_of_unreadable(raw: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Schedule {
        #[serde(default)]
        source_schedule_id: Option<serde_json::Value>,
    }
    let found: Schedule = as_message::from_json_slice(raw).ok()?;
    match found.source_schedule_id? {
        serde_json::Value::String(s) if as_storage::validate_id("source_schedule_id", &s).is_ok() => Some(s),
        _ => None,
    }
}

impl RedisStorage {
    /// A store that connects (on [`StorageBase::open`]) as `config` says.
    pub fn new(config: RedisStorageConfig) -> Result<Self, StorageError> {
        Self::build(config, None)
    }

    /// `RedisStorage.from_url`: parses `url` (see [`RedisStorageConfig::from_url`]).
    pub fn from_url(url: &str) -> Result<Self, StorageError> {
        Self::new(RedisStorageConfig::from_url(url)?)
    }

    /// Wraps a caller's pool, which must be connected by the caller and is never closed by the
    /// store. Connection fields of `config` are ignored; layout, TTL, timeout and limits apply.
    pub fn from_pool(pool: Pool, config: RedisStorageConfig) -> Result<Self, StorageError> {
        Self::build(config, Some(pool))
    }

    /// Wraps a caller's client (never closed by the store); see [`RedisStorage::from_pool`].
    pub fn from_client(client: fred::prelude::Client, config: RedisStorageConfig) -> Result<Self, StorageError> {
        let pool = Pool::from_clients(vec![client]).map_err(|e| map_fred("from_client", None, e))?;
        Self::build(config, Some(pool))
    }

    fn build(config: RedisStorageConfig, external: Option<Pool>) -> Result<Self, StorageError> {
        let keys = Keys::compile(&config.effective_key_config())?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                external,
                keys,
                scripts: Scripts::new(),
                state: Mutex::new(State::Idle),
                cache: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RedisStorageConfig {
        &self.inner.config
    }

    /// The Redis key of a session record.
    pub fn session_key(&self, user_id: &str, session_id: &str) -> String {
        self.inner.keys.session(user_id, session_id)
    }

    /// The Redis key of an agent's session index set.
    pub fn session_index_key(&self, user_id: &str, agent_id: &str) -> String {
        self.inner.keys.session_index(user_id, agent_id)
    }

    /// The Redis key of a session's message list.
    pub fn messages_key(&self, user_id: &str, session_id: &str) -> String {
        self.inner.keys.messages(user_id, session_id)
    }

    /// The Redis key of a schedule's session index set.
    pub fn schedule_index_key(&self, user_id: &str, schedule_id: &str) -> String {
        self.inner.keys.schedule_session_index(user_id, schedule_id)
    }

    /// The connection pool, while open (for [`crate::SessionLock`] and for callers that want to
    /// share it).
    pub fn pool(&self) -> Result<Pool, StorageError> {
        match &*self.inner.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Open(pool) => Ok(pool.clone()),
            State::Idle => Err(err(StorageErrorKind::Unavailable, "pool", "the store is not open (call open() first)")),
        }
    }

    fn pool_for(&self, op: &'static str) -> Result<Pool, StorageError> {
        self.pool().map_err(|_| err(StorageErrorKind::Unavailable, op, "the store is not open (call open() first)"))
    }

    /// Runs `fut` under the configured timeout.
    ///
    /// A plain combinator, not an `async fn`: an `async fn` would keep `fut` both as its argument
    /// and inside the `Timeout`, doubling the size of every operation's future (fred's command
    /// futures are about 7 KB each), which is then copied into the box `async_trait` makes.
    fn timed<T>(
        &self,
        op: &'static str,
        fut: impl Future<Output = Result<T, StorageError>>,
    ) -> impl Future<Output = Result<T, StorageError>> {
        use futures::FutureExt as _;
        let limit = self.inner.config.timeout;
        tokio::time::timeout(limit, fut).map(move |r| {
            r.unwrap_or_else(|_| {
                Err(err(StorageErrorKind::Unavailable, op, format!("Redis did not answer within {limit:?}")))
            })
        })
    }

    /// `EVALSHA`, or `EVAL` when the server does not know the script yet.
    async fn eval<R: fred::prelude::FromValue>(
        pool: &Pool,
        lua: &Lua,
        keys: Vec<String>,
        args: Vec<Value>,
    ) -> Result<R, FredError> {
        match pool.evalsha::<R, _, _, _>(lua.script.sha1().clone(), keys.clone(), args.clone()).await {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                pool.eval::<R, _, _, _>(lua.source.clone(), keys, args).await
            }
            r => r,
        }
    }

    fn cache_get(&self, key: &str) -> Option<Cached> {
        self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner).get(key).cloned()
    }

    fn cache_put(&self, key: String, c: Cached) {
        let mut cache = self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED && !cache.contains_key(&key) {
            cache.clear();
        }
        cache.insert(key, c);
    }

    /// Whether the cached envelope of `key` is still the one `stored` begins with (then its
    /// meta and token are exactly what [`token_for`] would derive from `stored`, without
    /// re-encoding the envelope).
    fn cache_matches(&self, key: &str, stored: &[u8]) -> bool {
        let cache = self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.get(key).is_some_and(|c| !c.exact && stored.starts_with(&c.token))
    }

    fn cache_forget(&self, key: &str) {
        self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }

    /// GETs a record and parses its envelope. `None` when absent, empty or owned by someone else.
    async fn read_meta(
        &self,
        pool: &Pool,
        op: &'static str,
        rkey: &str,
        owner: &Owner,
    ) -> Result<Option<(SessionMeta, Bytes, bool)>, StorageError> {
        let reply: Value = pool.get(rkey).await.map_err(|e| map_fred(op, Some(rkey), e))?;
        let Some(fetched) = Fetched::from_reply(reply).map_err(|e| map_fred(op, Some(rkey), e))? else {
            return Ok(None);
        };
        let meta: SessionMeta = as_message::from_json(fetched.text(op, rkey)?).map_err(|e| bad_value(op, rkey, e))?;
        let raw = fetched.bytes();
        if meta.user_id != owner.user_id || meta.agent_id != owner.agent_id {
            return Ok(None);
        }
        let (token, exact) = token_for(raw, &meta);
        Ok(Some((meta, token, exact)))
    }

    /// The `ARGV` tail that makes an update a `save_turn`: the first message's needle (its
    /// canonical `"id":…`), then `(id, json)` per message; empty without messages. Checks each
    /// message's size first.
    fn log_args(&self, op: &'static str, messages: &[Msg]) -> Result<Vec<Value>, StorageError> {
        let Some(first) = messages.first() else { return Ok(Vec::new()) };
        let mut log = Vec::with_capacity(1 + 2 * messages.len());
        log.push(str_value(format!("\"id\":{}", json_str(&first.id))));
        for m in messages {
            check_message_depth(BACKEND, op, m)?;
            let json = as_message::to_json(m);
            self.check_size(op, &json)?;
            log.extend([str_value(m.id.clone()), bytes_value(Bytes::from(json))]);
        }
        Ok(log)
    }

    fn check_size(&self, op: &'static str, json: &str) -> Result<(), StorageError> {
        as_storage::check_size(BACKEND, op, json.len(), self.inner.config.max_record_bytes)
    }

    fn ttl_args(&self) -> (Value, Value) {
        let (mode, secs) = self.inner.config.key_ttl.script_args(self.inner.config.index_ttl);
        (str_value(mode), int_value(secs))
    }

    /// The keys a write to a session touches, in the scripts' order: the record, its message list,
    /// the agent index, and the schedule index when the session has a schedule.
    fn write_keys(
        &self,
        rkey: &str,
        user_id: &str,
        agent_id: &str,
        session_id: &str,
        schedule: Option<&str>,
    ) -> Vec<String> {
        let keys = &self.inner.keys;
        let mut k = vec![rkey.to_owned(), keys.messages(user_id, session_id), keys.session_index(user_id, agent_id)];
        if let Some(s) = schedule.filter(|s| !s.is_empty()) {
            k.push(keys.schedule_session_index(user_id, s));
        }
        k
    }

    /// Writes `json` over the record if its envelope still matches `token`, and the messages of
    /// `log` ([`RedisStorage::log_args`]) with it. Returns 1 written, 2 already written (this very
    /// write with a non-empty `log`, re-sent after a lost reply), 0 missing, -1 changed meanwhile,
    /// -2 the log's last message is corrupt (nothing written unless 1).
    #[allow(clippy::too_many_arguments)]
    async fn cas_write(
        &self,
        pool: &Pool,
        op: &'static str,
        rkey: &str,
        meta: &SessionMeta,
        token: Bytes,
        exact: bool,
        json: String,
        new_head: Bytes,
        log: &[Value],
    ) -> Result<i64, StorageError> {
        let (mode, ttl) = self.ttl_args();
        let exact_arg = str_value(if exact { "1" } else { "0" });
        // A script error names the record, unless it is the scripts' own check of the message list
        // (that key is only built for an error, not on every write).
        let fail = |e: FredError| {
            let mkey = self.inner.keys.messages(&meta.user_id, &meta.id);
            let list_error = e.details().contains(&format!("WRONGTYPE {mkey} "));
            map_fred(op, Some(if list_error { &mkey } else { rkey }), e)
        };
        if json.len() <= INLINE_UPDATE_MAX_BYTES {
            let k = self.write_keys(rkey, &meta.user_id, &meta.agent_id, &meta.id, meta.source_schedule_id.as_deref());
            let mut args = Vec::with_capacity(6 + log.len());
            args.extend([
                bytes_value(token),
                exact_arg,
                str_value(meta.id.clone()),
                mode,
                ttl,
                bytes_value(Bytes::from(json)),
            ]);
            args.extend_from_slice(log);
            return Self::eval(pool, &self.inner.scripts.update_inline, k, args).await.map_err(fail);
        }
        // The staging key extends the record key, so it shares its hash tag (cluster slot).
        let stage = format!("{rkey}:stage:{}", stage_suffix());
        let mut k = self.write_keys(rkey, &meta.user_id, &meta.agent_id, &meta.id, meta.source_schedule_id.as_deref());
        k.insert(1, stage.clone());
        // The new record's envelope and length: a re-sent script finds its own write by them.
        let (head, len) = (bytes_value(new_head), int_value(u64::try_from(json.len()).unwrap_or(u64::MAX)));
        let mut args = vec![bytes_value(token), exact_arg, str_value(meta.id.clone()), mode, ttl, head, len];
        args.extend_from_slice(log);
        let lua = &self.inner.scripts.update;
        // One round trip: stage the value (expiring on its own if we die here), then the script.
        let pipeline = pool.next().pipeline();
        let () = pipeline
            .set(&stage, Bytes::from(json), Some(Expiration::PX(STAGE_TTL_MS)), None, false)
            .await
            .map_err(fail)?;
        // EVALSHA as a custom command (fred's pipeline has no Lua interface), routed by KEYS[1]'s slot.
        let mut raw_args: Vec<Value> = Vec::with_capacity(2 + k.len() + args.len());
        raw_args.push(Value::String(lua.script.sha1().clone()));
        raw_args.push(Value::Integer(i64::try_from(k.len()).unwrap_or(i64::MAX)));
        raw_args.extend(k.iter().map(|key| str_value(key.clone())));
        raw_args.extend(args.iter().cloned());
        let slot = fred::util::redis_keyslot(rkey.as_bytes());
        let evalsha = fred::types::CustomCommand::new("EVALSHA", fred::types::ClusterHash::Custom(slot), false);
        let () = pipeline.custom(evalsha, raw_args).await.map_err(fail)?;
        let mut results = pipeline.try_all::<Value>().await.into_iter();
        results
            .next()
            .unwrap_or_else(|| Err(FredError::new(fred::error::ErrorKind::Unknown, "missing reply")))
            .map_err(fail)?;
        let reply = match results.next() {
            Some(Err(e)) if e.details().starts_with("NOSCRIPT") => {
                pool.eval::<Value, _, _, _>(lua.source.clone(), k, args).await
            }
            Some(r) => r,
            None => Err(FredError::new(fred::error::ErrorKind::Unknown, "missing reply")),
        };
        staged_update_code(op, rkey, reply.map_err(fail)?.as_i64())
    }

    /// Encodes `meta` + `state`, returning the JSON and its CAS token (the envelope: a canonical record
    /// always begins with it).
    fn encode(
        &self,
        op: &'static str,
        meta: &SessionMeta,
        state: &AgentState,
    ) -> Result<(String, Bytes), StorageError> {
        let (json, head) = encode_checked_record(BACKEND, op, meta, state)?;
        self.check_size(op, &json)?;
        // The envelope was found while writing: no second encoding of it.
        let token = Bytes::copy_from_slice(json.as_bytes().get(..head).unwrap_or_default());
        Ok((json, token))
    }

    async fn create(&self, pool: &Pool, req: &UpsertSession, id: &str) -> Result<Option<SessionRecord>, StorageError> {
        const OP: &str = "upsert_session";
        // An empty schedule id is stored as given (as 2.0.4 stores it) and indexed under no schedule.
        let schedule = req.source_schedule_id.clone().filter(|s| !s.is_empty());
        let meta = SessionMeta::created(id, req);
        let state = req.state.clone().unwrap_or_default();
        let (json, token) = self.encode(OP, &meta, &state)?;
        let rkey = self.inner.keys.session(&meta.user_id, id);
        let k = self.write_keys(&rkey, &meta.user_id, &meta.agent_id, id, schedule.as_deref());
        let (mode, ttl) = self.ttl_args();
        let args = vec![bytes_value(Bytes::from(json)), str_value(id), mode, ttl];
        let created: i64 =
            Self::eval(pool, &self.inner.scripts.create, k, args).await.map_err(|e| map_fred(OP, Some(&rkey), e))?;
        if created != 1 {
            return Ok(None);
        }
        self.cache_put(rkey, Cached { meta: meta.clone(), token, exact: false });
        Ok(Some(SessionRecord::from_parts(meta, state)))
    }

    async fn upsert_inner(&self, req: UpsertSession) -> Result<SessionRecord, StorageError> {
        const OP: &str = "upsert_session";
        req.validate()?;
        let pool = self.pool_for(OP)?;
        let given = req.session_id.clone().filter(|s| !s.is_empty());
        let Some(id) = given else {
            for _ in 0..MAX_CAS_ATTEMPTS {
                let id = as_storage::generate_session_id(BACKEND, OP)?;
                if let Some(rec) = self.create(&pool, &req, &id).await? {
                    return Ok(rec);
                }
            }
            return Err(err(StorageErrorKind::Conflict, OP, "could not find a free session id"));
        };
        let rkey = self.inner.keys.session(&req.owner.user_id, &id);
        for attempt in 0..MAX_CAS_ATTEMPTS {
            cas_backoff(attempt).await;
            let raw: Option<Bytes> = pool.get(&rkey).await.map_err(|e| map_fred(OP, Some(&rkey), e))?;
            let Some(raw) = raw.filter(|b| !b.is_empty()) else {
                match self.create(&pool, &req, &id).await? {
                    Some(rec) => return Ok(rec),
                    None => continue,
                }
            };
            let text = utf8(OP, &rkey, &raw)?;
            // The update path needs the stored state when none is given.
            let stored: SessionRecord = as_storage::decode_record(text).map_err(|e| bad_value(OP, &rkey, e))?;
            if stored.user_id != req.owner.user_id || stored.agent_id != req.owner.agent_id {
                return Err(err(
                    StorageErrorKind::AlreadyExists,
                    OP,
                    format!("session id {id:?} is taken by another owner"),
                ));
            }
            let old_meta = stored.meta();
            let (token, exact) = token_for(&raw, &old_meta);
            let mut meta = old_meta.clone();
            meta.id.clone_from(&id);
            meta.updated_at = Timestamp::now_after(&old_meta.updated_at);
            meta.config = req.config.clone();
            let state = req.state.clone().unwrap_or(stored.state);
            let (json, new_token) = self.encode(OP, &meta, &state)?;
            match self.cas_write(&pool, OP, &rkey, &meta, token, exact, json, new_token.clone(), &[]).await? {
                1 => {
                    self.cache_put(rkey, Cached { meta: meta.clone(), token: new_token, exact: false });
                    return Ok(SessionRecord::from_parts(meta, state));
                }
                _ => continue,
            }
        }
        Err(err(StorageErrorKind::Conflict, OP, format!("session {id:?} kept changing; gave up")))
    }

    /// `update_session_state`, and `save_turn` when `messages` is not empty: one script writes
    /// the record and the messages, or nothing.
    async fn update_inner(
        &self,
        op: &'static str,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<Revision, StorageError> {
        key.validate()?;
        let log = self.log_args(op, messages)?;
        let pool = self.pool_for(op)?;
        let rkey = self.inner.keys.session(&key.user_id, &key.session_id);
        let owner = key.owner();
        let mut cached = self.cache_get(&rkey).filter(|c| {
            c.meta.user_id == key.user_id
                && c.meta.agent_id == key.agent_id
                && expected.is_none_or(|rev| c.meta.revision() == *rev)
        });
        // Attempts that read the record and still lost (a stale cache entry alone is no contention).
        let mut lost_after_reading = 0;
        for _ in 0..MAX_CAS_ATTEMPTS {
            let from_cache = cached.is_some();
            let (old, token, exact) = match cached.take() {
                Some(c) => (c.meta, c.token, c.exact),
                None => {
                    // A conditional write never waits: its re-read only confirms the conflict.
                    if expected.is_none() {
                        cas_backoff(lost_after_reading).await;
                    }
                    let Some((meta, token, exact)) = self.read_meta(&pool, op, &rkey, &owner).await? else {
                        self.cache_forget(&rkey);
                        return Err(not_found(op, key));
                    };
                    if let Some(rev) = expected
                        && meta.revision() != *rev
                    {
                        return Err(err(
                            StorageErrorKind::Conflict,
                            op,
                            format!("session {key} is at revision {} (expected {rev})", meta.revision()),
                        ));
                    }
                    (meta, token, exact)
                }
            };
            let mut meta = old.clone();
            // The key names the session: a record whose `id` disagrees (a copied key, or no
            // `id` at all, which decoding fills with a fresh one) is written back under its key.
            meta.id.clone_from(&key.session_id);
            meta.updated_at = Timestamp::now_after(&old.updated_at);
            let (json, new_token) = self.encode(op, &meta, state)?;
            match self.cas_write(&pool, op, &rkey, &meta, token, exact, json, new_token.clone(), &log).await? {
                // 2: this very save_turn, re-sent after its reply was lost, had already written.
                1 | 2 => {
                    let rev = meta.revision();
                    self.cache_put(rkey, Cached { meta, token: new_token, exact: false });
                    return Ok(rev);
                }
                0 => {
                    self.cache_forget(&rkey);
                    return Err(not_found(op, key));
                }
                -2 => return Err(bad_value(op, &self.message_keys(key).0, "the last message is not valid JSON")),
                // Changed meanwhile: re-read (a conditional write then reports the conflict).
                _ => lost_after_reading += usize::from(!from_cache),
            }
        }
        Err(err(StorageErrorKind::Conflict, op, format!("session {key} kept changing; gave up")))
    }

    /// The record key of `key` and its non-empty value, if any (after validating the key).
    async fn fetch_record(
        &self,
        op: &'static str,
        key: &SessionKey,
    ) -> Result<Option<(String, Fetched)>, StorageError> {
        key.validate()?;
        let pool = self.pool_for(op)?;
        let rkey = self.inner.keys.session(&key.user_id, &key.session_id);
        let reply: Value = pool.get(&rkey).await.map_err(|e| map_fred(op, Some(&rkey), e))?;
        let raw = Fetched::from_reply(reply).map_err(|e| map_fred(op, Some(&rkey), e))?;
        Ok(raw.map(|raw| (rkey, raw)))
    }

    async fn get_inner(&self, key: &SessionKey) -> Result<Option<SessionRecord>, StorageError> {
        const OP: &str = "get_session";
        let Some((rkey, fetched)) = self.fetch_record(OP, key).await? else { return Ok(None) };
        let text = fetched.text(OP, &rkey)?;
        let raw = fetched.bytes();
        let mut rec: SessionRecord = as_storage::decode_record(text).map_err(|e| bad_value(OP, &rkey, e))?;
        if rec.user_id != key.user_id || rec.agent_id != key.agent_id {
            return Ok(None);
        }
        // The key names the session, whatever `id` the stored record holds.
        rec.id.clone_from(&key.session_id);
        rec.state.session_id.clone_from(&rec.id);
        // Usually the record is still the one this process last wrote or read: the cached
        // canonical envelope is a prefix of it, so the cache entry is already right.
        if !self.cache_matches(&rkey, raw) {
            let meta = rec.meta();
            let (token, exact) = token_for(raw, &meta);
            self.cache_put(rkey, Cached { meta, token, exact });
        }
        Ok(Some(rec))
    }

    async fn get_raw_inner(&self, key: &SessionKey) -> Result<Option<String>, StorageError> {
        const OP: &str = "get_session_raw";
        let Some((rkey, fetched)) = self.fetch_record(OP, key).await? else { return Ok(None) };
        let text = fetched.text(OP, &rkey)?;
        let meta: SessionMeta = as_message::from_json(text).map_err(|e| bad_value(OP, &rkey, e))?;
        Ok((meta.user_id == key.user_id && meta.agent_id == key.agent_id).then(|| text.to_owned()))
    }

    async fn list_inner(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage, StorageError> {
        const OP: &str = "list_sessions";
        owner.validate()?;
        let after = page.cursor.as_deref().map(|c| SessionCursor::decode(BACKEND, c)).transpose()?;
        let pool = self.pool_for(OP)?;
        let keys = &self.inner.keys;
        let ikey = keys.session_index(&owner.user_id, &owner.agent_id);
        let ids: Vec<Bytes> = pool.smembers(&ikey).await.map_err(|e| map_fred(OP, Some(&ikey), e))?;
        let mut errors = Vec::new();
        // An id this store cannot address (AgentScope 2.0.4 checks none: `"my chat"`, or bytes
        // that are not UTF-8) is reported, not silently left out; its entry stays in the index.
        let mut ids: Vec<String> = ids
            .into_iter()
            .filter_map(|b| {
                let checked = match std::str::from_utf8(&b) {
                    Ok(id) => validate_id("session_id", id).map(|()| id.to_owned()),
                    Err(_) => Err(err(StorageErrorKind::InvalidKey, OP, "session id is not UTF-8")),
                };
                checked
                    .map_err(|e| {
                        let why = format!("{} (in index {ikey}): this store cannot address it", e.message());
                        let error = err(StorageErrorKind::InvalidKey, OP, why);
                        errors.push(ListError { session_id: String::from_utf8_lossy(&b).into_owned(), error });
                    })
                    .ok()
            })
            .collect();
        ids.sort();
        let rkeys: Vec<String> = ids.iter().map(|id| keys.session(&owner.user_id, id)).collect();
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (ids, rkeys) in ids.chunks(MGET_CHUNK).zip(rkeys.chunks(MGET_CHUNK)) {
            let values: Vec<Option<Bytes>> = if rkeys.len() == 1 {
                // GET of a key of another type fails where MGET gives nil: PRUNE reports it below.
                match pool.get(&rkeys[0]).await {
                    Err(e) if e.details().contains("WRONGTYPE") => vec![None],
                    r => vec![r.map_err(|e| map_fred(OP, Some(&rkeys[0]), e))?],
                }
            } else {
                pool.mget(rkeys.to_vec()).await.map_err(|e| map_fred(OP, Some(&ikey), e))?
            };
            for ((id, rkey), value) in ids.iter().zip(rkeys).zip(values) {
                let Some(raw) = value else {
                    // Gone, or a key of another type (MGET gives nil for both): PRUNE tells them apart.
                    gone.push((id.clone(), rkey.clone()));
                    continue;
                };
                if raw.is_empty() {
                    continue;
                }
                // Read as `get_session` reads a record: repeated keys as pydantic reads them.
                let parsed = utf8(OP, rkey, &raw)
                    .and_then(|t| as_message::from_json::<ListRecord>(t).map_err(|e| bad_value(OP, rkey, e)));
                match parsed {
                    Err(error) => errors.push(ListError { session_id: id.clone(), error }),
                    // In this agent's index but owned by someone else: a corrupt record or a stale
                    // index entry. Reported (no other agent's listing shows it), never listed.
                    Ok(r) if r.user_id != owner.user_id || r.agent_id != owner.agent_id => {
                        let why = format!(
                            "the record belongs to {}/{}, not to this index's {}/{}",
                            r.user_id, r.agent_id, owner.user_id, owner.agent_id
                        );
                        errors.push(ListError { session_id: id.clone(), error: bad_value(OP, rkey, why) });
                    }
                    Ok(r) => out.push(SessionSummary {
                        id: id.clone(),
                        name: r.config.name,
                        created_at: r.created_at,
                        updated_at: r.updated_at,
                        source: r.source,
                        message_count: Some(r.state.unwrap_or_default().context.0),
                        size_bytes: raw.len() as u64,
                    }),
                }
            }
        }
        if !gone.is_empty() {
            let mut k = vec![ikey.clone()];
            k.extend(gone.iter().map(|(_, rk)| rk.clone()));
            let args: Vec<Value> = gone.iter().map(|(id, _)| str_value(id.clone())).collect();
            let wrong_typed: Vec<String> = Self::eval(&pool, &self.inner.scripts.prune, k, args)
                .await
                .map_err(|e| map_fred(OP, Some(&ikey), e))?;
            for id in wrong_typed {
                let error = wrong_type(OP, &keys.session(&owner.user_id, &id));
                errors.push(ListError { session_id: id, error });
            }
        }
        out.sort_by(|a, b| b.created_at.sort_key().cmp(&a.created_at.sort_key()).then_with(|| b.id.cmp(&a.id)));
        if let Some(c) = &after {
            out.retain(|s| c.is_before(&s.created_at, &s.id));
            // An unreadable record has no place in the order: it is reported once, on the first
            // page, not again on every page after it.
            errors.clear();
        }
        let limit = page.limit.max(1);
        let next_cursor = if out.len() > limit {
            out.truncate(limit);
            out.last().map(|s| SessionCursor { created_at: s.created_at, id: s.id.clone() }.encode())
        } else {
            None
        };
        Ok(SessionPage { sessions: out, errors, next_cursor })
    }

    async fn delete_inner(&self, key: &SessionKey) -> Result<bool, StorageError> {
        const OP: &str = "delete_session";
        key.validate()?;
        let pool = self.pool_for(OP)?;
        let rkey = self.inner.keys.session(&key.user_id, &key.session_id);
        let owner = key.owner();
        // Only an overwrite import moves a session's schedule, so a retry is rare and brief.
        for _ in 0..MAX_CAS_ATTEMPTS {
            let meta = match self.read_meta(&pool, OP, &rkey, &owner).await {
                Ok(Some((meta, _, _))) => meta,
                Ok(None) => {
                    self.cache_forget(&rkey);
                    return Ok(false);
                }
                // Unreadable (not JSON, not UTF-8, not a record, another Redis type): no owner to
                // check on it, so the agent's index decides, or nothing could ever remove it.
                Err(e) if e.kind() == StorageErrorKind::Serialization => {
                    match self.delete_unreadable(&pool, key, &rkey).await? {
                        1 => {
                            self.cache_forget(&rkey);
                            return Ok(true);
                        }
                        0 => return Err(e),
                        _ => continue,
                    }
                }
                Err(e) => return Err(e),
            };
            let schedule = meta.source_schedule_id.as_deref();
            let k = self.write_keys(&rkey, &key.user_id, &key.agent_id, &key.session_id, schedule);
            let args = vec![
                str_value(owner_fragment(&key.user_id, &key.agent_id)),
                str_value(key.user_id.clone()),
                str_value(key.agent_id.clone()),
                str_value(key.session_id.clone()),
                str_value(schedule.unwrap_or_default()),
                str_value(format!("\"source_schedule_id\":{},", schedule.map_or_else(|| "null".to_owned(), json_str))),
            ];
            let r: i64 = Self::eval(&pool, &self.inner.scripts.delete, k, args)
                .await
                .map_err(|e| map_fred(OP, Some(&rkey), e))?;
            self.cache_forget(&rkey);
            bad_record(OP, &rkey, r)?;
            if r != -1 {
                return Ok(r == 1);
            }
        }
        Err(err(StorageErrorKind::Conflict, OP, format!("session {key} kept changing its schedule; gave up")))
    }

    /// Deletes `key`'s unreadable record, its message list, its agent index entry and the entry in
    /// the schedule index it names (see `DELETE_UNREADABLE`) if the agent's index lists it, the
    /// record names no other owner and is unchanged since read here. 1 deleted, 0 not this agent's,
    /// -1 changed meanwhile.
    async fn delete_unreadable(&self, pool: &Pool, key: &SessionKey, rkey: &str) -> Result<i64, StorageError> {
        const OP: &str = "delete_session";
        let read: Bytes = match pool.get::<Option<Bytes>, _>(rkey).await {
            Ok(Some(raw)) if !raw.is_empty() => raw,
            Ok(_) => return Ok(-1),
            Err(e) if e.details().contains("WRONGTYPE") => Bytes::new(),
            Err(e) => return Err(map_fred(OP, Some(rkey), e)),
        };
        let schedule = schedule_of_unreadable(&read);
        let k = self.write_keys(rkey, &key.user_id, &key.agent_id, &key.session_id, schedule.as_deref());
        let args = vec![
            str_value(key.session_id.clone()),
            bytes_value(read),
            str_value(owner_fragment(&key.user_id, &key.agent_id)),
            str_value(key.user_id.clone()),
            str_value(key.agent_id.clone()),
        ];
        Self::eval(pool, &self.inner.scripts.delete_unreadable, k, args).await.map_err(|e| map_fred(OP, Some(rkey), e))
    }

    fn message_keys(&self, key: &SessionKey) -> (String, String) {
        (
            self.inner.keys.messages(&key.user_id, &key.session_id),
            self.inner.keys.session(&key.user_id, &key.session_id),
        )
    }

    async fn upsert_message_inner(&self, key: &SessionKey, msg: &Msg) -> Result<(), StorageError> {
        const OP: &str = "upsert_message";
        key.validate()?;
        let pool = self.pool_for(OP)?;
        let (mkey, rkey) = self.message_keys(key);
        check_message_depth(BACKEND, OP, msg)?;
        let json = as_message::to_json(msg);
        self.check_size(OP, &json)?;
        let (mode, ttl) = self.ttl_args();
        let args = vec![
            bytes_value(Bytes::from(json)),
            str_value(msg.id.clone()),
            str_value(format!("\"id\":{}", json_str(&msg.id))),
            str_value(owner_fragment(&key.user_id, &key.agent_id)),
            str_value(key.user_id.clone()),
            str_value(key.agent_id.clone()),
            mode,
            ttl,
            str_value(key.session_id.clone()),
        ];
        let index = self.inner.keys.session_index(&key.user_id, &key.agent_id);
        let r: i64 =
            Self::eval(&pool, &self.inner.scripts.upsert_message, vec![mkey.clone(), rkey.clone(), index], args)
                .await
                .map_err(|e| map_fred(OP, Some(&mkey), e))?;
        bad_record(OP, &rkey, r)?;
        match r {
            0 => Err(not_found(OP, key)),
            -2 => Err(bad_value(OP, &mkey, "the last message is not valid JSON")),
            _ => Ok(()),
        }
    }

    async fn get_message_inner(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>, StorageError> {
        const OP: &str = "get_message";
        key.validate()?;
        let pool = self.pool_for(OP)?;
        let (mkey, rkey) = self.message_keys(key);
        let args = vec![
            str_value(message_id),
            str_value(format!("\"id\":{}", json_str(message_id))),
            str_value(owner_fragment(&key.user_id, &key.agent_id)),
            str_value(key.user_id.clone()),
            str_value(key.agent_id.clone()),
        ];
        let reply: Value = Self::eval(&pool, &self.inner.scripts.get_message, vec![mkey.clone(), rkey.clone()], args)
            .await
            .map_err(|e| map_fred(OP, Some(&mkey), e))?;
        let raw = match reply {
            Value::Null => return Ok(None),
            Value::Integer(-2) => {
                return Err(bad_value(OP, &mkey, format!("a message that may be {message_id:?} is not valid JSON")));
            }
            Value::Integer(code) => {
                bad_record(OP, &rkey, code)?;
                return Ok(None);
            }
            other => other.convert::<Bytes>().map_err(|e| map_fred(OP, Some(&mkey), e))?,
        };
        let text = utf8(OP, &mkey, &raw)?;
        as_message::from_json(text).map(Some).map_err(|e| bad_value(OP, &mkey, e))
    }

    async fn list_messages_inner(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>, StorageError> {
        const OP: &str = "list_messages";
        key.validate()?;
        let pool = self.pool_for(OP)?;
        let (mkey, rkey) = self.message_keys(key);
        let stop = lrange_stop(offset, limit);
        let args = vec![
            Value::Integer(offset),
            Value::Integer(stop),
            str_value(owner_fragment(&key.user_id, &key.agent_id)),
            str_value(key.user_id.clone()),
            str_value(key.agent_id.clone()),
        ];
        let reply: Vec<Value> =
            Self::eval(&pool, &self.inner.scripts.list_messages, vec![mkey.clone(), rkey.clone()], args)
                .await
                .map_err(|e| map_fred(OP, Some(&mkey), e))?;
        let mut it = reply.into_iter();
        let found = it.next().and_then(|v| v.as_i64()).unwrap_or(0);
        bad_record(OP, &rkey, found)?;
        if found != 1 {
            return Ok(Vec::new());
        }
        let items: Vec<Bytes> = match it.next() {
            Some(v) => v.convert().map_err(|e| map_fred(OP, Some(&mkey), e))?,
            None => Vec::new(),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let text = utf8(OP, &mkey, raw)?;
                as_message::from_json(text).map_err(|e| bad_value(OP, &mkey, format!("message {i}: {e}")))
            })
            .collect()
    }

    async fn import_inner(
        &self,
        record: &SessionRecord,
        messages: &[Msg],
        mode: ImportMode,
    ) -> Result<ImportOutcome, StorageError> {
        const OP: &str = "import_record";
        validate_import(record)?;
        let pool = self.pool_for(OP)?;
        let meta = record.meta();
        let (json, _) = encode_checked_record(BACKEND, OP, &meta, &record.state)?;
        self.check_size(OP, &json)?;
        let mut log = Vec::with_capacity(messages.len());
        for m in messages {
            check_message_depth(BACKEND, OP, m)?;
            let j = as_message::to_json(m);
            self.check_size(OP, &j)?;
            log.push(bytes_value(Bytes::from(j)));
        }
        let value = Bytes::from(json);
        let keys = &self.inner.keys;
        let rkey = keys.session(&meta.user_id, &meta.id);
        let new_schedule = meta.source_schedule_id.as_deref().filter(|s| !s.is_empty());
        for attempt in 0..MAX_CAS_ATTEMPTS {
            cas_backoff(attempt).await;
            let raw: Option<Bytes> = pool.get(&rkey).await.map_err(|e| map_fred(OP, Some(&rkey), e))?;
            let (token, exact, old_schedule, outcome) = match raw.filter(|b| !b.is_empty()) {
                None => (Bytes::new(), false, None, ImportOutcome::Created),
                Some(raw) => {
                    let old: SessionMeta =
                        as_message::from_json(utf8(OP, &rkey, &raw)?).map_err(|e| bad_value(OP, &rkey, e))?;
                    if old.user_id != meta.user_id || old.agent_id != meta.agent_id {
                        return Err(err(
                            StorageErrorKind::AlreadyExists,
                            OP,
                            format!("session id {:?} is taken by another owner", meta.id),
                        ));
                    }
                    if mode == ImportMode::CreateOnly {
                        return Err(err(
                            StorageErrorKind::AlreadyExists,
                            OP,
                            format!("session {:?} already exists", meta.id),
                        ));
                    }
                    let (token, exact) = token_for(&raw, &old);
                    let old_schedule = old.source_schedule_id.filter(|s| !s.is_empty());
                    (token, exact, old_schedule, ImportOutcome::Replaced)
                }
            };
            let mut k = vec![
                rkey.clone(),
                keys.messages(&meta.user_id, &meta.id),
                keys.session_index(&meta.user_id, &meta.agent_id),
            ];
            if let Some(s) = new_schedule {
                k.push(keys.schedule_session_index(&meta.user_id, s));
            }
            if let Some(s) = &old_schedule {
                k.push(keys.schedule_session_index(&meta.user_id, s));
            }
            let (ttl_mode, ttl) = self.ttl_args();
            let mut args = vec![
                bytes_value(value.clone()),
                str_value(meta.id.clone()),
                ttl_mode,
                ttl,
                bytes_value(token),
                str_value(if exact { "1" } else { "0" }),
                str_value(if new_schedule.is_some() { "1" } else { "0" }),
            ];
            args.extend(log.iter().cloned());
            let r: i64 = Self::eval(&pool, &self.inner.scripts.import, k, args)
                .await
                .map_err(|e| map_fred(OP, Some(&rkey), e))?;
            if r == 1 {
                // The record is now exactly these bytes: the next update of it needs no read (a
                // runner's first turn creates its session with an import, then writes the turn).
                let (token, exact) = token_for(&value, &meta);
                self.cache_put(rkey, Cached { meta, token, exact });
                return Ok(outcome);
            }
        }
        Err(err(StorageErrorKind::Conflict, OP, format!("session {:?} kept changing; gave up", meta.id)))
    }

    async fn list_agents_inner(&self, user_id: &str) -> Result<Vec<String>, StorageError> {
        const OP: &str = "list_agents";
        validate_id("user_id", user_id)?;
        let pool = self.pool_for(OP)?;
        let keys = &self.inner.keys;
        let Some(scan) = keys.agent_scan(user_id) else {
            return Err(err(
                StorageErrorKind::Unsupported,
                OP,
                "the session_index key template has placeholders besides {user_id} and one {agent_id}",
            ));
        };
        let client = pool.next().clone();
        // On a cluster, the user's index sets all live in the slot of its hash tag: scan the node
        // that owns it. Only when the escaped pattern's tag differs from the keys' (a `\` in the
        // user id) scan every primary.
        let one_node = !client.is_clustered()
            || (keys.single_slot_per_user()
                && crate::keys::hash_tag(&scan.pattern) == crate::keys::hash_tag(&keys.session_index(user_id, "a")));
        let pattern = scan.pattern.clone();
        // fred puts no command timeout on SCAN pages: each page gets ours (not the whole walk,
        // whose length grows with the keyspace).
        let limit = self.inner.config.timeout;
        let found = if one_node {
            collect_agents(client.scan(pattern, Some(SCAN_COUNT), Some(ScanType::Set)), &scan, limit).await
        } else {
            collect_agents(client.scan_cluster(pattern, Some(SCAN_COUNT), Some(ScanType::Set)), &scan, limit).await
        }?;
        Ok(found.into_iter().collect())
    }

    /// Every user with an agent index set: `SCAN` on every primary (a whole-keyspace walk, for
    /// administration).
    async fn list_users_inner(&self) -> Result<Vec<String>, StorageError> {
        const OP: &str = "list_users";
        let pool = self.pool_for(OP)?;
        let Some(scan) = self.inner.keys.user_scan() else {
            return Err(err(
                StorageErrorKind::Unsupported,
                OP,
                "the session_index key template does not hold {user_id} then {agent_id} with text between",
            ));
        };
        let client = pool.next().clone();
        let pattern = scan.pattern.clone();
        let limit = self.inner.config.timeout;
        let pick = |k: &str| scan.user(k).filter(|u| validate_id("user_id", u).is_ok()).map(str::to_owned);
        let users = if client.is_clustered() {
            let stream = client.scan_cluster(pattern, Some(SCAN_COUNT), Some(ScanType::Set));
            collect_keys(OP, stream, &scan.pattern, limit, pick).await?
        } else {
            let stream = client.scan(pattern, Some(SCAN_COUNT), Some(ScanType::Set));
            collect_keys(OP, stream, &scan.pattern, limit, pick).await?
        };
        Ok(users.into_iter().collect())
    }

    async fn open_inner(&self) -> Result<(), StorageError> {
        const OP: &str = "open";
        if matches!(&*self.inner.state.lock().unwrap_or_else(PoisonError::into_inner), State::Open(_)) {
            return Ok(());
        }
        let (pending, server_is_cluster) = match &self.inner.external {
            Some(pool) => (PendingPool::callers(pool.clone()), None),
            None => self.connect_owned().await?,
        };
        if let Err(e) = self.check_layout(pending.pool(), server_is_cluster).await {
            pending.close().await;
            return Err(e);
        }
        // No await from here on: the pool is stored (or, another open() having won the race, quit
        // in the background as `pending` drops).
        let mut state = self.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(&*state, State::Idle) {
            *state = State::Open(pending.keep());
        }
        drop(state);
        tracing::debug!(target: "as_storage_redis", op = OP, "opened");
        Ok(())
    }

    fn builder(&self, config: FredConfig) -> Builder {
        let cfg = &self.inner.config;
        // A single server: never re-send a command (a script must not run twice after a
        // reconnect). A cluster: allow MOVED/ASK redirections during failover or resharding.
        let attempts = if config.server.is_clustered() { 3 } else { 1 };
        let mut b = Builder::from_config(config);
        b.with_performance_config(|p| {
            p.default_command_timeout = cfg.timeout;
        })
        .with_connection_config(|c| {
            c.connection_timeout = cfg.connect_timeout;
            c.internal_command_timeout = cfg.timeout;
            c.max_command_attempts = attempts;
            c.tcp.nodelay = Some(true);
        })
        .set_policy(fred::prelude::ReconnectPolicy::new_exponential(0, 50, 1000, 2));
        b
    }

    /// Connects as configured, with whether the server is a cluster node when `INFO` told
    /// already (`None` when it was not asked: a cluster URL).
    async fn connect_owned(&self) -> Result<(PendingPool, Option<bool>), StorageError> {
        let Connection::Owned { config, host_port } = &self.inner.config.connection;
        let pending = self.connect_pool((**config).clone()).await?;
        if config.server.is_clustered() {
            return Ok((pending, None));
        }
        // A `redis://` URL that points at a cluster node: switch to a cluster client.
        let info = match cluster_info(pending.pool()).await {
            Ok(info) => info,
            Err(e) => {
                pending.close().await;
                return Err(e);
            }
        };
        if !info.is_some_and(|i| i.contains("cluster_enabled:1")) {
            return Ok((pending, Some(false)));
        }
        pending.close().await;
        let mut clustered = (**config).clone();
        clustered.server = ServerConfig::new_clustered(vec![(host_port.0.clone(), host_port.1)]);
        clustered.database = None;
        Ok((self.connect_pool(clustered).await?, Some(true)))
    }

    async fn connect_pool(&self, config: FredConfig) -> Result<PendingPool, StorageError> {
        const OP: &str = "open";
        let pool = self.builder(config).build_pool(self.inner.config.pool_size).map_err(|e| map_fred(OP, None, e))?;
        let pending = PendingPool::owned(pool);
        let limit = self.inner.config.connect_timeout;
        match tokio::time::timeout(limit, pending.pool().init()).await {
            Ok(Ok(_task)) => Ok(pending),
            Ok(Err(e)) => {
                pending.close().await;
                Err(map_fred(OP, None, e))
            }
            Err(_) => {
                pending.close().await;
                Err(err(StorageErrorKind::Unavailable, OP, format!("could not connect within {limit:?}")))
            }
        }
    }

    /// Refuses a client or key layout the server cannot serve; `server_is_cluster` is what
    /// `INFO` said when it was asked already (else it is asked here, unless the client is a cluster
    /// client: a cluster, whatever `INFO` says or whether the account may run it at all).
    async fn check_layout(&self, pool: &Pool, server_is_cluster: Option<bool>) -> Result<(), StorageError> {
        const OP: &str = "open";
        let server_is_cluster = pool.is_clustered()
            || match server_is_cluster {
                Some(known) => known,
                None => cluster_info(pool).await?.is_some_and(|i| i.contains("cluster_enabled:1")),
            };
        if server_is_cluster && !pool.is_clustered() {
            return Err(err(
                StorageErrorKind::Unsupported,
                OP,
                "the server is a Redis Cluster node but the client is not a cluster client (use a redis-cluster:// URL or a clustered fred client)",
            ));
        }
        if server_is_cluster && !self.inner.keys.single_slot_per_user() {
            return Err(err(
                StorageErrorKind::Unsupported,
                OP,
                format!(
                    "key layout {} cannot be used on a Redis Cluster: the keys of one session hash to different slots, so the atomic scripts would fail with CROSSSLOT; use layout=cluster",
                    self.inner.config.layout
                ),
            ));
        }
        Ok(())
    }

    async fn close_inner(&self) -> Result<(), StorageError> {
        let old = std::mem::replace(&mut *self.inner.state.lock().unwrap_or_else(PoisonError::into_inner), State::Idle);
        self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner).clear();
        if let State::Open(pool) = old
            && self.inner.external.is_none()
        {
            pool.quit().await.map_err(|e| map_fred("close", None, e))?;
        }
        Ok(())
    }

    /// Whether the store is open.
    pub fn is_open(&self) -> bool {
        matches!(&*self.inner.state.lock().unwrap_or_else(PoisonError::into_inner), State::Open(_))
    }

    /// The TTL policy in force.
    pub fn ttl_policy(&self) -> TtlPolicy {
        self.inner.config.key_ttl
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }
}

/// Keys per `SCAN` page in [`StorageBase::list_agents`].
const SCAN_COUNT: u32 = 1000;

/// Runs a `SCAN` stream to the end, keeping the valid agent ids of the matched keys.
async fn collect_agents(
    stream: impl futures::Stream<Item = Result<ScanResult, FredError>>,
    scan: &crate::keys::AgentScan,
    page_timeout: Duration,
) -> Result<std::collections::BTreeSet<String>, StorageError> {
    collect_keys("list_agents", stream, &scan.pattern, page_timeout, |k| {
        scan.agent(k).filter(|a| validate_id("agent_id", a).is_ok()).map(str::to_owned)
    })
    .await
}

/// What `pick` finds in the keys of a `SCAN` walk, each page bounded by `page_timeout` (fred puts
/// no command timeout on SCAN pages).
async fn collect_keys(
    op: &'static str,
    stream: impl futures::Stream<Item = Result<ScanResult, FredError>>,
    pattern: &str,
    page_timeout: Duration,
    pick: impl Fn(&str) -> Option<String>,
) -> Result<std::collections::BTreeSet<String>, StorageError> {
    use futures::StreamExt;
    let mut stream = std::pin::pin!(stream);
    let mut found = std::collections::BTreeSet::new();
    loop {
        let next = tokio::time::timeout(page_timeout, stream.next()).await.map_err(|_| {
            err(StorageErrorKind::Unavailable, op, format!("Redis did not answer a SCAN page within {page_timeout:?}"))
        })?;
        let Some(page) = next else { break };
        let mut page = page.map_err(|e| map_fred(op, Some(pattern), e))?;
        for key in page.take_results().unwrap_or_default() {
            if let Some(v) = key.as_str().and_then(&pick) {
                found.insert(v);
            }
        }
        // Dropping the page asks for the next one.
    }
    Ok(found)
}

/// The `LRANGE` stop index of 2.0.4's `list_messages(offset, limit)`: `offset + limit - 1`
/// (so `offset = 0, limit = 0` is `LRANGE 0 -1`, everything), saturating at the `i64` bounds.
fn lrange_stop(offset: i64, limit: i64) -> i64 {
    offset.saturating_add(limit).saturating_sub(1)
}

fn not_found(op: &'static str, key: &SessionKey) -> StorageError {
    err(StorageErrorKind::NotFound, op, format!("Session '{}' not found.", key.session_id))
}

#[async_trait]
impl StorageBase for RedisStorage {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none().with_ttl(true).with_cross_process(true).with_durable(true).with_atomic_turns(true)
    }

    async fn open(&self) -> Result<(), StorageError> {
        let limit = self.inner.config.connect_timeout.saturating_add(self.inner.config.timeout);
        match tokio::time::timeout(limit, self.open_inner()).await {
            Ok(r) => r,
            Err(_) => Err(err(StorageErrorKind::Unavailable, "open", format!("could not open within {limit:?}"))),
        }
    }

    async fn close(&self) -> Result<(), StorageError> {
        self.timed("close", self.close_inner()).await
    }

    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord, StorageError> {
        self.timed("upsert_session", self.upsert_inner(req)).await
    }

    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision, StorageError> {
        self.timed("update_session_state", self.update_inner("update_session_state", key, state, expected, &[])).await
    }

    /// One script writes the record and the messages (appended, or replacing the log's last
    /// message by id) or nothing, conditional on the record read (the CAS token) like any update.
    async fn save_turn(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
        messages: &[Msg],
    ) -> Result<SavedTurn, StorageError> {
        self.timed("save_turn", self.update_inner("save_turn", key, state, expected, messages))
            .await
            .map(SavedTurn::new)
    }

    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>, StorageError> {
        self.timed("get_session", self.get_inner(key)).await
    }

    async fn get_session_raw(&self, key: &SessionKey) -> Result<Option<String>, StorageError> {
        self.timed("get_session_raw", self.get_raw_inner(key)).await
    }

    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage, StorageError> {
        self.timed("list_sessions", self.list_inner(owner, page)).await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, StorageError> {
        self.timed("delete_session", self.delete_inner(key)).await
    }

    /// One script checks the owner and the log's last message and writes: it replaces that message
    /// when it has `msg`'s id, else appends (2.0.4's rule). A command fred re-sends after a lost
    /// reply (a cluster client, or a caller's pool) is not recognised: re-sent at once it replaces
    /// its own message, but after another writer's append in between it appends `msg` again.
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<(), StorageError> {
        self.timed("upsert_message", self.upsert_message_inner(key, msg)).await
    }

    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>, StorageError> {
        self.timed("get_message", self.get_message_inner(key, message_id)).await
    }

    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>, StorageError> {
        self.timed("list_messages", self.list_messages_inner(key, offset, limit)).await
    }

    /// One Lua script writes the record's bytes as given, `SADD`s it to the agent (and schedule)
    /// index, replaces the message list, and applies the TTL policy, like a create; an
    /// overwrite is checked against the envelope it read (CAS) and moves the schedule index entry.
    async fn import_record(
        &self,
        record: &SessionRecord,
        messages: &[Msg],
        mode: ImportMode,
    ) -> Result<ImportOutcome, StorageError> {
        self.timed("import_record", self.import_inner(record, messages, mode)).await
    }

    /// `SCAN … MATCH <session_index with the agent as *> TYPE set` (never `KEYS`): on one server,
    /// or on a cluster the primary that owns the user's slot. The cost is a walk of the whole
    /// keyspace of that node, so it is for administration, not for a hot path.
    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>, StorageError> {
        self.list_agents_inner(user_id).await
    }

    /// `SCAN … MATCH <session_index with user and agent as *> TYPE set` on every primary: a walk
    /// of the whole keyspace, for administration.
    async fn list_users(&self) -> Result<Vec<String>, StorageError> {
        self.list_users_inner().await
    }
}

/// A pool `open` is setting up. One of ours is quit unless it is kept ([`PendingPool::keep`]): on
/// an error, and also when `open`'s future is dropped midway (its overall time limit, or a caller's
/// own timeout), since fred keeps a pool's connections, and reconnects them, until it is quit. A
/// caller's pool ([`PendingPool::callers`]) is never quit.
struct PendingPool {
    pool: Pool,
    /// Whether it is ours and still to be quit.
    armed: bool,
}

impl PendingPool {
    fn owned(pool: Pool) -> Self {
        Self { pool, armed: true }
    }

    fn callers(pool: Pool) -> Self {
        Self { pool, armed: false }
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The pool, no longer to be quit here.
    fn keep(mut self) -> Pool {
        self.armed = false;
        self.pool.clone()
    }

    /// Quits one of ours now (if this is dropped before it is done, the drop quits it again).
    async fn close(mut self) {
        if self.armed {
            let _ = self.pool.quit().await;
            self.armed = false;
        }
    }
}

impl Drop for PendingPool {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let pool = self.pool.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = pool.quit().await;
            });
        }
    }
}

/// `INFO cluster`, or `None` when the account may not run `INFO` (it is in the `@dangerous` ACL
/// category, which hardened accounts are denied; 2.0.4 never needs it): the store then assumes no
/// cluster, and a compat layout on a real cluster fails later with CROSSSLOT.
async fn cluster_info(pool: &Pool) -> Result<Option<String>, StorageError> {
    match pool.info::<String>(Some(fred::types::InfoKind::Cluster)).await {
        Ok(info) => Ok(Some(info)),
        Err(e) if e.details().contains("NOPERM") || e.details().to_ascii_lowercase().contains("unknown command") => {
            tracing::debug!(target: "as_storage_redis", "INFO is not allowed for this account; assuming no cluster");
            Ok(None)
        }
        Err(e) => Err(map_fred("open", None, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule index of an unreadable record is named only by an id a write would take.
    #[test]
    fn an_unreadable_records_schedule_is_a_valid_id_or_none() {
        for (raw, want) in [
            (r#"{"source_schedule_id":"h1","config":7}"#, Some("h1")),
            (r#"{"source_schedule_id":"{x}"}"#, None),
            (r#"{"source_schedule_id":"a:b"}"#, None),
            (r#"{"source_schedule_id":""}"#, None),
            (r#"{"source_schedule_id":5}"#, None),
            (r#"{"other":1}"#, None),
            ("not json", None),
        ] {
            assert_eq!(schedule_of_unreadable(raw.as_bytes()).as_deref(), want, "{raw}");
        }
    }

    /// A private server, a store open on it and its pool; `None` (after saying so) without
    /// `redis-server`.
    async fn opened() -> Option<(crate::testing::RedisServer, RedisStorage, Pool)> {
        let Some(server) = crate::testing::RedisServer::start() else {
            println!("skipped: redis-server is not installed");
            return None;
        };
        let store = RedisStorage::from_url(&server.url()).unwrap();
        store.open().await.unwrap();
        let pool = store.pool_for("test").unwrap();
        Some((server, store, pool))
    }

    /// fred re-sends a command whose reply a dropped connection lost (cluster clients, and a
    /// caller's pool, allow 3 attempts): a create run twice reports success twice; an update run
    /// twice reports a conflict the second time, never a success it cannot prove.
    #[tokio::test]
    async fn write_scripts_are_safe_to_run_twice() {
        let Some((server, store, pool)) = opened().await else { return };
        let owner = Owner::new("u", "a");
        // A create, exactly as `create` sends it.
        let meta = SessionMeta {
            id: "s1".into(),
            updated_at: Timestamp::now(),
            created_at: Timestamp::now(),
            user_id: "u".into(),
            agent_id: "a".into(),
            source: as_storage::SessionSource::User,
            source_schedule_id: None,
            team_id: None,
            config: as_storage::SessionConfig::new("ws"),
        };
        let (json, _) = store.encode("t", &meta, &AgentState::default()).unwrap();
        let keys = &store.inner.keys;
        let rkey = keys.session("u", "s1");
        let k = store.write_keys(&rkey, "u", "a", "s1", None);
        let (mode, ttl) = store.ttl_args();
        let args = vec![bytes_value(Bytes::from(json)), str_value("s1"), mode, ttl];
        for run in 0..2 {
            let r: i64 = RedisStorage::eval(&pool, &store.inner.scripts.create, k.clone(), args.clone()).await.unwrap();
            assert_eq!(r, 1, "create, run {run}");
        }
        let listed = store.list_sessions(&owner, &PageRequest::default()).await.unwrap();
        assert_eq!(listed.sessions.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), ["s1"], "indexed once");
        // Updates, inline (small) and staged (large), each sent twice: the replay reports a
        // conflict (never a false success: another writer from the same revision could have
        // written the same bytes), and the write itself stands.
        for turns in [1, 400] {
            let (old, token, exact) = store.read_meta(&pool, "t", &rkey, &owner).await.unwrap().unwrap();
            let mut meta = old.clone();
            meta.updated_at = Timestamp::now_after(&old.updated_at);
            let state = as_storage::conformance::conversation_state(turns, "replay");
            let (json, head) = store.encode("t", &meta, &state).unwrap();
            assert_eq!(json.len() > INLINE_UPDATE_MAX_BYTES, turns > 1, "{turns} turns: {} bytes", json.len());
            let first = store
                .cas_write(&pool, "t", &rkey, &meta, token.clone(), exact, json.clone(), head.clone(), &[])
                .await
                .unwrap();
            assert_eq!(first, 1, "{turns}-turn update");
            let replay = store
                .cas_write(&pool, "t", &rkey, &meta, token.clone(), exact, json.clone(), head.clone(), &[])
                .await
                .unwrap();
            assert_eq!(replay, -1, "{turns}-turn update replayed");
            let got = store.get_session(&owner.session("s1")).await.unwrap().unwrap();
            assert_eq!(got.updated_at, meta.updated_at);
            assert_eq!(got.state.context.len(), state.context.len());
        }
        // A save_turn (an update with messages), inline and staged, sent twice: the replay finds
        // its own record and messages and reports them written (2), and appends nothing.
        let sk = owner.session("s1");
        for turns in [1, 400] {
            let (old, token, exact) = store.read_meta(&pool, "t", &rkey, &owner).await.unwrap().unwrap();
            let mut meta = old.clone();
            meta.updated_at = Timestamp::now_after(&old.updated_at);
            let state = as_storage::conformance::conversation_state(turns, "replay-turn");
            let (json, head) = store.encode("t", &meta, &state).unwrap();
            let msgs = [Msg::user("u", format!("question {turns}")), Msg::assistant("a", format!("answer {turns}"))];
            let log = store.log_args("t", &msgs).unwrap();
            let before = store.list_messages(&sk, 0, 0).await.unwrap().len();
            let write = async |log: &[Value]| {
                store.cas_write(&pool, "t", &rkey, &meta, token.clone(), exact, json.clone(), head.clone(), log).await
            };
            assert_eq!(write(&log).await.unwrap(), 1, "{turns}-turn save_turn");
            // Re-sent whole (for a staged write: its SET and its script).
            assert_eq!(write(&log).await.unwrap(), 2, "{turns}-turn save_turn replayed");
            if json.len() > INLINE_UPDATE_MAX_BYTES {
                // Only the script re-sent: its staging key was renamed into the record by the first run.
                let mut k = store.write_keys(&rkey, "u", "a", "s1", None);
                k.insert(1, format!("{rkey}:stage:gone"));
                let (mode, ttl) = store.ttl_args();
                let len = int_value(json.len() as u64);
                let mut args = vec![bytes_value(token.clone()), str_value(if exact { "1" } else { "0" })];
                args.extend([str_value("s1"), mode, ttl, bytes_value(head.clone()), len]);
                args.extend(log.iter().cloned());
                let r: i64 = RedisStorage::eval(&pool, &store.inner.scripts.update, k, args).await.unwrap();
                assert_eq!(r, 2, "{turns}-turn save_turn: only the script re-sent");
            }
            let logged = store.list_messages(&sk, 0, 0).await.unwrap();
            assert_eq!(logged.len(), before + 2, "{turns} turns: the replay appended again");
            assert_eq!(logged[before..].iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), [&msgs[0].id, &msgs[1].id]);
            // Another turn's messages with the same record bytes are no replay: a conflict.
            let other = store.log_args("t", &[Msg::user("u", "someone else")]).unwrap();
            assert_eq!(write(&other).await.unwrap(), -1, "{turns}-turn save_turn with other messages");
            assert_eq!(store.list_messages(&sk, 0, 0).await.unwrap().len(), before + 2);
        }
        // No staging key is left behind by the replayed staged update.
        let keys = crate::testing::raw_command(server.port(), "KEYS *").unwrap();
        assert!(keys.contains("s1") && !keys.contains(":stage:"), "{keys}");
    }

    /// A staged update whose staged value is gone when the script runs (Redis evicted it under
    /// memory pressure: with records that persist it is the only key with a TTL) writes nothing,
    /// and is an error of the write, never a lost race that `update_inner` would retry.
    #[tokio::test]
    async fn a_vanished_staged_value_is_an_error_not_a_conflict() {
        let Some((_server, store, pool)) = opened().await else { return };
        let owner = Owner::new("u", "a");
        let rec = store
            .upsert_session(
                as_storage::UpsertSession::new(owner.clone(), as_storage::SessionConfig::new("ws"))
                    .with_session_id("s1"),
            )
            .await
            .unwrap();
        let rkey = store.inner.keys.session("u", "s1");
        let (old, token, exact) = store.read_meta(&pool, "t", &rkey, &owner).await.unwrap().unwrap();
        let mut meta = old.clone();
        meta.updated_at = Timestamp::now_after(&old.updated_at);
        let (json, head) = store.encode("t", &meta, &as_storage::conformance::conversation_state(400, "gone")).unwrap();
        // The script as `cas_write` sends it, its staging key missing.
        let mut k = store.write_keys(&rkey, "u", "a", "s1", None);
        k.insert(1, format!("{rkey}:stage:evicted"));
        let (mode, ttl) = store.ttl_args();
        let len = int_value(json.len() as u64);
        let args = vec![
            bytes_value(token),
            str_value(if exact { "1" } else { "0" }),
            str_value("s1"),
            mode,
            ttl,
            bytes_value(head),
            len,
        ];
        let code: Value = RedisStorage::eval(&pool, &store.inner.scripts.update, k, args).await.unwrap();
        let e = staged_update_code("update_session_state", &rkey, code.as_i64()).unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Backend, "{e}");
        assert!(e.to_string().contains("evicted"), "{e}");
        let stored = store.get_session(&owner.session("s1")).await.unwrap().unwrap();
        assert_eq!(stored.revision(), rec.revision(), "nothing written");
        // Every other code is the script's answer.
        for code in [1, 2, 0, -1, -2] {
            assert_eq!(staged_update_code("t", &rkey, Some(code)).unwrap(), code);
        }
        assert_eq!(staged_update_code("t", &rkey, None).unwrap_err().kind(), StorageErrorKind::Backend);
    }

    #[test]
    fn lrange_windows() {
        assert_eq!(lrange_stop(0, 50), 49);
        assert_eq!(lrange_stop(0, 0), -1);
        assert_eq!(lrange_stop(1, 0), 0);
        assert_eq!(lrange_stop(-2, 2), -1);
        assert_eq!(lrange_stop(i64::MAX, i64::MAX), i64::MAX - 1);
        assert_eq!(lrange_stop(i64::MIN, i64::MIN), i64::MIN);
    }

    #[test]
    fn the_envelope_is_a_prefix_of_the_record() {
        let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
        let rec: SessionRecord = as_message::from_json(text).unwrap();
        let json = rec.to_canonical_json();
        let p = encode_envelope(&rec.meta());
        assert!(json.starts_with(&p));
        assert!(p.ends_with(",\"state\":"));
        let (tok, exact) = token_for(&Bytes::from(json.clone()), &rec.meta());
        assert!(!exact);
        assert_eq!(&tok[..], p.as_bytes());
        let spaced = Bytes::from(json.replacen(',', ", ", 1));
        assert!(token_for(&spaced, &rec.meta()).1);
    }

    #[test]
    fn tokens_do_not_pin_the_value_they_came_from() {
        let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
        let rec: SessionRecord = as_message::from_json(text).unwrap();
        let stored = Bytes::from(rec.to_canonical_json());
        let within = |tok: &Bytes| stored.as_ptr_range().contains(&tok.as_ptr());
        let (tok, exact) = token_for(&stored, &rec.meta());
        assert!(!exact);
        assert_eq!(&tok[..], &stored[..tok.len()]);
        assert!(!within(&tok), "the canonical token is its own small buffer");
        let spaced = Bytes::from(rec.to_canonical_json().replacen(',', ", ", 1));
        let (tok, exact) = token_for(&spaced, &rec.meta());
        assert!(exact);
        assert_eq!(tok, spaced);
        assert!(!spaced.as_ptr_range().contains(&tok.as_ptr()), "the exact token is a copy");
    }

    /// Each operation's future holds one fred command future (about 7 KB), not two: `timed` must
    /// not keep the operation both as an argument and inside its `Timeout` (it did: 14 KB for
    /// `get_session`, 20 KB for `update_session_state`), since `async_trait` copies the whole
    /// future into a box on every call.
    #[test]
    fn operation_futures_hold_one_command_future() {
        let s = RedisStorage::new(RedisStorageConfig::from_url("redis://127.0.0.1:1").unwrap()).unwrap();
        let key = Owner::new("u", "a").session("s".to_owned());
        let pool = Builder::default_centralized().build_pool(1).unwrap();
        let command = std::mem::size_of_val(&pool.get::<Option<Bytes>, _>("k"));
        let get = s.get_session(&key);
        let state = AgentState::default();
        let update = s.update_session_state(&key, &state, None);
        for (op, size) in [("get_session", std::mem::size_of_val(&*get)), ("update", std::mem::size_of_val(&*update))] {
            assert!(size < command * 2, "{op}: {size} bytes against {command} for one command");
        }
    }

    #[test]
    fn stage_suffixes_are_unique_within_and_across_processes() {
        let (a, b) = (stage_suffix(), stage_suffix());
        assert_ne!(a, b);
        let (pa, _) = a.split_once('-').unwrap();
        let (pb, _) = b.split_once('-').unwrap();
        assert_eq!(pa, pb);
        assert_eq!(pa.len(), 32, "a random 128-bit per-process part: {a}");
    }

    #[test]
    fn owner_fragment_is_canonical() {
        assert_eq!(owner_fragment("u-1", "a\"b"), r#""user_id":"u-1","agent_id":"a\"b","#);
    }
}
