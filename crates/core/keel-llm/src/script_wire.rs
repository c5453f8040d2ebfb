//! A scripted response on the Messages and Responses wires: the chat-completions payloads of a
//! [`StreamPlan`] re-expressed as the other formats' events, faults included (a plan cut short
//! for a disconnect stays cut at the same place; a payload that is not JSON passes through).
//!
//! The mock server uses this to answer `POST …/v1/messages` and `POST …/responses` the way the
//! real APIs stream: Messages events carry the thinking `signature` (`sig-mock-N-I`, so a test
//! can check it comes back), Responses reasoning items their `encrypted_content`
//! (`enc-mock-N-I`). Every event carries the fields the official SDKs' types require (judged by
//! keel-testkit's `tests/sdk_judges.rs`): Responses events their `sequence_number`, text parts
//! their `content_part` and `.done` events, the lifecycle events a whole `response` object.

use crate::script_render::StreamPlan;
use crate::wire::WireApi;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Thinking,
    Text,
    Tool,
}

struct Open {
    kind: Kind,
    index: usize,
    buf: String,
    id: String,
    name: String,
}

/// `plan` (chat-completions payloads for response `n`) as `api`'s events.
pub fn convert(plan: StreamPlan, api: WireApi, n: usize, model: &str) -> StreamPlan {
    if api == WireApi::Chat {
        return plan;
    }
    let mut c = Converter {
        api,
        n,
        model: model.to_owned(),
        out: Vec::new(),
        open: None,
        next: 0,
        stop: None,
        sequence: 0,
        done_items: Vec::new(),
    };
    c.start();
    for payload in &plan.payloads {
        c.payload(payload);
    }
    StreamPlan {
        payloads: c.out,
        ..plan
    }
}

struct Converter {
    api: WireApi,
    n: usize,
    model: String,
    out: Vec<String>,
    open: Option<Open>,
    next: usize,
    stop: Option<String>,
    /// The next Responses event's `sequence_number`.
    sequence: u64,
    /// The Responses output items finished so far, for `response.completed`'s `output`.
    done_items: Vec<Value>,
}

impl Converter {
    fn emit(&mut self, mut value: Value) {
        if self.api != WireApi::Messages
            && let Some(event) = value.as_object_mut()
        {
            event.insert("sequence_number".into(), self.sequence.into());
            self.sequence += 1;
        }
        self.out.push(value.to_string());
    }

    /// A Responses `response` object (the lifecycle events carry the whole of it).
    fn response(&self, status: &str, output: Value, usage: Value) -> Value {
        json!({"id": format!("resp_mock_{}", self.n), "object": "response", "created_at": 0,
            "status": status, "model": self.model, "output": output, "parallel_tool_calls": true,
            "tool_choice": "auto", "tools": [], "error": null, "incomplete_details": null,
            "usage": usage})
    }

