//! A compact JSON writer for serde, byte-identical to `serde_json::to_string` (compact formatter,
//! `arbitrary_precision` numbers) but faster on the text-heavy documents agents store: strings are
//! scanned for characters to escape eight bytes at a time and copied in runs.
//!
//! Anything it does not support (non-string map keys other than integers, `f32`) makes it fail,
//! and [`crate::to_json`] then falls back to `serde_json`, so output is always `serde_json`'s.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::ser::{self, Serialize};

/// serde_json's private marker for an `arbitrary_precision` number (a struct with one field holding the digits).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";
/// serde_json's private marker for a `RawValue`.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Why the fast writer declined; the caller falls back to `serde_json`.
#[derive(Debug)]
pub(crate) struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

type Result<T = (), E = Unsupported> = std::result::Result<T, E>;

/// Writes `value` as compact JSON, or fails when a construct is not supported.
pub(crate) fn write<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Result<String> {
    let mut w = Writer { out: String::with_capacity(capacity) };
    value.serialize(&mut w)?;
    Ok(w.out)
}

/// Appends `value` to `out` with the fast writer, or with `serde_json` when it declines.
pub(crate) fn write_into<T: Serialize + ?Sized>(out: &mut String, value: &T) {
    let start = out.len();
    let mut w = Writer { out: std::mem::take(out) };
    match value.serialize(&mut w) {
        Ok(()) => *out = w.out,
        Err(_) => {
            w.out.truncate(start);
            *out = w.out;
            // Our wire types always serialize; anything else that fails writes nothing, as `to_json` does.
            out.push_str(&serde_json::to_string(value).unwrap_or_default());
        }
    }
}

pub(crate) struct Writer {
    out: String,
}

const HEX: &[u8; 16] = b"0123456789abcdef";
/// For each byte: 0 when it is written as is, else the character after the backslash
/// (`u` for the `\u00XX` form).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = b'u';
        i += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

