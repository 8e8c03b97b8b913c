//! §9: context compression (structured summary, truncation fallback) and tool-result truncation.

use std::collections::HashSet;

use as_message::{ContentBlock, HintBlock, Msg, TextBlock, TextOrBlocks, TextOrData, ToolResultBlock};
use as_model::{ChatModel as _, StructuredOutputRequest, ToolSchema};

use crate::agent::Agent;
use crate::config::ContextConfig;
use crate::error::{AgentError, Result};
use crate::run::{Compressed, Run, TRUNCATION_NOTE};

/// The marker appended to a truncated tool result.
pub const TRUNCATED_MARKER: &str =
    "\n<<<TRUNCATED>>>\n<system-reminder>The remaining content has been omitted for limited context.</system-reminder>";

fn count(agent: &Agent, msgs: &[Msg], tools: &[ToolSchema]) -> usize {
    agent.model.count_tokens(msgs, tools)
}

/// The count of `base` followed by `extra`, without concatenating copies.
fn count_after(agent: &Agent, base: &[Msg], extra: &[Msg], tools: &[ToolSchema]) -> usize {
    agent.model.count_tokens_of_parts(&[base, extra], tools)
}

/// Splits `context` so that the reserved (newest) part stays within `budget` tokens together with `base`
/// and the tool schemas `tools` (counted as 2.0.4's `_split_context_for_compression` counts them).
/// Returns `(to_compress, reserved)`; `to_compress` is empty when nothing would be compressed.
fn split(agent: &Agent, base: &[Msg], context: &[Msg], budget: usize, tools: &[ToolSchema]) -> (Vec<Msg>, Vec<Msg>) {
    let with = |extra: &[Msg]| count_after(agent, base, extra, tools);
    // The newest boundary `i` whose suffix `context[i..]` reaches the budget. A suffix only grows as `i`
    // falls, so binary search finds it in O(log n) token counts (a linear scan was O(n²) clones).
    if context.is_empty() || with(context) < budget {
        return (Vec::new(), context.to_vec());
    }
    let (mut lo, mut hi) = (0usize, context.len() - 1); // invariant: with(&context[lo..]) >= budget
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if with(&context[mid..]) >= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let i = lo;
    let boundary = &context[i];
    let after = &context[i + 1..];
    // The first block index (from the end) whose suffix, with the reserved messages, exceeds the budget.
    let mut j: Option<usize> = None;
    for k in (0..boundary.content.len()).rev() {
        let mut part = boundary.clone();
        part.content = boundary.content[k..].to_vec();
        let mut v = vec![part];
        v.extend_from_slice(after);
        if with(&v) > budget {
            j = Some(k);
            break;
        }
    }
    let mut head_len = j.map_or(0, |j| j + 1);
    // Keep tool calls and their results together: a result whose call is compressed is compressed too
    // (repeated until stable, upstream fix 2d5ebe15f).
    loop {
        let compressed_calls: HashSet<&str> = boundary.content[..head_len]
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(c.id.as_str()),
                _ => None,
            })
            .collect();
        let last_result = boundary.content[head_len..]
            .iter()
            .enumerate()
            .filter_map(|(k, b)| match b {
                ContentBlock::ToolResult(r) if compressed_calls.contains(r.id.as_str()) => Some(head_len + k),
                _ => None,
            })
            .max();
        match last_result {
            Some(k) => head_len = k + 1,
            None => break,
        }
    }
    // A reserved result must never lose its call either: move calls of reserved results? Calls always precede
    // their results in one message, so the loop above is enough.
    let mut to_compress = context[..i].to_vec();
    let mut reserved = Vec::new();
    if head_len > 0 {
        let mut head = boundary.clone();
        head.content = boundary.content[..head_len].to_vec();
        to_compress.push(head);
    }
    if head_len < boundary.content.len() {
        let mut tail = boundary.clone();
        tail.content = boundary.content[head_len..].to_vec();
        reserved.push(tail);
    }
    reserved.extend_from_slice(after);
    (to_compress, reserved)
}

