//! No panic on any input: argument repair, rule matching, command splitting, schema validation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_tools::{bash_rule_matches, fnmatch, parse_arguments, split_command_segments, validate_arguments};
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z \\\\\"'\\n{}\\[\\]:,é]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec(("[a-z_]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Valid objects parse to themselves.
    #[test]
    fn objects_round_trip(kv in proptest::collection::vec(("[a-z_]{1,6}", json_value()), 0..5)) {
        let v = Value::Object(kv.into_iter().collect());
        let parsed = parse_arguments(&v.to_string()).unwrap();
        prop_assert_eq!(Value::Object(parsed), v);
    }

    /// Any prefix of a valid object (a model stream cut short) repairs to an object or fails
    /// with the model-facing text; never a panic.
    #[test]
    fn truncated_objects_never_panic(kv in proptest::collection::vec(("[a-z_]{1,6}", json_value()), 1..5), cut in 0usize..200) {
        let text = Value::Object(kv.into_iter().collect()).to_string();
        let chars: Vec<char> = text.chars().collect();
        let prefix: String = chars[..cut.min(chars.len())].iter().collect();
        match parse_arguments(&prefix) {
            Ok(_) => {}
            Err(e) => prop_assert!(e.model_text().starts_with("<system-reminder>Error: ")),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,80}", t in "[-a-z*?\\[\\]!\\\\/.:( )$`'\";&|\\n]{0,30}") {
        let _ = parse_arguments(&s);
        let _ = fnmatch(&s, &t);
        let _ = bash_rule_matches(&t, &s);
        let _ = split_command_segments(&s);
        let _ = split_command_segments(&t);
        if let Ok(input) = parse_arguments(&s) {
            let schema = json!({"properties": {"a": {"type": "string"}}, "required": ["a"], "type": "object"});
            let _ = validate_arguments("t", &schema, &input);
        }
    }
}
