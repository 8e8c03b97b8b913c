//! A fast reader for the canonical JSON form (what [`crate::to_json`] and pydantic's `model_dump_json`
//! write: compact, declaration field order, no whitespace), with exact fallback to the serde readers.
//!
//! A [`Cursor`] walks the text with a few primitives (literals, strings, integers, free-form values) and
//! hands any subtree it does not read by hand to serde ([`Cursor::serde`]), so every value it returns is
//! the value [`crate::from_json`] returns for the same text. Reading never reports errors: every method
//! returns `None` ("declined") on anything unexpected, and the caller then reads the whole document with
//! [`crate::from_json`], which produces the value or the exact error.
//!
//! Free-form JSON (metadata, `middle_context`, thinking extras) is read by [`Cursor::value`] on every
//! path (the serde impls read such values from their text with it too): serde_json's own `Value`
//! reader takes an object with one of its private marker keys (`$serde_json::private::Number`) for a
//! number, where Python keeps an ordinary dict.
//!
//! [`msg`] and [`content_block`] read the canonical shapes of [`Msg`] and [`ContentBlock`] by hand; an
//! object whose keys are not exactly the canonical sequence is re-read from its start by its own serde
//! `Deserialize` impl (a *local fallback*, counted by [`Cursor::fallbacks`]), so uncommon shapes stay correct.
//!
//! ```
//! use as_message::{Msg, read::{Cursor, msg}};
//!
//! let json = as_message::to_json(&Msg::user("alice", "héllo \"there\""));
//! let mut cursor = Cursor::new(&json);
//! let read = msg(&mut cursor).expect("canonical input is read");
//! assert!(cursor.is_at_end());
//! assert_eq!(cursor.fallbacks(), 0);
//! assert_eq!(read, as_message::from_json::<Msg>(&json)?);
//!
//! // Another key order: read by serde, same value.
//! let mut cursor = Cursor::new(r#"{"role":"user","name":"bob","content":[],"id":"m1","created_at":"t"}"#);
//! let read = msg(&mut cursor).expect("valid input is read");
//! assert_eq!((read.name.as_str(), cursor.fallbacks()), ("bob", 1));
//! # Ok::<(), as_message::MessageError>(())
//! ```

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::block::{
    ContentBlock, TextBlock, TextOrBlocks, ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState,
};
use crate::json::JsonMap;
use crate::msg::{Msg, Role, Usage};

mod value;
pub(crate) use value::{Numbers, ValueError};

/// The deepest nesting [`Cursor::value`] reads: [`crate::MAX_JSON_DEPTH`] less the 8 levels the
/// hand-written readers can be inside (record, state, context, message, content, block, ...), so a
/// value it reads is never deeper than the whole-document read ([`crate::from_json`]) allows.
const CURSOR_VALUE_DEPTH: usize = crate::MAX_JSON_DEPTH - 8;

/// The deepest free-form value a serde read limited to serde_json's 128 levels reads inside
/// ([`Cursor::serde`], the first try of [`crate::from_json`]): with the 8 levels a hand-written reader
/// can be inside, never deeper than [`crate::MAX_JSON_DEPTH`] in all. A deeper one fails that read,
/// and the whole-document read decides.
pub(crate) const SERDE_SUBTREE_DEPTH: usize = crate::MAX_JSON_DEPTH - 128 - 8;

/// Reads `text` as exactly one JSON value (whitespace around it allowed) with the free-form reader
/// of [`Cursor::value`], numbers as `numbers` says, at most `max_depth` levels deep.
pub(crate) fn parse_value(text: &str, numbers: Numbers, max_depth: usize) -> Result<Value, ValueError> {
    let mut c = Cursor::new(text);
    let v = value::read(&mut c, numbers, max_depth)?;
    if c.is_at_end() { Ok(v) } else { Err(ValueError::Syntax) }
}

