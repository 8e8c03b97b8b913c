//! The formatter reproduces 2.0.4's `OpenAIChatFormatter` / `DashScopeChatFormatter` output byte for byte.
// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use as_message::Msg;
use as_model_openai::{ChatFormatter, FormatterOptions};
use serde_json::Value;

fn golden(name: &str) -> (Vec<Msg>, Value) {
    let path = format!("{}/../../tests/fixtures/agentscope-2.0.4/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap();
    let input: Vec<Msg> = as_message::from_value(v["input"].clone()).unwrap();
    (input, v["output"].clone())
}

/// The media identifier is a random shortuuid in 2.0.4; take the one the golden run drew.
fn golden_media_id(output: &Value) -> String {
    let s = output.to_string();
    let start = s.find("identifier [").expect("golden has a media identifier") + "identifier [".len();
    let end = start + s[start..].find(']').unwrap();
    s[start..end].to_owned()
}

fn check(name: &str, opts: FormatterOptions) {
    let (input, expected) = golden(name);
    let id = golden_media_id(&expected);
    assert_eq!(id.len(), 22);
    let formatter = ChatFormatter::new(opts.with_media_id(Arc::new(move || id.clone())));
    let got = Value::Array(formatter.format(&input));
    // Compare serialized bytes: key order matters on the wire (Map equality ignores it).
    let got_s = serde_json::to_string_pretty(&got).unwrap();
    let want_s = serde_json::to_string_pretty(&expected).unwrap();
    assert_eq!(got_s, want_s, "{name}");
}

#[test]
fn openai_chat_golden() {
    check("formatter-openai-chat.json", FormatterOptions::openai());
}

#[test]
fn dashscope_chat_golden() {
    check("formatter-dashscope-chat.json", FormatterOptions::dashscope(false));
}

#[test]
fn dashscope_chat_thinking_golden() {
    check("formatter-dashscope-chat-thinking.json", FormatterOptions::dashscope(true));
}

/// Thinking across segments (split by a tool result and a hint): parts joined with `"\n"`, and a
/// segment of thinking alone sent with `content: null`. Made with the real 2.0.4 formatter by
/// `tests/goldens/dashscope_thinking_segments.py`.
#[test]
fn dashscope_thinking_segments_golden() {
    let path = format!("{}/tests/goldens/dashscope-thinking-segments.json", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let input: Vec<Msg> = as_message::from_value(v["input"].clone()).unwrap();
    let got = Value::Array(ChatFormatter::new(FormatterOptions::dashscope(true)).format(&input));
    assert_eq!(serde_json::to_string_pretty(&got).unwrap(), serde_json::to_string_pretty(&v["output"]).unwrap());
}

#[test]
fn thinking_is_dropped_without_reasoning_content_and_empty_messages_are_skipped() {
    use as_message::{ContentBlock, Role, ThinkingBlock, ToolCallBlock};
    let m = Msg::new("a", Role::Assistant, vec![ContentBlock::Thinking(ThinkingBlock::new("hidden"))]);
    assert!(ChatFormatter::new(FormatterOptions::openai()).format(&[m]).is_empty());
    let m = Msg::new("a", Role::Assistant, vec![ContentBlock::ToolCall(ToolCallBlock::new("c", "f", "{}"))]);
    let out = ChatFormatter::new(FormatterOptions::openai()).format(&[m]);
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"[{"role":"assistant","name":"a","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]"#
    );
}

/// Media a formatter does not take, returned by a tool: described as 2.0.4 describes it (by its main
/// type; a URL named, base64 data saved to a file in the temp directory whose path is named). Made
/// with the real 2.0.4 formatters by `tests/goldens/unsupported_media.py`, which records each
/// (random) saved path as `{saved}` followed by its extension.
#[test]
fn unsupported_media_in_tool_results_golden() {
    let path = format!("{}/tests/goldens/unsupported-media.json", env!("CARGO_MANIFEST_DIR"));
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(cases.len(), 2);
    let prefix = format!("{}/agentscope-", std::env::temp_dir().display());
    for case in cases {
        let opts = match case["formatter"].as_str().unwrap() {
            "openai" => FormatterOptions::openai(),
            "dashscope" => FormatterOptions::dashscope(false),
            other => panic!("{other}"),
        };
        let input: Vec<Msg> = as_message::from_value(case["input"].clone()).unwrap();
        let got = serde_json::to_string_pretty(&Value::Array(ChatFormatter::new(opts).format(&input))).unwrap();
        // Each saved path: `<temp dir>/agentscope-<32 hex digits>`, then the extension.
        let mut normalized = String::new();
        let mut saved = Vec::new();
        let mut rest = got.as_str();
        while let Some(at) = rest.find(&prefix) {
            normalized.push_str(&rest[..at]);
            let name_end = at + prefix.len() + 32;
            let ext_len = rest[name_end..].find(".</system-reminder>").unwrap();
            saved.push(rest[at..name_end + ext_len].to_owned());
            normalized.push_str("{saved}");
            rest = &rest[name_end..];
        }
        normalized.push_str(rest);
        let want = serde_json::to_string_pretty(&case["output"]).unwrap();
        assert_eq!(normalized, want, "{}", case["formatter"]);
        // The files hold the tool's bytes.
        let datas: Vec<Vec<u8>> = case["input"][1]["content"][1]["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["source"]["data"].as_str())
            .map(|d| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, d).unwrap())
            .collect();
        assert_eq!(saved.len(), datas.len());
        for (p, bytes) in saved.iter().zip(&datas) {
            assert_eq!(&std::fs::read(p).unwrap(), bytes, "{p}");
        }
        for p in &saved {
            let _ = std::fs::remove_file(p);
        }
    }
}
