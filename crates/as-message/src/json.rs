//! JSON helpers shared by every wire type: the canonical writer, the path-reporting reader,
//! and pydantic-style lax number coercion.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::error::{MessageError, MessageErrorKind};
use crate::read::Numbers;

/// A free-form JSON object whose key order and number text are preserved
/// (`metadata`, `middle_context`, `parameters`, thinking extras).
pub type JsonMap = serde_json::Map<String, Value>;

/// Writes `value` as pydantic's `model_dump_json()` would: compact, raw UTF-8, declaration order.
///
/// ```
/// let msg = as_message::Msg::user("user", "hi");
/// let json = as_message::to_json(&msg);
/// assert!(json.starts_with(r#"{"name":"user","content":[{"type":"text","text":"hi","#));
/// ```
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    // The fast writer produces serde_json's exact bytes; where it declines, serde_json writes.
    // Serializing our wire types cannot fail: every map key is a string and no impl errors.
    // The buffer starts at this thread's last output size, so a large state is written without regrowing.
    let capacity = LAST_LEN.with(std::cell::Cell::get);
    match crate::writer::write(value, capacity) {
        Ok(mut out) => {
            LAST_LEN.with(|c| c.set(out.len().max(256)));
            if out.capacity() > 2 * out.len() + 4096 {
                out.shrink_to_fit();
            }
            out
        }
        Err(_) => serde_json::to_string(value).unwrap_or_default(),
    }
}

/// Writes `value` canonically into a byte buffer (see [`to_json`]).
pub fn to_json_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    to_json(value).into_bytes()
}

thread_local! {
    static LAST_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(1024) };
}

/// Reads a wire type from JSON text, reporting the JSON path of the first error. Documents nested
/// up to [`MAX_JSON_DEPTH`] levels are read (as AgentScope 2.0.4 reads them), deeper ones refused.
///
/// ```
/// let err = as_message::from_json::<as_message::Msg>(r#"{"name":"u","role":"user"}"#).unwrap_err();
/// assert!(err.message().contains("content"), "{err}");
/// ```
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, MessageError> {
    // `from_str` skips the per-string UTF-8 check that bytes need. Free-form values inside are read
    // at most SERDE_SUBTREE_DEPTH deep here (serde_json stops at 128), so nothing deeper than
    // MAX_JSON_DEPTH in all is accepted; a deeper one is for the whole-document read to decide.
    if let Ok(value) = with_subtree_depth(crate::read::SERDE_SUBTREE_DEPTH, || serde_json::from_str::<T>(text)) {
        return Ok(value);
    }
    read_tracked(text.as_bytes())
}

/// The deepest nesting of non-empty arrays and objects [`from_json`] reads (an empty `[]` or `{}`
/// adds no level): what AgentScope 2.0.4's pydantic reads (serde_json alone stops at 128 levels).
pub const MAX_JSON_DEPTH: usize = 200;

/// Reads a wire type from JSON bytes (see [`from_json`]).
pub fn from_json_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, MessageError> {
    // Fast path: no path tracking. Only a failed read is read again to find where it failed.
    if let Ok(value) = with_subtree_depth(crate::read::SERDE_SUBTREE_DEPTH, || serde_json::from_slice::<T>(bytes)) {
        return Ok(value);
    }
    read_tracked(bytes)
}

/// The read after a failed fast one: with the JSON path of the error, past serde_json's 128 levels
/// up to [`MAX_JSON_DEPTH`], and with repeated keys read as pydantic reads them.
///
/// A repeated key is not an error to pydantic: the last value counts (in the first key's position, as
/// in a Python dict), in typed objects (`{"type":"text",…,"type":"tool_call"}` is a tool call) as in
/// free-form ones. serde's derived readers refuse a repeated field (or, for a block's `type`, read the
/// first), so the document is first read as a value by the free-form reader (which keeps the last
/// value and every number's text) and that value, written again, is what serde reads.
fn read_tracked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, MessageError> {
    // AgentScope 2.0.4 (pydantic) reads documents nested up to MAX_JSON_DEPTH, so one Python wrote
    // and reads is read here too (and nothing deeper, which also bounds the recursive read's stack).
    let fits = crate::read::python_depth(bytes) <= MAX_JSON_DEPTH;
    if fits
        && let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(value) = crate::read::parse_value(text, Numbers::Raw, MAX_JSON_DEPTH)
        && let Ok(deduplicated) = serde_json::to_string(&value)
    {
        let read = read_serde(deduplicated.as_bytes(), fits)?;
        // A `NaN` was read as `null`, which free-form data keeps (as pydantic writes it) but which a
        // nullable typed field takes too, where pydantic refuses a `NaN` (a float) as it refuses an
        // infinity ("finished_at":NaN). So a document with a `NaN` is read again with each `NaN` an
        // infinity: it must be read both ways (a float field refuses the `null`: a known difference).
        if text.contains("NaN")
            && let Ok(value) = crate::read::parse_value(text, Numbers::RawNanAsInfinity, MAX_JSON_DEPTH)
            && let Ok(infinite) = serde_json::to_string(&value)
        {
            read_serde::<T>(infinite.as_bytes(), fits).map_err(nan_error)?;
        }
        return Ok(read);
    }
    // Not JSON (or too deep): serde's error.
    read_serde(bytes, fits)
}

/// An error of the read of a document with each `NaN` an infinity (see [`read_tracked`]): the same
/// document was read with each `NaN` a `null`, so the number refused is a `NaN`, and named so.
fn nan_error(e: MessageError) -> MessageError {
    match e.message().strip_prefix("invalid type: number") {
        Some(rest) => MessageError::new(e.kind(), e.path(), format!("invalid type: NaN{rest}")),
        None => e,
    }
}

