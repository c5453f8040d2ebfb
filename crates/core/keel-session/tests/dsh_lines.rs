//! Every line of the real DeepSeek Harness logs parses (with the store's line parser), and
//! re-serialising a parsed event yields the same JSON value (no field dropped or renamed).

use keel_protocol::{EventBody, LogRecord};
use keel_session::store::parse_record;
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../testdata/dsh-sessions")
}

#[test]
fn every_dsh_line_parses_and_round_trips() {
    let mut events = 0;
    for dir in ["read-file", "multi-step", "interrupted", "compaction-prune"] {
        let path = testdata().join(dir).join("session.plain.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let rec =
                parse_record(line).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
            let original: serde_json::Value = serde_json::from_str(line).unwrap();
            let again = match &rec {
                LogRecord::Header(h) => serde_json::to_value(h).unwrap(),
                LogRecord::Event(e) => {
                    events += 1;
                    assert!(
                        !matches!(e.body, EventBody::Other(_))
                            || e.type_name() == "session/title-llm-request",
                        "{}",
                        e.type_name()
                    );
                    serde_json::to_value(e).unwrap()
                }
                LogRecord::Packed(p) => serde_json::to_value(p).unwrap(),
            };
            pretty_assertions::assert_eq!(original, again, "{}:{}", path.display(), n + 1);
        }
    }
    assert!(events > 100);
}
