//! A JSON value reader that works on the text itself and builds a [`serde_json::Value`] directly.
//!
//! serde_json's own `Value` reader cannot be used for free-form data: under `arbitrary_precision` (and
//! `raw_value`) serde_json hands a number to a visitor as the map `{"$serde_json::private::Number": "…"}`,
//! so a real JSON object with that key (or `$serde_json::private::RawValue`) is read as a number (or as
//! raw JSON), or fails. Python keeps such objects as ordinary dicts; so does this reader.
//!
//! The reader is iterative (no recursion, so no stack limit) and counts nesting as pydantic does: an
//! empty `[]` or `{}` adds no level.

use serde_json::{Map, Number, Value};

use super::Cursor;
use crate::json::MAX_NUMBER_DIGITS;

/// How numbers are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Numbers {
    /// As Python reads free-form data and pydantic writes it back: floats in their shortest
    /// round-trip form, `-0` as `0`, non-finite floats as `null`; more than [`MAX_NUMBER_DIGITS`]
    /// integer digits are refused (see [`crate::canonicalize_numbers`]).
    Canonical,
    /// The token's text as serde_json's own reader keeps it (every digit; an exponent written
    /// `e+2`), for typed fields (the lax readers decide) and for a document that serde reads again.
    Raw,
    /// [`Numbers::Raw`], but `NaN` read as an infinity instead of `null`: a typed field that takes
    /// `null` (`finished_at`, `usage`) refuses it, as pydantic refuses a `NaN` (a float) there.
    /// Only to check where a document's `NaN`s are (see `json::read_tracked`).
    RawNanAsInfinity,
}

/// Why a value was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ValueError {
    /// Not JSON.
    Syntax,
    /// Nested deeper than the limit.
    TooDeep,
    /// An integer part longer than Python reads ([`Numbers::Canonical`] only).
    TooManyDigits(usize),
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Syntax => f.write_str("invalid JSON"),
            Self::TooDeep => f.write_str("recursion limit exceeded"),
            Self::TooManyDigits(n) => write!(f, "number out of range: {n} digits (at most {MAX_NUMBER_DIGITS})"),
        }
    }
}

/// An array or object being read.
enum Frame {
    Array(Vec<Value>),
    /// The object so far and the key whose value is being read.
    Object(Map<String, Value>, String),
}