/// A position in JSON text, with reading primitives that decline (`None`) on anything unexpected.
///
/// A declined read may leave the position anywhere; restore it with [`Cursor::set_position`].
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    fallbacks: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Self { text, pos: 0, fallbacks: 0 }
    }

    /// The byte offset of the cursor.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Moves the cursor to byte offset `pos` (an offset it was at before).
    pub fn set_position(&mut self, pos: usize) {
        self.pos = pos.min(self.text.len());
    }

    /// The text after the cursor.
    pub fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    /// The next byte, if any.
    pub fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// How many objects were re-read by serde because their keys were not the canonical sequence.
    pub fn fallbacks(&self) -> usize {
        self.fallbacks
    }

    /// Counts one local fallback (for readers built on the cursor in other crates).
    pub fn count_fallback(&mut self) {
        self.fallbacks += 1;
    }

    /// Whether only JSON whitespace is left (what serde_json accepts after a document).
    pub fn is_at_end(&self) -> bool {
        self.rest().bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    }

    /// Consumes `literal` if the text continues with exactly it; otherwise consumes nothing.
    // Always inlined: with the literal's length known, the comparison is a few loads instead of a memcmp call.
    #[inline(always)]
    pub fn eat(&mut self, literal: &str) -> bool {
        let end = self.pos + literal.len();
        if self.text.as_bytes().get(self.pos..end) == Some(literal.as_bytes()) {
            self.pos = end;
            true
        } else {
            false
        }
    }

    /// [`Cursor::eat`] as an `Option`, for `?`.
    #[inline(always)]
    pub fn expect(&mut self, literal: &str) -> Option<()> {
        self.eat(literal).then_some(())
    }

    /// Reads a JSON string, decoding escapes exactly as serde_json does. Declines on a raw control
    /// character, an invalid escape, a lone surrogate or a missing closing quote.
    #[inline]
    pub fn string(&mut self) -> Option<String> {
        let bytes = self.text.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let start = self.pos + 1;
        let end = scan_plain(bytes, start);
        match bytes.get(end)? {
            b'"' => {
                let s = self.text.get(start..end)?.to_owned();
                self.pos = end + 1;
                Some(s)
            }
            b'\\' => self.string_with_escapes(start, end),
            _ => None,
        }
    }

    /// The rest of a string that has an escape at `first_escape`.
    #[cold]
    fn string_with_escapes(&mut self, start: usize, first_escape: usize) -> Option<String> {
        let bytes = self.text.as_bytes();
        // Find the closing quote first: the decoded string is never longer than its escaped form,
        // so one allocation of that size holds it.
        let mut end = first_escape;
        loop {
            match bytes.get(end)? {
                b'"' => break,
                b'\\' => end = scan_plain(bytes, end + 2),
                _ => return None,
            }
        }
        let mut out = String::with_capacity(end - start);
        out.push_str(self.text.get(start..first_escape)?);
        let mut i = first_escape;
        loop {
            match bytes.get(i)? {
                b'"' => {
                    self.pos = i + 1;
                    return Some(out);
                }
                b'\\' => {
                    let esc = *bytes.get(i + 1)?;
                    i += 2;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = hex4(bytes, i)?;
                            i += 4;
                            let code = match hi {
                                0xD800..=0xDBFF => {
                                    if bytes.get(i) != Some(&b'\\') || bytes.get(i + 1) != Some(&b'u') {
                                        return None;
                                    }
                                    let lo = hex4(bytes, i + 2)?;
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return None;
                                    }
                                    i += 6;
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                }
                                0xDC00..=0xDFFF => return None,
                                _ => hi,
                            };
                            out.push(char::from_u32(code)?);
                        }
                        _ => return None,
                    }
                }
                _ => {
                    let end = scan_plain(bytes, i);
                    if end == i {
                        // A raw control character.
                        return None;
                    }
                    out.push_str(self.text.get(i..end)?);
                    i = end;
                }
            }
        }
    }

    /// Reads `null` (as `None`) or a string.
    #[inline]
    pub fn null_or_string(&mut self) -> Option<Option<String>> {
        if self.eat("null") { Some(None) } else { self.string().map(Some) }
    }

    /// Reads a plain JSON integer (`-?(0|[1-9][0-9]*)`) that fits an `i64`. Declines on fractions,
    /// exponents, leading zeros and overflow.
    #[inline]
    pub fn int(&mut self) -> Option<i64> {
        let bytes = self.text.as_bytes();
        let mut i = self.pos;
        let negative = bytes.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let digits_start = i;
        let mut value: i64 = 0;
        while let Some(d) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            let d = i64::from(d - b'0');
            value = value.checked_mul(10)?;
            value = if negative { value.checked_sub(d)? } else { value.checked_add(d)? };
            i += 1;
        }
        let digits = i - digits_start;
        if digits == 0 || (digits > 1 && bytes.get(digits_start) == Some(&b'0')) {
            return None;
        }
        if matches!(bytes.get(i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.pos = i;
        Some(value)
    }

    /// Reads one value of `T` with its serde `Deserialize` impl (serde_json semantics exactly) and
    /// moves past it. Declines when serde fails, a subtree nested past serde_json's 128 levels
    /// included: the whole-document read ([`crate::from_json`], up to [`crate::MAX_JSON_DEPTH`])
    /// then decides. Whatever this accepts, that read accepts too: the hand-written readers hand
    /// subtrees to serde at most 8 levels deep, serde_json reads at most 128 more, and free-form
    /// values inside are read here at most 64 levels deep (8 + 128 + 64 = 200).
    pub fn serde<T: DeserializeOwned>(&mut self) -> Option<T> {
        let rest = self.rest();
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = crate::json::with_subtree_depth(SERDE_SUBTREE_DEPTH, || stream.next())?.ok()?;
        self.pos += stream.byte_offset();
        Some(value)
    }

    /// Reads a free-form object as [`crate::free_form::deserialize`] does (numbers canonicalised,
    /// a duplicate key's last value in its first position); `{}` and flat objects are read directly.
    #[inline]
    pub fn free_form(&mut self) -> Option<JsonMap> {
        if self.eat("{}") {
            return Some(JsonMap::new());
        }
        let start = self.pos;
        if let Some(map) = self.flat_map() {
            return Some(map);
        }
        self.set_position(start);
        match self.value()? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// Reads one free-form JSON value from the text itself, as Python reads it and pydantic writes it
    /// back: numbers canonicalised (see [`crate::canonicalize_numbers`]), a duplicate key's last value
    /// in its first position (a Python dict), and an object with one of serde_json's private marker
    /// keys (`$serde_json::private::Number`, `…RawValue`) kept as the object it is (serde_json's own
    /// `Value` reader takes it for a number or raw JSON). Whitespace between tokens is allowed, and
    /// Python's `NaN`, `Infinity` and `-Infinity` are read as `null` (what pydantic writes for them).
    ///
    /// Declines (the position is then unspecified) on invalid JSON, a number with more than
    /// [`crate::MAX_NUMBER_DIGITS`] integer digits, or more than 192 levels of non-empty arrays and
    /// objects ([`crate::MAX_JSON_DEPTH`] less what the readers of a state or record can be inside):
    /// the whole-document read ([`crate::from_json`]) then decides.
    ///
    /// ```
    /// let mut c = as_message::read::Cursor::new(r#"{"$serde_json::private::Number":"1","x":1.50}"#);
    /// let v = c.value().expect("valid JSON");
    /// assert_eq!(serde_json::to_string(&v)?, r#"{"$serde_json::private::Number":"1","x":1.5}"#);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn value(&mut self) -> Option<Value> {
        value::read(self, Numbers::Canonical, CURSOR_VALUE_DEPTH).ok()
    }

    /// Skips JSON whitespace.
    #[inline]
    pub(crate) fn skip_whitespace(&mut self) {
        let bytes = self.text.as_bytes();
        while bytes.get(self.pos).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// A non-empty object of distinct keys whose values are strings, plain integers, booleans or
    /// `null` (already canonical: `-0` reads as `0`, as canonicalisation makes it).
    fn flat_map(&mut self) -> Option<JsonMap> {
        self.expect("{")?;
        let mut map = JsonMap::new();
        loop {
            let key = self.string()?;
            self.expect(":")?;
            let value = match self.peek()? {
                b'"' => Value::String(self.string()?),
                b'n' => self.expect("null").map(|()| Value::Null)?,
                b't' => self.expect("true").map(|()| Value::Bool(true))?,
                b'f' => self.expect("false").map(|()| Value::Bool(false))?,
                _ => Value::from(self.int()?),
            };
            if map.insert(key, value).is_some() {
                return None;
            }
            if self.eat("}") {
                return Some(map);
            }
            self.expect(",")?;
        }
    }

    /// Reads a JSON array whose items `item` reads, `[]` included.
    #[inline]
    pub fn array<T>(&mut self, item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.array_with_capacity(0, item)
    }

    /// [`Cursor::array`] with room for `capacity` items reserved up front.
    #[inline]
    pub fn array_with_capacity<T>(
        &mut self,
        capacity: usize,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.expect("[")?;
        let mut out = Vec::new();
        if self.eat("]") {
            return Some(out);
        }
        out.reserve(capacity);
        loop {
            out.push(item(self)?);
            if !self.eat(",") {
                self.expect("]")?;
                return Some(out);
            }
        }
    }

    /// Reads an object with `fast`; when that declines, re-reads it from where it started with `T`'s
    /// serde impl and counts a local fallback.
    #[inline]
    pub fn or_serde<T: DeserializeOwned>(&mut self, fast: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let start = self.pos;
        if let Some(v) = fast(self) {
            return Some(v);
        }
        self.set_position(start);
        self.fallbacks += 1;
        self.serde::<T>()
    }
}

/// Bit 7 of byte k is set when byte k of the little-endian word `v` is `"`, `\\` or below 0x20, or
/// (borrow) lies above such a byte. So the lowest flagged byte is exactly the first special one.
#[inline]
fn special_bytes(v: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let quote = v ^ (ONES * u64::from(b'"'));
    let backslash = v ^ (ONES * u64::from(b'\\'));
    ((quote.wrapping_sub(ONES) & !quote)
        | (backslash.wrapping_sub(ONES) & !backslash)
        | (v.wrapping_sub(ONES * 0x20) & !v))
        & HIGH
}

/// The bytes of `b` (shorter than a word) as a little-endian word, padded with spaces: at most
/// three loads, no per-byte loop.
#[inline]
fn short_word(b: &[u8]) -> u64 {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let len = b.len();
    let word = if len >= 4 {
        let lo = b.first_chunk::<4>().map_or(0, |c| u32::from_le_bytes(*c));
        let hi = b.last_chunk::<4>().map_or(0, |c| u32::from_le_bytes(*c));
        u64::from(lo) | u64::from(hi) << (8 * (len - 4))
    } else if let (Some(&a), Some(&m), Some(&z)) = (b.first(), b.get(len / 2), b.last()) {
        u64::from(a) | u64::from(m) << (8 * (len / 2)) | u64::from(z) << (8 * (len - 1))
    } else {
        0
    };
    // `len < 8`, so the shift is in range.
    word | SPACES.checked_shl(8 * len as u32).unwrap_or(0)
}

/// The offset of the first `"`, `\` or control character at or after `i` (or the end): the bytes
/// a JSON string cannot hold raw (the reader stops there, the writer escapes them).
///
/// Whole words only: the bytes after the last full word are read as one word, overlapping the
/// word before it when there is one (those bytes were just found clean, so they flag nothing), or
/// padded with spaces.
#[inline]
pub(crate) fn scan_plain(bytes: &[u8], i: usize) -> usize {
    let rest = bytes.get(i..).unwrap_or_default();
    let (chunks, tail) = rest.as_chunks::<8>();
    let mut at = i;
    for chunk in chunks {
        let special = special_bytes(u64::from_le_bytes(*chunk));
        if special != 0 {
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    if tail.is_empty() {
        return at;
    }
    let (base, word) = match rest.last_chunk::<8>() {
        Some(last) => (bytes.len() - 8, u64::from_le_bytes(*last)),
        None => (at, short_word(tail)),
    };
    let special = special_bytes(word);
    if special == 0 { bytes.len() } else { base + (special.trailing_zeros() / 8) as usize }
}

fn hex4(bytes: &[u8], i: usize) -> Option<u32> {
    let digits = bytes.get(i..i + 4)?;
    let mut v = 0u32;
    for &d in digits {
        v = v * 16 + char::from(d).to_digit(16)?;
    }
    Some(v)
}

/// The deepest nesting of *non-empty* arrays and objects in a JSON text, as pydantic's parser
/// counts it for its recursion limit (an empty `[]` or `{}` adds no level; brackets inside strings
/// are not counted).
pub(crate) fn python_depth(json: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    let mut open: Vec<bool> = Vec::new(); // per open container: whether it counted as a level
    for (i, &b) in json.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let counts =
                    json.get(i + 1..).and_then(|rest| rest.iter().find(|c| !c.is_ascii_whitespace())) != Some(&close);
                open.push(counts);
                if counts {
                    depth += 1;
                    max = max.max(depth);
                }
            }
            b'}' | b']' if open.pop() == Some(true) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Reads a whole document with `read` (a hand-written reader of the canonical form) and, when it
/// declines or leaves anything but whitespace, with [`crate::from_json`]: the same value, or the same
/// error, as `from_json::<T>(text)`.
///
/// ```
/// use as_message::read::{fast_or_from_json, msg};
/// let json = as_message::to_json(&as_message::Msg::user("alice", "hi"));
/// assert_eq!(fast_or_from_json(&json, msg)?, as_message::from_json(&json)?);
/// assert!(fast_or_from_json("{}", msg).is_err());
/// # Ok::<(), as_message::MessageError>(())
/// ```
pub fn fast_or_from_json<T: DeserializeOwned>(
    text: &str,
    read: impl FnOnce(&mut Cursor<'_>) -> Option<T>,
) -> Result<T, crate::MessageError> {
    let mut cursor = Cursor::new(text);
    if let Some(value) = read(&mut cursor)
        && cursor.is_at_end()
    {
        return Ok(value);
    }
    crate::from_json(text)
}

/// Reads a [`Msg`] in its canonical form
/// `{"name":…,"content":[…],"role":…,"id":…,"metadata":{…},"created_at":…,"finished_at":…,"usage":…}`,
/// or, when its keys differ, with `Msg`'s serde impl. The role rules are checked as serde checks them.
pub fn msg(c: &mut Cursor<'_>) -> Option<Msg> {
    c.or_serde(msg_canonical)
}

fn msg_canonical(c: &mut Cursor<'_>) -> Option<Msg> {
    c.expect(r#"{"name":"#)?;
    let name = c.string()?;
    c.expect(r#","content":"#)?;
    let content = c.array(content_block)?;
    c.expect(r#","role":"#)?;
    let role = role(c)?;
    c.expect(r#","id":"#)?;
    let id = c.string()?;
    c.expect(r#","metadata":"#)?;
    let metadata = c.free_form()?;
    c.expect(r#","created_at":"#)?;
    let created_at = c.string()?;
    c.expect(r#","finished_at":"#)?;
    let finished_at = c.null_or_string()?;
    c.expect(r#","usage":"#)?;
    let usage = if c.eat("null") {
        None
    } else {
        c.expect(r#"{"input_tokens":"#)?;
        let input_tokens = c.int()?;
        c.expect(r#","output_tokens":"#)?;
        let output_tokens = c.int()?;
        c.expect("}")?;
        Some(Usage { input_tokens, output_tokens })
    };
    c.expect("}")?;
    let msg = Msg { name, content, role, id, metadata, created_at, finished_at, usage };
    msg.check_role().ok()?;
    Some(msg)
}

fn role(c: &mut Cursor<'_>) -> Option<Role> {
    const ROLES: [(&str, Role); 3] =
        [("\"assistant\"", Role::Assistant), ("\"user\"", Role::User), ("\"system\"", Role::System)];
    enum_value(c, &ROLES)
}

/// Reads a [`ContentBlock`]: text, tool_call and tool_result blocks in their canonical forms by hand,
/// thinking, hint and data blocks (and any non-canonical block) with `ContentBlock`'s serde impl.
/// Only non-canonical text, tool_call and tool_result blocks (or untyped ones) count as fallbacks.
pub fn content_block(c: &mut Cursor<'_>) -> Option<ContentBlock> {
    let start = c.position();
    let fast = if c.eat(r#"{"type":"text","text":"#) {
        text_rest(c)
    } else if c.eat(r#"{"type":"tool_call","id":"#) {
        tool_call_rest(c)
    } else if c.eat(r#"{"type":"tool_result","id":"#) {
        tool_result_rest(c)
    } else {
        let rest = c.rest();
        if !(rest.starts_with(r#"{"type":"thinking""#)
            || rest.starts_with(r#"{"type":"hint""#)
            || rest.starts_with(r#"{"type":"data""#))
        {
            c.count_fallback();
        }
        return c.serde::<ContentBlock>();
    };
    if fast.is_some() {
        return fast;
    }
    c.set_position(start);
    c.count_fallback();
    c.serde::<ContentBlock>()
}

fn text_rest(c: &mut Cursor<'_>) -> Option<ContentBlock> {
    let text = c.string()?;
    c.expect(r#","id":"#)?;
    let id = c.string()?;
    c.expect("}")?;
    Some(ContentBlock::Text(TextBlock { text, id }))
}

fn tool_call_rest(c: &mut Cursor<'_>) -> Option<ContentBlock> {
    let id = c.string()?;
    c.expect(r#","name":"#)?;
    let name = c.string()?;
    c.expect(r#","input":"#)?;
    let input = c.string()?;
    c.expect(r#","state":"#)?;
    let state = call_state(c)?;
    c.expect(r#","suggested_rules":"#)?;
    let suggested_rules = if c.eat("[]") { Vec::new() } else { c.serde()? };
    c.expect("}")?;
    Some(ContentBlock::ToolCall(ToolCallBlock { id, name, input, state, suggested_rules }))
}

fn tool_result_rest(c: &mut Cursor<'_>) -> Option<ContentBlock> {
    let id = c.string()?;
    c.expect(r#","name":"#)?;
    let name = c.string()?;
    c.expect(r#","output":"#)?;
    let output = if c.peek() == Some(b'"') { TextOrBlocks::Text(c.string()?) } else { c.serde()? };
    c.expect(r#","state":"#)?;
    let state = result_state(c)?;
    c.expect(r#","metadata":"#)?;
    let metadata = c.free_form()?;
    c.expect("}")?;
    Some(ContentBlock::ToolResult(ToolResultBlock { id, name, output, state, metadata }))
}

fn call_state(c: &mut Cursor<'_>) -> Option<ToolCallState> {
    const STATES: [(&str, ToolCallState); 5] = [
        ("\"finished\"", ToolCallState::Finished),
        ("\"pending\"", ToolCallState::Pending),
        ("\"asking\"", ToolCallState::Asking),
        ("\"allowed\"", ToolCallState::Allowed),
        ("\"submitted\"", ToolCallState::Submitted),
    ];
    enum_value(c, &STATES)
}

fn result_state(c: &mut Cursor<'_>) -> Option<ToolResultState> {
    const STATES: [(&str, ToolResultState); 5] = [
        ("\"success\"", ToolResultState::Success),
        ("\"error\"", ToolResultState::Error),
        ("\"interrupted\"", ToolResultState::Interrupted),
        ("\"denied\"", ToolResultState::Denied),
        ("\"running\"", ToolResultState::Running),
    ];
    enum_value(c, &STATES)
}

/// A string naming one of `values` (quoted wire names): matched as literals first (no allocation),
/// else decoded (escapes) and compared.
#[inline(always)]
fn enum_value<T: Copy>(c: &mut Cursor<'_>, values: &[(&str, T)]) -> Option<T> {
    if let Some(&(_, v)) = values.iter().find(|(lit, _)| c.eat(lit)) {
        return Some(v);
    }
    let s = c.string()?;
    values.iter().find(|(lit, _)| lit.get(1..lit.len() - 1) == Some(s.as_str())).map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor's string reader against serde_json's, on one JSON string literal.
    fn check_string(literal: &str) {
        let mut c = Cursor::new(literal);
        let fast = c.string();
        let slow = serde_json::from_str::<String>(literal).ok();
        match (&fast, &slow) {
            (Some(f), Some(s)) => {
                assert_eq!(f, s, "{literal:?}");
                assert!(c.is_at_end(), "{literal:?}");
            }
            (None, _) => {}
            (Some(f), None) => panic!("fast read {f:?} from {literal:?}, serde_json rejects it"),
        }
    }

    #[test]
    fn strings_decode_like_serde_json() {
        for lit in [
            r#""""#,
            r#""plain ascii text that is longer than eight bytes""#,
            r#""é✓😀 raw utf-8""#,
            r#""\" \\ \/ \b \f \n \r \t""#,
            r#""\u00e9\u00E9\u2028""#,
            r#""\ud83d\ude00 pair""#,
            r#""\ud83d lone high""#,
            r#""\ude00 lone low""#,
            r#""\ud83d\u0041 bad pair""#,
            r#""\x bad escape""#,
            r#""\u12 short""#,
            "\"raw \u{1} control\"",
            "\"raw \n newline in long text ......\"",
            "\"\u{7f} del is fine\"",
            r#""unterminated"#,
            r#""unterminated escape \"#,
        ] {
            check_string(lit);
        }
    }

    /// The word-at-a-time scan finds exactly the first special byte, wherever it is and whatever it is.
    #[test]
    fn scan_plain_matches_a_byte_loop() {
        for (special, len) in (0u8..=255).flat_map(|s| (1..=40).map(move |len| (s, len))) {
            for at in 0..len {
                let mut buf = vec![b'a'; len];
                buf[at] = special;
                buf[(at + 3).min(len - 1)] = 0xC3; // bytes above 0x7F around it
                let naive = buf.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(buf.len());
                for start in [0, 1, 5, 9, 17].into_iter().filter(|&s| s <= len) {
                    let want = buf[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
                    let want = want.map_or(buf.len(), |p| p + start);
                    assert_eq!(scan_plain(&buf, start), want, "byte {special:#x} at {at}, start {start}");
                }
                assert_eq!(scan_plain(&buf, 0), naive);
            }
        }
    }

    proptest::proptest! {
        /// Any mix of special bytes, bytes just above them (where a borrow could flag), spaces and
        /// non-ASCII bytes, from every start: the scan agrees with a byte loop.
        #[test]
        fn scan_plain_matches_a_byte_loop_on_mixed_text(
            buf in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b' ', b'"', b'#', b'\\', b']', 0, 1, 0x1f, 0x20, 0x21, 0x7f, 0xc3, 0xff]),
                0..48,
            ),
        ) {
            for start in 0..=buf.len() {
                let want = buf[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
                proptest::prop_assert_eq!(scan_plain(&buf, start), want.map_or(buf.len(), |p| p + start), "start {}", start);
            }
        }
    }

    #[test]
    fn strings_accept_what_they_must() {
        for (lit, want) in [(r#""a\u00e9b""#, "aéb"), (r#""\ud83d\ude00""#, "😀"), (r#""12345678\"9""#, "12345678\"9")]
        {
            assert_eq!(Cursor::new(lit).string().as_deref(), Some(want), "{lit}");
        }
        for lit in [r#""\ud83d""#, "\"a\u{1f}b\"", r#""abc"#] {
            assert_eq!(Cursor::new(lit).string(), None, "{lit}");
        }
    }

    fn check_int(text: &str, want: Option<i64>) {
        let mut c = Cursor::new(text);
        assert_eq!(c.int(), want, "{text}");
    }

    #[test]
    fn ints() {
        check_int("0", Some(0));
        check_int("-0", Some(0));
        check_int("42}", Some(42));
        check_int("-9223372036854775808", Some(i64::MIN));
        check_int("9223372036854775807", Some(i64::MAX));
        check_int("9223372036854775808", None);
        check_int("01", None);
        check_int("-", None);
        check_int("1.0", None);
        check_int("1e3", None);
        check_int("\"1\"", None);
    }

    #[test]
    fn serde_subparse_moves_past_the_value_and_declines_past_serde_json_depth() {
        let mut c = Cursor::new(r#"{"a":[1,2]},"next""#);
        let v: serde_json::Value = c.serde().unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2]}));
        assert!(c.eat(r#","next""#));
        // Within serde_json's 128 levels a subtree is read (the whole-document read, up to
        // MAX_JSON_DEPTH, accepts it too); past them the cursor declines and that read decides.
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(Cursor::new(&deep(125)).serde::<serde_json::Value>().is_some());
        assert!(Cursor::new(&deep(130)).serde::<serde_json::Value>().is_none());
        let in_string = format!("[\"{}\"]", "[".repeat(200));
        assert!(Cursor::new(&in_string).serde::<serde_json::Value>().is_some());
    }

    #[test]
    fn free_form_canonicalises_numbers() {
        let mut c = Cursor::new(r#"{"x":1E2,"y":-0}"#);
        let m = c.free_form().unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"x":100.0,"y":0}"#);
        // Too many digits for Python: the fast path declines (the full reader gives the error).
        let huge = format!(r#"{{"x":[1{}]}}"#, "0".repeat(4300));
        assert!(Cursor::new(&huge).free_form().is_none());
    }
}
