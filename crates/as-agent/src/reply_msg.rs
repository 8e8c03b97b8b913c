//! `Msg.append_event`: rebuilding a reply message from its event stream (what the session
//! layer stores in the message log), as 2.0.4's `Msg.append_event` does.

use as_message::{
    Base64Source, ContentBlock, DataBlock, HintBlock, Msg, Role, Source, TextBlock, TextOrBlocks, TextOrData,
    ThinkingBlock, ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, UrlSource, Usage,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::event::{AgentEvent, ReplyStartEvent};

/// Applies streaming events to a reply message.
pub trait MsgEventExt {
    /// The empty reply message a `REPLY_START` announces (`id = reply_id`, the agent's name).
    fn from_reply_start(event: &ReplyStartEvent) -> Msg;

    /// Applies `event`; returns whether it changed the message.
    ///
    /// Events whose `reply_id` is not this message's id are skipped, as are events whose block
    /// cannot be found. A data delta's URL is normalised as 2.0.4's `URLSource` does; one that is
    /// not a URL is skipped. Unlike 2.0.4, a `TOOL_RESULT_START` for a call that already has a result
    /// is skipped too, so a message never holds two results for one call.
    fn append_event(&mut self, event: &AgentEvent) -> bool;
}

impl MsgEventExt for Msg {
    fn from_reply_start(event: &ReplyStartEvent) -> Msg {
        let mut m = Msg::new(event.name.clone(), Role::Assistant, Vec::new());
        m.id.clone_from(&event.reply_id);
        m
    }

    fn append_event(&mut self, event: &AgentEvent) -> bool {
        if event.reply_id() != Some(self.id.as_str()) {
            return false;
        }
        apply(self, event)
    }
}

fn text_mut<'a>(m: &'a mut Msg, id: &str) -> Option<&'a mut TextBlock> {
    m.content.iter_mut().rev().find_map(|b| match b {
        ContentBlock::Text(t) if t.id == id => Some(t),
        _ => None,
    })
}

fn thinking_mut<'a>(m: &'a mut Msg, id: &str) -> Option<&'a mut ThinkingBlock> {
    m.content.iter_mut().rev().find_map(|b| match b {
        ContentBlock::Thinking(t) if t.id == id => Some(t),
        _ => None,
    })
}

fn call_mut<'a>(m: &'a mut Msg, id: &str) -> Option<&'a mut ToolCallBlock> {
    m.content.iter_mut().rev().find_map(|b| match b {
        ContentBlock::ToolCall(t) if t.id == id => Some(t),
        _ => None,
    })
}

fn result_mut<'a>(m: &'a mut Msg, id: &str) -> Option<&'a mut ToolResultBlock> {
    m.content.iter_mut().rev().find_map(|b| match b {
        ContentBlock::ToolResult(t) if t.id == id => Some(t),
        _ => None,
    })
}

fn concat_base64(a: &str, b: &str) -> String {
    let mut bytes = B64.decode(a.as_bytes()).unwrap_or_default();
    bytes.extend(B64.decode(b.as_bytes()).unwrap_or_default());
    B64.encode(bytes)
}