    fn start(&mut self) {
        let (n, model) = (self.n, self.model.clone());
        match self.api {
            WireApi::Messages => self.emit(json!({
                "type": "message_start",
                "message": {"id": format!("msg_mock_{n}"), "type": "message", "role": "assistant",
                    "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 0, "output_tokens": 1}}
            })),
            _ => {
                for kind in ["response.created", "response.in_progress"] {
                    let response = self.response("in_progress", json!([]), Value::Null);
                    self.emit(json!({"type": kind, "response": response}));
                }
            }
        }
    }

    fn payload(&mut self, payload: &str) {
        if payload.trim() == "[DONE]" {
            return self.done();
        }
        let Ok(value) = serde_json::from_str::<Value>(payload) else {
            self.out.push(payload.to_owned()); // a fault: pass it through
            return;
        };
        if let Some(usage) = value.get("usage").filter(|u| !u.is_null()) {
            return self.usage(usage.clone());
        }
        let Some(choice) = value.pointer("/choices/0") else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.close();
            self.stop = Some(reason.to_owned());
            return;
        }
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        if let Some(r) = delta.get("reasoning_content").and_then(Value::as_str) {
            self.text(Kind::Thinking, r);
        }
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.text(Kind::Text, t);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.open_block(Kind::Tool, id, name);
            }
            if let Some(args) = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                self.delta(args);
            }
        }
    }

    fn text(&mut self, kind: Kind, text: &str) {
        if self.open.as_ref().is_none_or(|o| o.kind != kind) {
            self.open_block(kind, "", "");
        }
        self.delta(text);
    }

    fn open_block(&mut self, kind: Kind, id: &str, name: &str) {
        self.close();
        let index = self.next;
        self.next += 1;
        let value = match (self.api, kind) {
            (WireApi::Messages, Kind::Thinking) => {
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            }
            (WireApi::Messages, Kind::Text) => {
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            }
            (WireApi::Messages, Kind::Tool) => {
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
            }
            (_, Kind::Thinking) => {
                json!({"type": "response.output_item.added", "output_index": index, "item": {"type": "reasoning", "id": format!("rs_{index}"), "summary": []}})
            }
            (_, Kind::Text) => {
                json!({"type": "response.output_item.added", "output_index": index, "item": {"type": "message", "id": format!("msg_{index}"), "role": "assistant", "status": "in_progress", "content": []}})
            }
            (_, Kind::Tool) => {
                json!({"type": "response.output_item.added", "output_index": index, "item": {"type": "function_call", "id": format!("fc_{index}"), "call_id": id, "name": name, "arguments": "", "status": "in_progress"}})
            }
        };
        self.emit(value);
        // The part the deltas go to.
        match (self.api, kind) {
            (WireApi::Messages, _) | (_, Kind::Tool) => {}
            (_, Kind::Thinking) => self.emit(
                json!({"type": "response.reasoning_summary_part.added", "item_id": format!("rs_{index}"), "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            ),
            (_, Kind::Text) => self.emit(
                json!({"type": "response.content_part.added", "item_id": format!("msg_{index}"), "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        }
        self.open = Some(Open {
            kind,
            index,
            buf: String::new(),
            id: id.to_owned(),
            name: name.to_owned(),
        });
    }

    fn delta(&mut self, text: &str) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.buf.push_str(text);
        let index = open.index;
        let value = match (self.api, open.kind) {
            (WireApi::Messages, Kind::Thinking) => {
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": text}})
            }
            (WireApi::Messages, Kind::Text) => {
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})
            }
            (WireApi::Messages, Kind::Tool) => {
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}})
            }
            (_, Kind::Thinking) => {
                json!({"type": "response.reasoning_summary_text.delta", "item_id": format!("rs_{index}"), "output_index": index, "summary_index": 0, "delta": text})
            }
            (_, Kind::Text) => {
                json!({"type": "response.output_text.delta", "item_id": format!("msg_{index}"), "output_index": index, "content_index": 0, "delta": text, "logprobs": []})
            }
            (_, Kind::Tool) => {
                json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{index}"), "output_index": index, "delta": text})
            }
        };
        self.emit(value);
    }

    fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let (n, i) = (self.n, open.index);
        match self.api {
            WireApi::Messages => {
                if open.kind == Kind::Thinking {
                    self.emit(json!({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": format!("sig-mock-{n}-{i}")}}));
                }
                self.emit(json!({"type": "content_block_stop", "index": i}));
            }
            _ => {
                let item = match open.kind {
                    Kind::Thinking => {
                        let (id, part) = (
                            format!("rs_{i}"),
                            json!({"type": "summary_text", "text": open.buf}),
                        );
                        self.emit(json!({"type": "response.reasoning_summary_text.done", "item_id": id, "output_index": i, "summary_index": 0, "text": open.buf}));
                        self.emit(json!({"type": "response.reasoning_summary_part.done", "item_id": id, "output_index": i, "summary_index": 0, "part": part}));
                        json!({"type": "reasoning", "id": id, "summary": [part], "encrypted_content": format!("enc-mock-{n}-{i}")})
                    }
                    Kind::Text => {
                        let (id, part) = (
                            format!("msg_{i}"),
                            json!({"type": "output_text", "text": open.buf, "annotations": []}),
                        );
                        self.emit(json!({"type": "response.output_text.done", "item_id": id, "output_index": i, "content_index": 0, "text": open.buf, "logprobs": []}));
                        self.emit(json!({"type": "response.content_part.done", "item_id": id, "output_index": i, "content_index": 0, "part": part}));
                        json!({"type": "message", "id": id, "role": "assistant", "status": "completed", "content": [part]})
                    }
                    Kind::Tool => {
                        let id = format!("fc_{i}");
                        self.emit(json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": i, "arguments": open.buf}));
                        json!({"type": "function_call", "id": id, "call_id": open.id, "name": open.name, "arguments": open.buf, "status": "completed"})
                    }
                };
                self.done_items.push(item.clone());
                self.emit(
                    json!({"type": "response.output_item.done", "output_index": i, "item": item}),
                );
            }
        }
    }

    fn usage(&mut self, usage: Value) {
        let get = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let prompt = get("prompt_tokens");
        let hit = usage
            .get("prompt_cache_hit_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(prompt);
        let output = get("completion_tokens");
        let reasoning = usage
            .pointer("/completion_tokens_details/reasoning_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let stop = self.stop.clone().unwrap_or_else(|| "stop".into());
        match self.api {
            WireApi::Messages => {
                let reason = match stop.as_str() {
                    "stop" => "end_turn",
                    "tool_calls" => "tool_use",
                    "length" => "max_tokens",
                    other => other,
                };
                self.emit(json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
                    "usage": {"input_tokens": prompt - hit, "cache_read_input_tokens": hit,
                        "cache_creation_input_tokens": 0, "output_tokens": output}}));
            }
            _ => {
                let usage = json!({"input_tokens": prompt, "input_tokens_details": {"cached_tokens": hit, "cache_write_tokens": 0},
                    "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
                    "total_tokens": prompt + output});
                let output = Value::Array(self.done_items.clone());
                let value = if stop == "length" {
                    let mut response = self.response("incomplete", output, usage);
                    response["incomplete_details"] = json!({"reason": "max_output_tokens"});
                    json!({"type": "response.incomplete", "response": response})
                } else {
                    json!({"type": "response.completed", "response": self.response("completed", output, usage)})
                };
                self.emit(value);
            }
        }
    }

    fn done(&mut self) {
        if self.api == WireApi::Messages {
            self.emit(json!({"type": "message_stop"}));
        }
    }
}

/// The name of a converted payload's event (its `type`), for the SSE `event:` line.
pub fn event_name(payload: &str) -> Option<String> {
    let value: Value = serde_json::from_str(payload).ok()?;
    value.get("type")?.as_str().map(str::to_owned)
}

/// A Messages or Responses request body seen as chat completions (`messages` with `role` and
/// text `content`, tool results as `tool` messages), so a script's matchers read every wire the
/// same way.
pub fn chat_view(api: WireApi, body: &Value) -> Value {
    let text_of = |blocks: &Value, kinds: &[&str]| -> String {
        match blocks {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter(|p| {
                    p.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| kinds.contains(&t))
                })
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        }
    };
    let mut messages = Vec::new();
    match api {
        WireApi::Chat => return body.clone(),
        WireApi::Messages => {
            for m in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("");
                let content = m.get("content").cloned().unwrap_or(Value::Null);
                for r in content.as_array().into_iter().flatten() {
                    if r.get("type").and_then(Value::as_str) == Some("tool_result") {
                        let text = text_of(r.get("content").unwrap_or(&Value::Null), &["text"]);
                        messages.push(json!({"role": "tool", "content": text}));
                    }
                }
                let text = text_of(&content, &["text"]);
                if !text.is_empty() || role == "assistant" {
                    messages.push(json!({"role": role, "content": text}));
                }
            }
        }
        WireApi::Responses => {
            // `input` may be a plain string: one user message.
            if let Some(text) = body.get("input").and_then(Value::as_str) {
                messages.push(json!({"role": "user", "content": text}));
            }
            for item in body
                .get("input")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = item.get("type").and_then(Value::as_str);
                let role = item.get("role").and_then(Value::as_str);
                match (kind, role) {
                    (Some("function_call_output"), _) => {
                        let out = item.get("output").and_then(Value::as_str).unwrap_or("");
                        messages.push(json!({"role": "tool", "content": out}));
                    }
                    (Some("function_call" | "reasoning"), _) => {}
                    (_, Some(role)) => {
                        let text = text_of(
                            item.get("content").unwrap_or(&Value::Null),
                            &["input_text", "output_text"],
                        );
                        messages.push(json!({"role": role, "content": text}));
                    }
                    _ => {}
                }
            }
        }
    }
    json!({ "model": body.get("model"), "messages": messages })
}
