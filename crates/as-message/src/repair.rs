//! Best-effort repair of almost-JSON (what a model streams or writes by hand), as AgentScope 2.0.4
//! repairs tool arguments and structured output with `json_repair` before giving up.

use crate::{JsonMap, JsonValue};

/// Best-effort repair of almost-JSON into a value. Returns `None` when nothing sensible results.
///
/// Handles: surrounding prose or a Markdown code fence, truncation anywhere (strings,
/// numbers, `true`/`false`/`null` prefixes, open arrays/objects are closed; a key without a
/// value is dropped), trailing commas, missing commas between members, single-quoted strings,
/// unquoted keys, Python's `True`/`False`/`None`. Nesting deeper than [`MAX_REPAIR_DEPTH`] is
/// not repaired (the value there is dropped), so hostile input cannot exhaust the stack.
pub fn repair_json(raw: &str) -> Option<JsonValue> {
    let text = strip_fence(raw);
    let start = text.find(['{', '['])?;
    let mut p = Repair { chars: text[start..].chars().collect(), pos: 0, depth: 0 };
    p.value()
}

/// The deepest nesting [`repair_json`] follows (serde_json's own parser stops at 128).
pub const MAX_REPAIR_DEPTH: usize = 128;

fn strip_fence(raw: &str) -> &str {
    let t = raw.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        return rest.strip_suffix("```").unwrap_or(rest).trim();
    }
    t
}

struct Repair {
    chars: Vec<char>,
    pos: usize,
    /// Open arrays and objects around `pos`.
    depth: usize,
}

impl Repair {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '/' && self.chars.get(self.pos + 1) == Some(&'/') {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn value(&mut self) -> Option<JsonValue> {
        self.skip_ws();
        match self.peek()? {
            '{' | '[' if self.depth >= MAX_REPAIR_DEPTH => {
                // Too deep: give up on the rest of the input.
                self.pos = self.chars.len();
                None
            }
            '{' => {
                self.depth += 1;
                let v = self.object();
                self.depth -= 1;
                Some(v)
            }
            '[' => {
                self.depth += 1;
                let v = self.array();
                self.depth -= 1;
                Some(v)
            }
            '"' | '\'' => Some(JsonValue::String(self.string())),
            c if c == '-' || c.is_ascii_digit() => self.number(),
            _ => self.literal(),
        }
    }

    /// Skips whitespace and commas before a container's next member: `false` at its end (the
    /// `close` bracket, consumed, or the end of the input).
    fn next_member(&mut self, close: char) -> bool {
        loop {
            self.skip_ws();
            match self.peek() {
                None => return false,
                Some(c) if c == close => {
                    self.pos += 1;
                    return false;
                }
                Some(',') => self.pos += 1,
                Some(_) => return true,
            }
        }
    }

