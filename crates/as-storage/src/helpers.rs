//! Small pieces every backend needs to get the contract's edge cases identical:
//! `LRANGE` index arithmetic, the listing cursor, and the size and depth checks.

use std::ops::Range;

use as_message::{JsonDepth, MAX_JSON_DEPTH, Msg, json_text_depth};
use as_state::AgentState;

use crate::error::{Result, StorageError, StorageErrorKind};
use crate::record::{SessionMeta, encode_envelope, encode_record_split};
use crate::timestamp::Timestamp;

/// The default maximum size of one stored value (a session record or a message), in bytes.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// The slice of a list of `len` items that Redis `LRANGE key offset offset+limit-1` returns,
/// which is what [`crate::StorageBase::list_messages`] must return.
///
/// Negative indexes count from the end; `offset = 0, limit = 0` is `LRANGE 0 -1`, everything;
/// a start after the stop is empty.
///
/// ```
/// use as_storage::message_range;
/// assert_eq!(message_range(5, 0, 0), 0..5); // LRANGE 0 -1
/// assert_eq!(message_range(5, 1, 2), 1..3);
/// assert_eq!(message_range(5, -2, 2), 3..5); // LRANGE -2 -1
/// assert_eq!(message_range(5, 3, 0), 0..0); // LRANGE 3 2
/// assert_eq!(message_range(5, 10, 5), 0..0);
/// assert_eq!(message_range(5, -100, 2), 0..0); // LRANGE -100 -99: both clamp below 0
/// ```
pub fn message_range(len: usize, offset: i64, limit: i64) -> Range<usize> {
    let len_i = len as i128;
    let start = i128::from(offset);
    let stop = start + i128::from(limit) - 1;
    let norm = |i: i128| if i < 0 { len_i + i } else { i };
    let (start, stop) = (norm(start).max(0), norm(stop));
    let stop = stop.min(len_i - 1);
    if start > stop || start >= len_i {
        return 0..0;
    }
    // Both are within 0..len here.
    (start as usize)..(stop as usize + 1)
}

/// A position in a session listing, ordered newest first: `created_at` descending, then id
/// descending. [`SessionCursor::encode`] gives the opaque `next_cursor` text; the next page
/// holds the sessions strictly after it in that order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionCursor {
    /// `created_at` of the last session of the previous page.
    pub created_at: Timestamp,
    /// Id of the last session of the previous page.
    pub id: String,
}

impl SessionCursor {
    /// The opaque cursor text.
    pub fn encode(&self) -> String {
        format!("{}~{}", self.created_at, self.id)
    }

    /// Reads a cursor produced by [`SessionCursor::encode`]; anything else is `InvalidInput`.
    ///
    /// ```
    /// use as_storage::{SessionCursor, Timestamp};
    /// let c = SessionCursor { created_at: "2025-06-01T10:00:00".parse().unwrap(), id: "s~1".into() };
    /// assert_eq!(SessionCursor::decode("memory", &c.encode()).unwrap(), c);
    /// assert!(SessionCursor::decode("memory", "garbage").is_err());
    /// ```
    pub fn decode(backend: &'static str, text: &str) -> Result<Self> {
        let bad = || StorageError::new(StorageErrorKind::InvalidInput, backend, "list_sessions", "invalid cursor");
        let (ts, id) = text.split_once('~').ok_or_else(bad)?;
        let created_at: Timestamp = ts.parse().map_err(|e| bad().with_source(e))?;
        if id.is_empty() {
            return Err(bad());
        }
        Ok(Self { created_at, id: id.to_owned() })
    }

    /// Whether a session `(created_at, id)` comes after this cursor in newest-first order.
    pub fn is_before(&self, created_at: &Timestamp, id: &str) -> bool {
        (created_at.sort_key(), id) < (self.created_at.sort_key(), self.id.as_str())
    }
}

/// Fails with `TooLarge` when `len > max` (call it before writing anything).
pub fn check_size(backend: &'static str, operation: &'static str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(StorageError::new(
            StorageErrorKind::TooLarge,
            backend,
            operation,
            format!("value of {len} bytes exceeds the limit of {max} bytes"),
        ));
    }
    Ok(())
}

