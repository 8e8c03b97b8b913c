//! `PermissionEngine::check_permission`, step by step per mode.

use std::path::{Path, PathBuf};

use as_message::{JsonMap, PermissionBehavior, PermissionContext, PermissionMode, PermissionRule};

use super::decision::{PermissionCheckContext, PermissionDecision};
use crate::tool::DynTool;

/// Decides whether a tool call runs, is denied, or needs the user.
///
/// The engine holds **no** permission data: each call takes the session's
/// `&PermissionContext` (from `AgentState.permission_context`), so replacing the state can
/// never leave the engine on a stale context (a 2.0.4 pitfall), and accepted rules are added
/// with [`PermissionEngine::add_rule`] straight into the state.
///
/// ```
/// # tokio_test_block(async {
/// use as_message::{PermissionBehavior, PermissionContext, PermissionMode, PermissionRule};
/// use as_tools::{PermissionEngine, IntoDynTool, builtin::BashTool};
///
/// let engine = PermissionEngine::new("/work");
/// let mut ctx = PermissionContext::default();
/// PermissionEngine::add_rule(&mut ctx, PermissionRule::new("Bash", Some("rm -rf *".into()), PermissionBehavior::Deny, "userSettings"));
/// let bash = BashTool::default().into_dyn_tool();
/// // 2.0.4 misses this multi-line command; every segment is checked here
/// let input = serde_json::json!({"command": "rm -rf x\necho done"});
/// let d = engine.check_permission(&ctx, bash.as_ref(), input.as_object().unwrap()).await;
/// assert_eq!(d.message, "Permission to use Bash has been denied");
/// assert_eq!(d.decision_reason.as_deref(), Some("Rule: rm -rf *"));
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) { tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) }
/// ```
#[derive(Clone, Debug)]
pub struct PermissionEngine {
    cwd: PathBuf,
}

impl PermissionEngine {
    /// An engine whose main working directory is `cwd` (2.0.4 uses `os.getcwd()`).
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self { cwd: cwd.into() }
    }

    /// An engine on the process's current directory.
    pub fn current_dir() -> Self {
        Self::new(std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")))
    }

    /// The main working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Appends `rule` to the allow/deny/ask list under `rule.tool_name` (no de-duplication; a
    /// `passthrough` rule is ignored), as 2.0.4 does for rules the user accepts.
    pub fn add_rule(context: &mut PermissionContext, rule: PermissionRule) {
        let list = match rule.behavior {
            PermissionBehavior::Allow => &mut context.allow_rules,
            PermissionBehavior::Deny => &mut context.deny_rules,
            PermissionBehavior::Ask => &mut context.ask_rules,
            PermissionBehavior::Passthrough => return,
        };
        list.entry(rule.tool_name.clone()).or_default().push(rule);
    }

    /// Decides for `tool` called with `input` (already parsed and validated).
    pub async fn check_permission(
        &self,
        context: &PermissionContext,
        tool: &dyn DynTool,
        input: &JsonMap,
    ) -> PermissionDecision {
        let ctx = PermissionCheckContext::new(context, &self.cwd);
        let name = tool.name();
        let mode = context.mode;

        // 1. deny rules (all modes)
        if let Some(rule) = first_match(&context.deny_rules, PermissionBehavior::Deny, tool, input, &ctx) {
            return PermissionDecision::deny(format!("Permission to use {name} has been denied"))
                .reason(rule_reason(rule));
        }
        // 2. ask rules (dont_ask converts to DENY)
        if let Some(rule) = first_match(&context.ask_rules, PermissionBehavior::Ask, tool, input, &ctx) {
            let ask = PermissionDecision::ask(format!("Permission required for {name}"))
                .reason(rule_reason(rule))
                .suggestions(tool.generate_suggestions(input, &ctx));
            return if mode == PermissionMode::DontAsk { dont_ask_convert(name, ask) } else { ask };
        }

        match mode {
            PermissionMode::Explore => {
                if tool.check_read_only(input) {
                    PermissionDecision::allow(format!(
                        "Permission granted for {name} (explore mode - read-only invocation)"
                    ))
                    .reason("Explore mode allows read-only operations")
                } else {
                    PermissionDecision::deny(format!("Permission denied for {name} (explore mode is read-only)"))
                        .reason("Explore mode does not allow modifications")
                }
            }
            PermissionMode::Default | PermissionMode::AcceptEdits => {
                if mode == PermissionMode::AcceptEdits && tool.check_read_only(input) {
                    return PermissionDecision::allow(format!(
                        "Permission granted for {name} (accept edits mode - read-only invocation)"
                    ))
                    .reason("Accept edits mode allows read-only operations");
                }
                let own = tool.check_permissions(input, &ctx).await;
                match own.behavior {
                    PermissionBehavior::Allow | PermissionBehavior::Deny => return own,
                    PermissionBehavior::Ask if own.bypass_immune => {
                        let suggestions = tool.generate_suggestions(input, &ctx);
                        return own.suggestions(suggestions);
                    }
                    _ => {}
                }
                if let Some(decision) = allow_rule(context, tool, input, &ctx) {
                    return decision;
                }
                PermissionDecision::ask(format!("Permission required for {name}"))
                    .reason(format!("Mode: {}", mode.as_str()))
                    .suggestions(tool.generate_suggestions(input, &ctx))
            }
            PermissionMode::Bypass => {
                let own = tool.check_permissions(input, &ctx).await;
                if matches!(own.behavior, PermissionBehavior::Allow | PermissionBehavior::Deny) {
                    return own;
                }
                if let Some(decision) = allow_rule(context, tool, input, &ctx) {
                    return decision;
                }
                PermissionDecision::allow(format!("Permission granted for {name} (bypass mode)"))
                    .reason("Bypass mode allows all operations")
            }
            PermissionMode::DontAsk => {
                let own = tool.check_permissions(input, &ctx).await;
                match own.behavior {
                    PermissionBehavior::Allow | PermissionBehavior::Deny => return own,
                    PermissionBehavior::Ask if own.bypass_immune => {
                        let suggestions = tool.generate_suggestions(input, &ctx);
                        return dont_ask_convert(name, own.suggestions(suggestions));
                    }
                    _ => {}
                }
                if let Some(decision) = allow_rule(context, tool, input, &ctx) {
                    return decision;
                }
                PermissionDecision::deny(format!("Permission denied for {name} (dont_ask mode - user not available)"))
                    .reason("User is not available to answer permission prompts")
            }
        }
    }
}