    fn object(&mut self) -> JsonValue {
        self.pos += 1;
        let mut map = JsonMap::new();
        while self.next_member('}') {
            let key = match self.peek() {
                Some('"' | '\'') => self.string(),
                Some(_) => {
                    let start = self.pos;
                    while let Some(c) = self.peek() {
                        if c == ':' || c == '}' || c == ',' || c.is_whitespace() {
                            break;
                        }
                        self.pos += 1;
                    }
                    if self.pos == start {
                        self.pos += 1;
                        continue;
                    }
                    self.chars[start..self.pos].iter().collect()
                }
                None => break,
            };
            self.skip_ws();
            if self.peek() != Some(':') {
                // key without value (truncated or malformed): drop it
                if self.peek().is_none() {
                    break;
                }
                continue;
            }
            self.pos += 1;
            self.skip_ws();
            if matches!(self.peek(), None | Some('}') | Some(',')) {
                continue;
            }
            match self.value() {
                Some(v) => {
                    map.insert(key, v);
                }
                None => {
                    // skip an unparseable token
                    while let Some(c) = self.peek() {
                        if c == ',' || c == '}' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
            }
        }
        JsonValue::Object(map)
    }

    fn array(&mut self) -> JsonValue {
        self.pos += 1;
        let mut items = Vec::new();
        while self.next_member(']') {
            match self.value() {
                Some(v) => items.push(v),
                None => {
                    while let Some(c) = self.peek() {
                        if c == ',' || c == ']' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
            }
        }
        JsonValue::Array(items)
    }

    fn string(&mut self) -> String {
        let quote = self.chars[self.pos];
        self.pos += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == quote {
                return out;
            }
            if c == '\\' {
                let Some(e) = self.peek() else { break };
                self.pos += 1;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let hex: String = self.chars.iter().skip(self.pos).take(4).collect();
                        if hex.len() == 4
                            && let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(ch);
                            self.pos += 4;
                            continue;
                        }
                        out.push_str("\\u");
                    }
                    other => out.push(other),
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    fn number(&mut self) -> Option<JsonValue> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E') {
                self.pos += 1;
            } else {
                break;
            }
        }
        // The run's longest prefix that is a JSON number (the rest of the run is dropped), found in one
        // pass: trying every shorter prefix with serde_json in turn was quadratic in the run.
        let run = &self.chars[start..self.pos];
        match number_prefix_len(run) {
            0 => None,
            len => parse_number(&run[..len].iter().collect::<String>()),
        }
    }

    fn literal(&mut self) -> Option<JsonValue> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphabetic() {
                self.pos += 1;
            } else {
                break;
            }
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        let truncated = self.peek().is_none();
        for (names, value) in [
            (["true", "True"], JsonValue::Bool(true)),
            (["false", "False"], JsonValue::Bool(false)),
            (["null", "None"], JsonValue::Null),
        ] {
            for n in names {
                if word == n || (truncated && !word.is_empty() && n.starts_with(&word)) {
                    return Some(value);
                }
            }
        }
        if word.is_empty() {
            self.pos += 1;
        }
        None
    }
}

/// The length of the longest prefix of `s` that is a JSON number
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), 0 if none is.
fn number_prefix_len(s: &[char]) -> usize {
    let digits_from = |mut i: usize| {
        while s.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_start = usize::from(s.first() == Some(&'-'));
    let mut end = match s.get(int_start) {
        Some('0') => int_start + 1,
        Some(c) if c.is_ascii_digit() => digits_from(int_start + 1),
        _ => return 0,
    };
    if s.get(end) == Some(&'.') {
        let frac_end = digits_from(end + 1);
        if frac_end == end + 1 {
            // `1.` or `1.e5`: only `1` is a number.
            return end;
        }
        end = frac_end;
    }
    if matches!(s.get(end), Some('e' | 'E')) {
        let exp_start = end + 1 + usize::from(matches!(s.get(end + 1), Some('+' | '-')));
        let exp_end = digits_from(exp_start);
        if exp_end > exp_start {
            end = exp_end;
        }
    }
    end
}

/// `text` as a JSON number, if it is one (serde_json's reader, every digit kept: with
/// `arbitrary_precision` it reads every number [`number_prefix_len`] finds, of any size).
fn parse_number(text: &str) -> Option<JsonValue> {
    #[cfg(test)]
    NUMBER_PARSES.with(|n| n.set(n.get() + 1));
    serde_json::from_str::<JsonValue>(text).ok().filter(JsonValue::is_number)
}

#[cfg(test)]
thread_local! {
    /// Texts [`parse_number`] has read on this thread: each read is linear in its text, so one read per
    /// number keeps a repair linear.
    static NUMBER_PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn hostile_nesting_is_not_followed_to_the_bottom() {
        for open in ["[", "{\"a\":", "[{\"k\":"] {
            let deep = open.repeat(200_000);
            // Returns (whatever is left of the shallow part) instead of overflowing the stack.
            let v = repair_json(&deep);
            let mut depth = 0;
            let mut cur = v.as_ref();
            while let Some(next) = cur.and_then(|v| match v {
                JsonValue::Array(a) => a.first(),
                JsonValue::Object(m) => m.values().next(),
                _ => None,
            }) {
                depth += 1;
                cur = Some(next);
            }
            assert!(depth <= MAX_REPAIR_DEPTH, "{open}: depth {depth}");
        }
        // Legitimate nesting within the limit is still repaired.
        let ok = format!("{}1{}", "[".repeat(100), "]".repeat(99));
        assert!(repair_json(&ok).is_some());
    }

    /// A run of number characters is read with one parse of its longest number prefix: trying every
    /// shorter prefix in turn was quadratic in the run (a CPU sink for model output).
    #[test]
    fn a_long_number_run_is_parsed_once() {
        let parses = |raw: &str| {
            NUMBER_PARSES.with(|n| n.set(0));
            let v = repair_json(raw);
            (v, NUMBER_PARSES.with(std::cell::Cell::get))
        };
        let (v, n) = parses(&format!("{{\"a\": {}{}}}", "1".repeat(500), "e".repeat(500)));
        assert_eq!(v.and_then(|v| v.get("a").map(ToString::to_string)), Some("1".repeat(500)));
        assert_eq!(n, 1);
        let (v, n) = parses(&format!("[{}, 1.5e-3+-.eE, -, 0123]", "-".repeat(300)));
        assert_eq!(v.map(|v| v.to_string()).as_deref(), Some("[1.5e-3,0]"));
        assert_eq!(n, 2, "one parse per number, none where no prefix is a number");
        // 100 000 characters of model output, one number (50 000 parses of up to 100 000 characters before).
        let (v, n) = parses(&format!("{{\"a\": {}{}}}", "1".repeat(50_000), "e".repeat(50_000)));
        let a = v.as_ref().and_then(|v| v.get("a")).and_then(JsonValue::as_number).map(|n| n.as_str().to_owned());
        assert_eq!(a, Some("1".repeat(50_000)));
        assert_eq!(n, 1);
    }

    /// The number reader before it was made linear: the longest prefix of the run serde_json reads as a
    /// number, found by trying every prefix from the longest (quadratic in the run).
    fn number_by_every_prefix(run: &str) -> Option<JsonValue> {
        let mut text = run.to_owned();
        while !text.is_empty() {
            if let Ok(v) = serde_json::from_str::<JsonValue>(&text)
                && v.is_number()
            {
                return Some(v);
            }
            text.pop();
        }
        None
    }

    fn number_of(text: &str) -> (Option<JsonValue>, usize) {
        let mut p = Repair { chars: text.chars().collect(), pos: 0, depth: 0 };
        let v = p.number();
        (v, p.pos)
    }

    #[test]
    fn numbers_read_as_before() {
        for text in [
            "",
            "-",
            "0",
            "-0",
            "01",
            "-01",
            "0.",
            "0.5",
            "1.e5",
            "1e",
            "1e+",
            "1e-3",
            "1E+05",
            "-1.50E-0",
            "1.5.5",
            "1e5e5",
            "1-2",
            "--1",
            "+1",
            ".5",
            "0e",
            "0.0e0.",
            "12abc",
            "1x",
            "9999999999999999999999e999999",
        ] {
            let run = text.chars().take_while(|c| c.is_ascii_digit() || "-+.eE".contains(*c)).count();
            assert_eq!(number_of(text), (number_by_every_prefix(&text[..run]), run), "{text:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(4096))]

        /// Short runs of number characters (and a few others after them): the same number, and the same
        /// position after it, as the reader that tried every prefix.
        #[test]
        fn numbers_read_as_by_every_prefix(
            chars in proptest::collection::vec(
                proptest::sample::select(vec!['0', '1', '9', '-', '+', '.', 'e', 'E', 'x', ' ', ']']),
                0..14,
            ),
        ) {
            let text: String = chars.iter().collect();
            let run = chars.iter().take_while(|c| c.is_ascii_digit() || "-+.eE".contains(**c)).count();
            proptest::prop_assert_eq!(number_of(&text), (number_by_every_prefix(&text[..run]), run), "{:?}", text);
        }
    }

    #[test]
    fn repairs_almost_json() {
        for (raw, want) in [
            (r#"{"text": "repaired"#, Some(json!({"text": "repaired"}))),
            (r#"{"a": 1, "b": [1, 2"#, Some(json!({"a": 1, "b": [1, 2]}))),
            (r#"{"a": 1,}"#, Some(json!({"a": 1}))),
            (r#"{'a': 'x', b: True, c: None}"#, Some(json!({"a": "x", "b": true, "c": null}))),
            ("```json\n{\"a\": 1}\n```", Some(json!({"a": 1}))),
            ("Here it is: {\"a\": 1} done", Some(json!({"a": 1}))),
            (r#"[1, 2"#, Some(json!([1, 2]))),
            ("", None),
            ("hello", None),
        ] {
            assert_eq!(repair_json(raw), want, "{raw}");
        }
    }
}