fn apply(m: &mut Msg, event: &AgentEvent) -> bool {
    match event {
        AgentEvent::TextBlockStart(e) => {
            m.content.push(ContentBlock::Text(TextBlock { text: String::new(), id: e.block_id.clone() }));
            true
        }
        AgentEvent::TextBlockDelta(e) => match text_mut(m, &e.block_id) {
            Some(t) => {
                t.text.push_str(&e.delta);
                true
            }
            None => false,
        },
        AgentEvent::ThinkingBlockStart(e) => {
            let mut t = ThinkingBlock::new("");
            t.id.clone_from(&e.block_id);
            m.content.push(ContentBlock::Thinking(t));
            true
        }
        AgentEvent::ThinkingBlockDelta(e) => match thinking_mut(m, &e.block_id) {
            Some(t) => {
                t.thinking.push_str(&e.delta);
                true
            }
            None => false,
        },
        AgentEvent::DataBlockStart(e) => {
            m.content.push(ContentBlock::Data(DataBlock {
                id: e.block_id.clone(),
                source: Source::Base64(Base64Source { data: String::new(), media_type: e.media_type.clone() }),
                name: None,
            }));
            true
        }
        AgentEvent::DataBlockDelta(e) => {
            let slot = m.content.iter_mut().rev().find_map(|b| match b {
                ContentBlock::Data(d) if d.id == e.block_id => Some(d),
                _ => None,
            });
            match slot {
                Some(DataBlock { source: Source::Base64(s), .. }) => {
                    s.data = concat_base64(&s.data, &e.data);
                    true
                }
                _ => false,
            }
        }
        AgentEvent::HintBlock(e) => {
            m.content.push(ContentBlock::Hint(HintBlock {
                hint: e.hint.clone(),
                id: e.block_id.clone(),
                source: e.source.clone(),
            }));
            true
        }
        AgentEvent::ToolCallStart(e) => {
            m.content.push(ContentBlock::ToolCall(ToolCallBlock::new(
                e.tool_call_id.clone(),
                e.tool_call_name.clone(),
                "",
            )));
            true
        }
        AgentEvent::ToolCallDelta(e) => match call_mut(m, &e.tool_call_id) {
            Some(c) => {
                c.input.push_str(&e.delta);
                true
            }
            None => false,
        },
        AgentEvent::ToolResultStart(e) => {
            if result_mut(m, &e.tool_call_id).is_some() {
                return false;
            }
            m.content.push(ContentBlock::ToolResult(ToolResultBlock::new(
                e.tool_call_id.clone(),
                e.tool_call_name.clone(),
                TextOrBlocks::Blocks(Vec::new()),
                ToolResultState::Running,
            )));
            true
        }
        AgentEvent::ToolResultTextDelta(e) => match result_mut(m, &e.tool_call_id) {
            Some(r) => {
                let blocks = match std::mem::take(&mut r.output) {
                    TextOrBlocks::Text(s) if s.is_empty() => Vec::new(),
                    TextOrBlocks::Text(s) => vec![TextOrData::Text(TextBlock::new(s))],
                    TextOrBlocks::Blocks(b) => b,
                };
                let mut blocks = blocks;
                match blocks.last_mut() {
                    Some(TextOrData::Text(t)) => t.text.push_str(&e.delta),
                    _ => blocks.push(TextOrData::Text(TextBlock::new(e.delta.clone()))),
                }
                r.output = TextOrBlocks::Blocks(blocks);
                true
            }
            None => false,
        },
        AgentEvent::ToolResultDataDelta(e) => match result_mut(m, &e.tool_call_id) {
            Some(r) => {
                let source = match (&e.data, &e.url) {
                    (Some(data), _) => {
                        Source::Base64(Base64Source { data: data.clone(), media_type: e.media_type.clone() })
                    }
                    (None, Some(url)) => match UrlSource::new(url, e.media_type.clone()) {
                        Ok(source) => Source::Url(source),
                        // A URL 2.0.4's `URLSource` refuses: no block that neither side could read back.
                        Err(_) => return false,
                    },
                    (None, None) => return false,
                };
                let block = TextOrData::Data(DataBlock { id: e.block_id.clone(), source, name: None });
                let mut blocks = match std::mem::take(&mut r.output) {
                    TextOrBlocks::Text(s) if s.is_empty() => Vec::new(),
                    TextOrBlocks::Text(s) => vec![TextOrData::Text(TextBlock::new(s))],
                    TextOrBlocks::Blocks(b) => b,
                };
                blocks.push(block);
                r.output = TextOrBlocks::Blocks(blocks);
                true
            }
            None => false,
        },
        AgentEvent::ToolResultEnd(e) => {
            let Some(r) = result_mut(m, &e.tool_call_id) else { return false };
            r.state = e.state;
            r.metadata.clone_from(&e.metadata);
            if let Some(c) = call_mut(m, &e.tool_call_id) {
                c.state = ToolCallState::Finished;
            }
            true
        }
        AgentEvent::ModelCallEnd(e) => {
            add_usage(&mut m.usage, e.input_tokens, e.output_tokens);
            true
        }
        AgentEvent::ReplyEnd(e) => {
            m.finished_at = Some(e.created_at.clone());
            true
        }
        AgentEvent::RequireUserConfirm(e) => {
            let mut changed = false;
            for call in &e.tool_calls {
                if let Some(c) = call_mut(m, &call.id) {
                    c.state = ToolCallState::Asking;
                    c.suggested_rules.clone_from(&call.suggested_rules);
                    changed = true;
                }
            }
            changed
        }
        AgentEvent::UserConfirmResult(e) => {
            let mut changed = false;
            // A repeated call id: the last result counts (as the agent applies them).
            for r in e.effective_results().into_values() {
                if let Some(c) = call_mut(m, &r.tool_call.id)
                    && c.state == ToolCallState::Asking
                {
                    c.state = if r.confirmed { ToolCallState::Allowed } else { ToolCallState::Finished };
                    changed = true;
                }
            }
            changed
        }
        AgentEvent::RequireExternalExecution(e) => {
            let mut changed = false;
            for call in &e.tool_calls {
                if let Some(c) = call_mut(m, &call.id) {
                    c.state = ToolCallState::Submitted;
                    changed = true;
                }
            }
            changed
        }
        AgentEvent::ExternalExecutionResult(e) => {
            let mut changed = false;
            for r in &e.execution_results {
                if result_mut(m, &r.id).is_none() {
                    m.content.push(ContentBlock::ToolResult(r.clone()));
                    changed = true;
                }
            }
            changed
        }
        AgentEvent::ReplyStart(_)
        | AgentEvent::ModelCallStart(_)
        | AgentEvent::TextBlockEnd(_)
        | AgentEvent::ThinkingBlockEnd(_)
        | AgentEvent::DataBlockEnd(_)
        | AgentEvent::ToolCallEnd(_)
        | AgentEvent::ExceedMaxIters(_)
        | AgentEvent::UserInterrupt(_)
        | AgentEvent::Custom(_) => false,
    }
}

/// Adds a model call's token counts to a message's usage (created at zero when absent), saturating: a
/// provider's (or a stored state's) huge count must not overflow the sum.
pub(crate) fn add_usage(acc: &mut Option<Usage>, input_tokens: i64, output_tokens: i64) {
    let u = acc.get_or_insert(Usage::default());
    u.input_tokens = u.input_tokens.saturating_add(input_tokens);
    u.output_tokens = u.output_tokens.saturating_add(output_tokens);
}
