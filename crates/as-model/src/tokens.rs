//! Token counting: the 2.0.4 bytes/4 heuristic behind a trait a real tokenizer can replace.

use std::fmt::{self, Write as _};

use as_message::{ContentBlock, Msg, TextOrBlocks, TextOrData};
use serde_json::Value;

use crate::request::ToolSchema;

/// Counts the tokens of a model input (used by context compression and tool-result truncation).
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// The token count of `messages` plus `tools`.
    fn count_tokens(&self, messages: &[Msg], tools: &[ToolSchema]) -> usize;
}

/// 2.0.4's `ChatModelBase.count_tokens` (spec §9.1):
/// `int(utf8_len(text)/4 + 0.5) + 2000 × data_blocks`, where `text` concatenates (no separator) the text,
/// thinking, hint text, tool-call input and tool-result text of every block, then `json.dumps(tools,
/// ensure_ascii=False)` of the tools in their `{"type":"function",...}` form. Data blocks count at the top level,
/// inside hints and inside tool results. Names, roles and ids are not counted.
///
/// ```
/// use as_model::{HeuristicTokenCounter, TokenCounter};
/// use as_message::Msg;
/// // 10 bytes -> int(2.5 + 0.5) = 3
/// assert_eq!(HeuristicTokenCounter.count_tokens(&[Msg::user("u", "0123456789")], &[]), 3);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HeuristicTokenCounter;

/// Tokens charged per data block by the heuristic.
pub const DATA_BLOCK_TOKENS: usize = 2000;

impl TokenCounter for HeuristicTokenCounter {
    fn count_tokens(&self, messages: &[Msg], tools: &[ToolSchema]) -> usize {
        self.count_parts(&[messages], tools)
    }
}

impl HeuristicTokenCounter {
    /// The count of the concatenation of `parts` (exactly `count_tokens` of one slice holding them all, in
    /// order), without copying any message.
    ///
    /// ```
    /// use as_model::{HeuristicTokenCounter, TokenCounter};
    /// use as_message::Msg;
    /// let (a, b) = (vec![Msg::user("u", "hello")], vec![Msg::user("u", "world!")]);
    /// let joined: Vec<Msg> = a.iter().chain(&b).cloned().collect();
    /// assert_eq!(HeuristicTokenCounter.count_parts(&[&a, &b], &[]), HeuristicTokenCounter.count_tokens(&joined, &[]));
    /// ```
    pub fn count_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        let mut bytes = 0usize;
        let mut data = 0usize;
        let add_parts = |parts: &TextOrBlocks, bytes: &mut usize, data: &mut usize| match parts {
            TextOrBlocks::Text(s) => *bytes += s.len(),
            TextOrBlocks::Blocks(bs) => {
                for b in bs {
                    match b {
                        TextOrData::Text(t) => *bytes += t.text.len(),
                        TextOrData::Data(_) => *data += 1,
                    }
                }
            }
        };
        for m in parts.iter().flat_map(|p| p.iter()) {
            for b in &m.content {
                match b {
                    ContentBlock::Text(t) => bytes += t.text.len(),
                    ContentBlock::Thinking(t) => bytes += t.thinking.len(),
                    ContentBlock::Hint(h) => add_parts(&h.hint, &mut bytes, &mut data),
                    ContentBlock::ToolCall(c) => bytes += c.input.len(),
                    ContentBlock::ToolResult(r) => add_parts(&r.output, &mut bytes, &mut data),
                    ContentBlock::Data(_) => data += 1,
                }
            }
        }
        if !tools.is_empty() {
            let list = Value::Array(tools.iter().map(ToolSchema::to_function_value).collect());
            bytes += python_json_dumps(&list).len();
        }
        (bytes + 2) / 4 + DATA_BLOCK_TOKENS * data
    }
}

