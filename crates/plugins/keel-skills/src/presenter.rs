//! How the skills plugin's events show ([`keel_protocol::present`]): a skill file skipped
//! (`skills/warning`) is an error notice naming the file and why. The listing event
//! (`skills/catalog`, its logged name) shows nothing.

use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, Level, MakePresenter, data_of, field, stateless};
use keel_protocol::text::one_line;

/// The ignorable event of a skipped skill file: `{file, error}`.
pub const WARNING_EVENT: &str = "skills/warning";
/// The ignorable event listing the skills and the shadowed ones.
pub const LISTING_EVENT: &str = "skills/catalog";

/// The presenter of the plugin's events.
pub fn presenter() -> MakePresenter {
    stateless(present)
}

fn present(event: &SessionEvent, out: &mut Vec<Item>) {
    if let Some(data) = data_of(event, WARNING_EVENT) {
        out.push(Item::notice(
            Level::Error,
            format!(
                "Skill file {} skipped: {}",
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
    fn a_skipped_file_is_an_error_notice() {
        let o = OtherEvent {
            type_name: WARNING_EVENT.into(),
            data: json!({"file": ".keel/skills/x/SKILL.md", "error": "no name"}),
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
                "Skill file .keel/skills/x/SKILL.md skipped: no name"
            )]
        );
    }
}
