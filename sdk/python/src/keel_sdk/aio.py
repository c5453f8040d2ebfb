"""The asyncio client: :class:`AsyncKeel`, the same surface as :class:`keel_sdk.Keel` as
coroutines and async iterators. Cancelling the task awaiting a run cancels its turn on the
server."""

from __future__ import annotations

import asyncio
import inspect
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _server
from ._http import AsyncHttp
from ._turn import NO_APPROVER_NOTE, Request, TurnReader, approval_body, question_body
from .client import PathLike, _events_path, _Options, image_url
from .errors import ConnectionLost
from .types import ApprovalRequest, Event, QuestionRequest, Result

MaybeAwaitable = Union[Any, Awaitable[Any]]


class AsyncKeel:
    """:class:`keel_sdk.Keel` for asyncio. The server starts on ``await keel.start()``, on
    ``async with``, or on the first call; ``await keel.close()`` stops it (so does the
    interpreter's exit). Callbacks may be plain functions or coroutine functions."""

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
        on_approval: Optional[Callable[[ApprovalRequest], MaybeAwaitable]] = None,
        on_question: Optional[Callable[[QuestionRequest], MaybeAwaitable]] = None,
        prices: Optional[Dict[str, Tuple[float, float, float]]] = None,
        timeout: Optional[float] = 60.0,
        start_timeout: float = 60.0,
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
        self._http: Optional[AsyncHttp] = None
        self._running: Dict[str, int] = {}
        self._finalizer: Optional[weakref.finalize] = None
        self._starting: Optional[asyncio.Lock] = None
        self.url = ""
        self.token = ""

    # --- the server ----------------------------------------------------------------------

    async def start(self) -> "AsyncKeel":
        """Start the private server (or check the given URL's token); once."""
        if self._http is not None:
            return self
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._http is not None:
                return self
            opts = self._opts
            if opts.url is not None:
                host, port, tok = _server.split_url(opts.url, opts.token)
            else:
                binary = _server.find_binary(opts.binary)
                loop = asyncio.get_running_loop()
                server = await loop.run_in_executor(
                    None, lambda: _server.PrivateServer(binary, opts.flags, self.cwd, opts.env, opts.start_timeout)
                )
                self._server = server
                self._finalizer = weakref.finalize(self, _server.stop_process, server.proc)
                host, port, tok = _server.split_url(server.url, None)
            self.url, self.token = f"http://{host}:{port}", tok
            self._http = AsyncHttp(host, port, tok, opts.timeout)
        return self

    async def _h(self) -> AsyncHttp:
        if self._http is None:
            await self.start()
        assert self._http is not None
        return self._http

    @property
    def pid(self) -> Optional[int]:
        return self._server.pid if self._server else None

    @property
    def server_stderr(self) -> str:
        return self._server.stderr() if self._server else ""

    async def close(self) -> None:
        if self._server is not None:
            server = self._server
            await asyncio.get_running_loop().run_in_executor(None, server.stop)
            if self._finalizer is not None:
                self._finalizer.detach()

    async def __aenter__(self) -> "AsyncKeel":
        return await self.start()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    # --- runs ----------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        *,
        session_id: Optional[str] = None,
        model: Optional[str] = None,
        mode: Optional[str] = None,
        images: Sequence[PathLike] = (),
        timeout: Optional[float] = None,
        on_event: Optional[Callable[[Event], MaybeAwaitable]] = None,
        on_notification: Optional[Callable[[Event], MaybeAwaitable]] = None,
    ) -> Result:
        """As :meth:`keel_sdk.Keel.run`. Cancelling the awaiting task cancels the turn on the
        server and re-raises ``CancelledError``."""
        stream = await self.stream(prompt, session_id=session_id, model=model, mode=mode, images=images, timeout=timeout)
        callback = on_event or on_notification
        try:
            async for event in stream:
                if callback is not None:
                    await _maybe(callback(event))
        except BaseException:
            if stream.result is None:
                await self._cancel_quietly(stream.session_id)
            raise
        assert stream.result is not None
        return stream.result

    async def stream(
        self,
        prompt: str,
        *,
        session_id: Optional[str] = None,
        model: Optional[str] = None,
        mode: Optional[str] = None,
        images: Sequence[PathLike] = (),
        timeout: Optional[float] = None,
    ) -> "AsyncStream":
        """Start ``prompt`` as one turn; ``async for event in await keel.stream(…)``."""
        http = await self._h()
        urls = [image_url(i) for i in images]
        if session_id is None:
            body: Dict[str, Any] = {"cwd": self.cwd}
            if not urls:
                body["prompt"] = prompt
            if model:
                body["model"] = model
            if mode:
                body["mode"] = mode
            sid = (await http.call("POST", "/api/v1/sessions", body))["id"]
            if urls:
                await http.call("POST", f"/api/v1/sessions/{sid}/messages", {"text": prompt, "images": urls})
            path = f"/api/v1/sessions/{sid}/events"
        else:
            sid = session_id
            if model:
                await self.set_model(sid, model)
            if mode:
                await self.set_mode(sid, mode)
            state = await http.call("GET", f"/api/v1/sessions/{sid}")
            message: Dict[str, Any] = {"text": prompt, "delivery": "queue"}
            if urls:
                message["images"] = urls
            await http.call("POST", f"/api/v1/sessions/{sid}/messages", message)
            path = _events_path(sid, state.get("events"))
        return AsyncStream(self, sid, path, timeout)

    async def _answer(self, request: Request) -> None:
        http = await self._h()
        sid = request.session_id
        if isinstance(request, QuestionRequest):
            answer = await _maybe(self.on_question(request)) if self.on_question else None
            body = question_body(answer)
            path = f"/api/v1/sessions/{sid}/questions/{request.request_id}"
        else:
            if self.on_approval is None:
                body = {"decision": "deny", "note": NO_APPROVER_NOTE}
            else:
                body = approval_body(await _maybe(self.on_approval(request)))
            path = f"/api/v1/sessions/{sid}/approvals/{request.request_id}"
        await http.call("POST", path, body, ok=(404, 409))

    async def _cancel_quietly(self, sid: str) -> None:
        try:
            await self.cancel(sid)
        except Exception:
            pass

    # --- sessions ------------------------------------------------------------------------

    def session(self, session_id: Optional[str] = None) -> "AsyncSession":
        return AsyncSession(self, session_id)

    start_session = session

    async def resume(self, session_id: str) -> "AsyncSession":
        await (await self._h()).call("GET", f"/api/v1/sessions/{session_id}")
        return AsyncSession(self, session_id)

    resume_session = resume

    async def fork(self, session_id: str, at: Optional[int] = None) -> "AsyncSession":
        body = {} if at is None else {"at": at}
        forked = await (await self._h()).call("POST", f"/api/v1/sessions/{session_id}/fork", body)
        return AsyncSession(self, forked["id"])

    async def rewind(self, session_id: str, to: Union[int, str], *, scope: str = "both", force: bool = False) -> str:
        body = {"to": str(to), "scope": scope, "force": force}
        answer = await (await self._h()).call("POST", f"/api/v1/sessions/{session_id}/rewind", body)
        return str(answer.get("message", ""))

    async def cancel(self, session_id: Optional[str] = None) -> bool:
        http = await self._h()
        targets = [session_id] if session_id else list(self._running)
        cancelled = False
        for sid in targets:
            cancelled |= bool((await http.call("POST", f"/api/v1/sessions/{sid}/cancel")).get("cancelled"))
        return cancelled

    interrupt = cancel

    async def set_mode(self, session_id: str, mode: str) -> str:
        return str((await (await self._h()).call("POST", f"/api/v1/sessions/{session_id}/mode", {"mode": mode}))["mode"])

    async def set_model(self, session_id: str, model: Optional[str] = None, effort: Optional[str] = None) -> Dict[str, Any]:
        body = {k: v for k, v in (("model", model), ("effort", effort)) if v}
        return dict(await (await self._h()).call("POST", f"/api/v1/sessions/{session_id}/model", body))

    async def info(self, session_id: str) -> Dict[str, Any]:
        return dict(await (await self._h()).call("GET", f"/api/v1/sessions/{session_id}"))

    async def sessions(self) -> List[Dict[str, Any]]:
        return list((await (await self._h()).call("GET", "/api/v1/sessions"))["sessions"])

    async def pending(self, session_id: str) -> List[Dict[str, Any]]:
        return list((await (await self._h()).call("GET", f"/api/v1/sessions/{session_id}/pending"))["requests"])

    async def close_session(self, session_id: str) -> bool:
        return bool((await (await self._h()).call("POST", f"/api/v1/sessions/{session_id}/close")).get("closed"))

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        return await (await self._h()).call(method, path, body)


