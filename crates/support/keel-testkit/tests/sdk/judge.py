"""The official Python SDKs judge keel-mock-server's three wires.

    judge.py script                 print the model script the checks expect (JSON)
    judge.py BASE_URL messages      the `anthropic` SDK against BASE_URL/v1/messages
    judge.py BASE_URL responses     the `openai` SDK against BASE_URL/v1/responses
    judge.py BASE_URL chat          the `openai` SDK against BASE_URL/v1/chat/completions

BASE_URL is what keel-mock-server prints on its first line (http://127.0.0.1:PORT). Each check
makes two or three requests, each served by its own copy of the one scripted response: reasoning,
text and a tool call with JSON arguments, fixed usage figures, and a `match` on the prompt (so
the mock's reading of the SDK's request body is judged too).

Two kinds of check per wire:
- the raw SSE events, each validated (pydantic, strict about required fields and literal
  values; extra fields allowed) against the SDK's own event types, which the SDKs generate from
  the APIs' specifications; the SDKs themselves build these without validation, so a missing
  field would otherwise go unnoticed until some code reads it;
- the SDK's streaming helper, which accumulates the events: its final message / response /
  completion must carry exactly what the script says.

Exits 1 with every mismatch listed, 0 after printing what was checked.
"""

from __future__ import annotations

import json
import sys
import traceback
import typing
import urllib.request

import pydantic

MODEL = "mock-judge-model"
PROMPT = "What is the weather in Paris?"
REASONING = "The user wants Paris weather; I should call get_weather with metric units."
TEXT = "Let me look that up for you \u2014 one moment."
CALL_ID = "call_weather_1"
TOOL = "get_weather"
ARGS = {"city": "Paris", "units": "metric", "days": [1, 2], "note": "caf\u00e9 \u2713"}
PROMPT_TOKENS, COMPLETION_TOKENS, CACHE_HIT, REASONING_TOKENS = 120, 40, 64, 10

PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "days": {"type": "array", "items": {"type": "integer"}},
        "note": {"type": "string"},
    },
    "required": ["city", "units", "days", "note"],
    "additionalProperties": False,
}


def script() -> dict:
    response = {
        "match": {"last_user_contains": "weather in Paris"},
        "reasoning": REASONING,
        "text": TEXT,
        "tool_calls": [{"id": CALL_ID, "name": TOOL, "arguments": ARGS}],
        "usage": {
            "prompt": PROMPT_TOKENS,
            "completion": COMPLETION_TOKENS,
            "cache_hit": CACHE_HIT,
            "reasoning": REASONING_TOKENS,
        },
        # Small pieces: several deltas per block, the JSON arguments cut mid-token.
        "chunk_size": 7,
    }
    return {"responses": [response] * 3}


class Judge:
    def __init__(self, wire: str) -> None:
        self.wire = wire
        self.failures: list[str] = []
        self.checked: list[str] = []

    def eq(self, what: str, got: object, want: object) -> None:
        if got == want:
            self.checked.append(f"{what} == {want!r}")
        else:
            self.failures.append(f"{what}: got {got!r}, want {want!r}")

    def true(self, what: str, cond: bool, detail: object = "") -> None:
        if cond:
            self.checked.append(what)
        else:
            self.failures.append(f"{what}: not so {detail!r}" if detail != "" else f"{what}: not so")

    def guard(self, what: str, fn) -> None:
        """Runs `fn(self)`; an exception (the SDK rejecting the stream) is a failure, not a crash."""
        try:
            fn(self)
        except Exception as e:  # noqa: BLE001 - any SDK error is the finding
            tb = traceback.extract_tb(e.__traceback__)[-1]
            where = f"{tb.filename.split('site-packages/')[-1]}:{tb.lineno} `{tb.line}`"
            self.failures.append(f"{what} raised {type(e).__name__}: {e} (at {where})")

    def finish(self) -> int:
        for line in self.checked:
            print(f"ok   {self.wire}: {line}")
        for line in self.failures:
            print(f"FAIL {self.wire}: {line}")
        if self.failures:
            print(f"{self.wire}: {len(self.failures)} mismatch(es) between the SDK and keel-mock-server", file=sys.stderr)
            for line in self.failures:
                print(f"  {line}", file=sys.stderr)
            return 1
        print(f"{self.wire}: all {len(self.checked)} checks passed")
        return 0


# ---- raw SSE, validated against the SDK's types ----


