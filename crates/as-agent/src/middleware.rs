//! Middleware hooks (2.0.4's `MiddlewareBase`), with their data in `AgentState::middle_context`.
//!
//! 2.0.4's hooks are async-generator onions; here each hook is a plain async method with a
//! default that does nothing. The first middleware is the outermost: hooks on the way in are
//! called in list order (it sees the input first), [`Middleware::on_tool_result`] on the way out
//! in reverse order (it sees the result last):
//!
//! | 2.0.4 hook | here |
//! |---|---|
//! | `on_system_prompt` | [`Middleware::on_system_prompt`] (a transformer pipeline) |
//! | `on_model_call` | [`Middleware::on_model_call`] (may edit the request: messages, tools, tool choice) |
//! | `on_acting` | [`Middleware::on_acting`] (may answer the call instead of the tool; no slot, calls may run concurrently) and [`Middleware::on_tool_result`] |
//! | `on_reply` | [`Middleware::on_event`] (sees every event of the reply, `REPLY_START` to `REPLY_END`) |
//! | `on_compress_context` | [`Middleware::on_compress_context`] (may change the settings or instructions of one compression, or skip it) |
//!
//! Each hook gets `slot`: the middleware's own entry `middle_context[key]` (JSON `null` when
//! absent; set it back to `null` to remove it). It is saved with the state, so it survives HITL
//! parks, interrupts and process restarts.

use std::fmt;

use as_message::{HintBlock, JsonValue, ToolCallBlock, ToolResultBlock};
use as_model::ChatRequest;
use async_trait::async_trait;

use crate::config::ContextConfig;
use crate::error::Result;
use crate::event::AgentEvent;

/// One context compression, as [`Middleware::on_compress_context`] sees it (2.0.4's
/// `on_compress_context` input: `context_config` and `instructions`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CompressRequest {
    /// The settings of this compression: the agent's, or those passed to
    /// [`crate::Agent::compress_context_with`]. Checked with [`ContextConfig::validate`] after the
    /// middlewares ran. `tool_result_limit` is not a compression setting: tool results are cut
    /// with the agent's own as they arrive.
    pub config: ContextConfig,
    /// Guidance for the summarizing model, sent as an assistant message holding this hint right
    /// before the compression prompt.
    pub instructions: Option<HintBlock>,
    /// Set it to skip this compression (2.0.4: a middleware that does not call `next_handler`);
    /// the middlewares after this one are not called (none is, when the caller set it).
    pub skip: bool,
}

impl CompressRequest {
    /// A compression with `config` and no instructions.
    pub fn new(config: ContextConfig) -> Self {
        Self { config, instructions: None, skip: false }
    }
}

/// A middleware. Every method has a no-op default.
#[async_trait]
pub trait Middleware: Send + Sync + fmt::Debug {
    /// The key of this middleware's entry in `middle_context` (2.0.4: the class name).
    fn key(&self) -> &str;

    /// Transforms the system prompt before each model call.
    fn on_system_prompt(&self, prompt: String, slot: &JsonValue) -> String {
        let _ = slot;
        prompt
    }

    /// Called before each model call attempt; may edit the request.
    async fn on_model_call(&self, request: &mut ChatRequest, slot: &mut JsonValue) -> Result<()> {
        let _ = (request, slot);
        Ok(())
    }

    /// Called before a permitted local tool runs (possibly concurrently with other calls of the
    /// batch, hence no `slot`); returning a result answers the call without running the tool (the
    /// block's `id` and `name` are set to the call's, whatever it carried).
    async fn on_acting(&self, call: &ToolCallBlock) -> Result<Option<ToolResultBlock>> {
        let _ = call;
        Ok(None)
    }

    /// Called with each tool result before its output is emitted and it is saved to the context, so
    /// what it leaves is what the `TOOL_RESULT_*` events, the message log rebuilt from them and the
    /// context all carry. The result stays the answer to its call: changes to `id` or `name` are
    /// undone.
    ///
    /// As 2.0.4's `on_acting` onion hands a tool's response outwards, the innermost middleware (the
    /// last in the list) rewrites it first; an answer from [`Middleware::on_acting`] is seen only by
    /// the middlewares before the one that gave it.
    ///
    /// Unlike 2.0.4's `on_acting`, it also sees the results that do not come from running a tool:
    /// errors (unknown tool, invalid input, a denying permission rule), a user's denial, and
    /// external results. And since it may rewrite the output, an agent with a middleware whose
    /// [`Middleware::rewrites_tool_output`] is `true` (the default) does not stream a tool's output
    /// chunk by chunk: the output deltas are emitted once the call ended, from the result as the
    /// middlewares left it.
    async fn on_tool_result(&self, result: &mut ToolResultBlock, slot: &mut JsonValue) -> Result<()> {
        let _ = (result, slot);
        Ok(())
    }

    /// Whether [`Middleware::on_tool_result`] may change a result's `output`. `true` by default,
    /// so that no event ever carries output a middleware removes (a redaction, say). A middleware
    /// that leaves the output alone (it only observes, or changes `state` or `metadata`) returns
    /// `false`, and when all of an agent's middlewares do, a tool's output streams chunk by chunk
    /// again. A middleware that says `false` and rewrites the output anyway changes only the
    /// context's copy: the events (and the log rebuilt from them) already carried the chunks.
    fn rewrites_tool_output(&self) -> bool {
        true
    }

    /// Called before each context compression check (before every reasoning step, and by
    /// [`crate::Agent::compress_context`]), outermost middleware first; may change the request's
    /// settings or instructions, or skip it. It runs whether or not the context is over the
    /// trigger: the trigger is one of the settings it may change.
    async fn on_compress_context(&self, request: &mut CompressRequest, slot: &mut JsonValue) -> Result<()> {
        let _ = (request, slot);
        Ok(())
    }

    /// Called with every event the reply emits, before the caller sees it.
    ///
    /// A reply stopped by dropping it (its [`crate::ReplyStream`], or the future of a
    /// [`crate::SessionRunner`] turn: a client that disconnects) ends without its closing events: no
    /// hook sees its `REPLY_END`, nor the `TOOL_RESULT_*` events of the calls it closes (the cleanup
    /// runs in `Drop`, which cannot await a hook). The state is still saved, with this middleware's
    /// slot as its last hook left it. A middleware that keeps per-reply data in its slot and removes
    /// it on `REPLY_END` must therefore expect an entry of an ended reply to stay: remove the entries
    /// of other replies when the next `REPLY_START` comes (its `reply_id` is new). A reply stopped
    /// with its cancel token emits its closing events, through the hooks, as usual.
    async fn on_event(&self, event: &AgentEvent, slot: &mut JsonValue) -> Result<()> {
        let _ = (event, slot);
        Ok(())
    }
}