async def _maybe(value: MaybeAwaitable) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class AsyncStream:
    """The events of one run as they come (``async for``); ``result`` once the turn ended."""

    def __init__(self, keel: AsyncKeel, session_id: str, path: str, timeout: Optional[float]) -> None:
        self.session_id = session_id
        self.result: Optional[Result] = None
        self._keel = keel
        self._path = path
        self._timeout = timeout
        self._gen = self._run()

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Event:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def _run(self) -> AsyncIterator[Event]:
        keel, sid = self._keel, self.session_id
        reader = TurnReader(sid, keel._opts.prices)
        http = await keel._h()
        keel._running[sid] = keel._running.get(sid, 0) + 1
        timer = None
        if self._timeout is not None:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(self._timeout, lambda: asyncio.ensure_future(keel._cancel_quietly(sid)))
        try:
            async for name, _id, data in http.events(self._path):
                shown, asks = reader.feed(name, data)
                for event in shown:
                    yield event
                for request in asks:
                    await keel._answer(request)
                if reader.done:
                    self.result = reader.result()
                    return
            raise ConnectionLost(f"the event stream of session {sid} ended before its turn did")
        finally:
            if timer is not None:
                timer.cancel()
            n = keel._running.get(sid, 0) - 1
            if n > 0:
                keel._running[sid] = n
            else:
                keel._running.pop(sid, None)


class AsyncSession:
    def __init__(self, keel: AsyncKeel, session_id: Optional[str] = None) -> None:
        self.keel = keel
        self.id = session_id

    @property
    def session_id(self) -> Optional[str]:
        return self.id

    async def run(self, prompt: str, **kwargs: Any) -> Result:
        result = await self.keel.run(prompt, session_id=self.id, **kwargs)
        self.id = result.session_id
        return result

    async def stream(self, prompt: str, **kwargs: Any) -> AsyncStream:
        stream = await self.keel.stream(prompt, session_id=self.id, **kwargs)
        self.id = stream.session_id
        return stream

    def _id(self) -> str:
        if self.id is None:
            raise ValueError("this session has not run yet")
        return self.id

    async def fork(self, at: Optional[int] = None) -> "AsyncSession":
        return await self.keel.fork(self._id(), at)

    async def rewind(self, to: Union[int, str], **kwargs: Any) -> str:
        return await self.keel.rewind(self._id(), to, **kwargs)

    async def cancel(self) -> bool:
        return await self.keel.cancel(self._id())

    async def info(self) -> Dict[str, Any]:
        return await self.keel.info(self._id())

    async def close(self) -> bool:
        return await self.keel.close_session(self._id())
