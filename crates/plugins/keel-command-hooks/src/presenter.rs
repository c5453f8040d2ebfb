//! How the plugin's own events show ([`keel_protocol::present`]): a plugin bundle whose hooks
//! were not loaded (`hooks/warning`) is an error notice naming the bundle, the file and why.

use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, Level, MakePresenter, data_of, field, stateless};
use keel_protocol::text::one_line;

/// The ignorable event of a bundle whose hooks file was skipped: `{bundle, file, error}`.
pub const WARNING_EVENT: &str = "hooks/warning";

/// The presenter of the plugin's events.
pub fn presenter() -> MakePresenter {
    stateless(present)
}

fn present(event: &SessionEvent, out: &mut Vec<Item>) {
    if let Some(data) = data_of(event, WARNING_EVENT) {
        out.push(Item::notice(
            Level::Error,
            format!(
                "Hooks of plugin {} skipped ({}): {}",
                field(data, "bundle"),
                field(data, "file"),
                one_line(field(data, "error"), 300)
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{EventBody, OtherEvent, Seq};
    use serde_json::json;

    #[test]
    fn a_skipped_bundle_file_is_an_error_notice() {
        let o = OtherEvent {
            type_name: WARNING_EVENT.into(),
            data: json!({"bundle": "fmt", "file": "/b/hooks/hooks.json", "error": "bad"}),
        };
        let mut out = Vec::new();
        presenter()().present(
            &SessionEvent::new(Seq(1), 0, EventBody::Other(Box::new(o))),
            &mut out,
        );
        assert_eq!(
            out,
            vec![Item::notice(
                Level::Error,
                "Hooks of plugin fmt skipped (/b/hooks/hooks.json): bad"
            )]
        );
    }
}
