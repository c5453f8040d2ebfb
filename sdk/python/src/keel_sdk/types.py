"""The SDK's typed values: what a run returns, what a stream yields, what a callback is asked.

Every event keeps the raw JSON it came from (``raw``: exactly what ``keel run --json`` prints
for a log event, or the data of a named message of the event stream), so nothing the server
sends is lost to the typing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

JsonObject = Dict[str, Any]

#: DeepSeek's list prices in US dollars per million tokens (input missed, input cached,
#: output), as keel's catalogue knows them (``keel_llm::catalogue::builtin_price``). A model
#: missing here has no cost unless ``Keel(prices=…)`` gives one.
BUILTIN_PRICES: Dict[str, Tuple[float, float, float]] = {
    "deepseek-chat": (0.28, 0.028, 0.42),
    "deepseek-reasoner": (0.28, 0.028, 0.42),
}


@dataclass
class Usage:
    """Tokens a run's model requests used, summed over its steps."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, usage: JsonObject) -> None:
        self.input_tokens += int(usage.get("inputTokens") or 0)
        self.output_tokens += int(usage.get("outputTokens") or 0)
        self.cache_read_tokens += int(usage.get("cacheReadTokens") or 0)
        self.requests += 1


# --- events ------------------------------------------------------------------------------


@dataclass
class Event:
    """One event of a session's log (``type``, ``seq``, ``time``, ``data``), or a named
    message of the event stream (``seq`` None). Subclasses name the fields worth naming."""

    type: str
    seq: Optional[int] = None
    time: Optional[int] = None
    data: JsonObject = field(default_factory=dict)
    raw: JsonObject = field(default_factory=dict, repr=False)


@dataclass
class TurnStart(Event):
    turn: int = 0


@dataclass
class TurnEnd(Event):
    turn: int = 0
    #: ``completed``, ``aborted``, ``blocked``, ``error``, ``max-tokens`` or ``interrupted``.
    reason: str = ""
    #: The reason's other fields (``reason`` of an abort, ``message`` of an error…).
    detail: JsonObject = field(default_factory=dict)


@dataclass
class TextDelta(Event):
    """A piece of the answer's text, as the model streams it."""

    text: str = ""


@dataclass
class ReasoningDelta(Event):
    """A piece of the model's reasoning, as it streams."""

    text: str = ""


@dataclass
class AssistantMessage(Event):
    """One complete model message (one step): its text, tool calls and usage."""

    text: str = ""
    tool_calls: List[JsonObject] = field(default_factory=list)
    usage: JsonObject = field(default_factory=dict)
    model: Optional[str] = None


@dataclass
class ToolCall(Event):
    call_id: str = ""
    name: str = ""
    #: The arguments parsed from their JSON text (``{}`` when they are not an object).
    arguments: JsonObject = field(default_factory=dict)


@dataclass
class ToolResult(Event):
    call_id: str = ""
    text: str = ""
    is_error: bool = False


@dataclass
class ApprovalRequest(Event):
    """A tool call waiting for a decision (the stream's ``request`` of kind ``approval``)."""

    request_id: str = ""
    session_id: str = ""
    call_id: str = ""
    tool: str = ""
    arguments: Any = None
    reason: str = ""
    options: List[str] = field(default_factory=list)
    escalation: bool = False
    plan: Optional[str] = None


@dataclass
class QuestionRequest(Event):
    """``ask_user_question`` waiting for answers (the stream's ``request`` of kind
    ``question``). ``questions`` are ``{"id", "question", "header"?, "options"?,
    "multi_select"?}``."""

    request_id: str = ""
    session_id: str = ""
    call_id: str = ""
    questions: List[JsonObject] = field(default_factory=list)


@dataclass
class Resolved(Event):
    """A request answered (by a callback, another client, a cancel or a close)."""

    request_id: str = ""
    kind: str = ""
    by: str = ""
    decision: Optional[str] = None
    outcome: Optional[str] = None


def _message_text(message: JsonObject) -> str:
    parts = []
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
    return "".join(parts)


