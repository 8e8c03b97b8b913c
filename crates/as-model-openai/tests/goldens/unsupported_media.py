# Made with AgentScope 2.0.4 (pip install agentscope==2.0.4):
#   python unsupported_media.py > unsupported-media.json
# Tool results carrying media the formatter does not accept: a URL is named in the tool message;
# base64 data is saved to a temporary file whose path is named. The paths (`<tmp>/tmpXXXXXXXX<ext>`)
# are random in 2.0.4: each is recorded as `{saved}` followed by its extension, and the saved bytes
# are checked here.
import asyncio, base64, json, re, tempfile
from agentscope.message import Msg, DataBlock, URLSource, Base64Source, TextBlock, ToolCallBlock, ToolResultBlock
from agentscope.formatter import OpenAIChatFormatter, DashScopeChatFormatter


def b64(b):
    return base64.b64encode(b).decode()


def data(media_type, raw):
    return DataBlock(source=Base64Source(data=b64(raw), media_type=media_type))


def url(media_type, u):
    return DataBlock(source=URLSource(url=u, media_type=media_type))


def conversation(blocks):
    return [
        Msg(name="user", role="user", content=[TextBlock(text="Fetch it.")]),
        Msg(name="Friday", role="assistant", content=[
            ToolCallBlock(id="c1", name="fetch", input="{}"),
            ToolResultBlock(id="c1", name="fetch", output=blocks, state="success"),
        ]),
    ]


common = [
    TextBlock(text="done"),
    url("application/pdf", "https://x.example/a.pdf"),
    data("application/pdf", b"%PDF-1.4 pdf bytes"),
    data("application/x-foo", b"foo bytes"),
    data("text/plain", b"plain text"),
    data("application/vnd.ms-excel", b"xls bytes"),
    url("model/gltf+json", "https://x.example/m.gltf"),
]
cases = [
    ("openai", OpenAIChatFormatter(), conversation(common + [
        data("video/mp4", b"mp4 bytes"),
        url("video/mp4", "https://x.example/v.mp4"),
    ])),
    ("dashscope", DashScopeChatFormatter(), conversation(common)),
]

saved = re.compile(re.escape(tempfile.gettempdir()) + r"/tmp[A-Za-z0-9_]{8}")
out = []
checked = 0
for name, formatter, msgs in cases:
    formatted = asyncio.run(formatter.format(msgs))
    text = formatted[-1]["content"]
    for m in re.finditer(saved.pattern + r"(\.[a-z0-9]+)?(?=\.<)", text):
        with open(m.group(0), "rb") as f:
            raw = f.read()
        checked += 1
        assert raw in (b"%PDF-1.4 pdf bytes", b"foo bytes", b"plain text", b"xls bytes", b"mp4 bytes"), raw
    formatted = json.loads(saved.sub("{saved}", json.dumps(formatted)))
    out.append({
        "formatter": name,
        "input": [json.loads(m.model_dump_json()) for m in msgs],
        "output": formatted,
    })
assert checked == 9, checked
print(json.dumps(out, ensure_ascii=False, indent=2))
