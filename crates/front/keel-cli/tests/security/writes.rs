//! The `write` race (issue 44, hole 3): while the model writes `r` again and again, something
//! else keeps swapping `r` between a symlink to a file outside the workspace and nothing. keel
//! used to check the path, then open it by name, following a link that appeared in between and
//! creating the outside file with the model's text. Now every write creates a fresh file in
//! the parent directory's descriptor and renames it over `r`, so a link there is replaced,
//! never followed.

use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_link_swapped_in_during_writes_never_redirects_one() {
    swapped_link_race(None);
}

/// The same with keel's own walk (`KEEL_BENEATH=walk`), as on a kernel without `openat2`.
#[test]
fn without_openat2_a_swapped_link_never_redirects_a_write_either() {
    swapped_link_race(Some("walk"));
}

fn swapped_link_race(resolver: Option<&str>) {
    let env = Env::new();
    let target = env.outside.join("target");
    let link = env.ws.join("r");
    let writes = 80;
    let mut script = String::from("responses:\n");
    for i in 0..writes {
        script.push_str(&format!(
            "  - tool_calls: [{{ id: w{i}, name: write, arguments: {{ file_path: r, content: \"MODEL TEXT {i}\" }} }}]\n"
        ));
    }
    script.push_str("  - text: \"done\"\n");
    let mock = Mock::start(&script);

    // The swapper: a real concurrent loop, `ln -sfn TARGET r; rm -f r`, until the run ends.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, target, link) = (stop.clone(), target.clone(), link.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::os::unix::fs::symlink(&target, &link);
                let _ = std::fs::remove_file(&link);
                swaps += 1;
            }
            swaps
        })
    };
    let mut cmd = env.keel(&mock.base_url());
    if let Some(r) = resolver {
        cmd.env("KEEL_BENEATH", r);
    }
    let out = run(cmd
        .args(["--approval", "auto", "-c", "tools.read_before_write=false"])
        .args(["run", "write r many times"]));
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(swaps > 100, "the swapper ran ({swaps} swaps)");

    assert!(
        std::fs::symlink_metadata(&target).is_err(),
        "the outside file was created through the link: {:?}",
        std::fs::read_to_string(&target)
    );
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), writes);
    let written = results.iter().filter(|(_, _, err)| !err).count();
    assert!(written > 0, "some writes went through: {results:?}");
}
