//! The session storage contract of agentscope-rs.
//!
//! A stateless agent keeps everything it needs in an [`as_state::AgentState`]; this crate stores
//! it in a [`SessionRecord`] addressed by `(user_id, agent_id, session_id)` through the
//! [`StorageBase`] trait. Records are the exact JSON of AgentScope Python 2.0.4.
//!
//! ```
//! # tokio_test_main();
//! # fn tokio_test_main() {}
//! use as_storage::{SessionConfig, Owner, UpsertSession};
//! let req = UpsertSession::new(Owner::new("user-1", "agent-1"), SessionConfig::new("ws-1"));
//! assert!(req.session_id.is_none());
//! ```

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod error;
mod helpers;
mod key;
mod memory;
mod record;
mod storage;
mod timestamp;

pub use error::{Result, StorageError, StorageErrorKind};
pub use helpers::{DEFAULT_MAX_RECORD_BYTES, SessionCursor, check_size, message_range};
pub use key::{MAX_ID_BYTES, Owner, SessionKey, validate_id};
pub use memory::InMemoryStorage;
pub use record::{
    ChatModelConfig, Revision, SessionConfig, SessionKnowledgeConfig, SessionMeta, SessionRecord, SessionSource,
    TTSModelConfig, encode_record,
};
pub use storage::{
    Capabilities, ListError, PageRequest, SessionPage, SessionSummary, SharedStorage, StorageBase, UpsertSession,
};
pub use timestamp::{Timestamp, TimestampError};
