//! [`JsonDepth`] for the state's types: how deep a state's JSON nests, without writing it. A store
//! uses it to refuse a state nested deeper than [`as_message::MAX_JSON_DEPTH`], which it could write
//! but neither it nor AgentScope 2.0.4 could read back.
//!
//! ```
//! use as_message::{JsonDepth, MAX_JSON_DEPTH, json};
//! let mut state = as_state::AgentState::for_session("s");
//! assert_eq!(state.json_depth(), as_message::json_text_depth(&as_message::to_json(&state)));
//! let deep = (0..MAX_JSON_DEPTH).fold(json!(1), |v, _| json!([v]));
//! state.middle_context.insert("deep".into(), deep);
//! assert_eq!(state.json_depth(), MAX_JSON_DEPTH + 1);
//! ```

use as_message::JsonDepth;
use as_message::depth::{list_depth, map_depth, object_depth};

use crate::{AgentState, ReadCacheEntry, Task, TaskContext, ToolContext};

impl JsonDepth for ReadCacheEntry {
    fn json_depth(&self) -> usize {
        object_depth([list_depth(self.lines.iter().map(|_| 0))])
    }
}

impl JsonDepth for ToolContext {
    fn json_depth(&self) -> usize {
        object_depth([
            list_depth(self.read_file_cache.iter().map(JsonDepth::json_depth)),
            list_depth(self.activated_groups.iter().map(|_| 0)),
        ])
    }
}

impl JsonDepth for Task {
    fn json_depth(&self) -> usize {
        object_depth([
            map_depth(&self.metadata),
            list_depth(self.blocks.iter().map(|_| 0)),
            list_depth(self.blocked_by.iter().map(|_| 0)),
        ])
    }
}

impl JsonDepth for TaskContext {
    fn json_depth(&self) -> usize {
        object_depth([list_depth(self.tasks.iter().map(JsonDepth::json_depth))])
    }
}

impl JsonDepth for AgentState {
    fn json_depth(&self) -> usize {
        object_depth([
            self.summary.json_depth(),
            list_depth(self.context.iter().map(JsonDepth::json_depth)),
            self.permission_context.json_depth(),
            self.tool_context.json_depth(),
            self.tasks_context.json_depth(),
            map_depth(&self.middle_context),
        ])
    }
}