/// serde's read of a whole document, reporting the JSON path of an error; `fits`: the document is
/// within [`MAX_JSON_DEPTH`].
fn read_serde<T: DeserializeOwned>(bytes: &[u8], fits: bool) -> Result<T, MessageError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Free-form values are read from their text (serde_json skips it without counting levels), so
    // their own limit keeps a deeper document refused: within one that fits, they may be as deep as
    // it; otherwise they get what serde_json's 128 levels leave (as in `from_json`'s first try).
    let subtree_depth = if fits {
        de.disable_recursion_limit();
        MAX_JSON_DEPTH
    } else {
        crate::read::SERDE_SUBTREE_DEPTH
    };
    let value: T = with_subtree_depth(subtree_depth, || serde_path_to_error::deserialize(&mut de)).map_err(|e| {
        let path = display_path(e.path());
        let inner = e.into_inner();
        split_nested(path, inner.to_string())
    })?;
    de.end().map_err(|e| MessageError::new(MessageErrorKind::InvalidJson, "", e.to_string()))?;
    Ok(value)
}

/// Reads a wire type from an already-parsed JSON value (see [`from_json`]).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, MessageError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = display_path(e.path());
        split_nested(path, e.into_inner().to_string())
    })
}

fn display_path(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s == "." { String::new() } else { s }
}

/// Errors raised inside hand-written `Deserialize` impls carry their inner path as
/// `@path@ message`; join that onto the outer path so the user sees one full path.
fn split_nested(outer: String, msg: String) -> MessageError {
    let (inner, msg) = parse_nested(&msg);
    let mut path = join_path(&outer, &inner);
    let msg = strip_position(&msg);
    // serde reports a missing field at its parent object; pydantic (and the user) want the field.
    if let Some(field) = msg.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
        path = join_path(&path, field);
    }
    let kind =
        if msg.starts_with("invalid value: ") { MessageErrorKind::InvalidValue } else { MessageErrorKind::InvalidJson };
    let msg = msg.strip_prefix("invalid value: ").unwrap_or(&msg).to_owned();
    MessageError::new(kind, path, msg)
}

fn parse_nested(msg: &str) -> (String, String) {
    if let Some(rest) = msg.strip_prefix('@')
        && let Some(end) = rest.find("@ ")
    {
        return (rest[..end].to_owned(), rest[end + 2..].to_owned());
    }
    (String::new(), msg.to_owned())
}

fn join_path(outer: &str, inner: &str) -> String {
    match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => outer.to_owned(),
        (false, false) if inner.starts_with('[') => format!("{outer}{inner}"),
        (false, false) => format!("{outer}.{inner}"),
    }
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => msg[..i].to_owned(),
        _ => msg.to_owned(),
    }
}

/// Converts a value to a typed wire struct inside a hand-written `Deserialize` impl,
/// keeping the inner path in the error text (joined again by [`from_json`]).
pub(crate) fn nested<T: DeserializeOwned, E: serde::de::Error>(value: Value) -> Result<T, E> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = display_path(e.path());
        let msg = e.into_inner().to_string();
        let (inner, msg) = parse_nested(&msg);
        let full = join_path(&path, &inner);
        if full.is_empty() { E::custom(msg) } else { E::custom(format!("@{full}@ {msg}")) }
    })
}

/// An error at a sub-path, from inside a hand-written `Deserialize` impl.
pub(crate) fn error_at<E: serde::de::Error>(path: &str, msg: impl std::fmt::Display) -> E {
    if path.is_empty() { E::custom(msg) } else { E::custom(format!("@{path}@ {msg}")) }
}

/// Describes a JSON value's type in error messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

thread_local! {
    /// How deep a free-form value read inside a serde read may be (see [`with_subtree_depth`]).
    static SUBTREE_DEPTH: Cell<usize> = const { Cell::new(MAX_JSON_DEPTH) };
}

/// Runs `read` with free-form values read at most `depth` levels deep (levels of non-empty arrays and
/// objects), then restores the previous limit. Outside any such call the limit is [`MAX_JSON_DEPTH`].
pub(crate) fn with_subtree_depth<R>(depth: usize, read: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            SUBTREE_DEPTH.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SUBTREE_DEPTH.with(|c| c.replace(depth)));
    read()
}

/// serde_json's name for a raw value (feature `raw_value`, the protocol of
/// `serde_json::value::RawValue`): a serde_json deserializer asked for a newtype struct of this name
/// hands over the next value's JSON text instead of reading it (the writer knows it too).
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// The next value of a deserializer as JSON text, or as a value when the deserializer cannot give
/// its text (not serde_json's) or gave a map instead (built here without serde_json's `Value` reader).
enum JsonText<'de> {
    Text(Cow<'de, str>),
    Value(Value),
}

/// A string, borrowed from the input when the deserializer can lend it.
struct Text;

