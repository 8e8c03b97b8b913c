"""AgentScope Python 2.0.4 side of `cargo xtask bench`.

Usage: bench_python.py REDIS_PORT REPEAT STATE_FILE...

Each STATE_FILE holds an AgentState JSON written by the Rust side (the same conversation shapes).
For each file it measures AgentState serialize (model_dump_json) and parse (model_validate_json),
and a turn (get_session + update_session_state) through RedisStorage against the given local Redis.
Prints one `BENCH_JSON {...}` line per figure (milliseconds, median and quartiles of REPEAT runs).
Needs: pip install agentscope==2.0.4 apscheduler redis
"""

import asyncio
import json
import statistics
import sys
import time

from agentscope.app.storage import RedisStorage, SessionConfig
from agentscope.state import AgentState


def quartiles(samples):
    s = sorted(samples)
    at = lambda q: s[round((len(s) - 1) * q)]
    return at(0.25), at(0.5), at(0.75)


def timed(fn, repeat):
    for _ in range(3):
        fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return quartiles(out)


def emit(**kw):
    print("BENCH_JSON " + json.dumps(kw), flush=True)


async def turn_bench(port, text, messages, repeat):
    state = AgentState.model_validate_json(text)
    async with RedisStorage(host="127.0.0.1", port=port) as storage:
        rec = await storage.upsert_session("py-bench-user", "py-bench-agent", SessionConfig(workspace_id="ws"), state=state)
        sid = rec.id

        async def turn():
            r = await storage.get_session("py-bench-user", "py-bench-agent", sid)
            await storage.update_session_state("py-bench-user", "py-bench-agent", sid, r.state)

        for _ in range(3):
            await turn()
        samples = []
        for _ in range(repeat):
            t = time.perf_counter()
            await turn()
            samples.append((time.perf_counter() - t) * 1e3)
        q1, med, q3 = quartiles(samples)
        emit(scenario="python_turn_redis", messages=messages, median_ms=med, q1_ms=q1, q3_ms=q3)
        await storage.delete_session("py-bench-user", "py-bench-agent", sid)


def main():
    port = int(sys.argv[1])
    repeat = int(sys.argv[2])
    for path in sys.argv[3:]:
        text = open(path, encoding="utf-8").read()
        state = AgentState.model_validate_json(text)
        messages = len(state.context)
        q1, med, q3 = timed(lambda: state.model_dump_json(), repeat)
        emit(scenario="python_serialize", messages=messages, bytes=len(text.encode()), median_ms=med, q1_ms=q1, q3_ms=q3)
        q1, med, q3 = timed(lambda: AgentState.model_validate_json(text), repeat)
        emit(scenario="python_parse", messages=messages, median_ms=med, q1_ms=q1, q3_ms=q3)
        if port > 0:
            asyncio.run(turn_bench(port, text, messages, repeat))


if __name__ == "__main__":
    main()
