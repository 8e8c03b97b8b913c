//! The session storage contract of agentscope-rs.
//!
//! A stateless agent keeps everything it needs in an [`as_state::AgentState`]; this crate stores
//! it in a [`SessionRecord`] addressed by `(user_id, agent_id, session_id)` through the
//! [`StorageBase`] trait (read its `# Contract`). Records are the exact JSON of AgentScope
//! Python 2.0.4. Everyone holds a store as [`SharedStorage`] (`Arc<dyn StorageBase>`); this crate
//! ships [`InMemoryStorage`], and backends live in their own crates (`as-storage-sqlite`,
//! `as-storage-redis`).
//!
//! A chat turn: load (or create) the record, run the agent on its state, write the state back
//! with compare-and-set so a concurrent writer is detected instead of overwritten.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> as_storage::Result<()> {
//! use std::sync::Arc;
//! use as_storage::{InMemoryStorage, Owner, SessionConfig, SharedStorage, StorageErrorKind, UpsertSession};
//!
//! let store: SharedStorage = Arc::new(InMemoryStorage::new());
//! store.open().await?;
//! let owner = Owner::new("user-1", "agent-1");
//! let rec = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws-1"))).await?;
//! let key = owner.session(rec.id.clone());
//!
//! // One turn: read, change the state, write it back if nobody wrote in between.
//! let loaded = store.get_session(&key).await?.expect("just created");
//! let mut state = loaded.state.clone();
//! state.context.push(as_message::Msg::user("user", "hello"));
//! let rev = store.update_session_state(&key, &state, Some(&loaded.revision())).await?;
//!
//! // A writer still holding the old revision gets a typed conflict, and nothing is written.
//! let stale = store.update_session_state(&key, &state, Some(&loaded.revision())).await;
//! assert_eq!(stale.unwrap_err().kind(), StorageErrorKind::Conflict);
//! assert_eq!(store.get_session(&key).await?.expect("exists").revision(), rev);
//!
//! // A wrong agent sees nothing; a bad id is rejected before any I/O.
//! assert!(store.get_session(&Owner::new("user-1", "agent-2").session(rec.id.clone())).await?.is_none());
//! let bad = store.get_session(&owner.session("a:b")).await;
//! assert_eq!(bad.unwrap_err().kind(), StorageErrorKind::InvalidKey);
//! # Ok(()) }
//! ```
//!
//! # Implementing a backend
//!
//! Implement [`StorageBase`] in your own crate, map your driver's errors into [`StorageError`]
//! kinds, declare [`Capabilities`], and run the conformance suite (feature `conformance`,
//! module `conformance`) from `tests/conformance.rs` with one macro call,
//! `as_storage::storage_conformance_tests!(MyFactory, skipped = [...])`, which pins the scenarios
//! your backend is expected to skip (any other skip fails). The helpers that keep edge cases
//! identical across backends are [`encode_record`] (with [`encode_record_split`] and
//! [`encode_envelope`] for the envelope bytes a compare-and-set checks), [`message_range`], [`SessionCursor`],
//! [`check_size`], [`check_record_depth`], [`check_record_timestamps`], [`check_message_depth`], [`validate_import`] and [`Timestamp::now_after`]. Four methods are optional:
//! [`StorageBase::import_record`], [`StorageBase::list_agents`] and [`StorageBase::list_users`] report
//! `Unsupported` by default (the suite then skips their scenarios), and [`StorageBase::get_session_raw`]
//! re-encodes [`StorageBase::get_session`]'s record by default. The full checklist is `docs/storage-backends.md`;
//! `examples/custom-storage` is a complete backend (JSON files in a directory).

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod decode;
mod error;
mod helpers;
mod key;
mod memory;
mod record;
mod storage;
mod timestamp;

pub use decode::{decode_record, read_record};
pub use error::{Result, StorageError, StorageErrorKind};
pub use helpers::{
    DEFAULT_MAX_RECORD_BYTES, SessionCursor, check_envelope_depth, check_message_depth, check_record_depth,
    check_record_timestamps, check_size, check_state_depth, encode_checked_record, generate_session_id, message_range,
};
pub use key::{MAX_ID_BYTES, Owner, SessionKey, validate_id};
pub use memory::InMemoryStorage;
pub use record::{
    ChatModelConfig, Revision, SessionConfig, SessionKnowledgeConfig, SessionMeta, SessionRecord, SessionSource,
    TTSModelConfig, encode_envelope, encode_record, encode_record_split,
};
pub use storage::{
    Capabilities, ImportMode, ImportOutcome, ListError, PageRequest, SavedTurn, SessionPage, SessionSummary,
    SharedStorage, StorageBase, UpsertSession, validate_import,
};
pub use timestamp::{Timestamp, TimestampError};