impl<'de> Visitor<'de> for Text {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

fn json_text<'de, D: Deserializer<'de>>(d: D, numbers: Numbers) -> Result<JsonText<'de>, D::Error> {
    struct Raw(Numbers);
    impl<'de> Visitor<'de> for Raw {
        type Value = JsonText<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        // serde_json's raw value is one entry: its marker key and the text. Any other map comes from a
        // deserializer that reads newtype structs as their content: its entries are read one by one.
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let Some(first) = map.next_key_seed(Text)? else {
                return Ok(JsonText::Value(Value::Object(JsonMap::new())));
            };
            if first == RAW_TOKEN {
                return map.next_value_seed(Text).map(JsonText::Text);
            }
            let mut object = JsonMap::new();
            object.insert(first.into_owned(), map.next_value_seed(ValueSeed(self.0))?);
            while let Some(k) = map.next_key::<String>()? {
                let v = map.next_value_seed(ValueSeed(self.0))?;
                object.insert(k, v);
            }
            Ok(JsonText::Value(Value::Object(object)))
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            Value::deserialize(d).map(JsonText::Value)
        }
    }
    d.deserialize_newtype_struct(RAW_TOKEN, Raw(numbers))
}

/// Reads the next value of a serde deserializer with the free-form reader ([`crate::read::Cursor::value`])
/// on its JSON text, not with serde_json's `Value` reader, which takes an object with one of its private
/// marker keys for a number or raw JSON. Numbers as `numbers` says; at most as deep as
/// [`with_subtree_depth`] allows.
pub(crate) fn value_from<'de, D: Deserializer<'de>>(d: D, numbers: Numbers) -> Result<Value, D::Error> {
    match json_text(d, numbers)? {
        JsonText::Text(text) => {
            let depth = SUBTREE_DEPTH.with(Cell::get);
            crate::read::parse_value(&text, numbers, depth).map_err(D::Error::custom)
        }
        JsonText::Value(mut v) => {
            if numbers == Numbers::Canonical {
                check_number_digits(&v).map_err(D::Error::custom)?;
                canonicalize_numbers(&mut v);
            }
            Ok(v)
        }
    }
}

/// A [`DeserializeSeed`] for [`value_from`].
#[derive(Clone, Copy)]
pub(crate) struct ValueSeed(pub(crate) Numbers);

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        value_from(d, self.0)
    }
}

/// A free-form object: its keys as strings, each value with [`value_from`] (a duplicate key keeps its
/// first position and its last value, as in a Python dict). Anything else is refused as serde_json's
/// map reader refuses it ("invalid type: sequence, expected a map").
pub(crate) fn object_from<'de, D: Deserializer<'de>>(d: D, numbers: Numbers) -> Result<JsonMap, D::Error> {
    struct Object(Numbers);
    impl<'de> Visitor<'de> for Object {
        type Value = JsonMap;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonMap, A::Error> {
            let mut object = JsonMap::new();
            while let Some(k) = map.next_key::<String>()? {
                let v = map.next_value_seed(ValueSeed(self.0))?;
                object.insert(k, v);
            }
            Ok(object)
        }
    }
    d.deserialize_map(Object(numbers))
}

/// A type's serde-derived deserializer under another name (see [`deserialize_map_only`]).
pub trait DerivedDeserialize<'de>: Sized {
    /// The derived impl (from `#[serde(remote = "Self")]`).
    fn derived<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

