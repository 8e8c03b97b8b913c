"""The Python half of tests/live_interop.rs: AgentScope 2.0.4's RedisStorage against the same
private redis-server as the Rust half. Usage: live_interop.py PORT PHASE [ARGS...]; prints one
JSON object on stdout. Needs `pip install agentscope==2.0.4 apscheduler redis`."""

import asyncio
import json
import sys

import redis.asyncio as aioredis
from agentscope.app.storage import RedisStorage, SessionConfig
from agentscope.message import Msg, TextBlock
from agentscope.state import AgentState


def msg(name, role, text, mid):
    return Msg(name=name, role=role, content=[TextBlock(text=text)], id=mid)


async def main():
    port, phase, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    out = {}
    raw = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    async with RedisStorage(host="127.0.0.1", port=port, key_ttl=3600) as st:
        if phase == "write":
            state = AgentState(context=[msg("user", "user", "hi from python", "py-m1")], cur_iter=2)
            rec = await st.upsert_session(
                "user-1", "agent-1", SessionConfig(workspace_id="ws-py", name="from python"), state=state
            )
            state.context.append(msg("Friday", "assistant", "hello, python here ✓", "py-m2"))
            state.cur_iter = 3
            await st.update_session_state("user-1", "agent-1", rec.id, state)
            await st.upsert_message("user-1", rec.id, msg("user", "user", "hi from python", "py-m1"))
            await st.upsert_message("user-1", rec.id, msg("Friday", "assistant", "draft", "py-m2"))
            await st.upsert_message("user-1", rec.id, msg("Friday", "assistant", "hello, python here ✓", "py-m2"))
            out["session_id"] = rec.id
        elif phase == "read":
            py_id, rust_id = args
            py = await st.get_session("user-1", "agent-1", py_id)
            rs = await st.get_session("user-1", "agent-1", rust_id)
            listed = await st.list_sessions("user-1", "agent-1")
            out["py"] = {
                "cur_iter": py.state.cur_iter,
                "context": [m.id for m in py.state.context],
                "name": py.config.name,
                "messages": [m.id for m in await st.list_messages("user-1", py_id)],
            }
            out["rust"] = {
                "cur_iter": rs.state.cur_iter,
                "context": [m.id for m in rs.state.context],
                "source": rs.source.value,
                "schedule": rs.source_schedule_id,
                "session_id": rs.state.session_id,
                "messages": [m.id for m in await st.list_messages("user-1", rust_id)],
                "get_message": (await st.get_message("user-1", rust_id, "rs-m1")).id,
                # Python re-serialises what Rust wrote to the very same bytes.
                "roundtrip": rs.model_dump_json() == await raw.get(f"agentscope:user:user-1:session:{rust_id}"),
                "messages_roundtrip": [m.model_dump_json() for m in await st.list_messages("user-1", rust_id)]
                == await raw.lrange(f"agentscope:user:user-1:session:{rust_id}:messages", 0, -1),
            }
            out["listed"] = [r.id for r in listed]
            # Python writes Rust's session.
            state = rs.state
            state.cur_iter = 99
            await st.update_session_state("user-1", "agent-1", rust_id, state)
            await st.upsert_message("user-1", rust_id, msg("user", "user", "python was here", "py-m3"))
        elif phase == "check":
            py_id, rust_id = args
            out["py_after_rust_delete"] = (await st.get_session("user-1", "agent-1", py_id)) is None
            out["listed"] = [r.id for r in await st.list_sessions("user-1", "agent-1")]
            rs = await st.get_session("user-1", "agent-1", rust_id)
            out["rust_cur_iter"] = rs.state.cur_iter
            out["deleted"] = await st.delete_session("user-1", "agent-1", rust_id)
        else:
            raise SystemExit(f"unknown phase {phase}")
    await raw.aclose()
    print(json.dumps(out))


asyncio.run(main())
