"""Fixtures: the real ``keel`` binary (``$KEEL_BIN``, else the repository's target/debug/keel)
against ``keel-mock-server`` (``$KEEL_MOCK_SERVER``, else beside keel) serving a YAML script,
with a temp ``$KEEL_HOME``, ``$HOME`` and workspace. Only the model is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def keel_bin() -> str:
    path = os.environ.get("KEEL_BIN") or str(REPO / "target/debug/keel")
    if not os.path.isfile(path):
        pytest.fail(f"no keel binary at {path}: set KEEL_BIN or run `cargo build -p keel-cli --bins`")
    return path


def mock_bin() -> str:
    path = os.environ.get("KEEL_MOCK_SERVER") or str(Path(keel_bin()).parent / "keel-mock-server")
    if not os.path.isfile(path):
        pytest.fail(f"no keel-mock-server at {path}: set KEEL_MOCK_SERVER or run `cargo build -p keel-testkit --bins`")
    return path


class Mock:
    """A running keel-mock-server; ``requests()`` are the request bodies it received."""

    def __init__(self, script: str, tmp: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.script = tmp / "script.yaml"
        self.script.write_text(script)
        self.record = tmp / "requests.jsonl"
        self.proc = subprocess.Popen(
            [mock_bin(), "--script", str(self.script), "--record", str(self.record)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().decode().strip()
        if not self.base_url.startswith("http://"):
            raise RuntimeError("keel-mock-server did not start: " + self.proc.stderr.read().decode())

    def requests(self) -> List[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = root / "ws"
        self.home = root / "home"
        for d in (self.ws, self.home, root / "tmp"):
            d.mkdir(parents=True, exist_ok=True)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("DEEPSEEK_BASE_URL", "DEEPSEEK_API_KEY", "KEEL_HOME", "KEEL_SERVE_TOKEN", "RUST_LOG", "DSH_TOOLS_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def mock(tmp_path: Path) -> Iterator[Callable[[str], Mock]]:
    started: List[Mock] = []

    def start(script: str) -> Mock:
        m = Mock(script, tmp_path / f"mock{len(started)}")
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()


@pytest.fixture
def keel_kwargs(env: Env) -> Callable[[Mock], dict]:
    """The Keel(...) arguments for a private server on the mock."""

    def kwargs(m: Mock) -> dict:
        return dict(
            cwd=env.ws,
            binary=keel_bin(),
            base_url=m.base_url,
            keel_home=env.home,
            trust_project=True,
            env={"DEEPSEEK_API_KEY": "sk-test", "TMPDIR": str(env.root / "tmp")},
        )

    return kwargs


def pid_gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" in line.split()[1]
    except FileNotFoundError:
        return True
    return False
