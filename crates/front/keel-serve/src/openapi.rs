//! The OpenAPI 3.1 document the server serves at `/api/v1/openapi.json`: every route of
//! [`crate::api::routes`] with its parameters, bodies and answers (a test holds the two
//! together).

use serde_json::{Value, json};

/// The document.
pub fn document() -> Value {
    let error = json!({"$ref": "#/components/responses/Error"});
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"},
        "description": "The session id."});
    let request_id = json!({"name": "requestId", "in": "path", "required": true,
        "schema": {"type": "string"},
        "description": "The request's id (`requestId` of its `request` message)."});
    let resolved = json!({"description": "Resolved: how (the `resolved` message).",
        "content": {"application/json": {"schema": {"type": "object", "properties": {
            "resolved": {"$ref": "#/components/schemas/Resolved"}}}}}});
    let conflict = json!({"description": "`already_answered`: the request was resolved \
        before (answered, its turn cancelled or its session closed).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let busy = json!({"description": "`session_busy`: the stored session is open for writing \
        in another keel process (named with its pid); one process writes a session.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "keel serve",
            "version": "1",
            "description": "Sessions as a service (docs/serve.md). Every request carries the \
                token (`Authorization: Bearer TOKEN` or the `keel_token` cookie), a loopback \
                `Host` naming the server's port, and no foreign `Origin`."
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "keel_token"}
            },
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "Session": {"type": "object", "properties": {
                    "id": {"type": "string"},
                    "cwd": {"type": ["string", "null"]},
                    "title": {"type": ["string", "null"]},
                    "updatedAt": {"type": ["integer", "null"],
                        "description": "Last modified, ms since the epoch."},
                    "status": {"enum": ["running", "idle", "stored"]}}},
                "Request": {"type": "object",
                    "description": "An approval or a question waiting for an answer.",
                    "required": ["requestId", "kind", "callId", "askedAt"],
                    "properties": {
                        "requestId": {"type": "string"},
                        "kind": {"enum": ["approval", "question"]},
                        "callId": {"type": "string",
                            "description": "The tool call (`callId` of `approval/asked` or \
                                `question/asked` in the log)."},
                        "askedAt": {"type": "integer", "description": "ms since the epoch."},
                        "tool": {"type": "string", "description": "approval: the tool."},
                        "arguments": {"description": "approval: the call's arguments."},
                        "reason": {"type": "string", "description": "approval: why it is asked."},
                        "options": {"type": "array",
                            "items": {"enum": ["allow", "allow_always", "deny"]},
                            "description": "approval: the decisions taken."},
                        "escalation": {"type": "boolean",
                            "description": "approval: the call asks to leave the sandbox."},
                        "plan": {"type": ["string", "null"],
                            "description": "approval of `exit_plan_mode`: the plan."},
                        "questions": {"type": "array",
                            "description": "question: `ask_user_question`'s questions \
                                ({id, question, header?, options?: [{label, description?}], \
                                multi_select?}).",
                            "items": {"type": "object"}}}},
                "Resolved": {"type": "object",
                    "required": ["requestId", "kind", "callId", "by"],
                    "properties": {
                        "requestId": {"type": "string"},
                        "kind": {"enum": ["approval", "question"]},
                        "callId": {"type": "string"},
                        "by": {"enum": ["client", "cancelled", "closed"]},
                        "decision": {"enum": ["allow", "allow_always", "deny"],
                            "description": "approval: the decision."},
                        "outcome": {"enum": ["answered", "declined", "unanswered"],
                            "description": "question: what came of it."},
                        "answers": {"type": "object", "description": "question: the answers."},
                        "note": {"type": "string"},
                        "reason": {"type": "string"}}}
            },
            "responses": {
                "Error": {"description": "An error.", "content": {"application/json":
                    {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": {
            "/": {"get": {
                "summary": "With `?token=TOKEN`: set the token cookie and redirect to `/`. \
                    A browser (`Accept: text/html`) gets the web app's page (docs/web-app.md); \
                    without the token, a page that says where the URL is.",
                "parameters": [{"name": "token", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "What this server is."},
                    "303": {"description": "The cookie is set."}, "401": error}}},
            "/api/v1/openapi.json": {"get": {
                "summary": "This document.",
                "responses": {"200": {"description": "The OpenAPI document."}}}},
            "/api/v1/sessions": {
                "get": {
                    "summary": "Every session of $KEEL_HOME, newest first; with `q`, the \
                        sessions that mention every word of it, best first.",
                    "parameters": [{"name": "q", "in": "query",
                        "schema": {"type": "string", "minLength": 1},
                        "description": "Search as `keel sessions search --all`: each session \
                            listed once, as `{id, cwd, status, snippet, seq}` (its best \
                            match, the words in `[…]`)."}],
                    "responses": {"200": {"description": "The sessions.", "content": {
                        "application/json": {"schema": {"type": "object", "properties": {
                            "sessions": {"type": "array",
                                "items": {"$ref": "#/components/schemas/Session"}}}}}}},
                        "400": error, "500": error}},
                "post": {
                    "summary": "A new session in cwd; with a prompt, its first turn starts.",
                    "requestBody": {"required": true, "content": {"application/json": {
                        "schema": {"type": "object", "required": ["cwd"], "properties": {
                            "cwd": {"type": "string", "pattern": "^/",
                                "description": "An absolute directory."},
                            "prompt": {"type": ["string", "null"]},
                            "model": {"type": ["string", "null"],
                                "description": "A model instead of the configured one."},
                            "mode": {"enum": ["default", "read-only", "auto", "plan", null],
                                "description": "The session's mode from the start (as \
                                    `POST …/mode`), before its first turn."}}}}}},
                    "responses": {"201": {"description": "Created.", "content": {
                        "application/json": {"schema": {"type": "object",
                            "properties": {"id": {"type": "string"}}}}}},
                        "400": error, "500": error}}
            },
            "/api/v1/sessions/{id}/messages": {"post": {
                "summary": "Queue a message as a turn, or steer it into the running turn.",
                "parameters": [id],
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"type": "object", "required": ["text"], "properties": {
                        "text": {"type": "string"},
                        "delivery": {"enum": ["queue", "steer"], "default": "queue"},
                        "images": {"type": "array", "items": {"type": "string"},
                            "description": "Images as `data:image/png;base64,…` URLs (PNG, \
                                JPEG, GIF or WebP; the media type must match the bytes; the \
                                session's model must read images)."}}}}}},
                "responses": {"202": {"description": "Delivered; `delivery` says how."},
                    "400": error, "404": error, "409": busy}}},
            "/api/v1/sessions/{id}/feedback": {"post": {
                "summary": "Rate an answer: an ignorable `feedback/rated` event in the log \
                    (`{seq, rating, note?}`; the last for a seq wins, null takes it back). \
                    Sent nowhere.",
                "parameters": [id],
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"type": "object", "required": ["seq", "rating"],
                        "additionalProperties": false,
                        "properties": {"seq": {"type": "integer", "minimum": 0},
                            "rating": {"enum": ["up", "down", null]},
                            "note": {"type": "string", "maxLength": 4000}}}}}},
                "responses": {"200": {"description": "`{\"seq\"}`: the event's."},
                    "400": error, "404": error, "409": error}}},
            "/api/v1/sessions/{id}/cancel": {"post": {
                "summary": "Cancel the running turn.",
                "parameters": [id],
                "responses": {"200": {"description": "`cancelled`: whether a turn ran."},
                    "404": error}}},
            "/api/v1/sessions/{id}/close": {"post": {
                "summary": "Stop hosting the session (its turn cancelled, its jobs stopped); \
                    it stays stored and a message resumes it.",
                "parameters": [id],
                "responses": {"200": {"description": "`closed`: whether it was hosted."},
                    "404": error}}},
            "/api/v1/sessions/{id}/events": {"get": {
                "summary": "The session's log as Server-Sent Events (`id:` seq, `data:` the \
                    event as `keel run --json` prints it), then live. `Last-Event-ID` resumes.",
                "parameters": [id,
                    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0},
                        "description": "Start after this seq (exclusive)."},
                    {"name": "present", "in": "query", "schema": {"type": "boolean"},
                        "description": "Also send the plugins' items: an `event: present` \
                            message `{seq, items}` just before the event that showed them \
                            (docs/serve.md, \"Plugins' items\")."},
                    {"name": "Last-Event-ID", "in": "header",
                        "schema": {"type": "integer", "minimum": 0},
                        "description": "The last seq received; wins over `after`."}],
                "responses": {"200": {"description": "The stream. A hosted session's \
                    stream also carries named messages without `id:`: `pending` first \
                    (`{\"requests\": [Request]}`), then `request` (a Request) and `resolved` \
                    (a Resolved) as they happen.",
                    "content": {"text/event-stream": {}}}, "400": error, "404": error}}},
            "/api/v1/sessions/{id}/pending": {"get": {
                "summary": "The approvals and questions waiting for an answer, oldest first.",
                "parameters": [id],
                "responses": {"200": {"description": "The open requests.", "content": {
                    "application/json": {"schema": {"type": "object", "properties": {
                        "requests": {"type": "array",
                            "items": {"$ref": "#/components/schemas/Request"}}}}}}},
                    "404": error}}},
            "/api/v1/sessions/{id}/approvals/{requestId}": {"post": {
                "summary": "Answer an approval. The first answer wins.",
                "parameters": [id, request_id],
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"type": "object", "required": ["decision"], "properties": {
                        "decision": {"enum": ["allow", "allow_always", "deny"],
                            "description": "`allow_always`: this command (`bash`) or tool \
                                for the rest of the session; one of the request's `options`."},
                        "note": {"type": ["string", "null"],
                            "description": "Why; a denial's note is shown to the model."}}}}}},
                "responses": {"200": resolved, "400": error, "404": error, "409": conflict}}},
            "/api/v1/sessions/{id}/questions/{requestId}": {"post": {
                "summary": "Answer `ask_user_question` (or decline it). The first answer wins.",
                "parameters": [id, request_id],
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"type": "object", "properties": {
                        "answers": {"type": ["object", "null"],
                            "description": "Question id → one of its option labels (free text \
                                when it has none), or an array of labels (multi-select). \
                                Questions left out are unanswered.",
                            "additionalProperties": {"anyOf": [{"type": "string"},
                                {"type": "array", "items": {"type": "string"}}]}},
                        "declined": {"type": "boolean",
                            "description": "Dismiss the questions instead."},
                        "note": {"type": ["string", "null"],
                            "description": "With `declined`: what the person said."}}}}}},
                "responses": {"200": resolved, "400": error, "404": error, "409": conflict}}}
        }
    });
    if let Some(paths) = doc["paths"].as_object_mut() {
        paths.extend(control(&id, &error));
    }
    closed_bodies(&mut doc);
    doc
}

