"""HTTP/1.1 to ``keel serve``: JSON calls and the Server-Sent Events stream, blocking
(``http.client``) and asyncio (``asyncio`` streams), with the bearer token on every request."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

from .errors import APIError, ConnectionLost, api_error

#: One message of the event stream: its ``event:`` name (``message`` for a log event), its
#: ``id:`` (None for named messages) and its data parsed as JSON.
SseMessage = Tuple[str, Optional[str], Any]


class SseParser:
    """Lines in, messages out (the parts of the SSE format ``keel serve`` sends)."""

    def __init__(self) -> None:
        self.name = ""
        self.id: Optional[str] = None
        self.data: List[str] = []

    def line(self, line: str) -> Optional[SseMessage]:
        if line == "":
            if not self.data:
                self.name, self.id = "", None
                return None
            text = "\n".join(self.data)
            msg = (self.name or "message", self.id, json.loads(text) if text else None)
            self.name, self.id, self.data = "", None, []
            return msg
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self.data.append(value)
        elif field == "event":
            self.name = value
        elif field == "id":
            self.id = value
        return None


def _headers(host: str, port: int, token: str, body: Optional[bytes]) -> Dict[str, str]:
    headers = {"Host": f"{host}:{port}", "Authorization": f"Bearer {token}", "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
        headers["Content-Length"] = str(len(body))
    return headers


def _decode(status: int, raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        if status >= 400:
            raise api_error(status, None, raw.decode("utf-8", "replace"))
        raise APIError(status, "unexpected", "not JSON: " + raw[:200].decode("utf-8", "replace"))


class SyncHttp:
    def __init__(self, host: str, port: int, token: str, timeout: Optional[float] = 60.0) -> None:
        self.host, self.port, self.token, self.timeout = host, port, token, timeout

    def call(self, method: str, path: str, body: Any = None, ok: Tuple[int, ...] = ()) -> Any:
        data = None if body is None else json.dumps(body).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers=_headers(self.host, self.port, self.token, data))
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as e:
            raise ConnectionLost(f"cannot reach keel serve at http://{self.host}:{self.port}: {e}") from e
        finally:
            conn.close()
        value = _decode(resp.status, raw)
        if resp.status >= 400 and resp.status not in ok:
            raise api_error(resp.status, value)
        return value

    def events(self, path: str) -> "SyncEvents":
        return SyncEvents(self, path)


class SyncEvents:
    """An open event stream; iterate for messages, ``close()`` to leave."""

    def __init__(self, http_: SyncHttp, path: str) -> None:
        self.conn = http.client.HTTPConnection(http_.host, http_.port, timeout=None)
        try:
            headers = _headers(http_.host, http_.port, http_.token, None)
            headers["Accept"] = "text/event-stream"
            self.conn.request("GET", path, headers=headers)
            self.resp = self.conn.getresponse()
        except OSError as e:
            self.conn.close()
            raise ConnectionLost(f"cannot reach keel serve at http://{http_.host}:{http_.port}: {e}") from e
        if self.resp.status != 200:
            value = _decode(self.resp.status, self.resp.read())
            self.conn.close()
            raise api_error(self.resp.status, value)

    def __iter__(self) -> Iterator[SseMessage]:
        parser = SseParser()
        while True:
            try:
                raw = self.resp.readline()
            except (OSError, ValueError, http.client.HTTPException):
                return
            if not raw:
                return
            msg = parser.line(raw.decode("utf-8").rstrip("\r\n"))
            if msg is not None:
                yield msg

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


class AsyncHttp:
    def __init__(self, host: str, port: int, token: str, timeout: Optional[float] = 60.0) -> None:
        self.host, self.port, self.token, self.timeout = host, port, token, timeout

    async def _open(self, method: str, path: str, body: Optional[bytes], accept: str):
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError as e:
            raise ConnectionLost(f"cannot reach keel serve at http://{self.host}:{self.port}: {e}") from e
        headers = _headers(self.host, self.port, self.token, body)
        headers["Accept"] = accept
        headers["Connection"] = "close"
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode() + (body or b""))
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2:
            writer.close()
            raise ConnectionLost(f"keel serve at http://{self.host}:{self.port} closed the connection")
        status = int(parts[1])
        resp_headers: Dict[str, str] = {}
        while True:
            line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            k, _, v = line.partition(":")
            resp_headers[k.strip().lower()] = v.strip()
        return status, resp_headers, reader, writer

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader, headers: Dict[str, str]) -> AsyncIterator[bytes]:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await reader.readline()
                if not size_line:
                    return
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return
                chunk = await reader.readexactly(size)
                await reader.readexactly(2)
                yield chunk
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if n:
                yield await reader.readexactly(n)
        else:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    return
                yield chunk

    async def call(self, method: str, path: str, body: Any = None, ok: Tuple[int, ...] = ()) -> Any:
        data = None if body is None else json.dumps(body).encode()

        async def go() -> Any:
            status, headers, reader, writer = await self._open(method, path, data, "application/json")
            try:
                raw = b"".join([c async for c in self._chunks(reader, headers)])
            finally:
                writer.close()
            value = _decode(status, raw)
            if status >= 400 and status not in ok:
                raise api_error(status, value)
            return value

        return await asyncio.wait_for(go(), self.timeout)

    async def events(self, path: str) -> AsyncIterator[SseMessage]:
        status, headers, reader, writer = await self._open("GET", path, None, "text/event-stream")
        try:
            if status != 200:
                raw = b"".join([c async for c in self._chunks(reader, headers)])
                raise api_error(status, _decode(status, raw))
            parser = SseParser()
            pending = b""
            try:
                async for chunk in self._chunks(reader, headers):
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        msg = parser.line(line.decode("utf-8").rstrip("\r"))
                        if msg is not None:
                            yield msg
            except (OSError, asyncio.IncompleteReadError):
                return
        finally:
            writer.close()
