"""keel-sdk: drive the keel agent harness from Python, through a private ``keel serve``.

>>> from keel_sdk import Keel
>>> with Keel(cwd=".") as keel:                      # doctest: +SKIP
...     print(keel.run("summarize README.md").text)
"""

from .aio import AsyncKeel, AsyncSession, AsyncStream
from .client import Keel, Session, Stream
from .errors import APIError, ConnectionLost, KeelError, ServerStartError
from .types import (
    BUILTIN_PRICES,
    ApprovalRequest,
    AssistantMessage,
    Event,
    QuestionRequest,
    ReasoningDelta,
    Resolved,
    Result,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
)

__version__ = "0.1.0"

# dsh SDK spellings (deepseek_harness): a script ports by its imports.
DeepSeekHarness = Keel
RunResult = Result

__all__ = [
    "Keel",
    "Session",
    "Stream",
    "AsyncKeel",
    "AsyncSession",
    "AsyncStream",
    "Result",
    "Usage",
    "Event",
    "TurnStart",
    "TurnEnd",
    "TextDelta",
    "ReasoningDelta",
    "AssistantMessage",
    "ToolCall",
    "ToolResult",
    "ApprovalRequest",
    "QuestionRequest",
    "Resolved",
    "KeelError",
    "ServerStartError",
    "APIError",
    "ConnectionLost",
    "BUILTIN_PRICES",
    "DeepSeekHarness",
    "RunResult",
    "__version__",
]
