//! The permission engine (2.0.4 `agentscope.permission._engine`) and rule matching.

mod decision;
mod engine;
mod matching;

pub use decision::{PermissionCheckContext, PermissionDecision};
pub(crate) use decision::{expand_user, real_path};
pub use engine::PermissionEngine;
pub(crate) use matching::{BashRule, CompiledGlob, MAX_NESTING, py_space, split_top_level_segments};
pub use matching::{bash_rule_matches, fnmatch, split_command_segments};