/// Fails with `InvalidInput` when the record of `record` holding `state` would be nested deeper than
/// [`as_message::MAX_JSON_DEPTH`] (call it before writing anything).
///
/// Such a record can be written (AgentScope 2.0.4 writes it too) but no reader, here or in 2.0.4,
/// reads it back: the session would be lost. The state's depth is computed from the value, without
/// encoding it; the envelope (small) is measured from its bytes.
///
/// ```
/// use as_message::{MAX_JSON_DEPTH, json};
/// use as_storage::{SessionRecord, StorageErrorKind, check_record_depth};
/// # let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
/// let mut rec: SessionRecord = as_message::from_json(text).unwrap();
/// check_record_depth("memory", "update_session_state", &rec.meta(), &rec.state)?;
/// let deep = (0..MAX_JSON_DEPTH).fold(json!(1), |v, _| json!([v]));
/// rec.state.middle_context.insert("deep".into(), deep);
/// let err = check_record_depth("memory", "update_session_state", &rec.meta(), &rec.state).unwrap_err();
/// assert_eq!(err.kind(), StorageErrorKind::InvalidInput);
/// # Ok::<(), as_storage::StorageError>(())
/// ```
pub fn check_record_depth(
    backend: &'static str,
    operation: &'static str,
    record: &SessionMeta,
    state: &AgentState,
) -> Result<()> {
    check_state_depth(backend, operation, state)?;
    check_envelope_depth(backend, operation, &encode_envelope(record))
}

/// [`encode_record_split`] with [`check_record_timestamps`] and [`check_record_depth`]'s checks: the
/// timestamps and the state's depth before encoding, the envelope's on the bytes just written
/// (encoded once, not again for the check). What a backend writes a record with: its JSON and
/// envelope length, or `InvalidInput` before anything is written.
///
/// ```
/// use as_storage::{SessionRecord, encode_checked_record, encode_record_split};
/// # let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
/// let rec: SessionRecord = as_message::from_json(text).unwrap();
/// let checked = encode_checked_record("memory", "update_session_state", &rec.meta(), &rec.state)?;
/// assert_eq!(checked, encode_record_split(&rec.meta(), &rec.state));
/// # Ok::<(), as_storage::StorageError>(())
/// ```
pub fn encode_checked_record(
    backend: &'static str,
    operation: &'static str,
    record: &SessionMeta,
    state: &AgentState,
) -> Result<(String, usize)> {
    check_record_timestamps(backend, operation, record)?;
    check_state_depth(backend, operation, state)?;
    let (json, head) = encode_record_split(record, state);
    check_envelope_depth(backend, operation, json.get(..head).unwrap_or_default())?;
    Ok((json, head))
}

/// Fails with `InvalidInput` when a timestamp of `record` (`created_at`, `updated_at`) is one
/// Python's `datetime` cannot hold ([`Timestamp::in_python_range`]: years 1 to 9999), so that no
/// reader, AgentScope 2.0.4's included, would take the record back (call it before writing
/// anything; [`encode_checked_record`] does). The case that happens: a write after a record whose
/// `updated_at` is 9999-12-31T23:59:59.999999, whose next revision ([`Timestamp::now_after`]) is in
/// year 10000; the write fails and the record stays readable.
///
/// ```
/// use as_storage::{SessionRecord, StorageErrorKind, Timestamp, check_record_timestamps};
/// # let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
/// let mut rec: SessionRecord = as_message::from_json(text).unwrap();
/// rec.updated_at = "9999-12-31T23:59:59.999999".parse().unwrap();
/// check_record_timestamps("memory", "update_session_state", &rec.meta())?;
/// rec.updated_at = Timestamp::now_after(&rec.updated_at);
/// let err = check_record_timestamps("memory", "update_session_state", &rec.meta()).unwrap_err();
/// assert_eq!(err.kind(), StorageErrorKind::InvalidInput);
/// # Ok::<(), as_storage::StorageError>(())
/// ```
pub fn check_record_timestamps(backend: &'static str, operation: &'static str, record: &SessionMeta) -> Result<()> {
    for (what, t) in [("created_at", &record.created_at), ("updated_at", &record.updated_at)] {
        if !t.in_python_range() {
            return Err(StorageError::new(
                StorageErrorKind::InvalidInput,
                backend,
                operation,
                format!(
                    "the session record's {what} {t} is outside the years 1 to 9999 that Python's datetime holds: no \
                     reader (AgentScope 2.0.4's included) would read the record back"
                ),
            ));
        }
    }
    Ok(())
}

