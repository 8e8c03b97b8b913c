//! Tool argument parsing: strict JSON first, then repair of almost-JSON, then validation
//! against the tool's schema, with the texts 2.0.4 shows the model.

use as_message::{JsonMap, JsonValue};
pub use as_message::{MAX_REPAIR_DEPTH, repair_json};

use crate::error::{ToolError, ToolErrorKind};
use crate::util::{python_repr, python_type, python_value_repr};

/// Parses a model's raw argument text into an object (2.0.4 `_json_loads_with_repair`).
///
/// Strict JSON is tried first; then the text is repaired (truncated strings, arrays and
/// objects closed, trailing commas dropped, single quotes and Python literals accepted, code
/// fences stripped). When neither yields an object the error's text is 2.0.4's
/// `<system-reminder>` explanation quoting the input (truncated to 100 + `[TRUNCATE]` + 100
/// characters when longer than 200).
///
/// ```
/// let ok = as_tools::parse_arguments(r#"{"text": "repaired"#).unwrap();
/// assert_eq!(ok["text"], "repaired");
/// let err = as_tools::parse_arguments("[1, 2]").unwrap_err();
/// assert!(err.model_text().starts_with("<system-reminder>Error: Your argument string is decoded into a <class 'list'> object"));
/// ```
pub fn parse_arguments(raw: &str) -> Result<JsonMap, ToolError> {
    // An object is read from its text as json.loads reads it (an object keyed with one of
    // serde_json's private markers stays an object; NaN and a repeated key are read); anything
    // else goes through serde_json below for 2.0.4's error texts.
    let read = as_message::free_form::from_str(raw).map(JsonValue::Object).or_else(|_| serde_json::from_str(raw));
    let error_message = match read {
        // Python's json.loads refuses integers over 4300 digits (and a session holding one could
        // not be read back by AgentScope Python).
        Ok(JsonValue::Object(map)) => match map.values().try_for_each(as_message::check_number_digits) {
            Ok(()) => return Ok(map),
            Err(e) => {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidJson,
                    format!("<system-reminder>Error: Your arguments hold a {e}.</system-reminder>"),
                ));
            }
        },
        Ok(other) => format!(
            "Error: Your argument string is decoded into a {} object, but a dict object is expected!",
            python_type(&other)
        ),
        Err(e) => format!(
            "Error: When decoding your tool arguments from JSON format to a Python dictionary, a JSONDecodeError \
             was raised with message: {}.",
            python_decode_message(raw, &e)
        ),
    };
    if let Some(JsonValue::Object(map)) = repair_json(raw)
        && map.values().try_for_each(as_message::check_number_digits).is_ok()
    {
        return Ok(map);
    }
    let chars: Vec<char> = raw.chars().collect();
    let (shown, hint) = if chars.len() > 200 {
        let head: String = chars[..100].iter().collect();
        let tail: String = chars[chars.len() - 100..].iter().collect();
        (
            format!("{head}[TRUNCATE]{tail}"),
            "(Because the JSON string is too long, a truncated label \"[TRUNCATE]\" is used here to indicate the \
             truncation)",
        )
    } else {
        (raw.to_owned(), "")
    };
    Err(ToolError::new(
        ToolErrorKind::InvalidJson,
        format!(
            "<system-reminder>{error_message}\n\nYour argument string is decoded by the following code \
             snippet{hint}:\n```python\nimport json\n\nyour_tool_arguments = {}\njson.loads(your_tool_arguments)\n```\
             \n\n**You should recorrect the arguments in JSON format.**</system-reminder>",
            python_repr(&shown)
        ),
    ))
}

/// Validates `input` against `schema`; the error text is
/// `Input validation failed for tool '{name}': {message}` with Python `jsonschema` wording.
///
/// ```
/// let schema = serde_json::json!({"properties": {"text": {"type": "string"}}, "required": ["text"], "type": "object"});
/// let input = as_tools::parse_arguments(r#"{"text": 5}"#).unwrap();
/// let err = as_tools::validate_arguments("echo", &schema, &input).unwrap_err();
/// assert_eq!(err.model_text(), "Input validation failed for tool 'echo': 5 is not of type 'string'");
/// ```
pub fn validate_arguments(name: &str, schema: &JsonValue, input: &JsonMap) -> Result<(), ToolError> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        ToolError::new(ToolErrorKind::Registration, format!("Invalid input schema of tool '{name}': {e}"))
    })?;
    let instance = JsonValue::Object(input.clone());
    match validator.validate(&instance) {
        Ok(()) => Ok(()),
        Err(e) => Err(ToolError::new(
            ToolErrorKind::InvalidInput,
            format!("Input validation failed for tool '{name}': {}", python_validation_message(&e)),
        )),
    }
}

