"""The blocking client: :class:`Keel`, its :class:`Session` handles and :class:`Stream`."""

from __future__ import annotations

import base64
import mimetypes
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from . import _server
from ._http import SyncEvents, SyncHttp
from ._turn import NO_APPROVER_NOTE, Request, TurnReader, approval_body, question_body
from .errors import APIError, ConnectionLost
from .types import BUILTIN_PRICES, ApprovalRequest, Event, QuestionRequest, Result

ApprovalAnswer = Union[bool, str, Tuple[str, str], None]
ApprovalCallback = Callable[[ApprovalRequest], ApprovalAnswer]
QuestionCallback = Callable[[QuestionRequest], Optional[Dict[str, Any]]]
PathLike = Union[str, "os.PathLike[str]"]


class _Options:
    """What :class:`Keel` and :class:`AsyncKeel` take, checked and turned into a server's
    command line once."""

    def __init__(
        self,
        cwd: Optional[PathLike],
        model: Optional[str],
        url: Optional[str],
        token: Optional[str],
        binary: Optional[str],
        base_url: Optional[str],
        api_key: Optional[str],
        keel_home: Optional[PathLike],
        provider: Optional[str],
        sandbox: Optional[str],
        approval: Optional[str],
        trust_project: bool,
        config: Optional[Dict[str, object]],
        reasoning_effort: Optional[str],
        max_tokens: Optional[int],
        extra_args: Sequence[str],
        env: Optional[Dict[str, str]],
        prices: Optional[Dict[str, Tuple[float, float, float]]],
        timeout: Optional[float],
        start_timeout: float,
    ) -> None:
        self.cwd = str(Path(cwd if cwd is not None else os.getcwd()).resolve())
        if not os.path.isdir(self.cwd):
            raise ValueError(f"cwd {self.cwd} is not a directory")
        self.model = model
        self.url = url
        self.token = token
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.prices = dict(BUILTIN_PRICES)
        self.prices.update(prices or {})
        self.env: Dict[str, str] = dict(env or {})
        if keel_home is not None:
            self.env["KEEL_HOME"] = str(Path(keel_home).resolve())
        flags_extra = list(extra_args)
        if provider:
            flags_extra += ["--provider", provider]
        if max_tokens is not None:
            flags_extra += ["--max-output", str(int(max_tokens))]
        if api_key is not None:
            if base_url:
                # A --base-url server gets no configured key: only --api-key-env's.
                self.env["KEEL_SDK_API_KEY"] = api_key
                flags_extra += ["--api-key-env", "KEEL_SDK_API_KEY"]
            else:
                self.env["DEEPSEEK_API_KEY"] = api_key
        cfg = dict(config or {})
        if reasoning_effort:
            cfg["agent.reasoning_effort"] = reasoning_effort
        self.binary = binary
        self.flags = _server.global_flags(model, base_url, sandbox, approval, trust_project, cfg, flags_extra)
        if url is not None and (binary or base_url or sandbox or approval or extra_args):
            raise ValueError("a server given by url= runs with its own flags: binary=, base_url=, sandbox=, approval= and extra_args= are for a private server")


def image_url(image: PathLike) -> str:
    """A ``data:`` URL for an image file (or a data URL as it is)."""
    text = os.fspath(image)
    if text.startswith("data:"):
        return text
    kind = mimetypes.guess_type(text)[0] or "application/octet-stream"
    return f"data:{kind};base64," + base64.b64encode(Path(text).read_bytes()).decode()


