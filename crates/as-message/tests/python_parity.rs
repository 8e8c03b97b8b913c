//! Messages read as AgentScope Python 2.0.4 reads them. Every expected value below was produced by
//! the real package (agentscope==2.0.4 on pydantic 2.14.4), not written by hand:
//! `Msg.model_validate_json(input).model_dump_json()`, or `None` where pydantic refuses the input.
//! Every read path must give those bytes (or refuse), and what it writes must read back unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use as_message::read::{Cursor, fast_or_from_json, msg};
use as_message::{Msg, from_json, from_json_slice, to_json};

/// (input, what Python writes after reading it, or `None` when it refuses it).
type Case = (&'static str, Option<&'static str>);

/// One way of reading a message; `Ok(None)` means "declined, another reader decides".
type Reader = fn(&str) -> Result<Option<Msg>, String>;

const FROM_JSON: (&str, Reader) = ("from_json", |s| from_json::<Msg>(s).map(Some).map_err(|e| e.to_string()));
const FROM_SLICE: (&str, Reader) =
    ("from_json_slice", |s| from_json_slice::<Msg>(s.as_bytes()).map(Some).map_err(|e| e.to_string()));
const FAST: (&str, Reader) = ("fast_or_from_json", |s| fast_or_from_json(s, msg).map(Some).map_err(|e| e.to_string()));
/// The hand-written reader alone: it may decline, but what it reads must be right.
const CURSOR: (&str, Reader) = ("cursor", |s| {
    let mut c = Cursor::new(s);
    Ok(msg(&mut c).filter(|_| c.is_at_end()))
});
/// The serde impls alone (what a caller of `serde_json::from_str` gets).
const SERDE: (&str, Reader) = ("serde_json", |s| serde_json::from_str::<Msg>(s).map(Some).map_err(|e| e.to_string()));

fn check(cases: &[Case], readers: &[(&str, Reader)]) {
    for &(input, want) in cases {
        for &(name, read) in readers {
            match (read(input), want) {
                (Ok(Some(m)), Some(out)) => {
                    assert_eq!(to_json(&m), out, "{name} on {input}");
                    // The derived serialization (any serializer but `to_json`'s) writes the same bytes.
                    assert_eq!(serde_json::to_string(&m).unwrap(), out, "{name}: serde_json::to_string");
                    assert_eq!(to_json(&from_json::<Msg>(out).unwrap()), out, "{name}: written bytes read back");
                }
                (Ok(None), _) | (Err(_), None) => {}
                (Ok(Some(m)), None) => panic!("{name} accepted {input} (Python refuses it): {}", to_json(&m)),
                (Err(e), Some(_)) => panic!("{name} refused {input} (Python reads it): {e}"),
            }
        }
        if want.is_some() {
            assert!(from_json::<Msg>(input).is_ok(), "some reader must read {input}");
        }
    }
}

/// An object in free-form data whose key is one of serde_json's private markers
/// (`$serde_json::private::Number`, `…RawValue`) is an ordinary object to Python; serde_json's `Value`
/// reader took it for a number or raw JSON (or refused the message).
#[test]
fn marker_keys_in_free_form_data_are_ordinary_keys() {
    check(MARKERS, &[FROM_JSON, FROM_SLICE, FAST, CURSOR, SERDE]);
}

const MARKERS: &[Case] = &[
    // Free-form metadata holding objects with serde_json's private marker keys.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"abc"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"abc"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":[{"$serde_json::private::Number":"1.50"}]},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":[{"$serde_json::private::Number":"1.50"}]},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::RawValue":"{\"a\":1}"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::RawValue":"{\"a\":1}"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"1","y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"1","y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::Number":"123"},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::Number":"123"},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::RawValue":"[1,2]"},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::RawValue":"[1,2]"},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Not canonical (key order, whitespace): read by serde.
    (
        r#"{"role":"user","name":"u","content":[],"id":"m","created_at":"t","metadata":{ "x" : { "$serde_json::private::Number" : "9e9" } , "y":1E2}}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"9e9"},"y":100.0},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Tool result metadata, with `type` first (streamed) and last (buffered).
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::Number":"123"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::Number":"123"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"$serde_json::private::Number":"123"},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::RawValue":"7"}},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::RawValue":"7"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Thinking extras.
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","$serde_json::private::Number":"123"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","$serde_json::private::Number":"123"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","id":"c","sig":{"$serde_json::private::Number":"abc"},"type":"thinking"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"abc"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Typed fields: an object is not a number, whatever its key.
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":{"$serde_json::private::Number":"5"},"output_tokens":1}}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":{"$serde_json::private::RawValue":"\"x\""},"id":"b"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
];

