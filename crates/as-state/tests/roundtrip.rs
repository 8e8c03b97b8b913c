//! Property tests: any generated `AgentState` (unicode, big integers, every block and state)
//! survives value → JSON → value unchanged, and JSON → value → JSON is a fixpoint.

#![cfg(test)]

use as_message::{ContentBlock, Msg, from_json, to_json};
use as_state::AgentState;
use as_state::test_utils::arb;
use proptest::prelude::*;

/// An internally tagged enum around a message (as events are).
#[derive(serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Tagged {
    Message(Msg),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn agent_state_value_json_value(state in arb::agent_state()) {
        let json = to_json(&state);
        let back: AgentState = from_json(&json).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?;
        prop_assert_eq!(&back, &state);
        // JSON → value → JSON is a fixpoint.
        prop_assert_eq!(to_json(&back), json);
    }

    /// `json_depth` (computed from the value) is the nesting depth of the JSON `to_json` writes, as
    /// pydantic counts it, for states, messages and blocks; deep free-form values are checked in
    /// `json_depth_at_the_limit`.
    #[test]
    fn json_depth_is_the_written_depth(state in arb::agent_state(), msg in arb::msg()) {
        use as_message::{JsonDepth, json_text_depth};
        prop_assert_eq!(state.json_depth(), json_text_depth(&to_json(&state)), "{}", to_json(&state));
        prop_assert_eq!(msg.json_depth(), json_text_depth(&to_json(&msg)), "{}", to_json(&msg));
        for block in &msg.content {
            prop_assert_eq!(block.json_depth(), json_text_depth(&to_json(block)), "{}", to_json(block));
        }
    }

    /// The fast writer behind `to_json` is byte-identical to `serde_json::to_string`.
    #[test]
    fn fast_writer_matches_serde_json(state in arb::agent_state()) {
        prop_assert_eq!(to_json(&state), serde_json::to_string(&state).unwrap());
        let value: serde_json::Value = serde_json::from_str(&to_json(&state)).unwrap();
        prop_assert_eq!(to_json(&value), serde_json::to_string(&value).unwrap());
    }

    /// The hand-written path (`WriteJson`, taken under `to_json`) gives the derived path's bytes
    /// (`serde_json` never takes it), also inside other types and for `serde_json::to_value`.
    #[test]
    fn hand_written_msg_matches_derived(msg in arb::msg(), state in arb::agent_state()) {
        use as_message::WriteJson;
        let derived = serde_json::to_string(&msg).unwrap();
        let mut hand = String::new();
        msg.write_json(&mut hand);
        prop_assert_eq!(&hand, &derived);
        prop_assert_eq!(to_json(&msg), derived);
        // Through serde containers: a Vec, an Option, an internally tagged enum (which adds a key
        // and so must not get the hand-written bytes), a map value.
        let in_vec = vec![msg.clone(), msg.clone()];
        prop_assert_eq!(to_json(&in_vec), serde_json::to_string(&in_vec).unwrap());
        let tagged = Tagged::Message(msg.clone());
        let tagged_json = to_json(&tagged);
        prop_assert!(tagged_json.starts_with(r#"{"kind":"message","name":"#), "{}", tagged_json);
        prop_assert_eq!(tagged_json, serde_json::to_string(&tagged).unwrap());
        let mut by_name = std::collections::BTreeMap::new();
        by_name.insert("m", Some(&state));
        prop_assert_eq!(to_json(&by_name), serde_json::to_string(&by_name).unwrap());
        let value = serde_json::to_value(&state).unwrap();
        prop_assert_eq!(value, serde_json::from_str::<serde_json::Value>(&to_json(&state)).unwrap());
    }

    #[test]
    fn msg_value_json_value(msg in arb::msg()) {
        let json = to_json(&msg);
        let back: Msg = from_json(&json).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?;
        prop_assert_eq!(&back, &msg);
        prop_assert_eq!(to_json(&back), json);
    }

    #[test]
    fn block_value_json_value(block in arb::content_block()) {
        let json = to_json(&block);
        prop_assert!(json.starts_with(&format!(r#"{{"type":"{}""#, block.block_type().as_str())), "type first: {}", json);
        let back: ContentBlock = from_json(&json).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?;
        prop_assert_eq!(&back, &block);
    }

    /// Blocks written without `type` (as some producers do) are still recognised, in pydantic's union order.
    #[test]
    fn block_without_type_is_dispatched(block in arb::content_block()) {
        let mut value: serde_json::Value = serde_json::from_str(&to_json(&block)).unwrap();
        value.as_object_mut().unwrap().shift_remove("type");
        let text = value.to_string();
        let back: ContentBlock = from_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        // A block whose keys fit an earlier member is read as that member (pydantic does the same);
        // otherwise it is the same block.
        let earlier_fit = matches!(
            (&block, &back),
            (_, ContentBlock::Text(_)) | (ContentBlock::Hint(_) | ContentBlock::ToolCall(_) | ContentBlock::ToolResult(_) | ContentBlock::Data(_), ContentBlock::Thinking(_))
        );
        prop_assert!(back == block || earlier_fit, "{:?} became {:?}", block, back);
    }

    /// Canonical bytes are stable: whatever JSON we accept, writing what we read and reading it again
    /// writes the same bytes (here: a state written with keys shuffled and defaults omitted).
    #[test]
    fn canonical_form_is_a_fixpoint(state in arb::agent_state(), drop_mask in any::<u16>(), reverse in any::<bool>()) {
        let mut value: serde_json::Value = serde_json::from_str(&to_json(&state)).unwrap();
        let map = value.as_object_mut().unwrap();
        let defaultable = ["summary", "context", "cur_iter", "permission_context", "tool_context", "tasks_context", "middle_context"];
        for (i, key) in defaultable.iter().enumerate() {
            if drop_mask & (1 << i) != 0 {
                map.shift_remove(*key);
            }
        }
        if reverse {
            let entries: Vec<_> = std::mem::take(map).into_iter().rev().collect();
            map.extend(entries);
        }
        let once: AgentState = from_json(&value.to_string()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let json1 = to_json(&once);
        let twice: AgentState = from_json(&json1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(to_json(&twice), json1);
    }
}

/// At and past the readers' limit, in every free-form place of a state (the places the generated
/// states fill only a few levels deep): the depth is exact up to `MAX_JSON_DEPTH` and
/// `MAX_JSON_DEPTH + 1` past it, and a state at the limit reads back while one past it is refused.
#[test]
fn json_depth_at_the_limit() {
    use as_message::{
        ContentBlock, JsonDepth, MAX_JSON_DEPTH, Role, TextOrBlocks, ThinkingBlock, ToolResultBlock, ToolResultState,
        json, json_text_depth,
    };
    let nest = |n: usize| (0..n).fold(json!(1), |v, _| json!([v]));
    // Each place, and its level in a state's JSON (the free-form value itself is one level more).
    type Place = fn(&mut AgentState, serde_json::Value);
    let places: [(&str, Place); 5] = [
        ("middle_context", |s, v| {
            s.middle_context.insert("k".into(), v);
        }),
        ("message metadata", |s, v| {
            let mut m = Msg::user("u", "x");
            m.metadata.insert("k".into(), v);
            s.context.push(m);
        }),
        ("thinking extra", |s, v| {
            let mut b = ThinkingBlock::new("t");
            b.extra.insert("k".into(), v);
            s.context.push(Msg::new("a", Role::Assistant, vec![ContentBlock::Thinking(b)]));
        }),
        ("tool result metadata", |s, v| {
            let mut r = ToolResultBlock::new("c", "Read", TextOrBlocks::Text("out".into()), ToolResultState::Success);
            r.metadata.insert("k".into(), v);
            s.context.push(Msg::new("a", Role::Assistant, vec![ContentBlock::ToolResult(r)]));
        }),
        ("task metadata", |s, v| {
            let mut t = as_state::Task::new("s", "d");
            t.metadata.insert("k".into(), v);
            s.tasks_context.tasks.push(t);
        }),
    ];
    // Run on a thread with a big stack: the readers and serde_json's drop are recursive.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            for (name, place) in places {
                // The level of the place: a value 10 deep there makes the state 10 deeper than it.
                let mut probe = AgentState::for_session("s");
                place(&mut probe, nest(10));
                let base = probe.json_depth() - 10;
                for depth in [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 40] {
                    let mut state = AgentState::for_session("s");
                    place(&mut state, nest(depth - base));
                    let json = to_json(&state);
                    assert_eq!(json_text_depth(&json), depth, "{name}");
                    assert_eq!(state.json_depth(), depth.min(MAX_JSON_DEPTH + 1), "{name} at {depth}");
                    let read = as_state::state_from_json(&json);
                    assert_eq!(read.is_ok(), depth <= MAX_JSON_DEPTH, "{name} at {depth}: {read:?}");
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
