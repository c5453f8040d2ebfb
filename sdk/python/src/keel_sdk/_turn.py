"""One run's reading of the event stream, without I/O: the stream's messages in, typed events
out, the requests to answer, and when the run's turn is over. The blocking and the asyncio
clients drive it the same way."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple, Union

from .types import (
    ApprovalRequest,
    Event,
    QuestionRequest,
    Result,
    TurnEnd,
    TurnStart,
    _Collector,
    parse_log_event,
    parse_request,
    parse_resolved,
)

Request = Union[ApprovalRequest, QuestionRequest]


class TurnReader:
    def __init__(self, session_id: str, prices: Dict[str, Tuple[float, float, float]]) -> None:
        self.session_id = session_id
        self.collector = _Collector(session_id, prices)
        self.started = False
        self.done = False
        self.seen_requests: Set[str] = set()
        self.last_seq: Optional[int] = None

    def feed(self, name: str, data: Any) -> Tuple[List[Event], List[Request]]:
        """The events to show for one stream message, and the requests it opened."""
        if self.done:
            return [], []
        if name == "message":
            if not isinstance(data, dict):
                return [], []
            event = parse_log_event(data)
            self.last_seq = event.seq if event.seq is not None else self.last_seq
            if isinstance(event, TurnStart):
                self.started = True
            if not self.started:
                # Before the run's turn (the log's earlier events, a turn that ended before it).
                return [event], []
            self.collector.add(event)
            if isinstance(event, TurnEnd):
                self.done = True
            return [event], []
        if name in ("pending", "request"):
            raws = (data or {}).get("requests", []) if name == "pending" else [data]
            events: List[Event] = []
            asks: List[Request] = []
            for raw in raws:
                if not isinstance(raw, dict):
                    continue
                rid = str(raw.get("requestId") or "")
                if rid in self.seen_requests:
                    continue
                self.seen_requests.add(rid)
                req = parse_request(self.session_id, raw)
                self.collector.add(req)
                events.append(req)
                asks.append(req)  # type: ignore[arg-type]
            return events, asks
        if name == "resolved" and isinstance(data, dict):
            resolved = parse_resolved(data)
            self.collector.add(resolved)
            return [resolved], []
        return [Event(type=name, data=data if isinstance(data, dict) else {"value": data}, raw={"value": data})], []

    def result(self) -> Result:
        return self.collector.result()


def approval_body(answer: Any) -> Dict[str, Any]:
    """What an approval callback returned, as the approvals route's body: ``True`` /
    ``"allow"``, ``"allow_always"``, ``False`` / ``"deny"`` / None, or a ``(decision, note)``
    pair."""
    note = None
    if isinstance(answer, tuple):
        answer, note = answer[0], (answer[1] if len(answer) > 1 else None)
    if answer is True:
        decision = "allow"
    elif answer is False or answer is None:
        decision = "deny"
    elif isinstance(answer, str) and answer in ("allow", "allow_always", "deny"):
        decision = answer
    else:
        raise ValueError(f"an approval callback returns True/False, 'allow', 'allow_always' or 'deny'; got {answer!r}")
    body: Dict[str, Any] = {"decision": decision}
    if note:
        body["note"] = str(note)
    return body


def question_body(answer: Any) -> Dict[str, Any]:
    """What a question callback returned: ``{question_id: answer}`` answers it, None declines."""
    if answer is None:
        return {"declined": True}
    if isinstance(answer, dict):
        return {"answers": answer}
    raise ValueError(f"a question callback returns a dict of answers or None; got {answer!r}")


NO_APPROVER_NOTE = "no approval callback: keel-sdk denies (pass on_approval= to Keel)"