/// Reads one JSON value at the cursor (whitespace around tokens allowed, as in JSON) and leaves the
/// cursor right after it. A duplicate key keeps its first position and its last value, as a Python
/// dict does. At most `max_depth` levels of non-empty arrays and objects.
pub(crate) fn read(c: &mut Cursor<'_>, numbers: Numbers, max_depth: usize) -> Result<Value, ValueError> {
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        c.skip_whitespace();
        let mut value = match c.peek().ok_or(ValueError::Syntax)? {
            b'{' => {
                c.pos += 1;
                c.skip_whitespace();
                if c.eat("}") {
                    Value::Object(Map::new())
                } else {
                    if stack.len() >= max_depth {
                        return Err(ValueError::TooDeep);
                    }
                    let key = key(c)?;
                    stack.push(Frame::Object(Map::new(), key));
                    continue;
                }
            }
            b'[' => {
                c.pos += 1;
                c.skip_whitespace();
                if c.eat("]") {
                    Value::Array(Vec::new())
                } else {
                    if stack.len() >= max_depth {
                        return Err(ValueError::TooDeep);
                    }
                    stack.push(Frame::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => Value::String(c.string().ok_or(ValueError::Syntax)?),
            b'n' => literal(c, "null", Value::Null)?,
            b't' => literal(c, "true", Value::Bool(true))?,
            b'f' => literal(c, "false", Value::Bool(false))?,
            // Python's `json` (and pydantic's parser) also read these three, as floats.
            b'N' => literal(c, "NaN", nan(numbers))?,
            b'I' => literal(c, "Infinity", infinity(numbers, ""))?,
            b'-' if c.eat("-Infinity") => infinity(numbers, "-"),
            _ => number(c, numbers)?,
        };
        // Hand the finished value to the containers it completes.
        loop {
            match stack.last_mut() {
                None => return Ok(value),
                Some(Frame::Array(items)) => {
                    items.push(value);
                    c.skip_whitespace();
                    if c.eat(",") {
                        break;
                    }
                    if !c.eat("]") {
                        return Err(ValueError::Syntax);
                    }
                }
                Some(Frame::Object(map, key_of_value)) => {
                    map.insert(std::mem::take(key_of_value), value);
                    c.skip_whitespace();
                    if c.eat(",") {
                        c.skip_whitespace();
                        *key_of_value = key(c)?;
                        break;
                    }
                    if !c.eat("}") {
                        return Err(ValueError::Syntax);
                    }
                }
            }
            value = match stack.pop() {
                Some(Frame::Array(items)) => Value::Array(items),
                Some(Frame::Object(map, _)) => Value::Object(map),
                None => return Err(ValueError::Syntax),
            };
        }
    }
}

/// `Infinity` (`sign` `""`) or `-Infinity` (`"-"`): `null` as pydantic writes a non-finite float
/// back; for typed fields a number too large for an `f64`, which the lax float reader reads as an
/// infinity (as pydantic does) and the integer reader refuses (as pydantic does).
fn infinity(numbers: Numbers, sign: &str) -> Value {
    match numbers {
        Numbers::Canonical => Value::Null,
        Numbers::Raw | Numbers::RawNanAsInfinity => {
            format!("{sign}1e999").parse::<Number>().map_or(Value::Null, Value::Number)
        }
    }
}

/// `NaN`: `null`, as pydantic writes a non-finite float back. A number has no `NaN`, so for typed
/// fields too it is `null` (a float field refuses it: see the crate docs' known differences), except
/// with [`Numbers::RawNanAsInfinity`].
fn nan(numbers: Numbers) -> Value {
    match numbers {
        Numbers::Canonical | Numbers::Raw => Value::Null,
        Numbers::RawNanAsInfinity => infinity(numbers, ""),
    }
}

/// A key and its colon.
fn key(c: &mut Cursor<'_>) -> Result<String, ValueError> {
    let key = c.string().ok_or(ValueError::Syntax)?;
    c.skip_whitespace();
    if c.eat(":") { Ok(key) } else { Err(ValueError::Syntax) }
}

fn literal(c: &mut Cursor<'_>, text: &str, value: Value) -> Result<Value, ValueError> {
    if c.eat(text) { Ok(value) } else { Err(ValueError::Syntax) }
}

/// A JSON number token `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn number(c: &mut Cursor<'_>, numbers: Numbers) -> Result<Value, ValueError> {
    let bytes = c.text.as_bytes();
    let start = c.pos;
    let mut i = start;
    let digits = |i: &mut usize| {
        let from = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    let int_digits = digits(&mut i);
    if int_digits == 0 || (int_digits > 1 && bytes.get(int_start) == Some(&b'0')) {
        return Err(ValueError::Syntax);
    }
    let mut integer = true;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return Err(ValueError::Syntax);
        }
        integer = false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return Err(ValueError::Syntax);
        }
        integer = false;
    }
    let token = c.text.get(start..i).ok_or(ValueError::Syntax)?;
    c.pos = i;
    if numbers == Numbers::Canonical && int_digits > MAX_NUMBER_DIGITS {
        return Err(ValueError::TooManyDigits(int_digits));
    }
    if integer {
        if token == "-0" {
            // Python reads the int 0 (canonical); the exact text for the typed readers.
            return Ok(if numbers == Numbers::Canonical { Value::from(0) } else { exact(token)? });
        }
        // Up to 18 digits always fit an i64, whose text is the token again.
        if int_digits <= 18 {
            return token.parse::<i64>().map(Value::from).map_err(|_| ValueError::Syntax);
        }
        return exact(token);
    }
    match numbers {
        Numbers::Raw | Numbers::RawNanAsInfinity => exact(token),
        Numbers::Canonical => {
            Ok(token.parse::<f64>().ok().and_then(Number::from_f64).map_or(Value::Null, Value::Number))
        }
    }
}