/// [`parse_arguments`] then [`validate_arguments`].
pub fn parse_and_validate(name: &str, schema: &JsonValue, raw: &str) -> Result<JsonMap, ToolError> {
    let input = parse_arguments(raw)?;
    validate_arguments(name, schema, &input)?;
    Ok(input)
}

fn python_validation_message(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::{TypeKind, ValidationErrorKind as K};
    let inst = python_value_repr(e.instance());
    match e.kind() {
        K::Type { kind } => match kind {
            TypeKind::Single(t) => format!("{inst} is not of type '{t}'"),
            TypeKind::Multiple(set) => {
                let names: Vec<String> = set.iter().map(|t| format!("'{t}'")).collect();
                format!("{inst} is not of type {}", names.join(", "))
            }
        },
        K::Required { property } => format!("{} is a required property", python_value_repr(property)),
        K::Enum { options } => format!("{inst} is not one of {}", python_value_repr(options)),
        K::Constant { expected_value } => format!("{} was expected", python_value_repr(expected_value)),
        K::AdditionalProperties { unexpected } => {
            let names: Vec<String> = unexpected.iter().map(|u| python_repr(u)).collect();
            let verb = if names.len() == 1 { "was" } else { "were" };
            format!("Additional properties are not allowed ({} {verb} unexpected)", names.join(", "))
        }
        K::AnyOf { .. } => format!("{inst} is not valid under any of the given schemas"),
        K::Minimum { limit } => format!("{inst} is less than the minimum of {limit}"),
        K::Maximum { limit } => format!("{inst} is greater than the maximum of {limit}"),
        K::ExclusiveMinimum { limit } => format!("{inst} is less than or equal to the minimum of {limit}"),
        K::ExclusiveMaximum { limit } => format!("{inst} is greater than or equal to the maximum of {limit}"),
        K::MinLength { .. } => format!("{inst} is too short"),
        K::MaxLength { .. } => format!("{inst} is too long"),
        K::MinItems { .. } => format!("{inst} is too short"),
        K::MaxItems { .. } => format!("{inst} is too long"),
        K::Pattern { pattern } => format!("{inst} does not match {}", python_repr(pattern)),
        _ => e.to_string(),
    }
}

