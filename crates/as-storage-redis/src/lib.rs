//! Redis session storage for agentscope-rs, on [`fred`].
//!
//! [`RedisStorage`] implements [`as_storage::StorageBase`] with the same keys and bytes as
//! AgentScope Python 2.0.4's `RedisStorage`, so Rust and Python processes can share sessions,
//! and fixes 2.0.4's races: every write is one atomic Lua script (create with its index
//! entries and TTL, compare-and-set updates, all-or-nothing delete cascade, tail-checked
//! `upsert_message`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), as_storage::StorageError> {
//! use std::sync::Arc;
//! use as_storage::{Owner, SessionConfig, SharedStorage, StorageBase, UpsertSession};
//! use as_storage_redis::RedisStorage;
//!
//! let storage: SharedStorage = Arc::new(RedisStorage::from_url("redis://127.0.0.1:6379/0?ttl=3600")?);
//! storage.open().await?;
//! let owner = Owner::new("user-1", "agent-1");
//! let rec = storage.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws-1"))).await?;
//! let key = owner.session(rec.id.clone());
//! let loaded = storage.get_session(&key).await?.expect("just created");
//! storage.update_session_state(&key, &loaded.state, Some(&loaded.revision())).await?;
//! storage.close().await?;
//! # Ok(()) }
//! ```
//!
//! # Key layouts: which one to choose
//!
//! [`KeyLayout::Compat`] (the default) is exactly 2.0.4's keys (`agentscope:user:{u}:session:{s}`,
//! `…:agent:{a}:sessions`, `…:session:{s}:messages`, `…:schedule:{h}:sessions`). Choose it to
//! share sessions with Python processes, on a single Redis server (with replicas; for Sentinel, pass
//! a fred client built with its `sentinel-client` feature to [`RedisStorage::from_client`]).
//! It **cannot** be used on Redis Cluster: the atomic scripts touch the record, the message list
//! and the index sets together, which hash to different slots, so the cluster would refuse them
//! with `CROSSSLOT`. [`StorageBase::open`](as_storage::StorageBase::open) therefore refuses a
//! compat store on a cluster with `Unsupported` and says to use `layout=cluster` (when the account
//! may run `INFO`; one that may not, such as a `-@dangerous` ACL user, is assumed not to be on a
//! cluster, and a compat store there fails at its first write with `CROSSSLOT`).
//!
//! [`KeyLayout::Cluster`] wraps the user id in a hash tag (`agentscope:user:{user-1}:session:…`).
//! All keys of one user share a slot, so every script stays atomic on a cluster, and a listing
//! is one `MGET`. The tradeoff: users, not sessions, are the unit of sharding (one very large
//! user stays on one shard), and a Python 2.0.4 process only shares these keys if it is given
//! the same templates (they are valid `str.format` templates, see [`KeyConfig::cluster`]).
//! A per-session hash tag (`{user:session}`) was rejected: the per-agent index set would then
//! live in another slot than the records, and create/delete could not be atomic with it.
//! A `redis://` URL naming one cluster node is switched to a cluster client on `open` (again when
//! `INFO` is allowed; otherwise use a `redis-cluster://` URL).
//!
//! # Atomicity (what 2.0.4 races on, §5.4 of the spec)
//!
//! Every write is one Lua script, sent with `EVALSHA` (falling back to `EVAL`):
//!
//! * create: `SET` (only if absent) + `SADD` to the agent (and schedule) index + TTLs, together;
//!   a message list left under the id by a session that is gone (its record expired first, or a
//!   2.0.4 delete stopped halfway) is removed, so a new session never inherits a conversation;
//! * update (`update_session_state`, `upsert_session` on an existing id): a compare-and-set on
//!   the stored envelope (the record's bytes up to `"state":`, which hold `updated_at`), so a
//!   concurrent writer (Python included) is never overwritten blindly, and a session deleted
//!   meanwhile is never re-created. A plain update re-reads and retries (after a lost retry, with
//!   a random wait of up to 1, 2, 4, 8, then 16 ms, so two writers cannot starve each other in
//!   lockstep; `Conflict` after 32 attempts); a conditional one (`expected = Some(rev)`) fails
//!   with `Conflict`. The envelope of the last record this process
//!   read or wrote is cached, so a turn (`get_session` + `update_session_state`) reads it once.
//!   A record up to 16 KiB travels in the script's arguments (one `EVALSHA`); a larger one is
//!   first `SET` under a staging key in the same slot, in the same pipeline, and the script moves
//!   it into place with `RENAME` (a large value copied through Lua costs more than that second
//!   command);
//! * delete: record, message list and index entries in one step (checked against the owner, and
//!   against the schedule it read, so a concurrent import that moves the schedule is seen);
//! * `upsert_message`: the tail id is checked and `LSET`/`RPUSH` done in the same step;
//! * `import_record` (`agentscope sessions import`): the record's bytes as given (timestamps and
//!   team kept), the `SADD`s a 2.0.4 create makes (agent index, schedule index), the message list
//!   replaced whole and the TTL policy, in one script; an overwrite is a CAS on the envelope it
//!   read and moves the schedule index entry when the schedule changed.
//!
//! `list_agents` finds a user's agents from the agent index sets (`…:agent:{a}:sessions`) with
//! `SCAN … MATCH … TYPE set`, never `KEYS`: on a single server it walks that server's keyspace; in
//! the cluster layout every key of a user shares the user's hash tag, so only the primary that owns
//! that slot is scanned (all primaries in the rare case the escaped pattern changes the tag). No
//! extra index is kept, so agents written by Python 2.0.4 are found too. It is an administration
//! call: its cost grows with the size of the scanned keyspace.
//!
//! Listing is `SMEMBERS` plus one `MGET` per 256 sessions (no round trip per session; each batch
//! is summarised and dropped before the next, so memory stays bounded by the batch, not by the
//! agent's session count); ids whose record is gone are pruned (`SREM`, re-checked in a script);
//! an unreadable record (not UTF-8, not a record, or a key of another Redis type) is reported in
//! [`as_storage::SessionPage::errors`] instead of failing the page.
//!
//! Redis does not roll a script back when a command in it fails, so every script checks what
//! could fail first (the CAS token, the log's last message, that each index key is a set) and
//! writes only after: an index key of another Redis type fails the write with a typed
//! `Serialization` error naming that key, and nothing of it is written.
//!
//! # TTL
//!
//! [`TtlPolicy::Persist`] (default) writes like 2.0.4 without `key_ttl` (a plain `SET`, which
//! clears a TTL); [`TtlPolicy::Sliding`] is 2.0.4's `key_ttl`, made atomic (`SET … EX`), and also
//! applied to the index sets (which 2.0.4 leaves without a TTL, so they grow forever);
//! [`TtlPolicy::Keep`] uses `KEEPTTL`. Processes sharing a Redis must use the same policy.
//! Under a sliding TTL, `upsert_message` restarts the record's TTL as well as the list's (2.0.4
//! expires only the list there), so a record never expires before the conversation after it.
//!
//! In a fleet that mixes Rust and Python 2.0.4 writers under `key_ttl`, the index TTL has a
//! catch: 2.0.4 never touches an index set's TTL (its create only `SADD`s, its updates skip the
//! index), so an agent whose sessions only Python writes can see its index set expire, once the
//! last Rust write to that agent is older than the TTL, while its records are alive. Those sessions
//! then drop out of listings (Rust's and Python's) until a Rust update re-adds them. Such a fleet
//! should set [`RedisStorageConfig::with_index_ttl`]`(false)` (URL: `index_ttl=false`): records and
//! message lists keep the sliding TTL, and index sets are written without one, exactly as 2.0.4
//! writes them (so they grow as in 2.0.4; a listing prunes the ids of expired sessions).
//!
//! # Differences from 2.0.4 a Python peer can notice
//!
//! * Ownership is enforced: a wrong `agent_id` sees no session (2.0.4 ignores it on get/update).
//! * What Rust stores always has `state.session_id == id` (2.0.4's first record has another id).
//! * `update_session_state` re-adds a missing index entry (2.0.4 never repairs the index).
//! * Deleting a session that leads a team does not dissolve the team (teams are not part of this
//!   crate's contract); 2.0.4's `delete_session` does.
//! * A state or message nested deeper than 200 levels (`as_message::MAX_JSON_DEPTH`) is refused
//!   with `InvalidInput` before anything is written; 2.0.4 writes it, and then neither side can read
//!   the session back.
//!
//! # Faults
//!
//! Every call is bounded by [`RedisStorageConfig::timeout`]: a Redis that is down or hung gives
//! `Unavailable` (retryable) in time, and the client reconnects by itself. A value that is not
//! JSON, not UTF-8 or of the wrong Redis type is a `Serialization` error naming the key.
//!
//! # Session lock
//!
//! [`SessionLock`] is AgentScope's chat-run lock `agentscope:session:lock:{session_id}`
//! (`SET NX PX` with a random token, heartbeat and release that only touch their own token).
//! Like 2.0.4's, the key names the session id only: two users' sessions that share an id wait for
//! each other (they never run together wrongly); [`SessionLock::with_prefix`] separates deployments
//! sharing one Redis. The lock serialises turns; the state write stays conditional on the revision,
//! so a holder that lost its lease (see [`SessionLockGuard::lost`]) cannot overwrite a newer state.
//! The message log is not fenced by the lock: a holder that keeps writing after losing its lease
//! can still append to it (`as-agent`'s `SessionRunner` stops and writes nothing once it is lost).
//!
//! # Testing
//!
//! The `test-utils` feature exposes the `testing` module (private `redis-server`s and a local 3-master
//! cluster). `timing-mimalloc` runs the `turn_timing` example and the `turn` bench on mimalloc (the
//! `agentscope` binary's allocator); it does not change the library. `cargo xtask interop` runs a live
//! check against AgentScope Python 2.0.4.

mod config;
mod error;
mod keys;
mod lock;
mod scripts;
mod storage;
#[cfg(feature = "test-utils")]
pub mod testing;

pub use config::{MAX_KEY_TTL, RedisStorageConfig, TtlPolicy, redact_url};
pub use keys::{KeyConfig, KeyLayout};
pub use lock::{DEFAULT_LOCK_PREFIX, SessionLock, SessionLockGuard};
pub use storage::RedisStorage;
