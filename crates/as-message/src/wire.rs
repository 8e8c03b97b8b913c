//! Hand-written canonical JSON for the hot wire types.
//!
//! [`crate::to_json`] writes through serde. For the types a session is made of ([`Msg`] and its
//! blocks here, `AgentState` in `as-state`) serde's generic calls (one per field name, one per
//! value) cost more than the bytes themselves, so these types also implement [`WriteJson`]: plain
//! code that appends their exact canonical bytes. Their `Serialize` impl goes through
//! [`serialize_fast`], which takes the hand-written path when the serializer is `to_json`'s writer
//! and the derived path for any other serializer (`serde_json::to_value`, an internally tagged
//! enum around them, ...). The two paths are tested to give the same bytes.
//!
//! ```
//! use as_message::{Msg, WriteJson};
//! let m = Msg::user("alice", "hi");
//! let mut out = String::new();
//! m.write_json(&mut out);
//! assert_eq!(out, as_message::to_json(&m));
//! assert_eq!(out, serde_json::to_string(&m).unwrap());
//! ```

use std::cell::Cell;

use serde::{Serialize, Serializer};

use crate::block::{ContentBlock, TextOrBlocks, ToolCallState, ToolResultState};
use crate::json::JsonMap;
use crate::msg::{Msg, Usage};
use crate::writer;

/// A wire type that can append its canonical JSON without going through serde.
///
/// Contract: `write_json` appends exactly the bytes that the type's derived `Serialize` gives
/// through `serde_json::to_string` (for the types of this workspace, pydantic's bytes).
pub trait WriteJson {
    /// Appends the canonical JSON of `self` to `out`.
    fn write_json(&self, out: &mut String);
}

/// The derived (field by field) serde serialization of a type whose `Serialize` impl is
/// [`serialize_fast`]: what every serializer but `to_json`'s writer gets.
pub trait DerivedSerialize {
    /// Serializes `self` with the derived, field-by-field impl.
    fn derived_serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

/// The newtype-struct name by which `to_json`'s writer recognises a [`serialize_fast`] value.
pub(crate) const FAST_TOKEN: &str = "$as_message::private::WriteJson";
/// The unit-struct name a hand-written value reports back with (the writer writes nothing for it).
pub(crate) const DONE_TOKEN: &str = "$as_message::private::Written";

thread_local! {
    /// The output buffer, lent by the writer to the one value it is about to serialize.
    static HANDOFF: Cell<Option<String>> = const { Cell::new(None) };
}

/// Lends `out` to a [`serialize_fast`] value the writer is about to serialize (see `Writer::serialize_newtype_struct`).
pub(crate) fn lend(out: String) {
    HANDOFF.with(|h| h.set(Some(out)));
}

/// Takes the buffer back (whether or not the value used it).
pub(crate) fn take_back() -> Option<String> {
    HANDOFF.with(Cell::take)
}

/// A `Serialize` impl for a type with both a hand-written and a derived serialization:
/// hand-written under [`crate::to_json`], derived for every other serializer.
///
/// ```
/// use as_message::{DerivedSerialize, WriteJson};
/// use serde::{Serialize, Serializer};
///
/// struct Point { x: i64 }
/// impl WriteJson for Point {
///     fn write_json(&self, out: &mut String) {
///         out.push_str(&format!("{{\"x\":{}}}", self.x));
///     }
/// }
/// impl DerivedSerialize for Point {
///     fn derived_serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
///         use serde::ser::SerializeStruct;
///         let mut st = s.serialize_struct("Point", 1)?;
///         st.serialize_field("x", &self.x)?;
///         st.end()
///     }
/// }
/// impl Serialize for Point {
///     fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
///         as_message::serialize_fast(self, s)
///     }
/// }
/// assert_eq!(as_message::to_json(&Point { x: 3 }), r#"{"x":3}"#);
/// assert_eq!(serde_json::to_value(Point { x: 3 }).unwrap(), serde_json::json!({"x": 3}));
/// ```
pub fn serialize_fast<T, S>(value: &T, s: S) -> Result<S::Ok, S::Error>
where
    T: WriteJson + DerivedSerialize + ?Sized,
    S: Serializer,
{
    s.serialize_newtype_struct(FAST_TOKEN, &Fast(value))
}

/// What [`serialize_fast`] hands to the serializer.
struct Fast<'a, T: ?Sized>(&'a T);

impl<T: WriteJson + DerivedSerialize + ?Sized> Serialize for Fast<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The buffer is lent only by `to_json`'s writer, right before it serializes this value
        // with itself; any other serializer finds none and gets the derived form.
        match take_back() {
            Some(mut out) => {
                self.0.write_json(&mut out);
                lend(out);
                s.serialize_unit_struct(DONE_TOKEN)
            }
            None => self.0.derived_serialize(s),
        }
    }
}