/// Runs before every reasoning step (§9.2), with these settings and instructions for the
/// summarizing model.
pub(crate) async fn compress(
    run: &mut Run<'_>,
    cfg: &ContextConfig,
    instructions: Option<&HintBlock>,
) -> Result<Compressed> {
    let tools = run.tool_schemas();
    let base = run.base_messages();
    let (agent, state, cancel) = run.parts();
    let size = agent.model.context_size();
    let est = count_after(agent, &base, &state.context, &tools);
    if (est as f64) < cfg.trigger_ratio * size as f64 {
        return Ok(Compressed::No);
    }
    if state.context.is_empty() {
        return Err(AgentError::compression(format!(
            "the system prompt and summary alone ({est} tokens) exceed the compression trigger"
        )));
    }
    let budget = (cfg.reserve_ratio * size as f64) as usize;
    let (mut to_compress, mut reserved) = split(agent, &base, &state.context, budget, &tools);
    if to_compress.is_empty() {
        (to_compress, reserved) = split(agent, &base, &state.context, 0, &tools);
    }
    if to_compress.is_empty() {
        return Ok(Compressed::No);
    }
    let build = |msgs: &[Msg]| {
        let mut input = base.clone();
        input.extend_from_slice(msgs);
        if let Some(hint) = instructions {
            input.push(Msg::new(
                agent.name.clone(),
                as_message::Role::Assistant,
                vec![ContentBlock::Hint(hint.clone())],
            ));
        }
        input.push(Msg::user("user", cfg.compression_prompt.clone()));
        input
    };
    let structured_tool = ToolSchema::new(
        as_model::STRUCTURED_OUTPUT_TOOL,
        as_model::STRUCTURED_OUTPUT_TOOL_DESCRIPTION,
        cfg.summary_schema.clone(),
    );
    let mut input = build(&to_compress);
    let overflow = count(agent, &input, std::slice::from_ref(&structured_tool)) > size;
    let mut attempt = 0;
    let summary = loop {
        let request =
            StructuredOutputRequest::new(input.clone(), cfg.summary_schema.clone()).with_cancel(cancel.clone());
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(Compressed::Cancelled),
            r = agent.model.generate_structured_output(request) => r,
        };
        match result {
            // A summary that does not render fails the compression (and the reply) with the state as
            // it was: `validate` accepted the template, so only a model that skips the schema's required
            // keys gets here, and dropping the history for the truncation note would lose it for good.
            Ok(r) => break Some(cfg.render_summary(&r.content)?),
            Err(e) if overflow && attempt == 0 => {
                tracing::warn!(error = %e, "compression call failed with an overflowing input; retrying shorter");
                attempt += 1;
                let limit = cfg.trigger_ratio * size as f64;
                // As 2.0.4: drop at least the oldest message, then more until the input, counted with
                // the structured-output tool, fits (all of them if none does). The smallest such
                // prefix, found by binary search (dropping more never adds tokens): O(n log n).
                let schema = std::slice::from_ref(&structured_tool);
                let fits = |k: usize| (count(agent, &build(&to_compress[k..]), schema) as f64) < limit;
                let (mut lo, mut hi) = (1usize.min(to_compress.len()), to_compress.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if fits(mid) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                to_compress.drain(..lo);
                input = build(&to_compress);
            }
            Err(e) => {
                tracing::warn!(error = %e, "compression call failed; falling back to truncation");
                break None;
            }
        }
    };
    match summary {
        Some(s) => state.summary = TextOrBlocks::Text(s),
        // Fallback (upstream 4a121d874): the old summary is kept as it is (text, or blocks with their
        // data blocks); only a session without one gets the note that messages were removed.
        None if state.summary.is_empty() => state.summary = TextOrBlocks::Text(TRUNCATION_NOTE.to_owned()),
        None => {}
    }
    let read_paths: Vec<String> = reserved
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if c.name == "Read" => as_message::free_form::from_str(&c.input)
                .ok()
                .and_then(|v| v.get("file_path").and_then(|p| p.as_str()).map(str::to_owned)),
            _ => None,
        })
        .collect();
    state.tool_context.clean_file_cache(Some(&read_paths));
    state.context = reserved;
    Ok(Compressed::Yes)
}

