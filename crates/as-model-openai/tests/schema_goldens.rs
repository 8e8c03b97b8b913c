//! Tool schemas are flattened exactly as 2.0.4's `_flatten_json_schema` (what its `OpenAIChatModel`
//! sends): the goldens in `tests/goldens/flatten-json-schema.json` were made with the real function by
//! `tests/goldens/flatten_json_schema.py`, and each output is compared byte for byte.
// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_message::Msg;
use as_model::{ChatRequest, ToolSchema};
use as_model_openai::{OpenAiCompatibleConfig, OpenAiCompatibleModel, inline_refs};
use serde_json::{Value, json};

fn goldens() -> Vec<(String, Value, String)> {
    let path = format!("{}/tests/goldens/flatten-json-schema.json", env!("CARGO_MANIFEST_DIR"));
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(cases.len() >= 15, "{path}");
    cases
        .into_iter()
        .map(|c| {
            (c["name"].as_str().unwrap().to_owned(), c["schema"].clone(), c["flattened"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn schemas_are_flattened_byte_for_byte_as_2_0_4() {
    for (name, schema, want) in goldens() {
        let got = serde_json::to_string(&inline_refs(&schema)).unwrap();
        assert_eq!(got, want, "{name}");
    }
}

/// The request an OpenAI-flavor model sends carries the flattened schemas: a recursive tree is a
/// few hundred bytes, not megabytes.
#[test]
fn the_request_body_carries_the_flattened_schemas() {
    let model = OpenAiCompatibleModel::new(OpenAiCompatibleConfig::custom("http://127.0.0.1:9/v1", "m")).unwrap();
    for (name, schema, want) in goldens() {
        let request = ChatRequest::new(vec![Msg::user("user", "Hi")])
            .with_tools(vec![ToolSchema::new("tool", "A tool.", schema)]);
        let body = model.request_body(&request).unwrap();
        let sent = serde_json::to_string(&body["tools"][0]["function"]["parameters"]).unwrap();
        assert_eq!(sent, want, "{name}");
        assert!(serde_json::to_vec(&body).unwrap().len() < 4096, "{name}");
    }
}

/// A parameter named like a section keyword is a parameter (2.0.4 drops a `definitions` or
/// `$defs` parameter, and leaves a `properties` object holding a `$ref` parameter unresolved).
#[test]
fn parameters_named_like_keywords_are_kept() {
    let schema = json!({
        "type": "object",
        "properties": {
            "definitions": {"type": "string"},
            "$defs": {"$ref": "#/$defs/P"},
            "$ref": {"type": "string"},
            "p": {"$ref": "#/definitions/P"}
        },
        "required": ["definitions"],
        "$defs": {"P": {"type": "integer"}}
    });
    assert_eq!(
        serde_json::to_string(&inline_refs(&schema)).unwrap(),
        r#"{"type":"object","properties":{"definitions":{"type":"string"},"$defs":{"type":"integer"},"$ref":{"type":"string"},"p":{"type":"integer"}},"required":["definitions"]}"#
    );
}

/// References that fan out without recursion (each level using the next twice) would double the
/// schema per level: past the limit the schema is sent as it is, with its `$defs`.
#[test]
fn a_schema_that_would_inline_too_large_is_sent_as_it_is() {
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {
                "a": {"$ref": format!("#/$defs/D{}", i + 1)},
                "b": {"$ref": format!("#/$defs/D{}", i + 1)}
            }}),
        );
    }
    defs.insert("D40".into(), json!({"type": "string"}));
    let schema = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    assert_eq!(inline_refs(&schema), schema);
    // A fan-out that stays under the limit is inlined.
    let mut small = schema.clone();
    small["properties"]["root"]["$ref"] = json!("#/$defs/D30");
    let flat = serde_json::to_string(&inline_refs(&small)).unwrap();
    assert!(!flat.contains("$ref") && !flat.contains("$defs"), "{flat}");
    assert_eq!(flat.matches(r#"{"type":"string"}"#).count(), 1024);
}