/// A fresh session id for a create without one: [`as_message::generate_id`] (which an application's
/// id factory may replace), checked with [`crate::validate_id`] like a given id. An id no key can
/// address (a factory's `"urn:x"`) would make a session nobody could read, update or delete again,
/// so it fails with [`StorageErrorKind::InvalidKey`] and nothing is written. Backends call it for
/// every fresh id they try.
///
/// ```
/// let id = as_storage::generate_session_id("memory", "upsert_session")?;
/// assert_eq!(id.len(), 32);
/// # Ok::<(), as_storage::StorageError>(())
/// ```
pub fn generate_session_id(backend: &'static str, operation: &'static str) -> Result<String> {
    let id = as_message::generate_id();
    crate::validate_id("session_id", &id).map_err(|e| {
        let why = format!("the id factory generated an invalid id: {}", e.message());
        StorageError::new(StorageErrorKind::InvalidKey, backend, operation, why).with_source(e)
    })?;
    Ok(id)
}

/// The part of [`check_record_depth`] about the state, for a backend that encodes the state apart
/// from its envelope: fails with `InvalidInput` when `state`, inside a record, would be nested
/// deeper than [`as_message::MAX_JSON_DEPTH`].
pub fn check_state_depth(backend: &'static str, operation: &'static str, state: &AgentState) -> Result<()> {
    // The record is one level, its state the next.
    too_deep(backend, operation, "the session record", 1 + state.json_depth())
}

/// The part of [`check_record_depth`] about the envelope, given its bytes ([`encode_envelope`]):
/// fails with `InvalidInput` when they nest deeper than [`as_message::MAX_JSON_DEPTH`] (the
/// configs' free-form `parameters`).
pub fn check_envelope_depth(backend: &'static str, operation: &'static str, envelope: &str) -> Result<()> {
    // The envelope's unclosed record counts as its first level.
    too_deep(backend, operation, "the session record", json_text_depth(envelope))
}

/// Fails with `InvalidInput` when `msg`, stored as a message of the log, would be nested deeper than
/// [`as_message::MAX_JSON_DEPTH`] (call it before writing anything); see [`check_record_depth`].
pub fn check_message_depth(backend: &'static str, operation: &'static str, msg: &Msg) -> Result<()> {
    too_deep(backend, operation, "the message", msg.json_depth())
}

fn too_deep(backend: &'static str, operation: &'static str, what: &str, depth: usize) -> Result<()> {
    if depth > MAX_JSON_DEPTH {
        return Err(StorageError::new(
            StorageErrorKind::InvalidInput,
            backend,
            operation,
            format!(
                "{what} would be nested more than {MAX_JSON_DEPTH} levels deep, which no reader (AgentScope 2.0.4's \
                 included) reads back"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal `LRANGE` on a Vec, the reference for `message_range`.
    fn lrange(len: usize, start: i64, stop: i64) -> Vec<usize> {
        let l = len as i64;
        let s = if start < 0 { (l + start).max(0) } else { start };
        let e = if stop < 0 { l + stop } else { stop.min(l - 1) };
        if s > e || s >= l { Vec::new() } else { (s as usize..=e as usize).collect() }
    }

    #[test]
    fn message_range_matches_lrange() {
        for len in 0..6usize {
            for offset in -8i64..8 {
                for limit in -8i64..8 {
                    let got: Vec<usize> = message_range(len, offset, limit).collect();
                    assert_eq!(got, lrange(len, offset, offset + limit - 1), "len {len} offset {offset} limit {limit}");
                }
            }
        }
        assert_eq!(message_range(3, i64::MAX, i64::MAX), 0..0);
        assert_eq!(message_range(3, i64::MIN, i64::MIN), 0..0);
        assert_eq!(message_range(3, 0, i64::MAX), 0..3);
    }

    #[test]
    fn size_check() {
        assert!(check_size("m", "op", 10, 10).is_ok());
        assert_eq!(check_size("m", "op", 11, 10).unwrap_err().kind(), StorageErrorKind::TooLarge);
    }
}