/// §9.3: a tool result over `tool_result_limit` tokens is cut for the context (the events carried it whole).
pub(crate) fn truncate_tool_result(agent: &Agent, block: ToolResultBlock) -> ToolResultBlock {
    let limit = agent.context_config.tool_result_limit;
    let as_msg = |output: &TextOrBlocks| {
        let blocks: Vec<ContentBlock> = match output {
            TextOrBlocks::Text(s) => vec![ContentBlock::Text(TextBlock { text: s.clone(), id: String::new() })],
            TextOrBlocks::Blocks(b) => b.iter().cloned().map(Into::into).collect(),
        };
        Msg::new("", as_message::Role::Assistant, blocks)
    };
    let total = count(agent, &[as_msg(&block.output)], &[]);
    if total <= limit {
        return block;
    }
    let blocks: Vec<TextOrData> = match &block.output {
        TextOrBlocks::Text(s) => vec![TextOrData::Text(TextBlock::new(s.clone()))],
        TextOrBlocks::Blocks(b) => b.clone(),
    };
    // The longest prefix of whole blocks within the limit, by bisection (a count is linear in the
    // prefix, so this is O(n log n); growing the prefix one block at a time was quadratic, which
    // an output of many small blocks made take minutes).
    let tokens = |k: usize| count(agent, &[as_msg(&TextOrBlocks::Blocks(blocks[..k].to_vec()))], &[]);
    let (mut lo, mut hi) = (0usize, blocks.len());
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if tokens(mid) <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut kept: Vec<TextOrData> = blocks[..lo].to_vec();
    // The first block that does not fit: a text block is cut in proportion to the room left.
    if let Some(TextOrData::Text(t)) = blocks.get(lo) {
        let before = tokens(lo);
        let used = tokens(lo + 1);
        let share = limit.saturating_sub(before) as f64 / used.saturating_sub(before).max(1) as f64;
        let mut cut = ((t.text.len() as f64) * share) as usize;
        cut = cut.min(t.text.len());
        while cut > 0 && !t.text.is_char_boundary(cut) {
            cut -= 1;
        }
        kept.push(TextOrData::Text(TextBlock { text: t.text[..cut].to_owned(), id: t.id.clone() }));
    }
    match kept.last_mut() {
        Some(TextOrData::Text(t)) => t.text.push_str(TRUNCATED_MARKER),
        _ => kept.push(TextOrData::Text(TextBlock::new(TRUNCATED_MARKER))),
    }
    let output = match block.output {
        TextOrBlocks::Text(_) => TextOrBlocks::Text(TextOrBlocks::Blocks(kept).text()),
        TextOrBlocks::Blocks(_) => TextOrBlocks::Blocks(kept),
    };
    ToolResultBlock { output, metadata: as_message::JsonMap::new(), ..block }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_of_many_blocks_keeps_its_longest_prefix_that_fits() {
        let model = std::sync::Arc::new(as_model::ScriptedModel::new("m", Vec::<as_model::ScriptedTurn>::new()));
        let cfg = crate::ContextConfig { tool_result_limit: 300, ..crate::ContextConfig::default() };
        let agent = Agent::builder("A", "sys", model).context_config(cfg).build().unwrap();
        // 20,000 small blocks (growing a prefix one block at a time took minutes here).
        let blocks: Vec<TextOrData> =
            (0..20_000).map(|i| TextOrData::Text(TextBlock::new(format!("line {i} of the output\n")))).collect();
        let full = TextOrBlocks::Blocks(blocks.clone()).text();
        let block = as_message::ToolResultBlock::new(
            "c1",
            "t",
            TextOrBlocks::Blocks(blocks),
            as_message::ToolResultState::Success,
        );
        let out = truncate_tool_result(&agent, block);
        let text = out.output.text();
        let body = text.strip_suffix(TRUNCATED_MARKER).expect("marked as truncated");
        assert!(!body.is_empty() && full.starts_with(body), "{body:?}");
        assert!(body.len() < full.len() / 10);
    }
}
