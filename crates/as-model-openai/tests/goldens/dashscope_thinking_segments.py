# Made with AgentScope 2.0.4 (pip install agentscope==2.0.4): python dashscope_thinking_segments.py > dashscope-thinking-segments.json
import asyncio, json
from agentscope.message import Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock, HintBlock
from agentscope.formatter import DashScopeChatFormatter

msgs = [
    Msg(name="user", role="user", content=[TextBlock(text="Plan it.")]),
    Msg(name="Friday", role="assistant", content=[
        ThinkingBlock(thinking="First, read the file."),
        ThinkingBlock(thinking="Then answer."),
        ToolCallBlock(id="c1", name="Read", input='{"file_path": "a.txt"}'),
        ToolResultBlock(id="c1", name="Read", output="hello", state="success"),
        ThinkingBlock(thinking="The file says hello."),
        HintBlock(hint="Be brief."),
        ThinkingBlock(thinking="Only thinking here."),
    ]),
]
f = DashScopeChatFormatter(input_types=["text/plain", "application/x-thinking"])
out = asyncio.run(f.format(msgs)) if asyncio.iscoroutinefunction(f.format) else f.format(msgs)
print(json.dumps({"input": [json.loads(m.model_dump_json()) for m in msgs], "output": out}, ensure_ascii=False, indent=2))