/// Free-form values are read from their text on every path, within pydantic's nesting limit for the
/// whole document (200 levels of non-empty containers): `metadata` (level 2 of a message) holding
/// 198 arrays around a number is read by Python 2.0.4, 199 are refused (measured).
#[test]
fn free_form_nesting_stops_where_python_stops() {
    let doc = |n: usize| {
        let nested = format!("{}1{}", "[".repeat(n), "]".repeat(n));
        format!(r#"{{"name":"u","content":[],"role":"user","id":"m","metadata":{{"a":{nested}}},"created_at":"t"}}"#)
    };
    // On a thread with a tokio worker's stack (2 MiB): the deep reads are recursive.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for (n, python_reads) in [(64, true), (130, true), (198, true), (199, false), (100_000, false)] {
                let text = doc(n);
                for (name, read) in [FROM_JSON, FROM_SLICE, FAST, CURSOR] {
                    match read(&text) {
                        Ok(Some(m)) => {
                            assert!(python_reads, "{name} read {n} levels");
                            assert_eq!(
                                to_json(&m),
                                text.replace(
                                    r#""created_at":"t"}"#,
                                    r#""created_at":"t","finished_at":null,"usage":null}"#
                                )
                            );
                        }
                        Ok(None) => assert_eq!(name, "cursor"),
                        Err(e) => {
                            assert!(!python_reads, "{name} refused {n} levels: {e}");
                            assert!(e.contains("recursion limit"), "{name}: {e}");
                        }
                    }
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A repeated key is read as pydantic reads it: the last value counts, in typed objects (a repeated
/// `type` decides the block) as in free-form maps (where it keeps the first key's position, as a
/// Python dict does). serde's derived readers refused a repeated field, or read the first `type`.
/// (`serde_json::from_str` alone still refuses a repeated typed field: only the crate's readers.)
#[test]
fn repeated_keys_keep_the_last_value() {
    check(DUPLICATES, &[FROM_JSON, FROM_SLICE, FAST, CURSOR]);
}

const DUPLICATES: &[Case] = &[
    // A repeated key of a typed object: the last value counts.
    (
        r#"{"name":"a","name":"b","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"b","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":5,"content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"name":"late"}"#,
        Some(
            r#"{"name":"late","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"name":5}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"content":[]}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":2,"input_tokens":7}}"#,
        Some(
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":7,"output_tokens":2}}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"role":"user"}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Bash","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"role":"user"}"#,
        None,
    ),
    // A repeated `type` decides the block: the last one.
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1","type":"tool_call","name":"Bash","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"1","name":"Bash","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","type":"tool_call","id":"1","name":"Bash","input":"{}","type":"text"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"1","type":"text","text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1","type":"bogus"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"bogus","text":"x","id":"1","type":"text"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"text","text":"o","id":"t","type":"data","source":{"type":"url","url":"https://a.b","media_type":"text/html"}}],"state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"t","source":{"type":"url","url":"https://a.b/","media_type":"text/html"},"name":null}],"state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"base64","data":"AA==","media_type":"image/png","type":"url","url":"https://a.b"},"name":null}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"url","url":"https://a.b/","media_type":"image/png"},"name":null}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Repeated keys inside a block.
    (
        r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Read","input":"{}","state":"pending","suggested_rules":[],"state":"finished","name":"Bash"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Bash","input":"{}","state":"finished","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"a","sig":1,"id":"c","sig":{"k":2},"thinking":"b"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"b","id":"c","sig":{"k":2}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"a":1,"b":2,"a":3},"metadata":{"z":1,"y":2,"z":0}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"z":0,"y":2}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Free-form maps: the last value in the first position, at every level.
    (
        r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{"a":1,"b":{"x":1,"y":2,"x":[3]},"a":{"c":1}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{"a":{"c":1},"b":{"x":[3],"y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
];

/// `NaN`, `Infinity` and `-Infinity` (Python's `json` spellings) in free-form data are read, and
/// written back as `null` as pydantic writes a non-finite float; serde_json refused the document.
/// Other spellings, and integer or string fields holding one, are refused as pydantic refuses them.
#[test]
fn non_finite_floats_in_free_form_data_are_read() {
    check(NON_FINITE, &[FROM_JSON, FROM_SLICE, FAST, CURSOR]);
}

const NON_FINITE: &[Case] = &[
    // Python's non-finite floats in free-form data are read, and written back as null.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":NaN,"b":Infinity,"c":-Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":null,"b":null,"c":null},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":[NaN ,Infinity , -Infinity],"b":{"c":[{"d":NaN}]}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":[null,null,null],"b":{"c":[{"d":null}]}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"role":"user","name":"u","content":[],"id":"m","created_at":"t","metadata":{ "x" : NaN }}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":null},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":NaN,"max":Infinity}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":null,"max":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":-Infinity},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","score":NaN,"range":[-Infinity,Infinity]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","score":null,"range":[null,null]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Only those three spellings, and not in typed fields that refuse them.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":-NaN},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":+Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":nan},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":inf},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":Infinityx},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":- Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":NaN,"content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":NaN,"output_tokens":1}}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":Infinity}}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-Infinity}}"#,
        None,
    ),
];

/// A known difference (see the crate docs): pydantic reads integers of any size; `Usage`'s fields are
/// `i64`, so a larger integer is refused with an error naming the field and saying why (it said
/// "expected an integer"). The middle column is what Python writes for the input.
#[test]
fn integers_past_64_bits_are_an_error_naming_the_field() {
    for &((input, python), path) in BIG_INTEGERS {
        assert!(python.is_some(), "Python reads {input}");
        for e in [from_json::<Msg>(input).unwrap_err(), fast_or_from_json(input, msg).unwrap_err()] {
            assert_eq!(e.path(), path, "{e}");
            assert!(e.message().starts_with("integer out of range: "), "{e}");
        }
    }
}

const BIG_INTEGERS: &[(Case, &str)] = &[
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":9223372036854775808,"output_tokens":1}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":9223372036854775808,"output_tokens":1}}"#,
            ),
        ),
        "usage.input_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-9223372036854775809}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-9223372036854775809}}"#,
            ),
        ),
        "usage.output_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":"99999999999999999999","output_tokens":1}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":99999999999999999999,"output_tokens":1}}"#,
            ),
        ),
        "usage.input_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":" 1_000_000_000_000_000_000_000 "}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":1000000000000000000000}}"#,
            ),
        ),
        "usage.output_tokens",
    ),
];
