"""AsyncKeel: the same runs as coroutines and async iterators; a cancelled task cancels its
turn on the server."""

from __future__ import annotations

import asyncio
import json

from conftest import pid_gone
from scripts import ASKING, BASIC

from keel_sdk import AsyncKeel, TextDelta, ToolResult, TurnEnd, TurnStart


def test_async_run_stream_resume_and_close(env, mock, keel_kwargs):
    (env.ws / "notes.txt").write_text("hello\n")
    m = mock(BASIC)

    async def main():
        async with AsyncKeel(**keel_kwargs(m)) as keel:
            pid = keel.pid
            result = await keel.run("remember the word")
            assert result.text == "I will remember: pelican." and result.stop_reason == "completed"
            session = await keel.resume(result.session_id)
            again = await session.run("which word")
            assert again.text == "The word was pelican." and again.turn == 2
            assert "I will remember: pelican." in json.dumps(m.requests()[-1]["messages"])
            stream = await keel.stream("read the notes")
            events = [e async for e in stream]
            assert isinstance(events[-1], TurnEnd) and events[-1].reason == "completed"
            assert "".join(e.text for e in events if isinstance(e, TextDelta)).endswith("The notes say hello.")
            assert stream.result is not None and stream.result.text == "The notes say hello."
        return pid

    pid = asyncio.run(main())
    assert pid_gone(pid)


def test_async_approval_callback_may_be_a_coroutine(env, mock, keel_kwargs):
    m = mock(ASKING)

    async def approve(request):
        await asyncio.sleep(0)
        return "allow"

    async def main():
        async with AsyncKeel(**keel_kwargs(m), sandbox="read-only", approval="ask", on_approval=approve) as keel:
            return await keel.run("run the check")

    result = asyncio.run(main())
    assert any("checked-by-keel" in e.text for e in result.events if isinstance(e, ToolResult))


def test_cancelling_the_task_cancels_the_turn(env, mock, keel_kwargs):
    m = mock(BASIC)

    async def main():
        async with AsyncKeel(**keel_kwargs(m)) as keel:
            started = asyncio.Event()

            def on_event(event):
                if isinstance(event, TurnStart):
                    started.set()

            task = asyncio.ensure_future(keel.run("take forever", on_event=on_event))
            await asyncio.wait_for(started.wait(), 30)
            task.cancel()
            try:
                await task
                raise AssertionError("not cancelled")
            except asyncio.CancelledError:
                pass
            # The server's turn ended: the session is idle and its log's turn aborted.
            sessions = await keel.sessions()
            sid = sessions[0]["id"]
            for _ in range(600):
                if (await keel.info(sid))["status"] == "idle":
                    break
                await asyncio.sleep(0.05)
            assert (await keel.info(sid))["status"] == "idle"
            # cancel() from elsewhere gives an interrupted result instead.
            task = asyncio.ensure_future(keel.run("take forever", session_id=sid))
            for _ in range(600):
                if (await keel.info(sid))["status"] == "running":
                    break
                await asyncio.sleep(0.05)
            assert await keel.cancel(sid)
            result = await task
            assert result.interrupted and result.stop_reason == "aborted"

    asyncio.run(main())
