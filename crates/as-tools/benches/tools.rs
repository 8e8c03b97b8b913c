//! Per-call overheads the agent pays on every tool call: the permission check (Bash with rules),
//! argument parsing (strict and repaired), and a full `Toolkit::call_tool` of a trivial tool.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench harness code

use std::hint::black_box;

use as_message::{PermissionBehavior, PermissionContext, PermissionRule};
use as_tools::builtin::BashTool;
use as_tools::{
    FunctionTool, IntoDynTool, PermissionEngine, SharedToolState, ToolCallContext, ToolError, Toolkit, parse_arguments,
};
use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;

/// Arguments of echo.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// Text.
    text: String,
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let engine = PermissionEngine::new("/work");
    let mut ctx = PermissionContext::default();
    for rule in ["rm -rf *", "git push:*", "curl", "sudo *"] {
        PermissionEngine::add_rule(
            &mut ctx,
            PermissionRule::new("Bash", Some(rule.into()), PermissionBehavior::Deny, "b"),
        );
    }
    PermissionEngine::add_rule(
        &mut ctx,
        PermissionRule::new("Bash", Some("npm run:*".into()), PermissionBehavior::Allow, "b"),
    );
    let bash = BashTool::default().into_dyn_tool();
    let input = serde_json::json!({"command": "cd web && npm run build && npm run test -- --ci"});
    let input = input.as_object().unwrap().clone();
    c.bench_function("permission_check_bash_5_rules", |b| {
        b.iter(|| rt.block_on(engine.check_permission(black_box(&ctx), bash.as_ref(), black_box(&input))))
    });

    // The slowest command shape found near the length cap (`a;` repeated to 64 KiB: 32,768
    // segments) against 8 deny rules: the command is read once for all the rules.
    let mut many = PermissionContext::default();
    for rule in ["rm -rf *", "git push:*", "curl", "sudo *", "dd:*", "mkfs:*", "shutdown", "chmod 777 *"] {
        PermissionEngine::add_rule(
            &mut many,
            PermissionRule::new("Bash", Some(rule.into()), PermissionBehavior::Deny, "b"),
        );
    }
    let long = "a;".repeat(as_tools::builtin::MAX_COMMAND_BYTES / 2);
    let long = serde_json::json!({ "command": long });
    let long = long.as_object().unwrap().clone();
    let mut slow = c.benchmark_group("permission_check_bash_64k");
    slow.sample_size(10);
    slow.bench_function("8_deny_rules", |b| {
        b.iter(|| rt.block_on(engine.check_permission(black_box(&many), bash.as_ref(), black_box(&long))))
    });
    slow.finish();

    c.bench_function("parse_arguments_strict", |b| {
        b.iter(|| parse_arguments(black_box(r#"{"file_path": "/work/src/main.rs", "offset": 10, "limit": 200}"#)))
    });
    c.bench_function("parse_arguments_repaired", |b| {
        b.iter(|| parse_arguments(black_box(r#"{"file_path": "/work/src/main.rs", "offset": 10, "limit": 2"#)))
    });

    let toolkit = Toolkit::new()
        .with(FunctionTool::new("echo", "Echo.", |a: EchoArgs, _| async move { Ok::<_, ToolError>(a.text) }));
    let state = SharedToolState::default();
    c.bench_function("toolkit_call_echo", |b| {
        b.iter(|| {
            rt.block_on(async {
                let ctx = ToolCallContext::new("c", state.clone(), "/");
                toolkit.call("echo", black_box(r#"{"text": "hi"}"#), ctx).collect::<Vec<_>>().await
            })
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
