//! Every recorded 2.0.4 event (and every client event of the scenarios) parses and re-serializes
//! to the same JSON, byte for byte in compact form.

#![cfg(test)]

use std::path::PathBuf;

use as_agent::{AgentEvent, EventType};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/agentscope-2.0.4")
}

/// Python's `json.dumps(obj, ensure_ascii=False)` separators, applied to our compact output.
fn python_dumps(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let items: Vec<String> =
                m.iter().map(|(k, v)| format!("{}: {}", serde_json::to_string(k).unwrap(), python_dumps(v))).collect();
            format!("{{{}}}", items.join(", "))
        }
        serde_json::Value::Array(a) => {
            format!("[{}]", a.iter().map(python_dumps).collect::<Vec<_>>().join(", "))
        }
        other => serde_json::to_string(other).unwrap(),
    }
}

#[test]
fn every_recorded_event_round_trips_byte_identically() {
    let mut files: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("events-") && n.ends_with(".jsonl")
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 22, "expected the 22 recorded event files");
    let mut count = 0;
    let mut seen = std::collections::BTreeSet::new();
    for f in &files {
        for line in std::fs::read_to_string(f).unwrap().lines() {
            let ev: AgentEvent = as_message::from_json(line).unwrap_or_else(|e| panic!("{}: {e}\n{line}", f.display()));
            seen.insert(format!("{:?}", ev.event_type()));
            let ours = as_message::to_json(&ev);
            // Our compact bytes are pydantic's model_dump_json(); rendered with json.dumps
            // separators they equal the recorded line exactly.
            let reparsed: serde_json::Value = serde_json::from_str(&ours).unwrap();
            assert_eq!(python_dumps(&reparsed), line, "{}", f.display());
            let compact_expected =
                serde_json::to_string(&serde_json::from_str::<serde_json::Value>(line).unwrap()).unwrap();
            assert_eq!(ours, compact_expected);
            count += 1;
        }
    }
    assert!(count > 200, "only {count} events");
    assert_eq!(seen.len(), 19, "{seen:?}");
}

#[test]
fn client_events_of_the_scenarios_round_trip() {
    let mut n = 0;
    for name in ["hitl-confirm", "hitl-external", "user-interrupt"] {
        let text = std::fs::read_to_string(fixtures().join(format!("scenario-{name}.json"))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for phase in v["phases"].as_array().unwrap() {
            let input = &phase["input"];
            if input.get("type").is_none() {
                continue;
            }
            let expected = serde_json::to_string(input).unwrap();
            let ev: AgentEvent = as_message::from_json(&expected).unwrap();
            assert!(ev.is_incoming());
            assert_eq!(as_message::to_json(&ev), expected);
            n += 1;
        }
    }
    assert_eq!(n, 7);
}

#[test]
fn unknown_or_mismatched_type_is_rejected() {
    let err = as_message::from_json::<AgentEvent>(r#"{"type":"NOPE","reply_id":"r"}"#).unwrap_err();
    assert!(err.to_string().contains("unknown event type"), "{err}");
    let err = as_message::from_json::<AgentEvent>(r#"{"reply_id":"r"}"#).unwrap_err();
    assert!(err.to_string().contains("type"), "{err}");
    let err = as_message::from_json::<AgentEvent>(r#"{"type":"USER_INTERRUPT"}"#).unwrap_err();
    assert!(err.to_string().contains("reply_id"), "{err}");
    let ok = as_message::from_json::<AgentEvent>(r#"{"type":"USER_INTERRUPT","reply_id":"r"}"#).unwrap();
    assert_eq!(ok.event_type(), EventType::UserInterrupt);
    assert_eq!(ok.reply_id(), Some("r"));
    assert_eq!(ok.id().len(), 32);
}

#[test]
fn the_json_schema_accepts_every_recorded_event_and_names_every_type() {
    let schema = serde_json::to_value(schemars::schema_for!(AgentEvent)).unwrap();
    let text = schema.to_string();
    for tag in [
        "REPLY_START",
        "REPLY_END",
        "MODEL_CALL_START",
        "MODEL_CALL_END",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "THINKING_BLOCK_START",
        "THINKING_BLOCK_DELTA",
        "THINKING_BLOCK_END",
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
        "HINT_BLOCK",
        "TOOL_CALL_START",
        "TOOL_CALL_DELTA",
        "TOOL_CALL_END",
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_DATA_DELTA",
        "TOOL_RESULT_END",
        "EXCEED_MAX_ITERS",
        "REQUIRE_USER_CONFIRM",
        "USER_CONFIRM_RESULT",
        "REQUIRE_EXTERNAL_EXECUTION",
        "EXTERNAL_EXECUTION_RESULT",
        "USER_INTERRUPT",
        "CUSTOM",
    ] {
        assert!(text.contains(&format!("\"const\":\"{tag}\"")), "{tag} missing from the schema");
    }
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let p = entry.unwrap().path();
        if !p.file_name().unwrap().to_string_lossy().starts_with("events-") {
            continue;
        }
        for line in std::fs::read_to_string(&p).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Err(e) = validator.validate(&v) {
                panic!("{}: {e}\n{line}", p.display());
            }
            n += 1;
        }
    }
    assert!(n > 200);
    let bad = serde_json::json!({"id": "x", "created_at": "t", "metadata": {}, "type": "REPLY_END", "reply_id": "r"});
    assert!(validator.validate(&bad).is_err(), "missing session_id and finished_reason must fail");
}

#[test]
fn the_json_schema_is_deterministic() {
    let a = serde_json::to_string(&schemars::schema_for!(AgentEvent)).unwrap();
    let b = serde_json::to_string(&schemars::schema_for!(AgentEvent)).unwrap();
    assert_eq!(a, b, "generated defaults (ids, timestamps) must not leak into the schema");
}