class Keel:
    """A keel agent host: a private ``keel serve`` on loopback (started now, stopped by
    :meth:`close`, the ``with`` block's end, or this process's exit), or a running server given
    by ``url`` (and ``token``).

    ``on_approval(request) -> True | False | "allow" | "allow_always" | "deny" | (decision,
    note)`` answers the tool calls the server asks about (``approval="ask"``, the default);
    without it they are denied. ``on_question(request) -> {question_id: answer} | None``
    answers ``ask_user_question`` (None declines); without it questions are declined.
    """

    def __init__(
        self,
        cwd: Optional[PathLike] = None,
        model: Optional[str] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        binary: Optional[str] = None,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        keel_home: Optional[PathLike] = None,
        provider: Optional[str] = None,
        sandbox: Optional[str] = None,
        approval: Optional[str] = None,
        trust_project: bool = False,
        config: Optional[Dict[str, object]] = None,
        reasoning_effort: Optional[str] = None,
        max_tokens: Optional[int] = None,
        extra_args: Sequence[str] = (),
        env: Optional[Dict[str, str]] = None,
        on_approval: Optional[ApprovalCallback] = None,
        on_question: Optional[QuestionCallback] = None,
        prices: Optional[Dict[str, Tuple[float, float, float]]] = None,
        timeout: Optional[float] = 60.0,
        start_timeout: float = 60.0,
        # dsh SDK spellings.
        dsh_home: Optional[PathLike] = None,
        dsh_bin: Optional[str] = None,
    ) -> None:
        self._opts = _Options(
            cwd, model, url, token, binary or dsh_bin, base_url, api_key, keel_home or dsh_home, provider,
            sandbox, approval, trust_project, config, reasoning_effort, max_tokens, extra_args, env, prices,
            timeout, start_timeout,
        )  # fmt: skip
        self.cwd = self._opts.cwd
        self.on_approval = on_approval
        self.on_question = on_question
        self._server: Optional[_server.PrivateServer] = None
        self._running: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._finalizer: Optional[weakref.finalize] = None
        if url is not None:
            host, port, tok = _server.split_url(url, token)
        else:
            binary_path = _server.find_binary(self._opts.binary)
            self._server = _server.PrivateServer(
                binary_path, self._opts.flags, self.cwd, self._opts.env, start_timeout
            )
            server = self._server
            # Stop the server when this object is collected or the interpreter exits.
            self._finalizer = weakref.finalize(self, _server.stop_process, server.proc)
            host, port, tok = _server.split_url(server.url, None)
        self.url = f"http://{host}:{port}"
        self.token = tok
        self._http = SyncHttp(host, port, tok, timeout)

    # --- the server ----------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The private server's pid (None for a server given by ``url``)."""
        return self._server.pid if self._server else None

    @property
    def server_stderr(self) -> str:
        """The tail of the private server's stderr."""
        return self._server.stderr() if self._server else ""

    def start(self) -> "Keel":
        """Nothing: the server starts with the object (for the dsh SDK's ``start()``)."""
        return self

    def close(self) -> None:
        """Stop the private server (its running turns are cancelled; sessions stay stored)."""
        if self._server is not None:
            self._server.stop()
            if self._finalizer is not None:
                self._finalizer.detach()

    def __enter__(self) -> "Keel":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- runs ----------------------------------------------------------------------------

    def run(
        self,
        prompt: str,
        *,
        session_id: Optional[str] = None,
        model: Optional[str] = None,
        mode: Optional[str] = None,
        images: Sequence[PathLike] = (),
        timeout: Optional[float] = None,
        on_event: Optional[Callable[[Event], None]] = None,
        on_notification: Optional[Callable[[Event], None]] = None,
    ) -> Result:
        """Run ``prompt`` as one turn, in a new session or in ``session_id``, and wait for its
        end. ``timeout`` (seconds) cancels the turn when it runs longer (the result is then
        ``interrupted``). Ctrl-C (or any exception) while waiting cancels the turn on the
        server and is raised."""
        stream = self.stream(prompt, session_id=session_id, model=model, mode=mode, images=images, timeout=timeout)
        callback = on_event or on_notification
        try:
            for event in stream:
                if callback is not None:
                    callback(event)
        except BaseException:
            if stream.result is None:
                self._cancel_quietly(stream.session_id)
            stream.close()
            raise
        assert stream.result is not None
        return stream.result

    def stream(
        self,
        prompt: str,
        *,
        session_id: Optional[str] = None,
        model: Optional[str] = None,
        mode: Optional[str] = None,
        images: Sequence[PathLike] = (),
        timeout: Optional[float] = None,
    ) -> "Stream":
        """Start ``prompt`` as one turn and return its events as they come (iterate the
        :class:`Stream`; its ``result`` is set once the turn ended). Leaving the loop early
        leaves the turn running on the server."""
        sid, path = self._begin(prompt, session_id, model, mode, images)
        return Stream(self, sid, path, timeout)

    def _begin(
        self, prompt: str, session_id: Optional[str], model: Optional[str], mode: Optional[str], images: Sequence[PathLike]
    ) -> Tuple[str, str]:
        urls = [image_url(i) for i in images]
        if session_id is None:
            body: Dict[str, Any] = {"cwd": self.cwd}
            if not urls:
                body["prompt"] = prompt
            if model:
                body["model"] = model
            if mode:
                body["mode"] = mode
            sid = self._http.call("POST", "/api/v1/sessions", body)["id"]
            if urls:
                self._http.call("POST", f"/api/v1/sessions/{sid}/messages", {"text": prompt, "images": urls})
            return sid, f"/api/v1/sessions/{sid}/events"
        sid = session_id
        if model:
            self.set_model(sid, model)
        if mode:
            self.set_mode(sid, mode)
        state = self._http.call("GET", f"/api/v1/sessions/{sid}")
        message: Dict[str, Any] = {"text": prompt, "delivery": "queue"}
        if urls:
            message["images"] = urls
        self._http.call("POST", f"/api/v1/sessions/{sid}/messages", message)
        return sid, _events_path(sid, state.get("events"))

    # Called by Stream.
    def _answer(self, request: Request) -> None:
        sid = request.session_id
        if isinstance(request, QuestionRequest):
            body = question_body(self.on_question(request) if self.on_question else None)
            path = f"/api/v1/sessions/{sid}/questions/{request.request_id}"
        else:
            if self.on_approval is None:
                body = {"decision": "deny", "note": NO_APPROVER_NOTE}
            else:
                body = approval_body(self.on_approval(request))
            path = f"/api/v1/sessions/{sid}/approvals/{request.request_id}"
        # 409: answered before (another client, a cancel); 404: gone with its turn.
        self._http.call("POST", path, body, ok=(404, 409))

    def _enter(self, sid: str) -> None:
        with self._lock:
            self._running[sid] = self._running.get(sid, 0) + 1

    def _leave(self, sid: str) -> None:
        with self._lock:
            n = self._running.get(sid, 0) - 1
            if n > 0:
                self._running[sid] = n
            else:
                self._running.pop(sid, None)

    def _cancel_quietly(self, sid: str) -> None:
        try:
            self.cancel(sid)
        except Exception:  # the server may be gone already
            pass

    # --- sessions ------------------------------------------------------------------------

    def session(self, session_id: Optional[str] = None) -> "Session":
        """A handle on a session: a new one (created at its first ``run``), or ``session_id``."""
        return Session(self, session_id)

    start_session = session

    def resume(self, session_id: str) -> "Session":
        """A stored or hosted session, checked to exist (an :class:`APIError` ``not_found``
        otherwise); its next ``run`` continues its conversation."""
        self._http.call("GET", f"/api/v1/sessions/{session_id}")
        return Session(self, session_id)

    resume_session = resume

    def fork(self, session_id: str, at: Optional[int] = None) -> "Session":
        """A new session seeded with ``session_id``'s log: up to the turn holding seq ``at``,
        or after its last completed turn."""
        body = {} if at is None else {"at": at}
        return Session(self, self._http.call("POST", f"/api/v1/sessions/{session_id}/fork", body)["id"])

    def rewind(self, session_id: str, to: Union[int, str], *, scope: str = "both", force: bool = False) -> str:
        """Files and conversation back to just before a turn: ``to`` is a seq, ``"N"`` (turn
        N), ``"seq:S"`` or ``"undo"``; ``scope`` ``both``, ``files`` or ``conversation``."""
        body = {"to": str(to), "scope": scope, "force": force}
        return str(self._http.call("POST", f"/api/v1/sessions/{session_id}/rewind", body).get("message", ""))

    def cancel(self, session_id: Optional[str] = None) -> bool:
        """Cancel the running turn of ``session_id``, or of every session this object runs now;
        the run waiting for it returns an ``interrupted`` :class:`Result`."""
        with self._lock:
            targets = [session_id] if session_id else list(self._running)
        cancelled = False
        for sid in targets:
            cancelled |= bool(self._http.call("POST", f"/api/v1/sessions/{sid}/cancel").get("cancelled"))
        return cancelled

    interrupt = cancel

    def set_mode(self, session_id: str, mode: str) -> str:
        """``default``, ``read-only``, ``auto`` or ``plan`` (between turns)."""
        return str(self._http.call("POST", f"/api/v1/sessions/{session_id}/mode", {"mode": mode})["mode"])

    def set_model(self, session_id: str, model: Optional[str] = None, effort: Optional[str] = None) -> Dict[str, Any]:
        """Switch a session's model and/or reasoning effort (between turns)."""
        body = {k: v for k, v in (("model", model), ("effort", effort)) if v}
        return dict(self._http.call("POST", f"/api/v1/sessions/{session_id}/model", body))

    def info(self, session_id: str) -> Dict[str, Any]:
        """``GET /api/v1/sessions/{id}``: the session's state (model, mode, status, events…)."""
        return dict(self._http.call("GET", f"/api/v1/sessions/{session_id}"))

    def sessions(self) -> List[Dict[str, Any]]:
        """Every session of the server's ``$KEEL_HOME``, newest first."""
        return list(self._http.call("GET", "/api/v1/sessions")["sessions"])

    def pending(self, session_id: str) -> List[Dict[str, Any]]:
        """The approvals and questions of a session waiting for an answer."""
        return list(self._http.call("GET", f"/api/v1/sessions/{session_id}/pending")["requests"])

    def close_session(self, session_id: str) -> bool:
        """Stop hosting a session (it stays stored; a run resumes it)."""
        return bool(self._http.call("POST", f"/api/v1/sessions/{session_id}/close").get("closed"))

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Any route of the API (``/api/v1/…``), for what the SDK does not wrap."""
        return self._http.call(method, path, body)


def _events_path(sid: str, next_seq: Any) -> str:
    path = f"/api/v1/sessions/{sid}/events"
    if isinstance(next_seq, int) and next_seq > 0:
        path += f"?after={next_seq - 1}"
    return path


class Stream:
    """The events of one run as they come; ``result`` once the turn ended."""

    def __init__(self, keel: Keel, session_id: str, path: str, timeout: Optional[float]) -> None:
        self.session_id = session_id
        self.result: Optional[Result] = None
        self._keel = keel
        self._reader = TurnReader(session_id, keel._opts.prices)
        self._events: Optional[SyncEvents] = keel._http.events(path)
        self._timeout = timeout
        self._gen = self._run()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return next(self._gen)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading (the turn goes on on the server)."""
        if self._events is not None:
            self._events.close()
            self._events = None

    def _run(self) -> Iterator[Event]:
        keel, reader, sid = self._keel, self._reader, self.session_id
        events = self._events
        assert events is not None
        keel._enter(sid)
        timer = None
        if self._timeout is not None:
            timer = threading.Timer(self._timeout, keel._cancel_quietly, [sid])
            timer.daemon = True
            timer.start()
        try:
            for name, _id, data in events:
                shown, asks = reader.feed(name, data)
                for event in shown:
                    yield event
                for request in asks:
                    keel._answer(request)
                if reader.done:
                    self.result = reader.result()
                    return
            raise ConnectionLost(f"the event stream of session {sid} ended before its turn did" + _stderr(keel))
        finally:
            if timer is not None:
                timer.cancel()
            keel._leave(sid)
            self.close()


