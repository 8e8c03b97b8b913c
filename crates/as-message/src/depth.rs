//! Nesting depth of a value's JSON, counted as AgentScope 2.0.4 (pydantic) counts it for its
//! recursion limit: every non-empty array or object is one level, an empty `[]` or `{}` none.
//!
//! A writer uses these to refuse what no reader would take back: a document deeper than
//! [`MAX_JSON_DEPTH`] is written by `to_json` (and by Python's `model_dump_json`) but refused by every
//! reader here and in Python. The depth of a typed value is computed from the value (no JSON is
//! written); it is exact up to [`MAX_JSON_DEPTH`], and `MAX_JSON_DEPTH + 1` for anything deeper (the
//! walk stops there, so a deep value in memory cannot exhaust the stack).
//!
//! ```
//! use as_message::{JsonDepth, MAX_JSON_DEPTH, Msg, json, json_text_depth, to_json};
//! let mut m = Msg::user("alice", "hi");
//! assert_eq!(m.json_depth(), 3); // the message, its content list, the text block
//! assert_eq!(json_text_depth(&to_json(&m)), 3);
//! let mut deep = json!(1);
//! for _ in 0..MAX_JSON_DEPTH {
//!     deep = json!([deep]);
//! }
//! m.metadata.insert("deep".into(), deep);
//! assert!(m.json_depth() > MAX_JSON_DEPTH);
//! ```

use serde_json::Value;

use crate::block::{ContentBlock, DataBlock, HintBlock, TextOrBlocks, TextOrData, ToolCallBlock, ToolResultBlock};
use crate::json::{JsonMap, MAX_JSON_DEPTH};
use crate::msg::Msg;
use crate::permission::PermissionContext;

/// Every depth here is at most this: `MAX_JSON_DEPTH + 1` says "deeper than [`MAX_JSON_DEPTH`]".
const CAP: usize = MAX_JSON_DEPTH + 1;

/// A value whose JSON nesting depth can be computed without writing it.
pub trait JsonDepth {
    /// The nesting depth of this value's canonical JSON as pydantic counts it (non-empty arrays and
    /// objects), exact up to [`MAX_JSON_DEPTH`]; `MAX_JSON_DEPTH + 1` for anything deeper.
    fn json_depth(&self) -> usize;
}

/// The nesting depth of a free-form JSON value (see the [module docs](self)).
pub fn value_depth(v: &Value) -> usize {
    value_within(v, MAX_JSON_DEPTH)
}

/// The nesting depth of a free-form JSON object (0 when empty).
pub fn map_depth(m: &JsonMap) -> usize {
    map_within(m, MAX_JSON_DEPTH)
}

/// `v`'s depth when it is at most `limit`, else `limit + 1`; the recursion is never deeper than
/// `limit` (a container at the limit with children is `limit + 1` without looking further).
fn value_within(v: &Value, limit: usize) -> usize {
    match v {
        Value::Array(a) => nested_within(a.iter(), limit),
        Value::Object(m) => map_within(m, limit),
        _ => 0,
    }
}

fn map_within(m: &JsonMap, limit: usize) -> usize {
    nested_within(m.values(), limit)
}

/// The depth of a container holding `children` (0 when there are none).
fn nested_within<'a>(mut children: impl Iterator<Item = &'a Value>, limit: usize) -> usize {
    let Some(first) = children.next() else { return 0 };
    if limit == 0 {
        return 1;
    }
    let mut deepest = value_within(first, limit - 1);
    for child in children {
        if deepest >= limit {
            break;
        }
        deepest = deepest.max(value_within(child, limit - 1));
    }
    1 + deepest
}

/// The depth of a list whose items have the given depths (0 when empty), capped at
/// `MAX_JSON_DEPTH + 1`: for [`JsonDepth`] impls of other crates' types.
pub fn list_depth(items: impl IntoIterator<Item = usize>) -> usize {
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return 0;
    }
    (1 + items.max().unwrap_or(0)).min(CAP)
}

/// The depth of an object (not empty: every wire object has a field) whose fields have these depths,
/// capped at `MAX_JSON_DEPTH + 1`: for [`JsonDepth`] impls of other crates' types.
pub fn object_depth(fields: impl IntoIterator<Item = usize>) -> usize {
    (1 + fields.into_iter().max().unwrap_or(0)).min(CAP)
}