/// Every request body is read with `deny_unknown_fields`: a field the route does not know is a
/// 400, so each body's schema says `additionalProperties: false`.
fn closed_bodies(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for op in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in op.values_mut() {
            let schema = op
                .pointer_mut("/requestBody/content/application~1json/schema")
                .and_then(Value::as_object_mut);
            if let Some(schema) = schema {
                schema
                    .entry("additionalProperties")
                    .or_insert(Value::Bool(false));
            }
        }
    }
}

/// The routes of forks, rewinds, mode and model switches.
fn control(id: &Value, error: &Value) -> serde_json::Map<String, Value> {
    let held = json!({"description": "`turn_running`: the session is running a turn (this waits \
        for it to end, or a cancel); `session_busy`: another keel process has it open.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let object = |required: &[&str], properties: Value| {
        json!({"required": true, "content": {"application/json": {"schema": {
            "type": "object", "required": required, "properties": properties}}}})
    };
    let trust = json!({"description": "The workspace's trust: `root`, `level` (`trusted` \
        or `untrusted`), `decided` (false: nobody decided; untrusted until someone does), \
        `source`, `ask` (a client should ask its user now), `notice` (what is left alone, or \
        null), `files` ([{file, what, changed?}] the decision governs).",
        "content": {"application/json": {"schema": {"type": "object",
            "required": ["root", "level", "decided", "ask", "files"],
            "properties": {"root": {"type": "string"},
                "level": {"enum": ["trusted", "untrusted"]},
                "decided": {"type": "boolean"}, "ask": {"type": "boolean"},
                "source": {"type": "object"}, "notice": {"type": ["string", "null"]},
                "files": {"type": "array", "items": {"type": "object"}},
                "recordedIn": {"type": "string",
                    "description": "POST: the configuration file it went to."}}}}}});
    let name = json!({"name": "name", "in": "path", "required": true,
        "schema": {"type": "string"}, "description": "The command's name, without `/`."});
    // A body that may be left out (none is `{}`).
    let optional = |mut body: Value| {
        body["required"] = Value::Bool(false);
        body
    };
    // A body that must give one of `fields` at least (not null).
    let at_least_one = |mut body: Value, fields: &[&str]| {
        body["content"]["application/json"]["schema"]["anyOf"] = fields
            .iter()
            .map(|f| json!({"required": [f], "properties": {*f: {"not": {"type": "null"}}}}))
            .collect();
        body
    };
    let job_id = json!({"name": "jobId", "in": "path", "required": true,
        "schema": {"type": "string"}, "description": "The job's id (`bash-1`, `subagent-2`)."});
    let job = json!({"type": "object", "description": "A background job: {id, kind (`bash`, \
        `subagent`), description, owner, status (`running`, `completed`, `failed`, `killed`), \
        summary?, waiting?, outputBytes, elapsedMs}."});
    let nullable = |t: &str| json!({"type": [t, "null"]});
    let paths = json!({
            "/api/v1/sessions/{id}": {"get": {
                "summary": "One session's state: for a hosted session what its agent runs \
                    with now; for a stored one what its log chose (null where it chose \
                    nothing).",
                "parameters": [id],
                "responses": {"200": {"description": "The session's state.",
                    "content": {"application/json": {"schema": {"type": "object",
                        "required": ["id", "status", "events", "plan"],
                        "properties": {
                            "id": {"type": "string"}, "cwd": nullable("string"),
                            "title": nullable("string"),
                            "status": {"enum": ["running", "idle", "stored"]},
                            "events": {"type": "integer", "minimum": 0,
                                "description": "Events in its log (the next seq)."},
                            "model": nullable("string"), "effort": nullable("string"),
                            "mode": {"enum": ["default", "read-only", "auto", "plan", null]},
                            "plan": {"type": "boolean"},
                            "sandbox": nullable("string"), "approval": nullable("string"),
                            "provenance": {"type": "boolean", "description": "Whether it \
                                records a provenance journal (`GET …/provenance` draws its \
                                graphs)."},
                            "parent": nullable("string"),
                            "origin": {"type": ["string", "null"], "description": "How it \
                                came from `parent` (`subagent`, `fork`, …)."}}}}}},
                    "404": error, "500": error}}},
            "/api/v1/sessions/{id}/commands/{name}/choices": {"get": {
                "summary": "The values a command offers for its argument now (`rewind`: the \
                    session's turns, newest first), as the terminal UI's picker lists them.",
                "parameters": [id, name],
                "responses": {"200": {"description": "`{\"choices\": [{args, label, detail, \
                    seq, text}]}`.", "content": {"application/json": {"schema": {
                        "type": "object", "properties": {"choices": {"type": "array",
                            "items": {"type": "object"}}}}}}},
                    "404": error, "409": held, "500": error}}},
            "/api/v1/sessions/{id}/files": {"get": {
                "summary": "The files the session presented (the `present` tool), oldest \
                    first.",
                "parameters": [id],
                "responses": {"200": {"description": "`{\"files\": [{path, description, \
                    seq}]}`.", "content": {"application/json": {"schema": {"type": "object",
                        "properties": {"files": {"type": "array",
                            "items": {"type": "object"}}}}}}},
                    "404": error}}},
            "/api/v1/sessions/{id}/files/content": {"get": {
                "summary": "The bytes of a presented file, as it is now in the workspace: \
                    images as themselves, text as text/plain, the rest as a download; \
                    never anything that runs in this origin.",
                "parameters": [id, {"name": "path", "in": "query", "required": true,
                    "schema": {"type": "string"},
                    "description": "A path as `GET …/files` lists it."}],
                "responses": {"200": {"description": "The file."},
                    "400": error, "403": error, "404": error, "410": error}}},
            "/api/v1/sessions/{id}/export": {"get": {
                "summary": "The session's HTML page, as `keel sessions export --format html` \
                    writes it: the log on disk, each tool result with its formation graph \
                    when the session has a provenance journal.",
                "parameters": [id],
                "responses": {"200": {"description": "The page.",
                    "content": {"text/html": {"schema": {"type": "string"}}}},
                    "404": error, "500": error}}},
            "/api/v1/sessions/{id}/provenance": {"get": {
                "summary": "The formation graph of one tool result as an SVG document (what \
                    `keel trace result:ID --format svg` draws). 404 `no_provenance` when the \
                    session records none, `no_graph` when its journal has no settled result \
                    for the call.",
                "parameters": [id, {"name": "call", "in": "query", "required": true,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 512},
                    "description": "The tool call's id."}],
                "responses": {"200": {"description": "The graph.",
                    "content": {"image/svg+xml": {"schema": {"type": "string"}}}},
                    "400": error, "404": error, "500": error}}},
            "/api/v1/sessions/{id}/paths": {"get": {
                "summary": "`@path` completion: the entries of the session's workspace the \
                    prefix may be completed to, one directory level at a time, \
                    gitignore-aware, never outside the workspace (at most 20).",
                "parameters": [id, {"name": "prefix", "in": "query",
                    "schema": {"type": "string"}, "description": "What was typed after `@`."}],
                "responses": {"200": {"description": "`{\"paths\": [path…]}`, directories \
                    ending in `/`.", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["paths"]}}}},
                    "400": error, "404": error}}},
            "/api/v1/sessions/{id}/jobs": {"get": {
                "summary": "The session's background jobs (commands and subagents), oldest \
                    first; none for a session this server does not host.",
                "parameters": [id],
                "responses": {"200": {"description": "`{\"jobs\": [Job…]}`.",
                    "content": {"application/json": {"schema": {"type": "object",
                        "properties": {"jobs": {"type": "array", "items": job}}}}}},
                    "404": error}}},
            "/api/v1/sessions/{id}/jobs/{jobId}": {"get": {
                "summary": "One job with the buffered tail of its output.",
                "parameters": [id, job_id],
                "responses": {"200": {"description": "`{\"job\": Job, \"output\"}`."},
                    "404": error}}},
            "/api/v1/sessions/{id}/jobs/{jobId}/kill": {"post": {
                "summary": "Kill a job (as `job_kill`); one that settled before stays as it \
                    settled.",
                "parameters": [id, job_id],
                "responses": {"200": {"description": "`{\"job\": Job}`."}, "404": error,
                    "409": error}}},
            "/api/v1/sessions/{id}/commands": {"get": {
                "summary": "The session's slash commands: `compact`, the custom commands \
                    (Markdown files) and the plugins' (`goal`, `review`, …).",
                "parameters": [id],
                "responses": {"200": {"description": "`{\"commands\": [{name, description, \
                    argumentHint, kind}]}`, kind `builtin`, `custom` or `plugin`.",
                    "content": {"application/json": {"schema": {"type": "object",
                        "properties": {"commands": {"type": "array",
                            "items": {"type": "object"}}}}}}},
                    "404": error, "409": held}}},
            "/api/v1/sessions/{id}/commands/{name}": {"post": {
                "summary": "Run a slash command as the terminal UI does (`/goal pause`, \
                    `/goal OBJECTIVE`, `/compact`, a custom command).",
                "parameters": [id, name],
                "requestBody": {"required": false, "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"args": {"type": "string",
                        "description": "What follows the name on the command line."}}}}}},
                "responses": {
                    "200": {"description": "`{\"message\"}`: it acted and says what it did."},
                    "202": {"description": "`{\"prompt\"}`: its prompt was queued as a turn."},
                    "400": error, "404": error,
                    "409": {"description": "`command_refused` (the command said no, and why), \
                        `turn_running` (`compact` mid-turn) or `session_busy`.",
                        "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Error"}}}},
                    "500": error}}},
            "/api/v1/attachments/{name}": {"get": {
                "summary": "An image a session carries (`keel-attachment:NAME` in its log), \
                    with its sniffed type; only names keel writes (`<sha256>.<ext>`).",
                "parameters": [{"name": "name", "in": "path", "required": true,
                    "schema": {"type": "string"}, "description": "`<sha256>.<ext>`."}],
                "responses": {"200": {"description": "The image."}, "404": error}}},
            "/api/v1/models": {"get": {
                "summary": "The models a session can be switched to (the configured one \
                    first) and the endpoint agents are built for: provider, URL and the \
                    environment variable of its key (never the key) with whether it is set.",
                "responses": {"200": {"description": "`{models: [name…], endpoint: \
                    {provider, baseUrl, keyVariable, keySet} | null, endpointError}`.",
                    "content": {"application/json": {"schema": {"type": "object",
                        "required": ["models", "endpoint"]}}}}, "500": error}}},
            "/api/v1/schedules": {"get": {
                "summary": "The schedules of every session the server hosts, soonest first \
                    (a stored session's wait for it to be resumed). A session's `/schedule` \
                    command creates and deletes them.",
                "responses": {"200": {"description": "`{\"schedules\": [{session, title, \
                    cwd, id, prompt, dueAt, everySeconds}]}` (`dueAt`: ms since the epoch).",
                    "content": {"application/json": {"schema": {"type": "object",
                        "required": ["schedules"]}}}}}}},
            "/api/v1/plugins": {
                "get": {
                    "summary": "A workspace's `[[plugins]]` rows and MCP servers as its next \
                        agent would get them.",
                    "parameters": [{"name": "cwd", "in": "query", "required": true,
                        "schema": {"type": "string", "pattern": "^/"},
                        "description": "The workspace (an absolute directory)."}],
                    "responses": {"200": {"description": "`{root, plugins: [Row…], \
                        mcpServers: [Row…]}`, a row being `{name, what, description, \
                        enabled, layer, problem, switchable}`.",
                        "content": {"application/json": {"schema": {"type": "object",
                            "required": ["root", "plugins", "mcpServers"]}}}},
                        "400": error}},
                "post": {
                    "summary": "Turn a plugin row or an MCP server on or off in one \
                        workspace, in the user's configuration (`[projects.\"<root>\"]`): \
                        sessions created or resumed there from then on follow it.",
                    "requestBody": {"required": true, "content": {"application/json": {
                        "schema": {"type": "object",
                            "required": ["cwd", "kind", "name", "enabled"],
                            "additionalProperties": false,
                            "properties": {"cwd": {"type": "string", "pattern": "^/"},
                                "kind": {"enum": ["plugin", "mcp"]},
                                "name": {"type": "string"},
                                "enabled": {"type": "boolean"}}}}}},
                    "responses": {"200": {"description": "What `GET` answers now, plus \
                        `recordedIn`."}, "400": error, "404": error}}},
            "/api/v1/trust": {
                "get": {
                    "summary": "The trust question of a workspace, as the terminal UI asks \
                        it before its first agent.",
                    "parameters": [{"name": "cwd", "in": "query", "required": true,
                        "schema": {"type": "string", "pattern": "^/"},
                        "description": "An absolute directory."}],
                    "responses": {"200": trust, "400": error}},
                "post": {
                    "summary": "Record the workspace's trust (as `/trust yes|no`); sessions \
                        created or resumed from now on follow it.",
                    "requestBody": object(&["cwd", "level"], json!({
                        "cwd": {"type": "string", "pattern": "^/",
                            "description": "An absolute directory."},
                        "level": {"enum": ["trusted", "untrusted"]}})),
                    "responses": {"200": trust, "400": error, "500": error}}},
            "/api/v1/sessions/{id}/fork": {"post": {
                "summary": "A new session seeded with this one's log (`keel fork`), stored; \
                    a message resumes it. Never refused for a running session.",
                "parameters": [id],
                "requestBody": optional(object(&[], json!({"at": {
                    "type": ["integer", "null"], "minimum": 0,
                    "description": "Fork just before this seq (the start of the turn holding \
                        it); after the last completed turn when absent."}}))),
                "responses": {"201": {"description": "`{\"id\"}`: the new session.",
                    "content": {"application/json": {"schema": {"type": "object",
                        "properties": {"id": {"type": "string"}}}}}},
                    "400": error, "404": error}}},
            "/api/v1/sessions/{id}/rewind": {"post": {
                "summary": "The files and the conversation back to just before a turn \
                    (`/rewind`, the checkpoints plugin's).",
                "parameters": [id],
                "requestBody": object(&["to"], json!({
                    "to": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
                        "description": "A seq (just before the turn holding it), or as \
                            `keel rewind --to`: `\"N\"` (turn N), `\"seq:S\"`, or \
                            `\"undo\"` (undo the last rewind)."},
                    "scope": {"enum": ["both", "files", "conversation"], "default": "both"},
                    "force": {"type": "boolean", "default": false,
                        "description": "Overwrite files changed by hand since."}})),
                "responses": {"200": {"description": "`{\"message\"}`: what was done."},
                    "400": error, "404": error, "409": held,
                    "501": {"description": "`unsupported`: the checkpoints plugin is off."}}}},
            "/api/v1/sessions/{id}/mode": {"post": {
                "summary": "Put the session in a mode (as an editor's `session/set_mode`).",
                "parameters": [id],
                "requestBody": object(&["mode"], json!({
                    "mode": {"enum": ["default", "read-only", "auto", "plan"]}})),
                "responses": {"200": {"description": "`{\"mode\"}`: the mode it is in."},
                    "400": error, "404": error, "409": held}}},
            "/api/v1/sessions/{id}/model": {"post": {
                "summary": "Rebuild the session's agent on another model and/or reasoning \
                    effort (`/model NAME`); the session keeps both. At least one of them.",
                "parameters": [id],
                "requestBody": at_least_one(object(&[], json!({
                    "model": {"type": ["string", "null"], "minLength": 1},
                    "effort": {"type": ["string", "null"], "pattern": "^[a-z]{1,16}$",
                        "description": "A reasoning effort (low, medium, high, …) for models \
                            that take one; it stays through later model switches."}})),
                    &["model", "effort"]),
                "responses": {"200": {"description": "`{\"model\", \"effort\"}`: what it runs \
                    with (effort null when none is set)."},
                    "400": error, "404": error, "409": held, "500": error}}}
    });
    match paths {
        Value::Object(paths) => paths,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented() {
        let doc = document();
        let routes = crate::api::routes();
        assert!(!routes.is_empty());
        for route in &routes {
            let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
            assert!(
                op.is_object(),
                "{} {} is not in the OpenAPI document",
                route.method,
                route.path
            );
        }
        // And nothing documented that the router lacks.
        let documented: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_object().unwrap().len())
            .sum();
        assert_eq!(documented, routes.len());
    }

    #[test]
    fn every_body_refuses_fields_it_does_not_know() {
        let doc = document();
        let mut bodies = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") {
                    assert_eq!(schema["additionalProperties"], false, "{method} {path}");
                    bodies += 1;
                }
            }
        }
        assert!(bodies > 5, "{bodies} bodies");
        // The fork's body may be left out; the model switch needs a model or an effort.
        let fork = &doc["paths"]["/api/v1/sessions/{id}/fork"]["post"]["requestBody"];
        assert_eq!(fork["required"], false);
        let model = &doc["paths"]["/api/v1/sessions/{id}/model"]["post"]["requestBody"];
        let any = model["content"]["application/json"]["schema"]["anyOf"].clone();
        assert_eq!(any[0]["required"][0], "model", "{any}");
        assert_eq!(any[1]["required"][0], "effort", "{any}");
    }
}
