//! Messages and content blocks of AgentScope, wire-compatible with AgentScope Python 2.0.4.
//!
//! Every type here serializes to exactly the bytes of pydantic's `model_dump_json()`
//! (field order, explicit nulls, compact separators, raw UTF-8, float forms) and reads
//! tolerantly where pydantic does (blocks without `type`, lax numbers, missing defaults),
//! keeping free-form JSON (`metadata`, thinking extras) losslessly, big integers included.
//!
//! ```
//! use as_message::{ContentBlock, Msg, ToolCallBlock, from_json, to_json};
//!
//! let mut reply = Msg::assistant("Friday", "Let me look.");
//! reply.content.push(ContentBlock::ToolCall(ToolCallBlock::new("call_1", "Read", r#"{"file_path":"a.txt"}"#)));
//! let json = to_json(&reply);
//! assert!(json.contains(r#"{"type":"tool_call","id":"call_1","name":"Read","input":"{\"file_path\":\"a.txt\"}","state":"pending","suggested_rules":[]}"#));
//! let back: Msg = from_json(&json)?;
//! assert_eq!(back, reply);
//! # Ok::<(), as_message::MessageError>(())
//! ```
//!
//! # Reading as pydantic reads
//!
//! [`from_json`] (and the fast readers in [`read`]) read what AgentScope 2.0.4's pydantic reads, as it
//! reads it: a repeated key's last value counts (in the first key's position in free-form maps, as in
//! a Python dict); `NaN`, `Infinity` and `-Infinity` are read (in free-form data, and written back
//! as `null`, as pydantic writes them); free-form objects whose keys are serde_json's private markers
//! (`$serde_json::private::Number`) stay objects; documents are read up to [`MAX_JSON_DEPTH`] levels.
//! Reading the types with `serde_json::from_str` directly skips the first two (serde_json refuses a
//! repeated field and non-finite tokens), and reading free-form text as a `serde_json::Value` or
//! [`JsonMap`] (with serde_json or [`from_json`]) misreads the markers: use [`free_form::from_str`].
//!
//! ## Known differences from AgentScope 2.0.4
//!
//! * Integer fields are `i64` ([`Usage`]'s token counts here, `AgentState::cur_iter` and
//!   `ToolContext::max_cache_files` in `as-state`); Python's are unbounded. An integer beyond 64 bits
//!   (Python reads up to 4300 digits) is refused with an error at the field's path whose message starts
//!   with `integer out of range`, so a record holding one cannot be read here.
//! * `NaN` in a float field (`ReadCacheEntry::updated_at`, `bytes` in `as-state`) is refused;
//!   pydantic reads it and writes `null`, which it then refuses itself.

mod block;
pub mod depth;
mod error;
mod id;
mod json;
mod msg;
mod permission;
pub mod read;
mod repair;
pub mod schema;
mod wire;
mod writer;

pub use block::{
    Base64Source, BlockType, ContentBlock, DataBlock, HintBlock, Source, TextBlock, TextOrBlocks, TextOrData,
    ThinkingBlock, ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, UrlSource, normalize_url,
};
pub use depth::{JsonDepth, json_text_depth, map_depth, value_depth};
pub use error::{MessageError, MessageErrorKind, Result};
pub use id::{IdFactory, format_naive, generate_id, now_iso, now_naive, set_id_factory, with_id_factory};
pub use json::{
    DerivedDeserialize, JsonMap, MAX_JSON_DEPTH, MAX_NUMBER_DIGITS, canonicalize_numbers, check_number_digits,
    deserialize_map_only, deserialize_str_enum, free_form, from_json, from_json_slice, from_value, lax_float, lax_int,
    required_nullable, to_json, to_json_vec,
};
pub use msg::{Msg, Role, Usage};
pub use permission::{
    AdditionalWorkingDirectory, PermissionBehavior, PermissionContext, PermissionMode, PermissionRule,
};
pub use repair::{MAX_REPAIR_DEPTH, repair_json};
pub use wire::{
    DerivedSerialize, WriteJson, serialize_fast, write_json_int, write_json_map, write_json_str, write_json_value,
};

/// serde, for [`map_only!`]'s expansion in other crates.
#[doc(hidden)]
pub use serde as __serde;

/// Re-exported so downstream crates use the same JSON value type (with order and precision preserved).
pub use serde_json::{Value as JsonValue, json};
