"""A private ``keel serve`` on loopback: started, read for its URL, and stopped.

``keel … serve --listen 127.0.0.1:0 --private`` runs in a session (process group) of its own
(a Ctrl-C in the terminal reaches Python, not the server), its stdin a pipe from this Python
process that nothing ever writes to:

* ``--private`` writes no ``$KEEL_HOME/serve.json`` (a running server's entry stays as it is)
  and stops the server, as SIGTERM does (running turns cancelled), when its stdin reaches EOF;
* so closing the pipe stops it: ``close()``, or this process exiting in any way, SIGKILL
  included, since the kernel then closes the pipe;
* ``close()`` closes the pipe and waits for the server; after a grace period it sends SIGTERM,
  and as a last resort SIGKILL to the whole group.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Deque, Dict, List, Optional, Sequence
from urllib.parse import parse_qs, urlsplit

from .errors import ServerStartError


def find_binary(binary: Optional[str]) -> str:
    """``binary``, else ``$KEEL_BIN``, else ``keel`` on ``PATH``."""
    for candidate in (binary, os.environ.get("KEEL_BIN")):
        if candidate:
            return candidate
    found = shutil.which("keel")
    if not found:
        raise ServerStartError("keel", "no keel binary: pass binary=, set KEEL_BIN, or put keel on PATH", "")
    return found


def split_url(url: str, token: Optional[str]) -> "tuple[str, int, str]":
    """Host, port and token of a server URL (``http://HOST:PORT/?token=…`` or without the
    token, then ``token`` or ``$KEEL_SERVE_TOKEN``)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"keel-sdk speaks plain HTTP to a loopback server; cannot use {url!r}")
    found = token or (parse_qs(parts.query).get("token") or [None])[0] or os.environ.get("KEEL_SERVE_TOKEN")
    if not found:
        raise ValueError(f"no token for {url}: give token=, a URL with ?token=, or KEEL_SERVE_TOKEN")
    return parts.hostname or "127.0.0.1", parts.port or 80, found


class PrivateServer:
    """One ``keel serve`` this process started and owns."""

    def __init__(
        self,
        binary: str,
        global_args: Sequence[str],
        cwd: str,
        env: Optional[Dict[str, str]] = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.binary = binary
        self.cwd = cwd
        self.stderr_tail: Deque[str] = collections.deque(maxlen=40)
        self.url = ""
        self._closed = False
        full_env = dict(os.environ)
        full_env.update(env or {})
        argv = [binary, *global_args, "serve", "--listen", "127.0.0.1:0", "--private"]
        try:
            # stdin: a pipe kept open and never written; its EOF stops the server.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=full_env,
                start_new_session=True,
            )
        except OSError as e:
            raise ServerStartError(binary, f"cannot start {binary}: {e}", "") from e
        self.pid: int = self.proc.pid
        lines: "collections.deque[str]" = collections.deque()
        ready = threading.Event()

        def read_stdout() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                lines.append(raw.decode("utf-8", "replace").strip())
                ready.set()
            ready.set()

        def read_stderr() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

        self._threads = [
            threading.Thread(target=read_stdout, name="keel-serve-stdout", daemon=True),
            threading.Thread(target=read_stderr, name="keel-serve-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()
        deadline = time.monotonic() + start_timeout
        while not self.url:
            while lines:
                line = lines.popleft()
                if line.startswith("keel serve: "):
                    self.url = line[len("keel serve: ") :]
            if self.url:
                break
            if self.proc.poll() is not None and not lines:
                self._threads[1].join(timeout=1.0)
                self.stop()
                raise ServerStartError(
                    binary,
                    f"{binary} serve exited with status {self.proc.returncode} before it served",
                    self.stderr(),
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ServerStartError(binary, f"{binary} serve printed no URL in {start_timeout:.0f} s", self.stderr())
            ready.wait(0.05)
            ready.clear()

    def stderr(self) -> str:
        return "\n".join(self.stderr_tail)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """Close the server's stdin (it stops as on SIGTERM) and wait; see :func:`stop_process`."""
        if self._closed:
            return
        self._closed = True
        stop_process(self.proc, grace)


def stop_process(proc: "subprocess.Popen[bytes]", grace: float = 10.0) -> None:
    """Stop a server started by :class:`PrivateServer` (also used at exit, with nothing but the
    process handle): close its stdin, the end of its input, and wait up to ``grace`` seconds for
    it to stop; then SIGTERM, and a few seconds later SIGKILL to its process group (the server,
    or whatever its tools left behind)."""
    _close(proc.stdin)
    if not _exited(proc, grace):
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        _exited(proc, 5.0)
    # Whatever is left of the group (nothing, after a clean stop). The server is not reaped yet
    # (unless a poll() elsewhere did), so the group's id, its pid, names no other process.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    _close(proc.stdout)
    _close(proc.stderr)


def _exited(proc: "subprocess.Popen[bytes]", timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to exit, without reaping it (so its pid stays
    its own for :func:`os.killpg`) where ``os.waitid`` allows; True once it has exited."""
    if not hasattr(os, "waitid") or not hasattr(os, "WNOWAIT"):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        if proc.returncode is not None:
            return True
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already (by proc.poll() in another thread)
            return True
        except OSError:
            return proc.poll() is not None
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _close(stream: Optional[IO[bytes]]) -> None:
    try:
        if stream is not None:
            stream.close()
    except OSError:
        pass


def global_flags(
    model: Optional[str],
    base_url: Optional[str],
    sandbox: Optional[str],
    approval: Optional[str],
    trust_project: bool,
    config: Optional[Dict[str, object]],
    extra_args: Sequence[str],
) -> List[str]:
    """The global flags ``keel`` takes before ``serve``."""
    args: List[str] = []
    for flag, value in (("--model", model), ("--base-url", base_url), ("--sandbox", sandbox), ("--approval", approval)):
        if value:
            args += [flag, value]
    if trust_project:
        args.append("--trust-project")
    for key, value in (config or {}).items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        args += ["-c", f"{key}={text}"]
    args += list(extra_args)
    return args
