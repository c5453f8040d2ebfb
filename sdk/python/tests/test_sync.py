"""The blocking client against the real keel serve and the mock model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import keel_bin, pid_gone
from scripts import ASKING, BASIC

from keel_sdk import (
    ApprovalRequest,
    AssistantMessage,
    Keel,
    QuestionRequest,
    Resolved,
    ServerStartError,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
)


def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pid_gone(pid):
            return True
        time.sleep(0.05)
    return pid_gone(pid)


def wait_idle(keel: Keel, sid: str) -> None:
    """The session's turn ended (the status follows the turn's end by a moment)."""
    deadline = time.monotonic() + 30
    while keel.info(sid)["status"] != "idle":
        assert time.monotonic() < deadline, "the turn was not cancelled"
        time.sleep(0.02)


def user_texts(request: dict) -> str:
    return json.dumps(request.get("messages", []))


def test_run_returns_text_usage_cost_and_session(env, mock, keel_kwargs):
    (env.ws / "notes.txt").write_text("hello\n")
    m = mock(BASIC)
    with Keel(**keel_kwargs(m), prices={"deepseek-v4-flash": (1.0, 0.1, 2.0)}) as keel:
        result = keel.run("read the notes")
    assert result.text == "The notes say hello."
    assert result.final_response == result.text  # the dsh name
    assert result.stop_reason == "completed" and result.ok and not result.interrupted
    assert result.session_id.startswith("session-")
    assert result.turn == 1
    assert result.usage.requests == 2
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    sent = m.requests()
    assert len(sent) == 2
    u = result.usage
    want = ((u.input_tokens - u.cache_read_tokens) * 1.0 + u.cache_read_tokens * 0.1 + u.output_tokens * 2.0) / 1e6
    assert result.cost == pytest.approx(want)
    assert result.model == "deepseek-v4-flash"
    # The session is stored in the given KEEL_HOME.
    assert list(env.home.glob(f"sessions/*/{result.session_id}/session.jsonl"))


def test_unpriced_model_has_no_cost(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:
        assert keel.run("remember the word").cost is None


def test_stream_yields_typed_events_in_order(env, mock, keel_kwargs):
    (env.ws / "notes.txt").write_text("hello\n")
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:
        stream = keel.stream("read the notes")
        assert stream.session_id.startswith("session-")
        events = list(stream)
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "in log order, once each"
    kinds = [type(e) for e in events]
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "completed"
    first = kinds.index(TurnStart)
    call = next(i for i, e in enumerate(events) if isinstance(e, ToolCall))
    res = next(i for i, e in enumerate(events) if isinstance(e, ToolResult))
    assert first < call < res
    assert events[call].name == "read" and events[call].arguments == {"path": "notes.txt"}
    assert events[res].call_id == events[call].call_id and "hello" in events[res].text
    answer = [e for e in events if isinstance(e, AssistantMessage)][-1]
    assert answer.text == "The notes say hello."
    deltas = "".join(e.text for e in events[res:] if isinstance(e, TextDelta))
    assert deltas == "The notes say hello."
    assert stream.result is not None and stream.result.text == "The notes say hello."
    assert stream.result.events[-1] is events[-1]


def test_resume_continues_the_conversation(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:
        first = keel.run("remember the word")
        sid = first.session_id
        # In the same server: run(session_id=…) continues it.
    # A new server over the same KEEL_HOME: resume the stored session.
    with Keel(**keel_kwargs(m)) as keel:
        session = keel.resume(sid)
        again = session.run("which word did I say")
    assert again.session_id == sid
    assert again.text == "The word was pelican."
    assert again.turn == 2
    last = user_texts(m.requests()[-1])
    assert "remember the word" in last and "I will remember: pelican." in last, "the first turn's history"
    # dsh spelling.
    with Keel(**keel_kwargs(m)) as keel:
        assert keel.resume_session(sid).id == sid
        with pytest.raises(Exception) as err:
            keel.resume("session-00000000-0000-0000-0000-000000000000")
        assert "not_found" in str(err.value)


def test_run_in_the_same_server_and_fork(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:
        first = keel.run("remember the word")
        forked = keel.fork(first.session_id)
        assert forked.id != first.session_id
        again = forked.run("which word")
        assert again.session_id == forked.id and again.text == "The word was pelican."
        assert "I will remember: pelican." in user_texts(m.requests()[-1])
        listed = {s["id"] for s in keel.sessions()}
        assert {first.session_id, forked.id} <= listed


def test_an_approval_is_answered_by_the_callback(env, mock, keel_kwargs):
    m = mock(ASKING)
    asked = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    with Keel(**keel_kwargs(m), sandbox="read-only", approval="ask", on_approval=approve) as keel:
        result = keel.run("run the check")
    assert len(asked) == 1
    assert asked[0].tool == "bash" and asked[0].arguments["command"] == "echo checked-by-keel"
    assert asked[0].call_id == "b1" and "allow" in asked[0].options
    outputs = [e for e in result.events if isinstance(e, ToolResult)]
    assert "checked-by-keel" in outputs[0].text and not outputs[0].is_error
    resolved = [e for e in result.events if isinstance(e, Resolved)]
    assert resolved and resolved[0].decision == "allow" and resolved[0].by == "client"
    assert result.text == "The check ran."


def test_a_denial_with_a_note_reaches_the_model(env, mock, keel_kwargs):
    m = mock(ASKING)
    with Keel(**keel_kwargs(m), sandbox="read-only", approval="ask", on_approval=lambda r: ("deny", "not today")) as keel:
        result = keel.run("clean up")
    assert result.text == "I did not clean up."
    assert "not today" in user_texts(m.requests()[-1])
    assert not any("cleaned-by-keel" in e.text for e in result.events if isinstance(e, ToolResult))


def test_without_a_callback_approvals_are_denied(env, mock, keel_kwargs):
    m = mock(ASKING)
    with Keel(**keel_kwargs(m), sandbox="read-only", approval="ask") as keel:
        result = keel.run("clean up")
    assert result.text == "I did not clean up."
    assert "no approval callback" in user_texts(m.requests()[-1])


def test_a_question_is_answered_by_the_callback(env, mock, keel_kwargs):
    m = mock(ASKING)
    asked = []

    def answer(request: QuestionRequest):
        asked.append(request)
        return {"lang": "Rust", "name": "keel"}

    with Keel(**keel_kwargs(m), on_question=answer) as keel:
        result = keel.run("ask me")
    assert [q["id"] for q in asked[0].questions] == ["lang", "name"]
    text = [e for e in result.events if isinstance(e, ToolResult)][0].text
    assert "lang: Rust" in text and "name: keel" in text
    assert result.text == "Noted your answers."


def test_a_cancelled_run_says_it_was_interrupted(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:

        def on_event(event):
            if isinstance(event, TurnStart):
                assert keel.cancel() is True

        started = time.monotonic()
        result = keel.run("take forever", on_event=on_event)
        assert result.interrupted and result.stop_reason == "aborted"
        assert time.monotonic() - started < 30
        # A timeout cancels the same way; the session is still usable.
        timed = keel.run("take forever", session_id=result.session_id, timeout=0.5)
        assert timed.interrupted and timed.session_id == result.session_id
        wait_idle(keel, result.session_id)


def test_ctrl_c_while_waiting_cancels_the_turn_on_the_server(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as keel:
        seen = {}

        def on_event(event):
            if isinstance(event, TurnStart):
                seen["sid"] = event
                raise KeyboardInterrupt

        stream_sid = []
        orig = keel.stream

        def spy(*a, **k):
            s = orig(*a, **k)
            stream_sid.append(s.session_id)
            return s

        keel.stream = spy  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            keel.run("take forever", on_event=on_event)
        wait_idle(keel, stream_sid[0])


def test_the_server_is_gone_after_close(env, mock, keel_kwargs):
    m = mock(BASIC)
    keel = Keel(**keel_kwargs(m))
    pid = keel.pid
    assert pid and not pid_gone(pid)
    assert not (env.home / "serve.json").exists(), "a private server writes no serve.json"
    keel.close()
    assert pid_gone(pid)
    assert not (env.home / "serve.json").exists()
    keel.close()  # twice is fine


def test_a_running_servers_serve_json_is_left_alone(env, mock, keel_kwargs):
    # Another server's entry (`keel serve` in a terminal, found by `keel attach` and `keel web`).
    planted = b'{\n  "url": "http://127.0.0.1:7878/?token=theirs",\n  "token": "theirs",\n  "pid": 1\n}\n'
    state = env.home / "serve.json"
    state.write_bytes(planted)
    m = mock(BASIC)
    keel = Keel(**keel_kwargs(m))
    pid = keel.pid
    assert keel.run("remember the word").text == "I will remember: pelican."
    assert state.read_bytes() == planted
    keel.close()
    assert pid is not None and pid_gone(pid)
    assert state.read_bytes() == planted, "the private server neither overwrote nor removed it"


CHILD = """
import sys
from keel_sdk import Keel
keel = Keel(cwd={ws!r}, binary={binary!r}, base_url={base!r}, keel_home={home!r}, trust_project=True,
            env={{"DEEPSEEK_API_KEY": "sk-test"}})