/// Python's `json.JSONDecodeError` wording for the common cases (`msg: line L column C (char N)`).
fn python_decode_message(raw: &str, e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let text = e.to_string();
    let msg = if text.starts_with("EOF while parsing a string") {
        "Unterminated string starting at"
    } else if text.starts_with("trailing characters") {
        "Extra data"
    } else if text.starts_with("key must be a string") {
        "Expecting property name enclosed in double quotes"
    } else if text.starts_with("expected `,` or `}`") || text.starts_with("expected `,` or `]`") {
        "Expecting ',' delimiter"
    } else if text.starts_with("expected `:`") {
        "Expecting ':' delimiter"
    } else if e.classify() == Category::Eof || text.starts_with("expected value") || text.starts_with("expected ident")
    {
        "Expecting value"
    } else {
        "Invalid JSON"
    };
    let (line, column) = (e.line(), e.column());
    // char offset of (line, column), both 1-based in serde_json.
    let mut offset = 0usize;
    for (i, l) in raw.split('\n').enumerate() {
        if i + 1 == line {
            offset += column.saturating_sub(1).min(l.chars().count());
            break;
        }
        offset += l.chars().count() + 1;
    }
    let (column, offset) = if e.classify() == Category::Eof {
        (column + 1, raw.chars().count())
    } else if msg == "Expecting value" {
        // Python points at the start of the bad token, serde_json after its first character(s)
        let chars: Vec<char> = raw.chars().collect();
        let mut start = offset.min(chars.len());
        while start > 0 && chars[start - 1].is_ascii_alphanumeric() {
            start -= 1;
        }
        (column.saturating_sub(offset - start), start)
    } else {
        (column, offset)
    };
    format!("{msg}: line {line} column {column} (char {offset})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(raw: &str, expect: Option<JsonValue>) {
        assert_eq!(parse_arguments(raw).ok().map(JsonValue::Object), expect, "{raw}");
    }

    /// Objects json.loads reads as they are, which serde_json's `Value` reader misreads or refuses.
    #[test]
    fn objects_are_read_as_json_loads_reads_them() {
        for (raw, expect) in [
            (r#"{"$serde_json::private::Number": "1"}"#, json!({"$serde_json::private::Number": "1"})),
            (
                r#"{"a": {"$serde_json::private::Number": "abc"}}"#,
                json!({"a": {"$serde_json::private::Number": "abc"}}),
            ),
            (r#"{"a": 1, "a": 2}"#, json!({"a": 2})),
            (r#"{"a": NaN}"#, json!({"a": null})),
        ] {
            check(raw, Some(expect));
        }
    }

    #[test]
    fn repairs_almost_json() {
        check(r#"{"text": "repaired"#, Some(json!({"text": "repaired"})));
        check(r#"{"a": 1, "b": [1, 2"#, Some(json!({"a": 1, "b": [1, 2]})));
        check(r#"{"a": 1,}"#, Some(json!({"a": 1})));
        check(r#"{'a': 'x', b: True, c: None}"#, Some(json!({"a": "x", "b": true, "c": null})));
        check("```json\n{\"a\": 1}\n```", Some(json!({"a": 1})));
        check(r#"{"a": 1, "b":"#, Some(json!({"a": 1})));
        check(r#"{"a": tr"#, Some(json!({"a": true})));
        check(r#"{"a": 12."#, Some(json!({"a": 12})));
        check(r#"{"a": "x\"y"}"#, Some(json!({"a": "x\"y"})));
        check(r#"{"a": 1 "b": 2}"#, Some(json!({"a": 1, "b": 2})));
        check("", None);
        check("[1, 2]", None);
        check("hello", None);
    }

    #[test]
    fn non_object_error_is_2_0_4_text() {
        let err = parse_arguments("[1, 2]").unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::InvalidJson);
        assert_eq!(
            err.model_text(),
            "<system-reminder>Error: Your argument string is decoded into a <class 'list'> object, but a dict object \
             is expected!\n\nYour argument string is decoded by the following code snippet:\n```python\nimport json\n\n\
             your_tool_arguments = '[1, 2]'\njson.loads(your_tool_arguments)\n```\n\n**You should recorrect the \
             arguments in JSON format.**</system-reminder>"
        );
    }

    #[test]
    fn long_inputs_are_truncated_in_the_message() {
        let raw = format!("[{}]", "1,".repeat(150) + "1");
        let text = parse_arguments(&raw).unwrap_err().model_text().to_owned();
        assert!(text.contains("[TRUNCATE]"), "{text}");
        assert!(text.contains("(Because the JSON string is too long"), "{text}");
    }

    #[test]
    fn decode_error_wording() {
        let text = parse_arguments("nope").unwrap_err().model_text().to_owned();
        assert!(
            text.contains("a JSONDecodeError was raised with message: Expecting value: line 1 column 1 (char 0)."),
            "{text}"
        );
    }

    #[test]
    fn validation_messages_use_python_wording() {
        let schema = json!({"properties": {"city": {"type": "string"}, "n": {"enum": ["a", "b"]}}, "required": ["city"], "type": "object"});
        let check = |raw: &str, expect: &str| {
            let input = parse_arguments(raw).unwrap();
            let got = validate_arguments("t", &schema, &input).err().map(|e| e.model_text().to_owned());
            assert_eq!(got.as_deref(), Some(expect), "{raw}");
        };
        check("{}", "Input validation failed for tool 't': 'city' is a required property");
        check(r#"{"city": 5}"#, "Input validation failed for tool 't': 5 is not of type 'string'");
        check(r#"{"city": "x", "n": "c"}"#, "Input validation failed for tool 't': 'c' is not one of ['a', 'b']");
    }
}
