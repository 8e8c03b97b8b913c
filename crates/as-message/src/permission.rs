//! Permission data that travels on the wire: rules, modes and the per-session permission context.
//!
//! The decision engine lives in `as-tools`; these are only the persisted shapes
//! (`agentscope.permission` in AgentScope 2.0.4).

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the permission engine treats tool calls in a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// Ask unless a rule or the tool allows.
    #[default]
    Default,
    /// Allow edits inside the working directories.
    AcceptEdits,
    /// Read-only: allow read-only calls, deny the rest.
    Explore,
    /// Allow everything that is not denied.
    Bypass,
    /// The user is unavailable: everything that would ask is denied.
    DontAsk,
}

crate::str_enum!(PermissionMode {
    Default => "default",
    AcceptEdits => "accept_edits",
    Explore => "explore",
    Bypass => "bypass",
    DontAsk => "dont_ask",
});

impl PermissionMode {
    /// The wire value (`"accept_edits"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "accept_edits",
            Self::Explore => "explore",
            Self::Bypass => "bypass",
            Self::DontAsk => "dont_ask",
        }
    }
}

/// What a rule or a decision does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionBehavior {
    /// Run the tool.
    Allow,
    /// Refuse the call.
    Deny,
    /// Ask the user.
    Ask,
    /// No opinion; fall through to the next step.
    Passthrough,
}

crate::str_enum!(PermissionBehavior { Allow => "allow", Deny => "deny", Ask => "ask", Passthrough => "passthrough" });

/// A permission rule for one tool; `rule_content: null` matches every invocation.
///
/// The `rule_content` key is required on the wire (an explicit `null` is needed).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "PermissionRule")]
pub struct PermissionRule {
    /// The tool the rule applies to.
    pub tool_name: String,
    /// The pattern (path glob, command prefix, ...); `None` matches everything.
    #[serde(deserialize_with = "crate::json::required_nullable::deserialize")]
    #[schemars(required, extend("type" = ["string", "null"]))]
    pub rule_content: Option<String>,
    /// The rule's behavior (informative: the list a rule sits in decides its effect).
    pub behavior: PermissionBehavior,
    /// Where the rule came from (`"session"`, `"suggested"`, `"userSettings"`, ...).
    pub source: String,
}

crate::map_only!(PermissionRule, "a PermissionRule object", Serialize);

impl PermissionRule {
    /// Builds a rule.
    pub fn new(
        tool_name: impl Into<String>,
        rule_content: Option<String>,
        behavior: PermissionBehavior,
        source: impl Into<String>,
    ) -> Self {
        Self { tool_name: tool_name.into(), rule_content, behavior, source: source.into() }
    }
}

/// A working directory granted to the session besides the process's current directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "AdditionalWorkingDirectory")]
pub struct AdditionalWorkingDirectory {
    /// The directory.
    pub path: String,
    /// Where the grant came from.
    pub source: String,
}

crate::map_only!(AdditionalWorkingDirectory, "an AdditionalWorkingDirectory object", Serialize);

/// The permission state persisted in `AgentState.permission_context`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "PermissionContext")]
pub struct PermissionContext {
    /// The session's mode.
    #[serde(default)]
    pub mode: PermissionMode,
    /// Extra working directories, keyed by path.
    #[serde(default)]
    pub working_directories: IndexMap<String, AdditionalWorkingDirectory>,
    /// Allow rules, keyed by tool name.
    #[serde(default)]
    pub allow_rules: IndexMap<String, Vec<PermissionRule>>,
    /// Deny rules, keyed by tool name.
    #[serde(default)]
    pub deny_rules: IndexMap<String, Vec<PermissionRule>>,
    /// Ask rules, keyed by tool name.
    #[serde(default)]
    pub ask_rules: IndexMap<String, Vec<PermissionRule>>,
}

crate::map_only!(PermissionContext, "a PermissionContext object", Serialize);
