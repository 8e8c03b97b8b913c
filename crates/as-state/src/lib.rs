//! `AgentState`: everything a stateless AgentScope agent needs to resume, wire-compatible
//! with AgentScope Python 2.0.4 (same JSON bytes).
//!
//! ```
//! use as_message::{ContentBlock, Msg};
//! use as_state::AgentState;
//!
//! let mut state = AgentState::for_session("s1");
//! state.context.push(Msg::user("user", "hi"));
//! state.append_context("Friday", vec![ContentBlock::text("hello!")]);
//! assert_eq!(state.context[1].id, state.reply_id);
//! assert!(!state.has_awaiting_tool_calls("Friday"));
//! let json = as_message::to_json(&state);
//! assert_eq!(as_message::from_json::<AgentState>(&json).unwrap(), state);
//! // The same value, about twice as fast on canonical JSON (what `to_json` and pydantic write):
//! assert_eq!(as_state::state_from_json(&json).unwrap(), state);
//! ```
//!
//! Reading a state, prefer [`state_from_json`]: it reads the canonical form by hand and falls back
//! to the tolerant serde reader (`as_message::from_json`) for anything else, with the same value or
//! the same error either way. Writing, `as_message::to_json` already takes the hand-written path.
//!
//! Reading follows AgentScope 2.0.4's pydantic (repeated keys, `NaN`/`Infinity`, free-form data; see
//! `as_message`'s crate docs), with its known differences: `cur_iter` and `max_cache_files` are `i64`,
//! so a larger integer (which Python reads) is an `integer out of range` error at that field, and
//! `NaN` in a read-cache entry's `updated_at` or `bytes` is refused.

mod depth;
pub mod read;
mod state;
mod task;
mod tool_context;

#[cfg(feature = "test-utils")]
pub mod test_utils;

pub use read::state_from_json;
pub use state::AgentState;
pub use task::{Task, TaskContext, TaskState};
pub use tool_context::{ReadCacheEntry, ToolContext};