#[inline]
fn write_escape(out: &mut String, byte: u8, short: u8) {
    out.push('\\');
    out.push(char::from(short));
    if short == b'u' {
        out.push_str("00");
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
}

/// True when no byte of `bytes` must be escaped.
#[inline]
fn is_clean(bytes: &[u8]) -> bool {
    crate::read::scan_plain(bytes, 0) == bytes.len()
}

/// Writes a JSON string literal with serde_json's escaping (raw UTF-8, `\u00XX` lowercase for other controls).
#[inline]
pub(crate) fn write_str(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    let first = crate::read::scan_plain(bytes, 0);
    if first == bytes.len() {
        out.push_str(s);
    } else {
        write_escaped(out, s, first);
    }
    out.push('"');
}

/// The body of a string whose first byte to escape is at `first`: clean runs (found a word at a
/// time) are copied whole, each byte to escape is written as its escape.
#[cold]
fn write_escaped(out: &mut String, s: &str, first: usize) {
    let bytes = s.as_bytes();
    let (mut start, mut i) = (0, first);
    while let Some(&byte) = bytes.get(i) {
        // `start` and `i` sit on ASCII bytes (or the ends), so both are char boundaries.
        out.push_str(s.get(start..i).unwrap_or_default());
        write_escape(out, byte, ESCAPE[usize::from(byte)]);
        start = i + 1;
        i = crate::read::scan_plain(bytes, start);
    }
    out.push_str(s.get(start..).unwrap_or_default());
}

/// Struct field names already checked clean, by address and length. Field names are
/// `&'static str` (immutable for the whole run), so one check per name is enough; a slot holds
/// `address << 16 | length` and a collision only costs a re-check.
static CLEAN_KEYS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

#[inline]
fn key_is_clean(key: &'static str) -> bool {
    let addr = key.as_ptr() as usize as u64;
    let len = key.len() as u64;
    if addr >> 48 != 0 || len >> 16 != 0 {
        return is_clean(key.as_bytes());
    }
    let tag = addr << 16 | len;
    let slot = &CLEAN_KEYS[((addr >> 3 ^ len) & 63) as usize];
    if slot.load(Ordering::Relaxed) == tag {
        return true;
    }
    let clean = is_clean(key.as_bytes());
    if clean {
        slot.store(tag, Ordering::Relaxed);
    }
    clean
}

/// Writes `"key":` for a struct field.
#[inline]
fn write_key(out: &mut String, key: &'static str) {
    if key_is_clean(key) {
        out.reserve(key.len() + 3);
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
    } else {
        write_str(out, key);
        out.push(':');
    }
}

/// Writes an integer in decimal (the digits `itoa`, and so serde_json, writes).
#[inline]
fn write_int<I: itoa::Integer>(out: &mut String, n: I) {
    out.push_str(itoa::Buffer::new().format(n));
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result {
        write_int(&mut self.out, v);
        Ok(())
    }
    fn serialize_f32(self, _v: f32) -> Result {
        Err(Unsupported("f32".into()))
    }
    fn serialize_f64(self, v: f64) -> Result {
        // serde_json's own shortest round-trip form (`1e-7`, `1e+16`, `25000.0`), `null` when not finite.
        match serde_json::Number::from_f64(v) {
            Some(n) => self.out.push_str(n.as_str()),
            None => self.out.push_str("null"),
        }
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result {
        write_str(&mut self.out, v.encode_utf8(&mut [0u8; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result {
        write_str(&mut self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        use ser::SerializeSeq as _;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result {
        if name == crate::wire::DONE_TOKEN {
            // A hand-written value has already written itself (see `serialize_newtype_struct`).
            return Ok(());
        }
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result {
        if name == crate::wire::FAST_TOKEN {
            // `value` is an `as_message::serialize_fast` wrapper: lend it the buffer, it appends its
            // hand-written bytes and answers with the done token.
            crate::wire::lend(std::mem::take(&mut self.out));
            let result = value.serialize(&mut *self);
            if let Some(mut out) = crate::wire::take_back() {
                // Empty unless the value did not take the buffer.
                out.push_str(&self.out);
                self.out = out;
            }
            return result;
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.out.push('{');
        write_str(&mut self.out, variant);
        self.out.push(':');
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>> {
        self.out.push('[');
        Ok(Compound { w: self, first: true, close: "]", raw: false })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        self.out.push('{');
        write_str(&mut self.out, variant);
        self.out.push_str(":[");
        Ok(Compound { w: self, first: true, close: "]}", raw: false })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>> {
        self.out.push('{');
        Ok(Compound { w: self, first: true, close: "}", raw: false })
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a>> {
        if name == NUMBER_TOKEN {
            return Ok(Compound { w: self, first: true, close: "", raw: true });
        }
        if name == RAW_TOKEN {
            return Err(Unsupported("raw value".into()));
        }
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        self.out.push('{');
        write_str(&mut self.out, variant);
        self.out.push_str(":{");
        Ok(Compound { w: self, first: true, close: "}}", raw: false })
    }
}

/// An array, object or (for `raw`) an arbitrary-precision number being written.
pub(crate) struct Compound<'a> {
    w: &'a mut Writer,
    first: bool,
    close: &'static str,
    raw: bool,
}

impl Compound<'_> {
    #[inline]
    fn comma(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.w.out.push(',');
        }
    }

    #[inline]
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        if self.raw {
            return value.serialize(RawNumber(&mut self.w.out));
        }
        self.comma();
        write_key(&mut self.w.out, key);
        value.serialize(&mut *self.w)
    }

    fn finish(self) -> Result {
        self.w.out.push_str(self.close);
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.comma();
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.comma();
        key.serialize(MapKey(&mut self.w.out))
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.w.out.push(':');
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.field(key, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.field(key, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

/// Writes the digits of an arbitrary-precision number verbatim.
struct RawNumber<'a>(&'a mut String);

/// Writes a map key: strings as they are, integers quoted (as serde_json does); anything else is unsupported.
struct MapKey<'a>(&'a mut String);

macro_rules! unsupported {
    ($($name:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $name(self, $(_: $arg),*) -> Result { Err(Unsupported(concat!("unsupported ", stringify!($name)).into())) })*
    };
}

macro_rules! unsupported_compound {
    () => {
        type SerializeSeq = ser::Impossible<(), Unsupported>;
        type SerializeTuple = ser::Impossible<(), Unsupported>;
        type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
        type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
        type SerializeMap = ser::Impossible<(), Unsupported>;
        type SerializeStruct = ser::Impossible<(), Unsupported>;
        type SerializeStructVariant = ser::Impossible<(), Unsupported>;
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result {
            Err(Unsupported("option".into()))
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Result {
            Err(Unsupported("newtype".into()))
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result {
            Err(Unsupported("newtype variant".into()))
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
            Err(Unsupported("seq".into()))
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
            Err(Unsupported("tuple".into()))
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct> {
            Err(Unsupported("tuple struct".into()))
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant> {
            Err(Unsupported("tuple variant".into()))
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
            Err(Unsupported("map".into()))
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
            Err(Unsupported("struct".into()))
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant> {
            Err(Unsupported("struct variant".into()))
        }
    };
}

impl ser::Serializer for RawNumber<'_> {
    type Ok = ();
    type Error = Unsupported;
    unsupported_compound!();
    unsupported!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    );
    // A number's text as Python would write it (`1.50` → `1.5`, `1E2` → `100.0`, `-0` → `0`),
    // whatever built the map (a `serde_json::from_str` of tool arguments keeps the raw text).
    fn serialize_str(self, v: &str) -> Result {
        self.0.push_str(&crate::json::canonical_number_text(v));
        Ok(())
    }
}

impl ser::Serializer for MapKey<'_> {
    type Ok = ();
    type Error = Unsupported;
    unsupported_compound!();
    unsupported!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
    );
    fn serialize_str(self, v: &str) -> Result {
        write_str(self.0, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result {
        write_str(self.0, v.encode_utf8(&mut [0u8; 4]));
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        write_str(self.0, variant);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result {
        quoted(self.0, v)
    }
    fn serialize_i16(self, v: i16) -> Result {
        quoted(self.0, v)
    }
    fn serialize_i32(self, v: i32) -> Result {
        quoted(self.0, v)
    }
    fn serialize_i64(self, v: i64) -> Result {
        quoted(self.0, v)
    }
    fn serialize_u8(self, v: u8) -> Result {
        quoted(self.0, v)
    }
    fn serialize_u16(self, v: u16) -> Result {
        quoted(self.0, v)
    }
    fn serialize_u32(self, v: u32) -> Result {
        quoted(self.0, v)
    }
    fn serialize_u64(self, v: u64) -> Result {
        quoted(self.0, v)
    }
}

fn quoted<I: itoa::Integer>(out: &mut String, n: I) -> Result {
    out.push('"');
    write_int(out, n);
    out.push('"');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &str) {
        let mut ours = String::new();
        write_str(&mut ours, s);
        assert_eq!(ours, serde_json::to_string(s).unwrap(), "{s:?}");
    }

    #[test]
    fn strings_escape_like_serde_json() {
        let all_ascii: String = (0u8..128).map(char::from).collect();
        check(&all_ascii);
        check("");
        check("plain text that is longer than eight bytes");
        check("\"quoted\" and \\back\\slashes\\ at chunk edges\"");
        check("ünïcødé ✓ 😀 \u{2028}\u{2029}\u{7f}");
        for i in 0..20 {
            check(&format!("{}\n{}", "x".repeat(i), "y".repeat(i)));
            check(&format!("{}\u{1}", "é".repeat(i)));
        }
    }

    #[test]
    fn values_write_like_serde_json() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"a":[1,-2,1.5,1e-7,1e16,-0.0,9007199254740993,1180591620717411303424,true,false,null],"b":{"c":"d\n"},"":{}}"#,
        )
        .unwrap();
        let ours = write(&v, 0).unwrap();
        assert_eq!(ours, serde_json::to_string(&v).unwrap());
        let mut m = std::collections::BTreeMap::new();
        m.insert(3u32, f64::NAN);
        assert_eq!(write(&m, 0).unwrap(), serde_json::to_string(&m).unwrap());
        assert!(write(&1.5f32, 0).is_err(), "f32 falls back to serde_json");
    }
}
