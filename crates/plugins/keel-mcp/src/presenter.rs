//! How the `mcp/server` events show ([`keel_protocol::present`]): a server that could not be
//! used is an error notice saying how to check it (its stderr's last words under it, where a
//! front end has room); a tool of a server that was not offered is an info notice. A server
//! that connected shows nothing.

use crate::client::source::SERVER_EVENT;
use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, Level, MakePresenter, data_of, field, stateless};
use keel_protocol::text::one_line;

/// The presenter of the plugin's events.
pub fn presenter() -> MakePresenter {
    stateless(present)
}

fn present(event: &SessionEvent, out: &mut Vec<Item>) {
    let Some(data) = data_of(event, SERVER_EVENT) else {
        return;
    };
    let f = |k: &str| field(data, k);
    match f("status") {
        "failed" => {
            let how = match f("transport") {
                "" => String::new(),
                t => format!(" ({})", one_line(t, 120)),
            };
            let tail = f("stderrTail");
            out.push(Item::Notice {
                level: Level::Error,
                text: format!(
                    "MCP server '{}'{how} is not available: {}. Check it with: keel mcp test {}",
                    f("server"),
                    one_line(f("error"), 300),
                    f("server")
                ),
                detail: if tail.is_empty() {
                    Vec::new()
                } else {
                    vec![format!("its stderr ends: {}", one_line(tail, 400))]
                },
            });
        }
        "tool-skipped" => out.push(Item::notice(
            Level::Info,
            format!(
                "MCP server '{}': tool '{}' is not offered: {}",
                f("server"),
                f("tool"),
                one_line(f("error"), 200)
            ),
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{EventBody, OtherEvent, Seq};
    use serde_json::json;

    fn ev(data: serde_json::Value) -> SessionEvent {
        let o = OtherEvent {
            type_name: SERVER_EVENT.into(),
            data,
        };
        SessionEvent::new(Seq(3), 0, EventBody::Other(Box::new(o)))
    }

    #[test]
    fn a_failed_server_is_an_error_with_its_stderr_under_it() {
        let mut p = presenter()();
        let mut out = Vec::new();
        p.present(
            &ev(
                json!({"server": "db", "status": "failed", "transport": "stdio: db-mcp",
                       "error": "exited", "stderrTail": "no such table"}),
            ),
            &mut out,
        );
        p.present(
            &ev(json!({"server": "db", "status": "connected"})),
            &mut out,
        );
        assert_eq!(
            out,
            vec![Item::Notice {
                level: Level::Error,
                text: "MCP server 'db' (stdio: db-mcp) is not available: exited. Check it with: \
                       keel mcp test db"
                    .into(),
                detail: vec!["its stderr ends: no such table".into()],
            }]
        );
    }
}
