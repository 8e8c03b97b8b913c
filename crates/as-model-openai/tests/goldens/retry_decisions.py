# Made with AgentScope 2.0.4 (pip install agentscope==2.0.4) and the openai SDK it installs:
#   python retry_decisions.py > retry-decisions.json
# How many requests 2.0.4's OpenAIChatModel sends when every answer is the same HTTP error, for each
# status and `x-should-retry` header. Two layers retry in 2.0.4: the openai SDK's client
# (`_should_retry`: x-should-retry "true"/"false" first, then 408, 409, 429, >= 500; 2 retries by
# default, 2.0.4 passes no max_retries) and ChatModelBase.__call__ (max_retries=3 on RateLimitError
# and InternalServerError, i.e. 429 and >= 500, whatever the headers say). `sdk_requests` is the count
# with the model's own retries off (max_retries=0), `requests` with its defaults.
# Every answer carries `retry-after-ms: 1`, so the SDK waits 1 ms between its attempts (a hint of at
# most 120 s does not change whether it retries); the model's retry_delay is 0.
import asyncio, json, logging, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agentscope.credential import OpenAICredential
from agentscope.message import Msg, TextBlock
from agentscope.model import OpenAIChatModel

logging.disable(logging.CRITICAL)  # the "Attempt N failed" warnings

STATE = {"requests": 0, "status": 500, "x_should_retry": []}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        STATE["requests"] += 1
        body = json.dumps({"error": {"message": "try later", "type": "x", "param": None, "code": None}}).encode()
        self.send_response(STATE["status"])
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("retry-after-ms", "1")
        for value in STATE["x_should_retry"]:
            self.send_header("x-should-retry", value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
BASE_URL = f"http://127.0.0.1:{server.server_address[1]}/v1"

# (status, the x-should-retry header's values, in order; several are several header lines)
CASES = [
    (500, []), (502, []), (503, []), (599, []),
    (503, ["true"]), (503, ["false"]), (500, ["false"]), (503, ["1"]), (503, ["false", "false"]),
    (429, []), (429, ["false"]), (429, ["true"]),
    (409, []), (409, ["false"]), (409, ["true"]),
    (408, []), (408, ["false"]),
    (400, []), (400, ["true"]), (400, ["false"]), (400, ["True"]), (400, ["TRUE"]), (400, ["yes"]),
    (400, ["true", "true"]),
    (401, []), (401, ["true"]), (403, ["true"]), (404, []), (404, ["true"]), (422, []), (422, ["true"]),
    (413, ["true"]), (499, []),
]


async def requests_sent(status, x_should_retry, **model_kwargs):
    STATE.update(requests=0, status=status, x_should_retry=x_should_retry)
    model = OpenAIChatModel(
        credential=OpenAICredential(api_key="sk-probe", base_url=BASE_URL),
        model="gpt-probe",
        stream=False,
        retry_delay=0.0,
        **model_kwargs,
    )
    try:
        await model([Msg(name="user", role="user", content=[TextBlock(text="Hi")])])
    except Exception as e:  # every case ends in the SDK's status error
        error = type(e).__name__
    else:
        raise AssertionError(f"{status} {x_should_retry}: no error")
    return STATE["requests"], error


async def main():
    out = []
    for status, x_should_retry in CASES:
        sdk_requests, _ = await requests_sent(status, x_should_retry, max_retries=0)
        requests, error = await requests_sent(status, x_should_retry)
        out.append(
            {
                "status": status,
                "x_should_retry": x_should_retry,
                "sdk_requests": sdk_requests,
                "requests": requests,
                "error": error,
            }
        )
    print(json.dumps(out, indent=2))


asyncio.run(main())
