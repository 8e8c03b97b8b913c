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
//! # Key layouts
//!
//! See [`KeyLayout`]: `compat` (the default, 2.0.4's keys, single server) or `cluster` (user id
//! in a hash tag, Redis Cluster).
//!
//! # Session lock
//!
//! [`SessionLock`] is AgentScope's chat-run lock `agentscope:session:lock:{session_id}`
//! (`SET NX PX` with a random token, heartbeat and release that only touch their own token).

mod config;
mod error;
mod keys;
mod lock;
mod scripts;
mod storage;
#[cfg(feature = "test-utils")]
pub mod testing;

pub use config::{RedisStorageConfig, TtlPolicy};
pub use keys::{KeyConfig, KeyLayout};
pub use lock::{DEFAULT_LOCK_PREFIX, SessionLock, SessionLockGuard};
pub use storage::RedisStorage;
