//! The read side of [`crate::encode_record`]: a fast reader for a record's canonical JSON.

use as_message::MessageError;
use as_message::read::Cursor;
use as_state::read::read_state;

use crate::Timestamp;
use crate::record::{SessionRecord, SessionSource};

/// Reads a [`SessionRecord`] from JSON text: the canonical form (what [`crate::encode_record`] and
/// Python 2.0.4's `model_dump_json` write) with a hand-written reader, anything else with
/// [`as_message::from_json`]. The result is always exactly `as_message::from_json::<SessionRecord>(text)`:
/// the same record, or the same error.
///
/// ```
/// use as_storage::{SessionConfig, SessionMeta, Timestamp, decode_record, encode_record};
///
/// let meta: SessionMeta = as_message::from_json(
///     r#"{"id":"s1","updated_at":"2025-06-01T10:00:00","created_at":"2025-06-01T10:00:00",
///         "user_id":"u","agent_id":"a","config":{"workspace_id":"ws"}}"#,
/// )?;
/// let state = as_state::test_utils::conversation_state(4);
/// let json = encode_record(&meta, &state);
/// let record = decode_record(&json)?;
/// assert_eq!(record, as_message::from_json(&json)?);
/// assert_eq!(record.state.context, state.context);
/// assert!(decode_record("{}").is_err());
/// # Ok::<(), as_message::MessageError>(())
/// ```
pub fn decode_record(text: &str) -> Result<SessionRecord, MessageError> {
    as_message::read::fast_or_from_json(text, read_record)
}

/// Reads a [`Timestamp`]: a JSON string with the cursor (then read exactly as its `Deserialize`
/// reads a string; `None` when that would fail, so serde reports the error), anything else with serde.
fn timestamp(c: &mut Cursor<'_>) -> Option<Timestamp> {
    if c.peek() == Some(b'"') { c.string()?.parse().ok() } else { c.serde() }
}

/// Reads one `SessionRecord` object at the cursor in its canonical key order (`id, updated_at,
/// created_at, user_id, agent_id, source, source_schedule_id, team_id, config, state`); the envelope's
/// small values are read by serde, the state by [`as_state::read::read_state`]. `None` when it
/// declines: read the whole document with serde.
pub fn read_record(c: &mut Cursor<'_>) -> Option<SessionRecord> {
    c.expect(r#"{"id":"#)?;
    let id = c.string()?;
    c.expect(r#","updated_at":"#)?;
    let updated_at = timestamp(c)?;
    c.expect(r#","created_at":"#)?;
    let created_at = timestamp(c)?;
    c.expect(r#","user_id":"#)?;
    let user_id = c.string()?;
    c.expect(r#","agent_id":"#)?;
    let agent_id = c.string()?;
    c.expect(r#","source":"#)?;
    let source = if c.eat(r#""user""#) {
        SessionSource::User
    } else if c.eat(r#""schedule""#) {
        SessionSource::Schedule
    } else {
        c.serde()?
    };
    c.expect(r#","source_schedule_id":"#)?;
    let source_schedule_id = c.null_or_string()?;
    c.expect(r#","team_id":"#)?;
    let team_id = c.null_or_string()?;
    c.expect(r#","config":"#)?;
    let config = c.serde()?;
    c.expect(r#","state":"#)?;
    let state = read_state(c)?;
    c.expect("}")?;
    Some(SessionRecord {
        id,
        updated_at,
        created_at,
        user_id,
        agent_id,
        source,
        source_schedule_id,
        team_id,
        config,
        state,
    })
}
