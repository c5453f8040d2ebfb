"""A real ACP client (the Python SDK `agent-client-protocol`, pinned in requirements.txt)
driving `keel acp` for keel's tests (crates/front/keel-cli/tests/acp.rs): initialize, a new session
in WORKSPACE, one prompt, and a JSON report of what came back as the last stdout line."""

import asyncio
import json
import os
import sys

from acp import PROTOCOL_VERSION, text_block
from acp.client.connection import ClientSideConnection  # noqa: F401  (the class in use)
from acp.schema import ClientCapabilities, Implementation
from acp.stdio import spawn_agent_process


class Recorder:
    """The client side: records session updates, rejects every permission request."""

    def __init__(self):
        self.updates = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        return {"outcome": {"outcome": "cancelled"}}

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    def __getattr__(self, name):
        raise AttributeError(name)


async def main():
    command = os.environ["KEEL_ACP_COMMAND"]
    args = json.loads(os.environ["KEEL_ACP_ARGS"])
    workspace = os.environ["WORKSPACE"]
    recorder = Recorder()
    report = {}
    async with spawn_agent_process(lambda _agent: recorder, command, *args, env=dict(os.environ)) as (conn, process):
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="keel-acp-python-test", version="0"),
        )
        report["initialize"] = init.model_dump(by_alias=True, exclude_none=True)
        session = await conn.new_session(cwd=workspace, mcp_servers=[])
        report["sessionId"] = session.session_id
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("hello from python")])
        report["stopReason"] = answer.stop_reason
        report["updates"] = recorder.updates
    print(json.dumps(report))


asyncio.run(asyncio.wait_for(main(), 90))
