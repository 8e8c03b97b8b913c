//! JSON Schema agreement in both directions:
//! * every golden document validates against the schemas we publish (`docs/schemas/`, kept fresh by xtask);
//! * what we write validates against the schemas pydantic generates (`tests/fixtures/agentscope-2.0.4/*.schema.json`).

#![cfg(test)]

use as_message::{JsonValue, Msg, to_json};
use as_state::AgentState;
use as_state::test_utils::{arb, conversation_state};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/agentscope-2.0.4/");

fn load(path: &str) -> JsonValue {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ours(name: &str) -> jsonschema::Validator {
    let schema = load(&format!("{ROOT}/docs/schemas/{name}.schema.json"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("our {name} schema does not compile: {e}"))
}

fn pydantic(file: &str) -> jsonschema::Validator {
    let schema = load(&format!("{FIX}{file}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("pydantic's {file} does not compile: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, doc: &JsonValue, what: &str) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
}

fn golden(name: &str) -> JsonValue {
    load(&format!("{FIX}{name}"))
}

#[test]
fn goldens_validate_against_our_schemas() {
    let state = ours("agent-state");
    let record = ours("session-record");
    let msg = ours("msg");
    for name in ["empty_agent_state.compact.json", "rich_agent_state.compact.json"] {
        assert_valid(&state, &golden(name), name);
    }
    for name in ["session_record.compact.json", "redis-session-after-cycle.compact.json"] {
        assert_valid(&record, &golden(name), name);
    }
    let rich = golden("rich_agent_state.compact.json");
    for (i, m) in rich["context"].as_array().unwrap().iter().enumerate() {
        assert_valid(&msg, m, &format!("rich_agent_state context[{i}]"));
    }
    // validation.json: every accepted output validates too.
    let cases = golden("validation.json");
    for c in cases.as_array().unwrap() {
        if c["result"] != "accepted" || c["output"].to_string().contains('<') {
            continue;
        }
        let v = match c["model"].as_str().unwrap() {
            "Msg" => &msg,
            "AgentState" => &state,
            "SessionRecord" => &record,
            _ => continue,
        };
        assert_valid(v, &c["output"], c["case"].as_str().unwrap());
    }
}

#[test]
fn our_schemas_reject_what_pydantic_rejects() {
    let state = ours("agent-state");
    let msg = ours("msg");
    let bad_states = [
        r#"{"cur_iter":"three"}"#,
        r#"{"middle_context":null}"#,
        r#"{"tool_context":{"max_cache_files":1}}"#,
        r#"{"permission_context":{"mode":"DEFAULT"}}"#,
        r#"{"tasks_context":{"tasks":[{"subject":"s","description":"d"}]}}"#,
        r#"{"tool_context":{"max_cache_bytes":10000}}"#,
        r#"{"permission_context":{"allow_rules":{"Read":[{"tool_name":"Read","behavior":"allow","source":"session"}]}}}"#,
    ];
    for text in bad_states {
        assert!(!state.is_valid(&serde_json::from_str(text).unwrap()), "{text}");
    }
    // ... and accept what the readers (and pydantic) accept.
    let good_states = [
        r#"{"tool_context":{"max_cache_bytes":10000.5}}"#,
        r#"{"permission_context":{"allow_rules":{"Read":[{"tool_name":"Read","rule_content":null,"behavior":"allow","source":"session"}]}}}"#,
        r#"{"context":[{"name":"n","role":"assistant","content":[{"type":"thinking","thinking":"t"}]}]}"#,
    ];
    for text in good_states {
        let doc: JsonValue = serde_json::from_str(text).unwrap();
        assert!(state.is_valid(&doc), "{text}");
        as_state::state_from_json(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    let bad_msgs = [
        r#"{"name":"n","role":"assistant","content":"hi"}"#,
        r#"{"name":"n","role":"robot","content":[]}"#,
        r#"{"name":"n","role":"assistant","content":[{"type":"tool_call","id":"t","name":"x","input":{"a":1}}]}"#,
    ];
    for text in bad_msgs {
        assert!(!msg.is_valid(&serde_json::from_str(text).unwrap()), "{text}");
    }
}

fn samples<T: std::fmt::Debug>(strategy: impl Strategy<Value = T>, n: usize) -> Vec<T> {
    let mut runner = TestRunner::deterministic();
    (0..n).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
}

#[test]
fn our_output_validates_against_pydantic_schemas() {
    let state = pydantic("agent_state.schema.json");
    let msg = pydantic("msg.schema.json");
    let record = pydantic("session_record.schema.json");

    let rich: AgentState =
        as_message::from_json(&std::fs::read_to_string(format!("{FIX}rich_agent_state.compact.json")).unwrap())
            .unwrap();
    let mut states = vec![AgentState::default(), rich, conversation_state(40)];
    states.extend(samples(arb::agent_state(), 64));
    for (i, s) in states.iter().enumerate() {
        let doc: JsonValue = serde_json::from_str(&to_json(s)).unwrap();
        assert_valid(&state, &doc, &format!("state #{i}"));
        for (j, m) in s.context.iter().enumerate() {
            let doc: JsonValue = serde_json::from_str(&to_json(m)).unwrap();
            assert_valid(&msg, &doc, &format!("state #{i} message {j}"));
        }
    }
    for (i, m) in samples(arb::msg(), 64).iter().enumerate() {
        let doc: JsonValue = serde_json::from_str(&to_json::<Msg>(m)).unwrap();
        assert_valid(&msg, &doc, &format!("msg #{i}"));
    }

    let text = std::fs::read_to_string(format!("{FIX}session_record.compact.json")).unwrap();
    let rec: as_storage::SessionRecord = as_message::from_json(&text).unwrap();
    let doc: JsonValue = serde_json::from_str(&rec.to_canonical_json()).unwrap();
    assert_valid(&record, &doc, "session record");
}