def _stderr(keel: Keel) -> str:
    if keel._server is not None and not keel._server.alive():
        return " (the server exited)\n" + keel.server_stderr
    return ""


class Session:
    """One session of a :class:`Keel`: created by its first :meth:`run` when new."""

    def __init__(self, keel: Keel, session_id: Optional[str] = None) -> None:
        self.keel = keel
        self.id = session_id

    @property
    def session_id(self) -> Optional[str]:
        return self.id

    def run(self, prompt: str, **kwargs: Any) -> Result:
        result = self.keel.run(prompt, session_id=self.id, **kwargs)
        self.id = result.session_id
        return result

    def stream(self, prompt: str, **kwargs: Any) -> Stream:
        stream = self.keel.stream(prompt, session_id=self.id, **kwargs)
        self.id = stream.session_id
        return stream

    def _id(self) -> str:
        if self.id is None:
            raise ValueError("this session has not run yet")
        return self.id

    def fork(self, at: Optional[int] = None) -> "Session":
        return self.keel.fork(self._id(), at)

    def rewind(self, to: Union[int, str], **kwargs: Any) -> str:
        return self.keel.rewind(self._id(), to, **kwargs)

    def cancel(self) -> bool:
        return self.keel.cancel(self._id())

    def set_mode(self, mode: str) -> str:
        return self.keel.set_mode(self._id(), mode)

    def set_model(self, model: Optional[str] = None, effort: Optional[str] = None) -> Dict[str, Any]:
        return self.keel.set_model(self._id(), model, effort)

    def info(self) -> Dict[str, Any]:
        return self.keel.info(self._id())

    def close(self) -> bool:
        return self.keel.close_session(self._id())


__all__ = ["Keel", "Session", "Stream", "APIError"]
