//! `web_fetch` reaches globally reachable addresses only (issue 44, part 5): a URL whose host is
//! a literal IPv6 address in IPv4-mapped `::ffff:0:0/96`, SIIT's IPv4-translated
//! `::ffff:0:0:0/96`, local-use NAT64 `64:ff9b:1::/48`, Teredo `2001::/32` or discard-only
//! `100::/64` is refused before any connection, the refusal naming the address and its block.
//! The ones carrying 127.0.0.1 aim at a real listener on 127.0.0.1 that must see no connection.

use crate::support::*;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn web_fetch_refuses_mapped_translated_nat64_local_teredo_and_discard_addresses() {
    let env = Env::new();
    // web_fetch is offered against a loopback model only when the user's own row says so.
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"web\"\n[plugins.config]\nfetch = true\nfetch_timeout_ms = 3000\n",
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });

    // (URL, the address and the block its refusal names)
    let cases = [
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0/96 (IPv4-mapped Address, RFC 4291)",
        ),
        (
            format!("http://[::ffff:8.8.8.8]:{port}/"),
            "::ffff:8.8.8.8",
            "::ffff:0.0.0.0/96 (IPv4-mapped Address, RFC 4291)",
        ),
        (
            format!("http://[::ffff:0:7f00:1]:{port}/"),
            "::ffff:0:7f00:1",
            "::ffff:0:0:0/96 (IPv4-translated Address, RFC 2765)",
        ),
        (
            format!("http://[64:ff9b:1::7f00:1]:{port}/"),
            "64:ff9b:1::7f00:1",
            "64:ff9b:1::/48 (IPv4-IPv6 Translat., RFC 8215)",
        ),
        (
            "http://[2001::1]/".to_owned(),
            "2001::1",
            "2001::/32 (TEREDO, RFC 4380)",
        ),
        (
            "http://[100::1]/".to_owned(),
            "100::1",
            "100::/64 (Discard-Only Address Block, RFC 6666)",
        ),
    ];
    let calls: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, (url, _, _))| {
            format!("      - {{ id: f{i}, name: web_fetch, arguments: {{ url: \"{url}\" }} }}")
        })
        .collect();
    let mock = Mock::start(&format!(
        r#"
responses:
  - match: {{ last_user_contains: "GO" }}
    tool_calls:
{}
  - text: "DONE"
"#,
        calls.join("\n")
    ));
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");

    let names = tool_names(&mock.requests()[0]);
    assert!(names.contains(&"web_fetch".to_owned()), "{names:?}");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), cases.len(), "{results:?}");
    for (i, (url, address, block)) in cases.iter().enumerate() {
        let (_, text, is_error) = results
            .iter()
            .find(|(id, _, _)| *id == format!("f{i}"))
            .unwrap_or_else(|| panic!("no result for {url}: {results:?}"));
        assert!(*is_error, "{url}: {text}");
        assert!(
            text.contains(&format!("resolves to {address}, ")),
            "{url}: {text}"
        );
        assert!(text.contains(block), "{url}: {text}");
        assert!(text.contains("public addresses only"), "{url}: {text}");
    }
    // Nothing reached the loopback listener the mapped and translated addresses carry.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}