def parse_log_event(raw: JsonObject) -> Event:
    """The typed form of one log event (its JSON as ``keel run --json`` prints it)."""
    etype = str(raw.get("type", ""))
    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    base = dict(type=etype, seq=raw.get("seq"), time=raw.get("time"), data=data, raw=raw)
    if etype == "turn/start":
        return TurnStart(**base, turn=int(data.get("turn") or 0))
    if etype == "turn/end":
        reason = data.get("reason") if isinstance(data.get("reason"), dict) else {}
        detail = {k: v for k, v in reason.items() if k != "kind"}
        return TurnEnd(
            **base, turn=int(data.get("turn") or 0), reason=str(reason.get("kind", "")), detail=detail
        )
    if etype == "assistant/chunk":
        chunk = data.get("chunk") if isinstance(data.get("chunk"), dict) else {}
        if chunk.get("type") == "text-delta":
            return TextDelta(**base, text=str(chunk.get("text") or ""))
        if chunk.get("type") == "reasoning-delta":
            return ReasoningDelta(**base, text=str(chunk.get("text") or ""))
        return Event(**base)
    if etype == "assistant/message":
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        calls = [
            b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool-call"
        ]
        source = message.get("source") if isinstance(message.get("source"), dict) else {}
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return AssistantMessage(
            **base, text=_message_text(message), tool_calls=calls, usage=usage, model=source.get("model")
        )
    if etype == "tool/call":
        args: Any = data.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        return ToolCall(
            **base,
            call_id=str(data.get("callId") or ""),
            name=str(data.get("name") or ""),
            arguments=args if isinstance(args, dict) else {},
        )
    if etype == "tool/result":
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool-result":
                return ToolResult(
                    **base,
                    call_id=str(block.get("toolCallId") or ""),
                    text=_message_text(block),
                    is_error=bool(block.get("isError")),
                )
        return ToolResult(**base)
    return Event(**base)


def parse_request(session_id: str, raw: JsonObject) -> Event:
    """The typed form of a request (the data of ``request``, an item of ``pending``)."""
    base = dict(type="request", data=raw, raw=raw)
    common = dict(
        request_id=str(raw.get("requestId") or ""),
        session_id=session_id,
        call_id=str(raw.get("callId") or ""),
    )
    if raw.get("kind") == "question":
        return QuestionRequest(**base, **common, questions=list(raw.get("questions") or []))
    return ApprovalRequest(
        **base,
        **common,
        tool=str(raw.get("tool") or ""),
        arguments=raw.get("arguments"),
        reason=str(raw.get("reason") or ""),
        options=list(raw.get("options") or []),
        escalation=bool(raw.get("escalation")),
        plan=raw.get("plan"),
    )


def parse_resolved(raw: JsonObject) -> Resolved:
    return Resolved(
        type="resolved",
        data=raw,
        raw=raw,
        request_id=str(raw.get("requestId") or ""),
        kind=str(raw.get("kind") or ""),
        by=str(raw.get("by") or ""),
        decision=raw.get("decision"),
        outcome=raw.get("outcome"),
    )


# --- results -----------------------------------------------------------------------------


@dataclass
class Result:
    """What one run came to."""

    #: The final answer: the text of the turn's last model message.
    text: str
    session_id: str
    usage: Usage
    #: US dollars, from the prices of the models that answered; None when a model's price is
    #: unknown (``Keel(prices=…)`` gives one).
    cost: Optional[float]
    #: How the turn ended: ``completed``, ``aborted`` (cancelled), ``error``, ``blocked``,
    #: ``max-tokens``, ``interrupted``.
    stop_reason: str
    turn: int = 0
    #: Every event of the run, in order.
    events: List[Event] = field(default_factory=list, repr=False)
    #: The model that answered last.
    model: Optional[str] = None
    #: The turn's end reason's other fields (an error's message…).
    detail: JsonObject = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        """The run was cancelled (``cancel()``, a cancelled task, Ctrl-C) or interrupted."""
        return self.stop_reason in ("aborted", "interrupted")

    @property
    def ok(self) -> bool:
        return self.stop_reason == "completed"

    # dsh SDK names (RunResult).
    @property
    def final_response(self) -> str:
        return self.text

    @property
    def finish_reason(self) -> str:
        return self.stop_reason


class _Collector:
    """Folds a run's events into its :class:`Result`."""

    def __init__(self, session_id: str, prices: Dict[str, Tuple[float, float, float]]):
        self.session_id = session_id
        self.prices = prices
        self.events: List[Event] = []
        self.usage = Usage()
        self.cost: Optional[float] = 0.0
        self.text = ""
        self.model: Optional[str] = None
        self.end: Optional[TurnEnd] = None

    def add(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, AssistantMessage):
            self.text = event.text
            self.model = event.model or self.model
            if event.usage:
                self.usage.add(event.usage)
                price = self.prices.get(event.model or "")
                if price is None or self.cost is None:
                    self.cost = None
                else:
                    inp = int(event.usage.get("inputTokens") or 0)
                    cached = int(event.usage.get("cacheReadTokens") or 0)
                    out = int(event.usage.get("outputTokens") or 0)
                    self.cost += (max(inp - cached, 0) * price[0] + cached * price[1] + out * price[2]) / 1e6
        elif isinstance(event, TurnEnd):
            self.end = event

    def result(self) -> Result:
        end = self.end
        return Result(
            text=self.text,
            session_id=self.session_id,
            usage=self.usage,
            cost=self.cost if self.usage.requests else (0.0 if self.cost is not None else None),
            stop_reason=end.reason if end else "interrupted",
            turn=end.turn if end else 0,
            events=self.events,
            model=self.model,
            detail=end.detail if end else {},
        )
