//! Golden bytes from AgentScope Python 2.0.4 survive a read and a write unchanged.

use as_state::AgentState;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/");

#[test]
fn compact_goldens_roundtrip_byte_identical() {
    for name in ["empty_agent_state.compact.json", "rich_agent_state.compact.json"] {
        let text = std::fs::read_to_string(format!("{FIX}{name}")).unwrap();
        let state: AgentState = as_message::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(as_message::to_json(&state), text, "{name}");
    }
}