/// Deserializes a struct from a JSON object only: serde's derived impls also accept an array of
/// field values (`[]` would give an all-default `AgentState`), which pydantic rejects.
/// [`map_only!`](crate::map_only!) writes these impls in one line.
///
/// ```
/// use as_message::{DerivedDeserialize, deserialize_map_only};
/// #[derive(serde::Deserialize, Debug)]
/// #[serde(remote = "Self")]
/// struct P { #[serde(default)] x: i64 }
/// impl<'de> DerivedDeserialize<'de> for P {
///     fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> { P::deserialize(d) }
/// }
/// impl<'de> serde::Deserialize<'de> for P {
///     fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
///         deserialize_map_only(d, "a P object")
///     }
/// }
/// assert!(serde_json::from_str::<P>("[]").is_err());
/// assert_eq!(serde_json::from_str::<P>(r#"{"x":1}"#).unwrap().x, 1);
/// ```
#[inline]
pub fn deserialize_map_only<'de, D, T>(d: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DerivedDeserialize<'de>,
{
    struct MapOnly<T>(std::marker::PhantomData<T>, &'static str);
    impl<'de, T: DerivedDeserialize<'de>> serde::de::Visitor<'de> for MapOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.1)
        }
        #[inline(always)]
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::derived(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(MapOnly(std::marker::PhantomData, expecting))
}

/// Makes a struct read only from a JSON object, as pydantic does: serde's derived `Deserialize`
/// also accepts an array of field values (`"usage": [1, 2]`), which pydantic rejects.
///
/// The struct derives `Deserialize` (and optionally `Serialize`) with `#[serde(remote = "Self")]`, so
/// the derived code becomes inherent functions; this macro implements [`DerivedDeserialize`] with
/// them, a `Deserialize` that goes through [`deserialize_map_only`], and, given `Serialize`, a
/// `Serialize` that forwards to the derived one. A `JsonSchema` derive needs `#[schemars(rename = "…")]`,
/// since schemars names a remote type after its remote path (`Self`).
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, Debug)]
/// #[serde(remote = "Self")]
/// struct Point { x: i64, #[serde(default)] y: i64 }
/// as_message::map_only!(Point, "a Point object", Serialize);
///
/// # fn main() {
/// assert_eq!(serde_json::from_str::<Point>(r#"{"x":1}"#).unwrap().x, 1);
/// let err = serde_json::from_str::<Point>("[1, 2]").unwrap_err();
/// assert!(err.to_string().contains("expected a Point object"), "{err}");
/// assert_eq!(serde_json::to_string(&Point { x: 1, y: 2 }).unwrap(), r#"{"x":1,"y":2}"#);
/// # }
/// ```
///
/// Given `FastSerialize` instead, the type also implements [`crate::WriteJson`] (hand-written bytes)
/// and its `Serialize` is [`crate::serialize_fast`]: the hand-written bytes under [`to_json`], the
/// derived serialization for every other serializer.
///
/// Attributes before the type (`map_only!(#[inline(always)] Usage, …)`) go on the `derived` function:
/// a small struct read in a hot loop stays as fast as the plain derive.
///
/// Inside the defining crate, `Point::deserialize(d)` names the derived (array-accepting) function;
/// call it only on a deserializer that can hold nothing but a map.
#[macro_export]
macro_rules! map_only {
    ($(#[$derived_attr:meta])* $ty:ty, $expecting:literal) => {
        impl<'de> $crate::DerivedDeserialize<'de> for $ty {
            $(#[$derived_attr])*
            fn derived<D: $crate::__serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                <$ty>::deserialize(d)
            }
        }

        /// Reads only a JSON object (pydantic rejects an array of field values, which serde's derive accepts).
        impl<'de> $crate::__serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                $crate::deserialize_map_only(d, $expecting)
            }
        }
    };
    ($(#[$derived_attr:meta])* $ty:ty, $expecting:literal, Serialize) => {
        $crate::map_only!($(#[$derived_attr])* $ty, $expecting);

        impl $crate::__serde::Serialize for $ty {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                <$ty>::serialize(self, s)
            }
        }
    };
    // `Serialize` through the type's hand-written `WriteJson` under `to_json`, derived elsewhere.
    ($(#[$derived_attr:meta])* $ty:ty, $expecting:literal, FastSerialize) => {
        $crate::map_only!($(#[$derived_attr])* $ty, $expecting);

        impl $crate::DerivedSerialize for $ty {
            fn derived_serialize<S: $crate::__serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                <$ty>::serialize(self, s)
            }
        }

        impl $crate::__serde::Serialize for $ty {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                $crate::serialize_fast(self, s)
            }
        }
    };
}

/// Reads a unit-only enum from its wire string alone, as pydantic reads a `Literal` or `StrEnum` field:
/// serde's derived `Deserialize` also takes the externally tagged map `{"user": null}`, which pydantic
/// refuses. `variants`: each wire string with its value. [`str_enum!`](crate::str_enum!) writes the impl.
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// enum Side { Left, Right }
/// impl<'de> serde::Deserialize<'de> for Side {
///     fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
///         as_message::deserialize_str_enum(d, &[("left", Side::Left), ("right", Side::Right)])
///     }
/// }
/// assert_eq!(serde_json::from_str::<Side>(r#""left""#).unwrap(), Side::Left);
/// let err = serde_json::from_str::<Side>(r#"{"left":null}"#).unwrap_err();
/// assert!(err.to_string().starts_with("invalid type: map, expected one of `left`, `right`"), "{err}");
/// let err = serde_json::from_str::<Side>(r#""up""#).unwrap_err();
/// assert!(err.to_string().starts_with("unknown variant `up`, expected one of `left`, `right`"), "{err}");
/// ```
pub fn deserialize_str_enum<'de, D, T>(d: D, variants: &'static [(&'static str, T)]) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Copy + 'static,
{
    /// "one of `a`, `b`", as serde's derived impls list the variants.
    struct OneOf<T: 'static>(&'static [(&'static str, T)]);
    impl<T> fmt::Display for OneOf<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("one of ")?;
            for (i, (name, _)) in self.0.iter().enumerate() {
                write!(f, "{}`{name}`", if i == 0 { "" } else { ", " })?;
            }
            Ok(())
        }
    }
    struct StrOnly<T: 'static>(&'static [(&'static str, T)]);
    impl<T: Copy + 'static> Visitor<'_> for StrOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}", OneOf(self.0))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            match self.0.iter().find(|(name, _)| *name == v) {
                Some(&(_, value)) => Ok(value),
                None => Err(E::custom(format_args!("unknown variant `{v}`, expected {}", OneOf(self.0)))),
            }
        }
    }
    d.deserialize_str(StrOnly(variants))
}

/// Implements `Deserialize` for a unit-only enum with [`deserialize_str_enum`]: from its wire string
/// alone, as pydantic reads it (serde's derive also takes the map `{"user": null}`). Every variant must
/// be listed, with the string its `Serialize` writes.
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
/// #[serde(rename_all = "snake_case")]
/// enum Side { Left, FarRight }
/// as_message::str_enum!(Side { Left => "left", FarRight => "far_right" });
///
/// # fn main() {
/// assert_eq!(serde_json::from_str::<Side>(r#""far_right""#).unwrap(), Side::FarRight);
/// assert!(serde_json::from_str::<Side>(r#"{"left":null}"#).is_err());
/// # }
/// ```
#[macro_export]
macro_rules! str_enum {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        /// Reads only the wire string (pydantic refuses the map `{"…": null}`, which serde's derive accepts).
        impl<'de> $crate::__serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                // Every variant is listed: one left out does not compile.
                const _: fn($ty) = |v| match v {
                    $($ty::$variant)|+ => {}
                };
                const VARIANTS: &[(&str, $ty)] = &[$(($name, $ty::$variant)),+];
                $crate::deserialize_str_enum(d, VARIANTS)
            }
        }
    };
}