/// A number with the token's text, as serde_json's reader keeps it (`arbitrary_precision`).
fn exact(token: &str) -> Result<Value, ValueError> {
    token.parse::<Number>().map(Value::Number).map_err(|_| ValueError::Syntax)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, ValueError> {
        let mut c = Cursor::new(text);
        let v = read(&mut c, Numbers::Canonical, crate::MAX_JSON_DEPTH)?;
        if !c.is_at_end() {
            return Err(ValueError::Syntax);
        }
        Ok(serde_json::to_string(&v).unwrap_or_default())
    }

    fn raw(text: &str) -> Result<String, ValueError> {
        let mut c = Cursor::new(text);
        let v = read(&mut c, Numbers::Raw, crate::MAX_JSON_DEPTH)?;
        Ok(serde_json::to_string(&v).unwrap_or_default())
    }

    #[test]
    fn reads_json_like_serde_json_without_its_marker_keys() {
        for (text, want) in [
            ("null", "null"),
            (" true ", "true"),
            ("[1, -2 ,\"x\",{}, [] ,false]", r#"[1,-2,"x",{},[],false]"#),
            (r#"{"$serde_json::private::Number":"1"}"#, r#"{"$serde_json::private::Number":"1"}"#),
            (r#"{"$serde_json::private::RawValue":"{}"}"#, r#"{"$serde_json::private::RawValue":"{}"}"#),
            (r#"{"a":1,"b":2,"a":{"c":3}}"#, r#"{"a":{"c":3},"b":2}"#),
            ("[1.50,1E2,-0,-0.0,1e400,12345678901234567890123]", "[1.5,100.0,0,-0.0,null,12345678901234567890123]"),
            (" \t\n\r{ \"k\" : [ 1 ] } ", r#"{"k":[1]}"#),
        ] {
            assert_eq!(canonical(text).as_deref(), Ok(want), "{text}");
        }
        // The text serde_json's own reader keeps for each.
        let serde = serde_json::to_string(&serde_json::from_str::<Value>("[1.50,1E2,-0,1e400,12]").unwrap()).unwrap();
        assert_eq!(raw("[1.50,1E2,-0,1e400,12]"), Ok(serde));
        for bad in
            ["", "[", "[1,]", "{\"a\"}", "{\"a\":1,}", "01", "1.", ".5", "1e", "-", "nul", "[1 2]", "{1:2}", "\"\\x\""]
        {
            assert_eq!(canonical(bad), Err(ValueError::Syntax), "{bad:?}");
        }
        // Python's non-finite floats: `null` when written back; for typed fields, infinities stay numbers.
        assert_eq!(canonical("[NaN, Infinity,-Infinity]").as_deref(), Ok("[null,null,null]"));
        assert_eq!(raw("[NaN, Infinity,-Infinity]").as_deref(), Ok("[null,1e+999,-1e+999]"));
        let mut c = Cursor::new("[NaN, Infinity,-Infinity]");
        let v = read(&mut c, Numbers::RawNanAsInfinity, crate::MAX_JSON_DEPTH).map(|v| v.to_string());
        assert_eq!(v.as_deref(), Ok("[1e+999,1e+999,-1e+999]"), "to check where the NaNs are");
        for bad in ["-NaN", "+Infinity", "nan", "inf", "Infinityx", "[Infinity1]", "- Infinity", "-Inf", "NaN0"] {
            assert_eq!(canonical(bad), Err(ValueError::Syntax), "{bad:?}");
        }
        let huge = format!("[1{}]", "0".repeat(4300));
        assert_eq!(canonical(&huge), Err(ValueError::TooManyDigits(4301)));
        assert!(raw(&huge).is_ok());
    }

    #[test]
    fn depth_counts_non_empty_containers_like_pydantic() {
        let nest = |n: usize, leaf: &str| format!("{}{leaf}{}", "[".repeat(n), "]".repeat(n));
        let at = |text: &str, max| read(&mut Cursor::new(text), Numbers::Canonical, max).map(drop);
        assert_eq!(at(&nest(3, "1"), 3), Ok(()));
        assert_eq!(at(&nest(4, ""), 3), Ok(()), "the innermost [] adds no level");
        assert_eq!(at(&nest(4, "1"), 3), Err(ValueError::TooDeep));
        assert_eq!(at(&nest(1_000_000, ""), 200), Err(ValueError::TooDeep), "no recursion");
        assert_eq!(at(r#"{"a":{"b":{}}}"#, 2), Ok(()));
        assert_eq!(at(r#"{"a":{"b":{"c":1}}}"#, 2), Err(ValueError::TooDeep));
    }
}
