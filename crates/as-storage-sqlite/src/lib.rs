//! SQLite session storage for agentscope-rs: the embedded, durable default store.
//!
//! [`SqliteStorage`] implements the [`as_storage::StorageBase`] contract on one SQLite file:
//!
//! * **Layout.** A `sessions` table keeps each record as the canonical JSON bytes of
//!   [`as_storage::encode_record`] (so export/import between backends is lossless), with the columns a
//!   listing needs beside it (owner, id, timestamps, source, name, message count, size), indexed for
//!   "sessions of (user, agent), newest first". A `messages` table keeps each session's message log
//!   `(session, seq, msg id, JSON)`, indexed for "messages of a session in order".
//! * **Versioned.** An `agentscope_schema` table records the applied forward migrations. A file written
//!   by a newer build fails with [`SqliteErrorKind::SchemaTooNew`]; someone else's SQLite file fails with
//!   [`SqliteErrorKind::ForeignDatabase`]; a file that is not a database fails with
//!   [`SqliteErrorKind::NotADatabase`]. Nothing is ever recreated over an existing file.
//! * **Concurrent.** WAL mode, a busy timeout, short transactions (`BEGIN IMMEDIATE` for
//!   read-modify-write) and a small connection pool driven from blocking threads, so the async runtime
//!   is never blocked. The compare-and-set of `update_session_state` holds across processes. Waits
//!   are bounded: for a connection by [`SqliteOptions::acquire_timeout`], for another process's lock by
//!   [`SqliteOptions::busy_timeout`]; either ends in a retryable [`SqliteErrorKind::Busy`].
//! * **Durable.** A process killed mid-write leaves a file that opens cleanly and holds every committed write.
//!
//! Errors cross the trait as [`as_storage::StorageError`]; the SQLite detail is its source, a
//! [`SqliteError`] with a [`SqliteErrorKind`] (see [`SqliteError::from_storage`]).
//!
//! ```
//! use as_storage::{Owner, SessionConfig, StorageBase, UpsertSession};
//! use as_storage_sqlite::SqliteStorage;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> as_storage::Result<()> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let store = SqliteStorage::open_path(dir.path().join("sessions.db")).await?;
//! let owner = Owner::new("user-1", "agent-1");
//! let rec = store.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws-1"))).await?;
//!
//! let key = owner.session(rec.id.clone());
//! let mut state = store.get_session(&key).await?.expect("stored").state;
//! state.append_context("user", vec![as_message::ContentBlock::text("hello")]);
//! let rev = store.update_session_state(&key, &state, Some(&rec.revision())).await?;
//! assert!(rev > rec.revision());
//! store.close().await?;
//! # Ok(())
//! # }
//! ```

mod error;
mod options;
mod pool;
mod schema;
mod storage;

pub use error::{SqliteError, SqliteErrorKind};
pub use options::{SqliteOptions, Synchronous};
pub use storage::SqliteStorage;