/// Rewrites the numbers inside free-form JSON the way Python's `json.loads` + pydantic's dump would:
/// floats in their shortest round-trip form (`1e-07` → `1e-7`, `1E2` → `100.0`), non-finite floats
/// as `null`, `-0` as `0`. Integers keep every digit (big integers are not touched).
///
/// ```
/// let mut v: as_message::JsonValue = serde_json::from_str(r#"[1e-07, 1E2, 9007199254740993, -0, 1e999]"#).unwrap();
/// as_message::canonicalize_numbers(&mut v);
/// assert_eq!(v.to_string(), "[1e-7,100.0,9007199254740993,0,null]");
/// ```
pub fn canonicalize_numbers(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(c) = canonical_number(n) {
                *v = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(canonicalize_numbers),
        Value::Object(map) => map.values_mut().for_each(canonicalize_numbers),
        _ => {}
    }
}

/// The canonical replacement of a number, or `None` when its text is already canonical.
fn canonical_number(n: &serde_json::Number) -> Option<Value> {
    let text = n.as_str();
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return (text == "-0").then(|| Value::from(0));
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => {
            let c = serde_json::Number::from_f64(f)?;
            (c.as_str() != text).then_some(Value::Number(c))
        }
        _ => Some(Value::Null),
    }
}

/// The canonical JSON text of a number's text (what [`canonicalize_numbers`] would make of it).
pub(crate) fn canonical_number_text(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return if text == "-0" { "0".into() } else { text.into() };
    }
    match text.parse::<f64>().ok().filter(|f| f.is_finite()).and_then(serde_json::Number::from_f64) {
        Some(c) if c.as_str() == text => text.into(),
        Some(c) => c.as_str().to_owned().into(),
        None => "null".into(),
    }
}

/// The most integer digits a number may have: CPython refuses to convert longer integer text
/// (`sys.get_int_max_str_digits()`, 4300), and pydantic's JSON parser refuses such a number, so a
/// record holding one could not be read by AgentScope Python.
pub const MAX_NUMBER_DIGITS: usize = 4300;

/// Fails when a number in `v` has more than [`MAX_NUMBER_DIGITS`] digits before its fraction.
///
/// ```
/// let ok: as_message::JsonValue = serde_json::from_str("[1, 2.5, {\"a\": -3}]").unwrap();
/// assert!(as_message::check_number_digits(&ok).is_ok());
/// let huge: as_message::JsonValue = serde_json::from_str(&format!("[1{}]", "0".repeat(4300))).unwrap();
/// assert!(as_message::check_number_digits(&huge).is_err());
/// ```
pub fn check_number_digits(v: &Value) -> Result<(), String> {
    match v {
        Value::Number(n) => {
            let text = n.as_str().trim_start_matches('-');
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            if digits > MAX_NUMBER_DIGITS {
                return Err(format!("number out of range: {digits} digits (at most {MAX_NUMBER_DIGITS})"));
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(check_number_digits),
        Value::Object(map) => map.values().try_for_each(check_number_digits),
        _ => Ok(()),
    }
}

/// Free-form JSON objects (`metadata`, `middle_context`, `parameters`): read losslessly, with numbers
/// canonicalised (see [`canonicalize_numbers`]). Use with `#[serde(deserialize_with = "as_message::free_form::deserialize")]`.
pub mod free_form {
    use super::*;

    /// Deserializes a free-form object (`null` is rejected, as in pydantic) from its JSON text, as
    /// [`crate::read::Cursor::value`] reads it: an object with a key that serde_json reserves for
    /// itself (`$serde_json::private::Number`) stays an object, as in Python.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<JsonMap, D::Error> {
        object_from(d, Numbers::Canonical)
    }

    /// Reads free-form JSON text (an object, e.g. a tool call's `input`) as Python's `json.loads`
    /// reads it and pydantic writes it back: see [`crate::read::Cursor::value`]. Prefer it to
    /// `serde_json::from_str::<JsonMap>`, whose `Value` reader takes an object with one of serde_json's
    /// private marker keys for a number or raw JSON.
    ///
    /// ```
    /// let m = as_message::free_form::from_str(r#"{"a": {"$serde_json::private::Number": "1"}, "b": 1E2}"#)?;
    /// assert_eq!(as_message::to_json(&m), r#"{"a":{"$serde_json::private::Number":"1"},"b":100.0}"#);
    /// assert!(as_message::free_form::from_str("[1]").is_err());
    /// # Ok::<(), as_message::MessageError>(())
    /// ```
    pub fn from_str(text: &str) -> Result<JsonMap, MessageError> {
        let invalid = |m: String| MessageError::new(MessageErrorKind::InvalidJson, "", m);
        match crate::read::parse_value(text, Numbers::Canonical, MAX_JSON_DEPTH) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(invalid(format!("expected a JSON object, got {}", type_name(&other)))),
            Err(e) => Err(invalid(e.to_string())),
        }
    }
}

/// Whether a JSON number is written as an integer (no fraction, no exponent): Python reads it as
/// an `int`, not a `float`.
fn is_integer_literal(n: &serde_json::Number) -> bool {
    !n.as_str().contains(['.', 'e', 'E'])
}

/// pydantic-lax integer: accepts ints, floats with no fraction and numeric strings.
pub mod lax_int {
    use super::*;

