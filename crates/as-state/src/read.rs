//! A fast reader for the canonical JSON of [`AgentState`], falling back to [`as_message::from_json`].
//!
//! The result is always exactly what `as_message::from_json::<AgentState>` returns: the same value on
//! success, the same error otherwise (on anything unexpected the fast reader declines and the serde
//! path reads the whole text). See [`as_message::read`] for the primitives.
//!
//! ```
//! let state = as_state::test_utils::conversation_state(8);
//! let json = as_message::to_json(&state);
//! assert_eq!(as_state::state_from_json(&json)?, state);
//! let err = as_state::state_from_json(r#"{"context":[{"name":"u"}]}"#).unwrap_err();
//! assert_eq!(err, as_message::from_json::<as_state::AgentState>(r#"{"context":[{"name":"u"}]}"#).unwrap_err());
//! # Ok::<(), as_message::MessageError>(())
//! ```

use as_message::read::{Cursor, msg};
use as_message::{MessageError, TextOrBlocks};

use crate::AgentState;

/// Reads an [`AgentState`] from JSON text: the canonical form fast, anything else with
/// [`as_message::from_json`]. Same value, same errors as `as_message::from_json::<AgentState>(text)`.
pub fn state_from_json(text: &str) -> Result<AgentState, MessageError> {
    as_message::read::fast_or_from_json(text, read_state)
}

/// Reads one `AgentState` object at the cursor in its canonical key order
/// (`session_id, summary, context, reply_id, cur_iter, permission_context, tool_context, tasks_context,
/// middle_context`); messages are read by [`as_message::read::msg`] (local fallback per message).
/// `None` when it declines (the position is then unspecified): read the whole document with serde.
pub fn read_state(c: &mut Cursor<'_>) -> Option<AgentState> {
    c.expect(r#"{"session_id":"#)?;
    let session_id = c.string()?;
    c.expect(r#","summary":"#)?;
    let summary = if c.peek() == Some(b'"') { TextOrBlocks::Text(c.string()?) } else { c.serde()? };
    c.expect(r#","context":"#)?;
    // Reserve for one message per ~400 bytes of the remaining text (a typical canonical message is
    // 300-600 bytes): a long context then grows at most a few times instead of about log2(n) times.
    let mut context = c.array_with_capacity(c.rest().len() / 400, msg)?;
    if context.capacity() > 2 * context.len() + 16 {
        // Few large messages: give back the room reserved for many small ones.
        context.shrink_to_fit();
    }
    c.expect(r#","reply_id":"#)?;
    let reply_id = c.string()?;
    c.expect(r#","cur_iter":"#)?;
    let cur_iter = c.int()?;
    c.expect(r#","permission_context":"#)?;
    let permission_context = c.serde()?;
    c.expect(r#","tool_context":"#)?;
    let tool_context = c.serde()?;
    c.expect(r#","tasks_context":"#)?;
    let tasks_context = c.serde()?;
    c.expect(r#","middle_context":"#)?;
    let middle_context = c.free_form()?;
    c.expect("}")?;
    Some(AgentState {
        session_id,
        summary,
        context,
        reply_id,
        cur_iter,
        permission_context,
        tool_context,
        tasks_context,
        middle_context,
    })
}