def post_sse(url: str, body: dict, headers: dict[str, str]) -> list[tuple[str | None, dict | str]]:
    """POSTs `body`, returns the stream's events as (event name, parsed data)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "accept": "text/event-stream", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        ctype = response.headers.get("content-type", "")
        if not ctype.startswith("text/event-stream"):
            raise SystemExit(f"{url}: content-type {ctype!r}, not text/event-stream")
        text = response.read().decode("utf-8")
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if not data:
            continue
        payload = "\n".join(data)
        events.append((name, payload if payload == "[DONE]" else json.loads(payload)))
    return events


def variants(union: object) -> dict[str, type[pydantic.BaseModel]]:
    """The members of a union of event models (`Annotated` or not), by their `type` literal."""
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        args = typing.get_args(args[0])
    out = {}
    for cls in args:
        for literal in typing.get_args(cls.model_fields["type"].annotation):
            out[literal] = cls
    return out


def errors(e: pydantic.ValidationError) -> str:
    """The errors, without those of union members whose `type` literal does not match."""
    errs = e.errors()
    wrong = [err["loc"][:-1] for err in errs if err["loc"][-1:] == ("type",) and err["type"] == "literal_error"]
    kept = [err for err in errs if not any(len(w) < len(err["loc"]) and err["loc"][: len(w)] == w for w in wrong if w)]
    return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in (kept or errs)[:6])


def validate_events(judge: Judge, events, by_type, named: bool) -> None:
    bad = []
    for i, (name, data) in enumerate(events):
        if data == "[DONE]":
            continue
        kind = data.get("type") if named else None
        if named and name != kind:
            bad.append(f"event {i}: SSE event name {name!r} but type {kind!r}")
        cls = by_type(data)
        if cls is None:
            bad.append(f"event {i}: type {kind!r} is not one of the SDK's event types")
            continue
        try:
            cls.model_validate(data)
        except pydantic.ValidationError as e:
            bad.append(f"event {i} ({kind or cls.__name__}): {errors(e)}")
    if bad:
        judge.failures.extend(f"raw stream: {b}" for b in bad)
    else:
        judge.checked.append(f"raw stream: all {len(events)} events valid {', '.join(sorted({cls_name(by_type, d) for _, d in events if d != '[DONE]'}))}")


def cls_name(by_type, data) -> str:
    cls = by_type(data)
    return cls.__name__ if cls else "?"


def validate_model(judge: Judge, what: str, cls: type[pydantic.BaseModel], obj: pydantic.BaseModel) -> None:
    try:
        cls.model_validate(obj.to_dict())
        judge.checked.append(f"{what} is a valid {cls.__name__}")
    except pydantic.ValidationError as e:
        judge.failures.append(f"{what} is not a valid {cls.__name__}: {errors(e)}")


# ---- the Messages API: anthropic ----


def check_messages(base: str) -> int:
    import anthropic
    from anthropic.types import Message, RawMessageStreamEvent

    judge = Judge("messages")
    judge.checked.append(f"anthropic {anthropic.__version__}")
    tool = {"name": TOOL, "description": "Weather forecast for a city.", "input_schema": PARAMETERS}
    request = {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [tool],
        "messages": [{"role": "user", "content": PROMPT}],
    }

    members = variants(RawMessageStreamEvent)
    raw = post_sse(
        f"{base}/v1/messages",
        {**request, "stream": True},
        {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"},
    )
    validate_events(judge, raw, lambda d: members.get(d.get("type")), named=True)

    def sdk(judge: Judge) -> None:
        client = anthropic.Anthropic(base_url=base, api_key="sk-test", max_retries=0, timeout=30)
        snapshots: dict[str, object] = {}
        signatures = []
        with client.messages.stream(**request) as stream:
            for event in stream:
                if event.type in ("text", "thinking", "input_json"):
                    snapshots[event.type] = event.snapshot
                elif event.type == "signature":
                    signatures.append(event.signature)
            final = stream.get_final_message()
            final_text = stream.get_final_text()

        judge.eq("thinking event snapshot", snapshots.get("thinking"), REASONING)
        judge.eq("text event snapshot", snapshots.get("text"), TEXT)
        judge.eq("input_json event snapshot", snapshots.get("input_json"), ARGS)
        judge.true("one non-empty signature event", len(signatures) == 1 and bool(signatures[0]), signatures)
        judge.eq("get_final_text()", final_text, TEXT)

        judge.eq("message role", final.role, "assistant")
        judge.eq("message model", final.model, MODEL)
        judge.eq("content block types", [b.type for b in final.content], ["thinking", "text", "tool_use"])
        if [b.type for b in final.content] == ["thinking", "text", "tool_use"]:
            thinking, text, tool_use = final.content
            judge.eq("thinking", thinking.thinking, REASONING)
            judge.true("thinking signature is a non-empty string", isinstance(thinking.signature, str) and bool(thinking.signature), thinking.signature)
            judge.eq("text", text.text, TEXT)
            judge.eq("tool_use id", tool_use.id, CALL_ID)
            judge.eq("tool_use name", tool_use.name, TOOL)
            judge.eq("tool_use input", tool_use.input, ARGS)
        judge.eq("stop_reason", final.stop_reason, "tool_use")
        usage = final.usage
        judge.eq("usage.output_tokens", usage.output_tokens, COMPLETION_TOKENS)
        judge.eq("usage.cache_read_input_tokens", usage.cache_read_input_tokens, CACHE_HIT)
        # Messages usage: input_tokens excludes the cache reads and writes.
        judge.eq("usage.input_tokens", usage.input_tokens, PROMPT_TOKENS - CACHE_HIT)
        judge.eq("usage.cache_creation_input_tokens", usage.cache_creation_input_tokens, 0)
        validate_model(judge, "final message", Message, final)
    judge.guard("client.messages.stream()", sdk)
    return judge.finish()


# ---- the Responses API: openai ----


def check_responses(base: str) -> int:
    import openai
    from openai.types.responses import Response, ResponseStreamEvent

    judge = Judge("responses")
    judge.checked.append(f"openai {openai.__version__}")
    tool = {"type": "function", "name": TOOL, "description": "Weather forecast for a city.", "parameters": PARAMETERS, "strict": True}
    request = {
        "model": MODEL,
        "input": [{"role": "user", "content": PROMPT}],
        "tools": [tool],
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }

    members = variants(ResponseStreamEvent)
    raw = post_sse(f"{base}/v1/responses", {**request, "stream": True}, {"authorization": "Bearer sk-test"})
    validate_events(judge, raw, lambda d: members.get(d.get("type")), named=True)
    sequence = [d.get("sequence_number") for _, d in raw]
    judge.eq("sequence_number of each event", sequence, list(range(len(raw))))

    def sdk(judge: Judge) -> None:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0, timeout=30)
        text_snapshot = args_snapshot = None
        created_id = None
        # The plain-string `input` form here (the raw request above sent a message list).
        with client.responses.stream(**{**request, "input": PROMPT}) as stream:
            for event in stream:
                if event.type == "response.created":
                    created_id = event.response.id
                elif event.type == "response.output_text.delta":
                    text_snapshot = event.snapshot
                elif event.type == "response.function_call_arguments.delta":
                    args_snapshot = event.snapshot
            final = stream.get_final_response()

        judge.eq("output_text.delta snapshot", text_snapshot, TEXT)
        judge.eq("function_call_arguments.delta snapshot (parsed)", json.loads(args_snapshot or "null"), ARGS)
        judge.eq("final response id", final.id, created_id)
        judge.eq("status", final.status, "completed")
        judge.eq("output_text", final.output_text, TEXT)
        kinds = [o.type for o in final.output]
        judge.eq("output item types", kinds, ["reasoning", "message", "function_call"])
        if kinds == ["reasoning", "message", "function_call"]:
            reasoning, message, call = final.output
            judge.eq("reasoning summary", [s.text for s in reasoning.summary], [REASONING])
            judge.true("reasoning encrypted_content is a non-empty string", bool(reasoning.encrypted_content), reasoning.encrypted_content)
            judge.eq("message role", message.role, "assistant")
            judge.eq("message content", [(c.type, c.text) for c in message.content], [("output_text", TEXT)])
            judge.eq("function_call call_id", call.call_id, CALL_ID)
            judge.eq("function_call name", call.name, TOOL)
            judge.eq("function_call arguments (parsed)", json.loads(call.arguments), ARGS)
            judge.eq("function_call parsed_arguments (strict tool)", call.parsed_arguments, ARGS)
        usage = final.usage
        if usage is None:
            judge.failures.append("final response has no usage")
        else:
            judge.eq("usage.input_tokens", usage.input_tokens, PROMPT_TOKENS)
            judge.eq("usage.input_tokens_details.cached_tokens", usage.input_tokens_details.cached_tokens, CACHE_HIT)
            judge.eq("usage.output_tokens", usage.output_tokens, COMPLETION_TOKENS)
            judge.eq("usage.output_tokens_details.reasoning_tokens", usage.output_tokens_details.reasoning_tokens, REASONING_TOKENS)
            judge.eq("usage.total_tokens", usage.total_tokens, PROMPT_TOKENS + COMPLETION_TOKENS)
        validate_model(judge, "final response", Response, final)
    judge.guard("client.responses.stream()", sdk)
    return judge.finish()


# ---- chat completions: openai ----


def check_chat(base: str) -> int:
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    judge = Judge("chat")
    judge.checked.append(f"openai {openai.__version__}")
    tool = {"type": "function", "function": {"name": TOOL, "description": "Weather forecast for a city.", "parameters": PARAMETERS, "strict": True}}
    request = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [tool],
        "stream_options": {"include_usage": True},
    }

    raw = post_sse(f"{base}/v1/chat/completions", {**request, "stream": True}, {"authorization": "Bearer sk-test"})
    judge.true("raw stream ends with data: [DONE]", bool(raw) and raw[-1][1] == "[DONE]")
    validate_events(judge, raw, lambda d: ChatCompletionChunk, named=False)

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0, timeout=30)

    def create(judge: Judge) -> None:
        """create(stream=True): the chunks, accumulated here."""
        content, reasoning, finish, usage = "", "", None, None
        calls: dict[int, dict] = {}
        for chunk in client.chat.completions.create(**request, stream=True):
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                content += delta.content or ""
                reasoning += getattr(delta, "reasoning_content", None) or ""
                for call in delta.tool_calls or []:
                    acc = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                    acc["id"] = call.id or acc["id"]
                    if call.function:
                        acc["name"] += call.function.name or ""
                        acc["arguments"] += call.function.arguments or ""
                finish = choice.finish_reason or finish
        judge.eq("create(stream=True): content", content, TEXT)
        judge.eq("create(stream=True): reasoning_content (DeepSeek's extension)", reasoning, REASONING)
        judge.eq("create(stream=True): tool call indexes", sorted(calls), [0])
        if 0 in calls:
            judge.eq("create(stream=True): tool call id", calls[0]["id"], CALL_ID)
            judge.eq("create(stream=True): tool call name", calls[0]["name"], TOOL)
            judge.eq("create(stream=True): tool call arguments (parsed)", json.loads(calls[0]["arguments"]), ARGS)
        judge.eq("create(stream=True): finish_reason", finish, "tool_calls")
        if usage is None:
            judge.failures.append("create(stream=True): no usage chunk (stream_options.include_usage)")
        else:
            judge.eq("create(stream=True): usage.prompt_tokens", usage.prompt_tokens, PROMPT_TOKENS)
            judge.eq("create(stream=True): usage.completion_tokens", usage.completion_tokens, COMPLETION_TOKENS)
            judge.eq("create(stream=True): usage.total_tokens", usage.total_tokens, PROMPT_TOKENS + COMPLETION_TOKENS)
            judge.eq("create(stream=True): usage.prompt_tokens_details.cached_tokens", usage.prompt_tokens_details.cached_tokens, CACHE_HIT)
            judge.eq("create(stream=True): usage.completion_tokens_details.reasoning_tokens", usage.completion_tokens_details.reasoning_tokens, REASONING_TOKENS)

    def stream(judge: Judge) -> None:
        """stream(): the SDK's own accumulator."""
        with client.chat.completions.stream(**request) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
        judge.eq("stream(): choices", len(final.choices), 1)
        choice = final.choices[0]
        judge.eq("stream(): finish_reason", choice.finish_reason, "tool_calls")
        judge.eq("stream(): message role", choice.message.role, "assistant")
        judge.eq("stream(): message content", choice.message.content, TEXT)
        got = [(c.id, c.type, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
        judge.eq("stream(): tool calls (id, type, name, arguments)", got, [(CALL_ID, "function", TOOL, ARGS)])
        if choice.message.tool_calls:
            judge.eq("stream(): parsed_arguments (strict tool)", choice.message.tool_calls[0].function.parsed_arguments, ARGS)
        judge.eq("stream(): usage.prompt_tokens", final.usage and final.usage.prompt_tokens, PROMPT_TOKENS)
        judge.eq("stream(): model", final.model, MODEL)
        validate_model(judge, "stream(): final completion", ChatCompletion, final)
    judge.guard("client.chat.completions.create(stream=True)", create)
    judge.guard("client.chat.completions.stream()", stream)
    return judge.finish()


def main(argv: list[str]) -> int:
    if argv[1:] == ["script"]:
        print(json.dumps(script(), ensure_ascii=False, indent=2))
        return 0
    checks = {"messages": check_messages, "responses": check_responses, "chat": check_chat}
    if len(argv) != 3 or argv[2] not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    return checks[argv[2]](argv[1].rstrip("/"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
