//! The OpenAPI 3.1 document the server serves at `/api/v1/openapi.json`: every route of
//! [`crate::api::routes`] with its parameters, bodies and answers (a test holds the two
//! together).

use serde_json::{Value, json};

/// The document.
pub fn document() -> Value {
    let error = json!({"$ref": "#/components/responses/Error"});
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"},
        "description": "The session id."});
    json!({
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
                    "status": {"enum": ["running", "idle", "stored"]}}}
            },
            "responses": {
                "Error": {"description": "An error.", "content": {"application/json":
                    {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": {
            "/": {"get": {
                "summary": "With `?token=TOKEN`: set the token cookie and redirect to `/`.",
                "parameters": [{"name": "token", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "What this server is."},
                    "303": {"description": "The cookie is set."}, "401": error}}},
            "/api/v1/openapi.json": {"get": {
                "summary": "This document.",
                "responses": {"200": {"description": "The OpenAPI document."}}}},
            "/api/v1/sessions": {
                "get": {
                    "summary": "Every session of $KEEL_HOME, newest first.",
                    "responses": {"200": {"description": "The sessions.", "content": {
                        "application/json": {"schema": {"type": "object", "properties": {
                            "sessions": {"type": "array",
                                "items": {"$ref": "#/components/schemas/Session"}}}}}}}}},
                "post": {
                    "summary": "A new session in cwd; with a prompt, its first turn starts.",
                    "requestBody": {"required": true, "content": {"application/json": {
                        "schema": {"type": "object", "required": ["cwd"], "properties": {
                            "cwd": {"type": "string", "description": "An absolute directory."},
                            "prompt": {"type": "string"},
                            "model": {"type": "string",
                                "description": "A model instead of the configured one."}}}}}},
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
                        "delivery": {"enum": ["queue", "steer"], "default": "queue"}}}}}},
                "responses": {"202": {"description": "Delivered; `delivery` says how."},
                    "400": error, "404": error}}},
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
                    {"name": "after", "in": "query", "schema": {"type": "integer"},
                        "description": "Start after this seq (exclusive)."},
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"},
                        "description": "The last seq received; wins over `after`."}],
                "responses": {"200": {"description": "The stream.",
                    "content": {"text/event-stream": {}}}, "400": error, "404": error}}}
        }
    })
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
}