/// Python's `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators, non-ASCII kept raw,
/// control characters escaped as `\uXXXX` (except `\n \r \t \b \f`).
pub fn python_json_dumps(value: &Value) -> String {
    let mut out = String::new();
    write_py(value, &mut out);
    out
}

fn write_py(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_py_str(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py_str(k, out);
                out.push_str(": ");
                write_py(x, out);
            }
            out.push('}');
        }
    }
}

fn write_py_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use as_message::{
        Base64Source, DataBlock, HintBlock, Role, Source, ThinkingBlock, ToolCallBlock, ToolResultBlock,
        ToolResultState,
    };

    fn count(msgs: &[Msg], tools: &[ToolSchema]) -> usize {
        HeuristicTokenCounter.count_tokens(msgs, tools)
    }

    fn data() -> DataBlock {
        DataBlock::new(Source::Base64(Base64Source { data: "aGk=".into(), media_type: "image/png".into() }), None)
    }

    #[test]
    fn rounding_is_half_up() {
        for (len, want) in [(0, 0), (1, 0), (2, 1), (5, 1), (6, 2), (10, 3), (13, 3), (14, 4)] {
            assert_eq!(count(&[Msg::user("u", "x".repeat(len))], &[]), want, "len {len}");
        }
        // UTF-8 bytes, not chars: 4 × 3 bytes = 12 -> 3
        assert_eq!(count(&[Msg::user("u", "你好世界")], &[]), 3);
    }

    #[test]
    fn every_block_kind_counts() {
        let mut m = Msg::new("a", Role::Assistant, vec![]);
        m.content.push(ContentBlock::Thinking(ThinkingBlock::new("abcd")));
        m.content.push(ContentBlock::ToolCall(ToolCallBlock::new("id-not-counted", "name-not-counted", "{}{}")));
        m.content.push(ContentBlock::ToolResult(ToolResultBlock::new(
            "x",
            "y",
            TextOrBlocks::Blocks(vec![TextOrData::Text(as_message::TextBlock::new("abcd")), TextOrData::Data(data())]),
            ToolResultState::Success,
        )));
        m.content.push(ContentBlock::Hint(HintBlock {
            hint: TextOrBlocks::Text("abcd".into()),
            id: "h".into(),
            source: None,
        }));
        m.content.push(ContentBlock::Data(data()));
        // 16 bytes -> 4, two data blocks -> 4000
        assert_eq!(count(&[m], &[]), 4004);
    }

    #[test]
    fn tools_are_python_dumped() {
        let t = ToolSchema::new("f", "é\n", serde_json::json!({"type": "object"}));
        let dumped = python_json_dumps(&Value::Array(vec![t.to_function_value()]));
        assert_eq!(
            dumped,
            r#"[{"type": "function", "function": {"name": "f", "description": "é\n", "parameters": {"type": "object"}}}]"#
        );
        assert_eq!(count(&[], &[t]), (dumped.len() + 2) / 4);
    }

    #[test]
    fn parts_count_as_their_concatenation() {
        let mut with_data = Msg::new("a", Role::Assistant, vec![ContentBlock::Data(data())]);
        with_data.content.push(ContentBlock::Thinking(ThinkingBlock::new("xyz")));
        let msgs =
            vec![Msg::user("u", "a"), with_data, Msg::user("u", "bcdef"), Msg::user("u", "你好"), Msg::user("u", "g")];
        let tools = [ToolSchema::new("f", "d", serde_json::json!({"type": "object"}))];
        // Every split point, with and without tools: rounding happens once, on the whole.
        for tools in [&tools[..], &[]] {
            for at in 0..=msgs.len() {
                let (a, b) = msgs.split_at(at);
                let parts = HeuristicTokenCounter.count_parts(&[a, b], tools);
                assert_eq!(parts, count(&msgs, tools), "split at {at}");
                assert_eq!(HeuristicTokenCounter.count_parts(&[&[], a, &[], b], tools), parts);
            }
        }
    }
}