    /// Deserializes a lax integer. An integer that does not fit an `i64` is refused with an
    /// "integer out of range" error (AgentScope Python reads integers of any size: a known difference).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let v = value_from(d, Numbers::Raw)?;
        coerce(&v).ok_or_else(|| {
            if out_of_range(&v) {
                D::Error::custom(format!(
                    "integer out of range: {} does not fit in 64 bits (AgentScope Python reads integers of any size)",
                    describe(&v)
                ))
            } else {
                D::Error::custom(format!("expected an integer, got {}", describe(&v)))
            }
        })
    }

    pub(crate) fn coerce(v: &Value) -> Option<i64> {
        match v {
            // A float with no fraction that fits an i64 (pydantic: 9.2e18 yes, 2^63 no). An integer
            // literal that does not fit is refused, never rounded through a float (which would
            // turn -9223372036854775809 into i64::MIN).
            Value::Number(n) => n.as_i64().or_else(|| {
                if is_integer_literal(n) {
                    return None;
                }
                let f = n.as_f64()?;
                let bound = 2f64.powi(63);
                (f.fract() == 0.0 && (-bound..bound).contains(&f)).then_some(f as i64)
            }),
            Value::String(s) => from_str(s),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// Whether pydantic reads `v` as an integer that [`coerce`] cannot hold: an integer literal, or a
    /// string [`from_str`] would read, with at most [`MAX_NUMBER_DIGITS`] digits (pydantic refuses
    /// floats past 2^63 itself, and Python any integer with more digits).
    fn out_of_range(v: &Value) -> bool {
        let digits = match v {
            Value::Number(n) if is_integer_literal(n) => n.as_str().trim_start_matches('-').len(),
            Value::String(s) => match int_shape(s) {
                Some((_, whole)) => whole.bytes().filter(u8::is_ascii_digit).count(),
                None => return false,
            },
            _ => return false,
        };
        coerce(v).is_none() && digits <= MAX_NUMBER_DIGITS
    }

    /// pydantic's integer from a string: surrounding whitespace, an optional sign, decimal digits
    /// with single `_` between them, and optionally `.` followed by zeros only (`"1_000.0"` is
    /// 1000; `"1e3"`, `"1."`, `"1.5"`, `"0x10"` are not integers). Never through a float.
    pub(crate) fn from_str(s: &str) -> Option<i64> {
        let (negative, whole) = int_shape(s)?;
        let mut value: i128 = 0;
        for c in whole.bytes().filter(u8::is_ascii_digit) {
            value = value.checked_mul(10)?.checked_add(i128::from(c - b'0'))?;
        }
        i64::try_from(if negative { -value } else { value }).ok()
    }

    /// A string pydantic reads as an integer (see [`from_str`]): its sign and its digits (with `_`).
    fn int_shape(s: &str) -> Option<(bool, &str)> {
        let t = s.trim();
        let (negative, unsigned) = match t.as_bytes().first()? {
            b'-' => (true, t.get(1..)?),
            b'+' => (false, t.get(1..)?),
            _ => (false, t),
        };
        let (whole, fraction) = match unsigned.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (unsigned, None),
        };
        if fraction.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b == b'0')) {
            return None;
        }
        let b = whole.as_bytes();
        let well_formed = b.first().is_some_and(u8::is_ascii_digit)
            && b.last().is_some_and(u8::is_ascii_digit)
            && b.iter().all(|c| c.is_ascii_digit() || *c == b'_')
            && !whole.contains("__");
        well_formed.then_some((negative, whole))
    }

    pub(crate) fn describe(v: &Value) -> String {
        match v {
            Value::Number(n) => format!("the number {n}"),
            Value::String(s) => format!("the string {s:?}"),
            other => type_name(other).to_owned(),
        }
    }
}

/// pydantic-lax float: accepts ints, floats and numeric strings.
pub mod lax_float {
    use super::*;

    /// pydantic's float from a string (pydantic-core's `str_as_float`): what Rust's `f64` parser reads
    /// with surrounding whitespace trimmed (`" 2.5 "`, `"inf"`, `"nan"`, `"1e400"`); failing that, with
    /// single `_` between characters taken out of the untrimmed string (`"1_000.5"`, `"1e1_0"`, but
    /// not `" 1_000.5"`: whitespace and underscores together are refused).
    pub(crate) fn from_str(s: &str) -> Option<f64> {
        if let Ok(f) = s.trim().parse::<f64>() {
            return Some(f);
        }
        if !s.contains('_') || s.starts_with('_') || s.ends_with('_') || s.contains("__") {
            return None;
        }
        s.replace('_', "").parse::<f64>().ok()
    }

    /// Deserializes a lax float.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let v = value_from(d, Numbers::Raw)?;
        let f = match &v {
            // As pydantic: a number beyond f64's range is infinite (`1e400`), one with more digits
            // than Python reads is refused.
            // An integer literal is an int to pydantic, then a float: `-0` is 0.0, not -0.0.
            Value::Number(n) => check_number_digits(&v)
                .ok()
                .and_then(|()| n.as_str().parse::<f64>().ok())
                .map(|f| if f == 0.0 && is_integer_literal(n) { 0.0 } else { f }),
            Value::String(s) => from_str(s),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        };
        f.ok_or_else(|| D::Error::custom(format!("expected a number, got {}", lax_int::describe(&v))))
    }
}

/// A required key whose value may be `null` (pydantic `x: str | None` with no default).
pub mod required_nullable {
    use super::*;

