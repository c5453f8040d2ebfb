"""Every ```python block of the README runs, as written, against the mock model: keel found by
$KEEL_BIN, the model's endpoint by DEEPSEEK_BASE_URL, sessions in a temp $KEEL_HOME."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import keel_bin

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)

ANSWER = """
  - match: { last_user_contains: "notes.txt" }
    text: "Let me look."
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "notes.txt" }
    text: "It says hello."
"""
SCRIPT = (
    "responses:\n"
    + ANSWER * 3
    + """
  - match: { last_user_contains: "Remember the word" }
    text: "Remembered: pelican."
  - match: { last_user_contains: "Which word" }
    text: "You said pelican."
  - match: { last_user_contains: "Which word" }
    text: "You said pelican."
  - match: { last_user_contains: "Run the check" }
    tool_calls:
      - { name: bash, arguments: { command: "echo checked" } }
  - match: { last_user_contains: "Run the check" }
    text: "The check passed."
"""
    + """
  - match: { last_user_contains: "Take your time" }
    behaviour: stall
    text: "never"
"""
    * 3
)

EXPECT = {
    "Run": ["It says hello.", "session-"],
    "Stream": ["It says hello.", "-- completed", "[read {'path': 'notes.txt'}]"],
    "Sessions": ["You said pelican.\nYou said pelican."],
    "Approvals": ["asked: bash", "The check passed."],
    "Cancel": ["True aborted\nTrue"],
    "asyncio": ["It says hello.", "cancelled"],
}


def test_the_readme_has_its_examples():
    assert len(BLOCKS) == len(EXPECT), BLOCKS


def section_of(block: str) -> str:
    text = README.read_text()
    before = text[: text.index(block)]
    return re.findall(r"^## (\w+)", before, re.M)[-1]


@pytest.mark.parametrize("block", BLOCKS, ids=[section_of(b) for b in BLOCKS])
def test_a_readme_example_runs(block, env, mock):
    m = mock(SCRIPT)
    (env.ws / "notes.txt").write_text("hello\n")
    child_env = dict(os.environ)
    child_env.update(
        KEEL_BIN=keel_bin(),
        KEEL_HOME=str(env.home),
        DEEPSEEK_BASE_URL=m.base_url,
        DEEPSEEK_API_KEY="sk-test",
        TMPDIR=str(env.root / "tmp"),
    )
    out = subprocess.run(
        [sys.executable, "-c", block], cwd=env.ws, env=child_env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    for want in EXPECT[section_of(block)]:
        assert want in out.stdout, f"{want!r} not in:\n{out.stdout}\n--- stderr\n{out.stderr}"
