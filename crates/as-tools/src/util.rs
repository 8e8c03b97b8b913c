//! Small Python-compatibility helpers for texts the model sees.

use serde_json::Value;

/// `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators, raw UTF-8.
pub(crate) fn python_dumps(value: &Value) -> String {
    let mut out = String::new();
    dump_into(value, &mut out);
    out
}

fn dump_into(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dump_into(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                dump_into(v, out);
            }
            out.push('}');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Python's `repr(str)`: single quotes unless the text contains `'` and no `"`.
pub(crate) fn python_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str(type(v))` for a decoded JSON value.
pub(crate) fn python_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Number(n) if n.is_i64() || n.is_u64() || !n.to_string().contains(['.', 'e', 'E']) => "<class 'int'>",
        Value::Number(_) => "<class 'float'>",
        Value::String(_) => "<class 'str'>",
        Value::Array(_) => "<class 'list'>",
        Value::Object(_) => "<class 'dict'>",
    }
}

/// Python's `repr()` of a decoded JSON value (for validation messages: `5`, `'x'`, `None`, `True`).
pub(crate) fn python_value_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => python_repr(s),
        Value::Array(items) => format!("[{}]", items.iter().map(python_value_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", python_repr(k), python_value_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python() {
        assert_eq!(python_repr("[1, 2]"), "'[1, 2]'");
        assert_eq!(python_repr("it's"), "\"it's\"");
        assert_eq!(python_repr("a'\"b\n"), "'a\\'\"b\\n'");
        assert_eq!(python_dumps(&serde_json::json!({"a": [1, "é"]})), "{\"a\": [1, \"é\"]}");
        assert_eq!(python_type(&serde_json::json!([1])), "<class 'list'>");
        assert_eq!(python_type(&serde_json::json!(1.5)), "<class 'float'>");
        assert_eq!(python_value_repr(&serde_json::json!({"k": null})), "{'k': None}");
    }
}