fn dont_ask_convert(name: &str, ask: PermissionDecision) -> PermissionDecision {
    let orig = ask.decision_reason.clone().unwrap_or_else(|| "None".to_owned());
    let mut d = PermissionDecision::deny(format!(
        "Permission denied for {name} (dont_ask mode - ASK converted to DENY, user not available)"
    ))
    .reason(format!("DONT_ASK mode converted ASK to DENY. Original reason: {orig}"));
    d.suggested_rules = ask.suggested_rules;
    d
}

fn rule_reason(rule: &PermissionRule) -> String {
    format!("Rule: {}", rule.rule_content.as_deref().unwrap_or("None"))
}

fn allow_rule(
    context: &PermissionContext,
    tool: &dyn DynTool,
    input: &JsonMap,
    ctx: &PermissionCheckContext<'_>,
) -> Option<PermissionDecision> {
    first_match(&context.allow_rules, PermissionBehavior::Allow, tool, input, ctx).map(|_| {
        let mut d = PermissionDecision::allow(format!("Permission granted for {}", tool.name()));
        d.updated_input = Some(input.clone());
        d
    })
}

/// The first rule under `tool.name()` that matches: an empty/null `rule_content` matches every
/// call; otherwise the tool's `match_rule` decides.
fn first_match<'r>(
    rules: &'r indexmap::IndexMap<String, Vec<PermissionRule>>,
    list: PermissionBehavior,
    tool: &dyn DynTool,
    input: &JsonMap,
    ctx: &PermissionCheckContext<'_>,
) -> Option<&'r PermissionRule> {
    let rules = rules.get(tool.name())?;
    // Rules before the first one without content (which matches every call) go to the tool
    // together, so work that does not depend on the rule is done once.
    let open = rules.iter().position(|r| r.rule_content.as_deref().is_none_or(str::is_empty));
    let contents: Vec<&str> =
        rules.iter().take(open.unwrap_or(rules.len())).filter_map(|r| r.rule_content.as_deref()).collect();
    // No content rule before it: the tool is not asked (Bash would read the command for nothing).
    let found = if contents.is_empty() { None } else { tool.first_matching_rule(&contents, list, input, ctx) };
    match found {
        Some(i) => rules.get(i),
        None => open.and_then(|i| rules.get(i)),
    }
}