/// The depth of a text or data block: a data block's source is an object.
fn text_or_data(b: &TextOrData) -> usize {
    match b {
        TextOrData::Text(_) => 1,
        TextOrData::Data(d) => d.json_depth(),
    }
}

impl JsonDepth for Value {
    fn json_depth(&self) -> usize {
        value_depth(self)
    }
}

impl JsonDepth for JsonMap {
    fn json_depth(&self) -> usize {
        map_depth(self)
    }
}

impl JsonDepth for TextOrBlocks {
    fn json_depth(&self) -> usize {
        match self {
            Self::Text(_) => 0,
            Self::Blocks(blocks) => list_depth(blocks.iter().map(text_or_data)),
        }
    }
}

impl JsonDepth for DataBlock {
    fn json_depth(&self) -> usize {
        2
    }
}

impl JsonDepth for HintBlock {
    fn json_depth(&self) -> usize {
        object_depth([self.hint.json_depth()])
    }
}

impl JsonDepth for ToolCallBlock {
    fn json_depth(&self) -> usize {
        // Each suggested rule is an object of strings.
        object_depth([list_depth(self.suggested_rules.iter().map(|_| 1))])
    }
}

impl JsonDepth for ToolResultBlock {
    fn json_depth(&self) -> usize {
        object_depth([self.output.json_depth(), map_depth(&self.metadata)])
    }
}

impl JsonDepth for ContentBlock {
    fn json_depth(&self) -> usize {
        match self {
            Self::Text(_) => 1,
            // The extra fields are written beside the block's own.
            Self::Thinking(b) => object_depth(b.extra.values().map(value_depth)),
            Self::Hint(b) => b.json_depth(),
            Self::ToolCall(b) => b.json_depth(),
            Self::ToolResult(b) => b.json_depth(),
            Self::Data(b) => b.json_depth(),
        }
    }
}

impl JsonDepth for Msg {
    fn json_depth(&self) -> usize {
        object_depth([
            list_depth(self.content.iter().map(JsonDepth::json_depth)),
            map_depth(&self.metadata),
            usize::from(self.usage.is_some()),
        ])
    }
}

impl JsonDepth for PermissionContext {
    fn json_depth(&self) -> usize {
        // Maps of objects of strings, and maps of lists of rules (objects of strings).
        let rules = |m: &indexmap::IndexMap<String, Vec<crate::permission::PermissionRule>>| {
            list_depth(m.values().map(|rules| list_depth(rules.iter().map(|_| 1))))
        };
        object_depth([
            list_depth(self.working_directories.values().map(|_| 1)),
            rules(&self.allow_rules),
            rules(&self.deny_rules),
            rules(&self.ask_rules),
        ])
    }
}

/// The nesting depth of a JSON text as pydantic counts it (non-empty arrays and objects; brackets in
/// strings are not counted). Any text is measured, well-formed or not.
///
/// ```
/// assert_eq!(as_message::json_text_depth(r#"{"a":[[],{"b":"[["}]}"#), 3);
/// ```
pub fn json_text_depth(text: &str) -> usize {
    crate::read::python_depth(text.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn nest(n: usize) -> Value {
        (0..n).fold(json!(1), |v, _| json!([v]))
    }

    #[test]
    fn free_form_values_count_non_empty_containers() {
        let cases = [
            (json!(1), 0),
            (json!([]), 0),
            (json!({}), 0),
            (json!([[]]), 1),
            (json!({"a": {"b": []}, "c": [1]}), 2),
            (json!([1, {"a": [[2]]}, []]), 4),
            (nest(MAX_JSON_DEPTH), MAX_JSON_DEPTH),
        ];
        for (v, want) in cases {
            assert_eq!(value_depth(&v), want, "{v}");
            assert_eq!(json_text_depth(&crate::to_json(&v)), want, "{v}");
        }
    }

    #[test]
    fn deeper_than_the_limit_is_reported_without_walking_it_all() {
        for n in [MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 2, MAX_JSON_DEPTH + 50] {
            assert_eq!(value_depth(&nest(n)), CAP, "{n}");
        }
        // A wide value past the limit stops early too, and a map measures as a value.
        let wide = json!([nest(3), nest(MAX_JSON_DEPTH + 5), nest(3)]);
        assert_eq!(value_depth(&wide), CAP);
        let map: JsonMap = [("a".to_owned(), nest(MAX_JSON_DEPTH - 1))].into_iter().collect();
        assert_eq!(map_depth(&map), MAX_JSON_DEPTH);
    }
}