    /// Deserializes `Option<T>`; use with `#[serde(deserialize_with)]` and no `default`,
    /// so a missing key is an error.
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
        Option::<T>::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    /// Free-form data from anywhere (here `serde_json::from_str`, as tool arguments are parsed) is
    /// written as Python writes it; reading never accepts a number Python cannot read.
    #[test]
    fn free_form_numbers_write_as_python_and_read_within_its_limits() {
        let mut msg = crate::Msg::user("u", "hi");
        msg.id = "m".into();
        msg.metadata =
            serde_json::from_str(r#"{"p":1.50,"q":1E2,"r":-0,"s":1e400,"t":12345678901234567890123,"u":[0.1]}"#)
                .unwrap();
        let json = crate::to_json(&msg);
        assert!(
            json.contains(r#""metadata":{"p":1.5,"q":100.0,"r":0,"s":null,"t":12345678901234567890123,"u":[0.1]}"#),
            "{json}"
        );
        // Written bytes read back to the same bytes.
        assert_eq!(crate::to_json(&crate::from_json::<crate::Msg>(&json).unwrap()), json);
        let with = |digits: usize| json.replace("12345678901234567890123", &format!("1{}", "0".repeat(digits - 1)));
        assert!(crate::from_json::<crate::Msg>(&with(4300)).is_ok());
        let e = crate::from_json::<crate::Msg>(&with(4301)).unwrap_err();
        assert!(e.to_string().contains("number out of range"), "{e}");
    }

    /// Each wire enum reads back what it writes, from the string only, with errors listing the strings.
    #[test]
    fn wire_enums_read_back_what_they_write_from_strings_only() {
        use crate::{BlockType, PermissionBehavior, PermissionMode, Role, ToolCallState, ToolResultState};
        fn check<T>(all: &[T])
        where
            T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
        {
            for v in all {
                let text = serde_json::to_string(v).unwrap();
                assert_eq!(&serde_json::from_str::<T>(&text).unwrap(), v, "{text}");
                assert_eq!(&crate::from_value::<T>(serde_json::from_str(&text).unwrap()).unwrap(), v, "{text}");
                let tagged = format!("{{{text}:null}}");
                let e = serde_json::from_str::<T>(&tagged).unwrap_err().to_string();
                assert!(e.starts_with("invalid type: map, expected one of `"), "{tagged}: {e}");
                assert!(e.contains(&text.replace('"', "`")), "{tagged}: {e}");
                assert!(crate::from_value::<T>(serde_json::from_str(&tagged).unwrap()).is_err(), "{tagged}");
            }
        }
        check(&[Role::User, Role::Assistant, Role::System]);
        check(&[
            BlockType::Text,
            BlockType::Thinking,
            BlockType::Hint,
            BlockType::ToolCall,
            BlockType::ToolResult,
            BlockType::Data,
        ]);
        check(&[
            ToolCallState::Pending,
            ToolCallState::Asking,
            ToolCallState::Allowed,
            ToolCallState::Submitted,
            ToolCallState::Finished,
        ]);
        check(&[
            ToolResultState::Success,
            ToolResultState::Error,
            ToolResultState::Interrupted,
            ToolResultState::Denied,
            ToolResultState::Running,
        ]);
        check(&[
            PermissionMode::Default,
            PermissionMode::AcceptEdits,
            PermissionMode::Explore,
            PermissionMode::Bypass,
            PermissionMode::DontAsk,
        ]);
        check(&[
            PermissionBehavior::Allow,
            PermissionBehavior::Deny,
            PermissionBehavior::Ask,
            PermissionBehavior::Passthrough,
        ]);
        let e = crate::from_json::<crate::Msg>(r#"{"name":"u","content":[],"role":"User"}"#).unwrap_err();
        assert_eq!(e.path(), "role");
        assert_eq!(e.message(), "unknown variant `User`, expected one of `user`, `assistant`, `system`");
        let e = crate::from_json::<crate::Msg>(r#"{"name":"u","content":[],"role":{"user":null}}"#).unwrap_err();
        assert_eq!(
            (e.path(), e.message()),
            ("role", "invalid type: map, expected one of `user`, `assistant`, `system`")
        );
    }

    #[test]
    fn urls_trim_like_whatwg() {
        assert_eq!(crate::normalize_url(" http://a.com/x \n").unwrap(), "http://a.com/x");
        assert_eq!(crate::normalize_url("http://a.com/x\u{7f}").unwrap(), "http://a.com/x%7F");
        assert!(crate::normalize_url(" \u{7f}http://a.com").is_err());
    }

    /// As pydantic reads them into `int` and `float` fields (checked against AgentScope 2.0.4).
    #[test]
    fn integer_literals_are_ints_like_python() {
        #[derive(serde::Deserialize)]
        struct I {
            #[serde(deserialize_with = "super::lax_int::deserialize")]
            x: i64,
        }
        #[derive(serde::Deserialize)]
        struct F {
            #[serde(deserialize_with = "super::lax_float::deserialize")]
            x: f64,
        }
        let int = |t: &str| serde_json::from_str::<I>(&format!(r#"{{"x":{t}}}"#)).map(|i| i.x).ok();
        let float = |t: &str| serde_json::from_str::<F>(&format!(r#"{{"x":{t}}}"#)).map(|f| f.x).ok();
        assert_eq!(int("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(int("-9223372036854775809"), None, "not clamped to i64::MIN");
        assert_eq!(int("-18446744073709551615"), None);
        assert_eq!(int("9223372036854775808"), None);
        assert_eq!(int("-9.223372036854775808e18"), Some(i64::MIN), "a float goes through float, as in pydantic");
        assert_eq!(int("3.0"), Some(3));
        assert!(float("-0").is_some_and(|f| f == 0.0 && f.is_sign_positive()), "int -0 is 0, then 0.0");
        assert!(float("-0.0").is_some_and(|f| f.is_sign_negative()), "a float -0.0 stays -0.0");
        assert!(float("-0e0").is_some_and(|f| f.is_sign_negative()));
    }

    #[test]
    fn lax_floats_out_of_range_are_infinite_like_pydantic() {
        #[derive(serde::Deserialize)]
        struct F {
            #[serde(deserialize_with = "super::lax_float::deserialize")]
            x: f64,
        }
        let read = |t: &str| serde_json::from_str::<F>(&format!(r#"{{"x":{t}}}"#)).map(|f| f.x);
        assert_eq!(read("1e400").unwrap(), f64::INFINITY);
        assert_eq!(read("-1e400").unwrap(), f64::NEG_INFINITY);
        assert_eq!(read(&format!("1{}", "0".repeat(399))).unwrap(), f64::INFINITY);
        assert_eq!(read("2.5").unwrap(), 2.5);
        assert!(read(&format!("1{}", "0".repeat(4300))).is_err(), "more digits than Python reads");
    }

    /// Each case as pydantic 2 (AgentScope 2.0.4's) reads it: `TypeAdapter(int).validate_python(s)`.
    #[test]
    fn integers_from_strings_like_pydantic() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1", Some(1)),
            ("+1", Some(1)),
            ("-1", Some(-1)),
            (" 7 ", Some(7)),
            ("\t5\n", Some(5)),
            ("1.0", Some(1)),
            ("1.00", Some(1)),
            ("1_000", Some(1000)),
            ("1_000.0", Some(1000)),
            ("00012", Some(12)),
            ("-0", Some(0)),
            ("1.", None),
            ("-1.", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("1e3", None),
            ("0x10", None),
            ("1.0_0", None),
            ("１２", None),
            ("1.5", None),
            ("", None),
            ("-", None),
            // pydantic keeps it (Python ints are unbounded); an i64 field cannot.
            ("9223372036854775808", None),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            // Unlike a float, an integer is trimmed before its underscores are looked at.
            (" 1_0 ", Some(10)),
            ("\t1_0", Some(10)),
            ("1_0\n", Some(10)),
            ("\u{a0}-1_0\u{a0}", Some(-10)),
            (" +1_0 ", Some(10)),
            (" 1_000.0 ", Some(1000)),
            ("1_0.0_0", None),
            ("1 _0", None),
            ("\u{1c}1", None),
        ];
        for (s, want) in cases {
            assert_eq!(super::lax_int::from_str(s), *want, "{s:?}");
        }
        let floats = [(9.2e18, Some(9_200_000_000_000_000_000)), (9.3e18, None), (2f64.powi(63), None), (1.0, Some(1))];
        for (f, want) in floats {
            assert_eq!(super::lax_int::coerce(&serde_json::json!(f)), want, "{f}");
        }
    }

    /// `TypeAdapter(float).validate_python(s)`.
    #[test]
    fn floats_from_strings_like_pydantic() {
        let cases: &[(&str, Option<f64>)] = &[
            ("1_000.5", Some(1000.5)),
            ("1_0", Some(10.0)),
            ("1e1_0", Some(1e10)),
            ("1_.5", Some(1.5)),
            ("1._5", Some(1.5)),
            (" 2.5 ", Some(2.5)),
            ("1e400", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("0x1p3", None),
            // Underscores are taken out of the untrimmed string: with whitespace around, they fail.
            ("1_0000.5", Some(10000.5)),
            (" 1_0000.5", None),
            ("1_0000.5 ", None),
            ("\u{a0}1_0000.5", None),
            ("\t1_0", None),
            (" 1e1_0", None),
            (" -1_0", None),
            (" 1_.5", None),
            ("\u{a0}2.5", Some(2.5)),
            ("2.5\u{2028}", Some(2.5)),
            ("\u{3000} 1.5", Some(1.5)),
            ("\u{1c}1.5", None),
            // What Rust's `f64` parser reads once the underscores are out, as pydantic-core (Rust) does.
            ("in_f", Some(f64::INFINITY)),
            ("1_e5", Some(1e5)),
            ("1e_5", Some(1e5)),
            ("1_0._0", Some(10.0)),
            ("+inf", Some(f64::INFINITY)),
            ("infinity", Some(f64::INFINITY)),
            ("nan_", None),
            ("_", None),
            ("", None),
            ("  ", None),
            ("1 _0", None),
            ("1_ 0", None),
        ];
        for (s, want) in cases {
            assert_eq!(super::lax_float::from_str(s), *want, "{s:?}");
        }
        for s in ["n_an", "-nan", " NaN "] {
            assert!(super::lax_float::from_str(s).is_some_and(f64::is_nan), "{s:?}");
        }
        assert!(super::lax_float::from_str("nan").is_some_and(f64::is_nan));
    }

    #[test]
    fn documents_are_read_as_deep_as_agentscope_2_0_4_reads_them() {
        use crate::{JsonMap, MAX_JSON_DEPTH, from_json, to_json};
        // `{"a":[[…]]}` with `arrays` arrays, the innermost `leaf`: pydantic (jiter) reads 200 levels of
        // non-empty containers, an empty one below them adding none (measured with 2.0.4).
        let doc = |arrays: usize, leaf: &str| format!("{{\"a\":{}{leaf}{}}}", "[".repeat(arrays), "]".repeat(arrays));
        // On a thread with a tokio worker's stack (2 MiB): the deep read is recursive.
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                for (arrays, leaf) in [(127, ""), (150, "1"), (199, "1"), (200, ""), (199, "{}")] {
                    let v: JsonMap = from_json(&doc(arrays, leaf)).unwrap_or_else(|e| panic!("{arrays}: {e}"));
                    assert_eq!(to_json(&v), doc(arrays, leaf));
                }
                for (arrays, leaf) in [(200, "1"), (201, ""), (1_000_000, "")] {
                    let e = from_json::<JsonMap>(&doc(arrays, leaf)).unwrap_err();
                    assert!(e.to_string().contains("recursion limit"), "{arrays}: {e}");
                }
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(MAX_JSON_DEPTH, 200);
    }
}