/// Appends a JSON string literal (serde_json's escaping: raw UTF-8, short escapes, `\u00XX` otherwise).
///
/// ```
/// let mut out = String::new();
/// as_message::write_json_str(&mut out, "a\"b\n");
/// assert_eq!(out, r#""a\"b\n""#);
/// ```
#[inline]
pub fn write_json_str(out: &mut String, s: &str) {
    writer::write_str(out, s);
}

/// Appends any serializable value through `to_json`'s serde writer (for the rare parts of a
/// hand-written type: free-form maps, permission rules, ...).
pub fn write_json_value<T: Serialize + ?Sized>(out: &mut String, value: &T) {
    writer::write_into(out, value);
}

/// Appends a free-form object (`{}` without a serde call when empty).
#[inline]
pub fn write_json_map(out: &mut String, map: &JsonMap) {
    if map.is_empty() {
        out.push_str("{}");
    } else {
        write_json_value(out, map);
    }
}

#[inline]
fn write_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_json_str(out, s),
        None => out.push_str("null"),
    }
}

/// Appends an integer in decimal.
#[inline]
pub fn write_json_int(out: &mut String, n: i64) {
    out.push_str(itoa::Buffer::new().format(n));
}

impl ToolCallState {
    /// The wire value (`"pending"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Asking => "asking",
            Self::Allowed => "allowed",
            Self::Submitted => "submitted",
            Self::Finished => "finished",
        }
    }
}

impl ToolResultState {
    /// The wire value (`"success"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
            Self::Denied => "denied",
            Self::Running => "running",
        }
    }
}

impl WriteJson for TextOrBlocks {
    fn write_json(&self, out: &mut String) {
        match self {
            Self::Text(s) => write_json_str(out, s),
            Self::Blocks(b) if b.is_empty() => out.push_str("[]"),
            Self::Blocks(b) => write_json_value(out, b),
        }
    }
}

impl WriteJson for ContentBlock {
    fn write_json(&self, out: &mut String) {
        match self {
            Self::Text(b) => {
                out.push_str("{\"type\":\"text\",\"text\":");
                write_json_str(out, &b.text);
                out.push_str(",\"id\":");
                write_json_str(out, &b.id);
                out.push('}');
            }
            Self::Thinking(b) if b.extra.is_empty() => {
                out.push_str("{\"type\":\"thinking\",\"thinking\":");
                write_json_str(out, &b.thinking);
                out.push_str(",\"id\":");
                write_json_str(out, &b.id);
                out.push('}');
            }
            Self::ToolCall(b) => {
                out.push_str("{\"type\":\"tool_call\",\"id\":");
                write_json_str(out, &b.id);
                out.push_str(",\"name\":");
                write_json_str(out, &b.name);
                out.push_str(",\"input\":");
                write_json_str(out, &b.input);
                out.push_str(",\"state\":\"");
                out.push_str(b.state.as_str());
                out.push_str("\",\"suggested_rules\":");
                if b.suggested_rules.is_empty() {
                    out.push_str("[]");
                } else {
                    write_json_value(out, &b.suggested_rules);
                }
                out.push('}');
            }
            Self::ToolResult(b) => {
                out.push_str("{\"type\":\"tool_result\",\"id\":");
                write_json_str(out, &b.id);
                out.push_str(",\"name\":");
                write_json_str(out, &b.name);
                out.push_str(",\"output\":");
                b.output.write_json(out);
                out.push_str(",\"state\":\"");
                out.push_str(b.state.as_str());
                out.push_str("\",\"metadata\":");
                write_json_map(out, &b.metadata);
                out.push('}');
            }
            // Rare in a conversation: the derived form.
            Self::Thinking(_) | Self::Hint(_) | Self::Data(_) => write_json_value(out, self),
        }
    }
}

impl WriteJson for Usage {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"input_tokens\":");
        write_json_int(out, self.input_tokens);
        out.push_str(",\"output_tokens\":");
        write_json_int(out, self.output_tokens);
        out.push('}');
    }
}

impl WriteJson for Msg {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"name\":");
        write_json_str(out, &self.name);
        out.push_str(",\"content\":[");
        for (i, block) in self.content.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            block.write_json(out);
        }
        out.push_str("],\"role\":\"");
        out.push_str(self.role.as_str());
        out.push_str("\",\"id\":");
        write_json_str(out, &self.id);
        out.push_str(",\"metadata\":");
        write_json_map(out, &self.metadata);
        out.push_str(",\"created_at\":");
        write_json_str(out, &self.created_at);
        out.push_str(",\"finished_at\":");
        write_opt_str(out, self.finished_at.as_deref());
        out.push_str(",\"usage\":");
        match &self.usage {
            Some(u) => u.write_json(out),
            None => out.push_str("null"),
        }
        out.push('}');
    }
}

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            item.write_json(out);
        }
        out.push(']');
    }
}