print(keel.pid, flush=True)
{tail}
"""


def child(env, m, tail: str) -> subprocess.Popen:
    code = CHILD.format(ws=str(env.ws), binary=keel_bin(), base=m.base_url, home=str(env.home), tail=tail)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_server_is_gone_when_the_interpreter_exits(env, mock):
    m = mock(BASIC)
    proc = child(env, m, "")  # exits without close()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    pid = int(out.split()[0])
    assert wait_gone(pid, 5), "atexit stopped the server"


def test_the_server_is_gone_when_the_interpreter_is_killed(env, mock):
    m = mock(BASIC)
    proc = child(env, m, "import time; time.sleep(600)")
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    assert not pid_gone(pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(pid, 15), "the server stopped when its stdin closed"


def test_a_server_that_cannot_start_is_named_with_its_stderr(env):
    with pytest.raises(ServerStartError) as err:
        Keel(cwd=env.ws, binary=keel_bin(), keel_home=env.home, sandbox="nonsense-mode")
    text = str(err.value)
    assert keel_bin() in text and "nonsense-mode" in text, text
    with pytest.raises(ServerStartError) as err:
        Keel(cwd=env.ws, binary=str(env.root / "no-such-keel"), keel_home=env.home)
    assert "no-such-keel" in str(err.value)


def test_connecting_to_a_running_server_by_url(env, mock, keel_kwargs):
    m = mock(BASIC)
    with Keel(**keel_kwargs(m)) as owner:
        url = f"{owner.url}/?token={owner.token}"
        other = Keel(cwd=env.ws, url=url)
        assert other.pid is None
        result = other.run("remember the word")
        assert result.text == "I will remember: pelican."
        other.close()  # closes nothing of the owner's server
        assert owner.run("which word", session_id=result.session_id).text == "The word was pelican."
    with pytest.raises(ValueError):
        Keel(cwd=env.ws, url="http://127.0.0.1:1/")
