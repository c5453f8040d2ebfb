"""The SDK's exceptions."""

from __future__ import annotations

from typing import Any, Optional


class KeelError(Exception):
    """Base of every keel-sdk error."""


class ServerStartError(KeelError):
    """The private ``keel serve`` could not be started; names the binary and ends with the
    tail of the server's stderr."""

    def __init__(self, binary: str, message: str, stderr: str) -> None:
        self.binary = binary
        self.stderr = stderr
        text = message
        if stderr.strip():
            text += "\n--- stderr of " + binary + " (tail)\n" + stderr.rstrip()
        super().__init__(text)


class APIError(KeelError):
    """The server answered an error (``{"error": {"code", "message"}}``) or something
    unexpected."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        super().__init__(f"keel serve answered {status} {code}: {message}")


class ConnectionLost(KeelError):
    """The event stream ended before the turn did (the server stopped, or the session was
    closed)."""


def api_error(status: int, body: Any, fallback: Optional[str] = None) -> APIError:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return APIError(status, str(err.get("code", "")), str(err.get("message", "")), body)
    return APIError(status, "unexpected", fallback or str(body)[:500], body)
