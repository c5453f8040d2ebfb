//! Tool sources: a set that changes while an agent runs is re-read only when its generation
//! moved, keeps its place among the other tools, and leaves out (and reports) tools it cannot
//! register.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, Probe, ProbeTool};
use keel_tools::{BuiltinConfig, ExecMode, SandboxMode, Tool, ToolRegistry, ToolSource};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Changing {
    names: Mutex<Vec<&'static str>>,
    generation: AtomicU64,
    probe: Arc<Probe>,
}

impl Changing {
    fn set(&self, names: &[&'static str]) {
        *self.names.lock().unwrap() = names.to_vec();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl ToolSource for Changing {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.names
            .lock()
            .unwrap()
            .iter()
            .map(|n| Arc::new(ProbeTool::new(n, ExecMode::Parallel, &self.probe)) as Arc<dyn Tool>)
            .collect()
    }
}

fn names(reg: &ToolRegistry) -> Vec<String> {
    reg.names().map(str::to_owned).collect()
}

fn registry(source: &Arc<Changing>) -> ToolRegistry {
    let mut reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    assert!(reg.add_source(source.clone()).is_empty());
    reg.register(Arc::new(ProbeTool::new(
        "after",
        ExecMode::Parallel,
        &source.probe,
    )))
    .unwrap();
    reg
}

#[test]
fn a_source_is_re_read_only_when_its_generation_moved_and_keeps_its_place() {
    let source = Arc::new(Changing::default());
    source.set(&["s_a"]);
    let reg = registry(&source);
    let before = names(&reg);
    assert_eq!(&before[before.len() - 2..], ["s_a", "after"]);
    assert!(reg.refreshed().is_none(), "nothing moved");

    source.set(&["s_b", "s_c"]);
    let (next, errors) = reg.refreshed().unwrap();
    assert!(errors.is_empty());
    let after = names(&next);
    assert_eq!(&after[..before.len() - 2], &before[..before.len() - 2]);
    assert_eq!(&after[after.len() - 3..], ["s_b", "s_c", "after"]);
    assert!(next.get("s_a").is_none() && next.get("s_c").is_some());
    assert!(
        next.refreshed().is_none(),
        "the new registry read the new generation"
    );

    // Emptied, then refilled: the place is kept even with no tools in between.
    source.set(&[]);
    let (empty, _) = next.refreshed().unwrap();
    assert_eq!(names(&empty).last().unwrap(), "after");
    source.set(&["s_d"]);
    let (refilled, _) = empty.refreshed().unwrap();
    let refilled = names(&refilled);
    assert_eq!(&refilled[refilled.len() - 2..], ["s_d", "after"]);
}

#[test]
fn tools_a_source_cannot_register_are_left_out_and_named() {
    let source = Arc::new(Changing::default());
    let reg = registry(&source);
    source.set(&["fine", "bad name", "after"]);
    let (next, errors) = reg.refreshed().unwrap();
    let refused: Vec<&str> = errors.iter().map(|e| e.tool()).collect();
    assert_eq!(refused, ["bad name", "after"]);
    assert!(next.get("fine").is_some());
    assert_eq!(names(&next).iter().filter(|n| *n == "after").count(), 1);
}

#[test]
fn a_pipeline_takes_the_new_tools_only_when_refreshed() {
    let fx = Fixture::new();
    let source = Arc::new(Changing::default());
    source.set(&["s_a"]);
    let pipeline = fx.pipeline_with(
        SandboxMode::WorkspaceWrite,
        Arc::new(registry(&source)),
        keel_tools::ToolHooks::new(),
    );
    assert!(!pipeline.refresh_tools().0);
    source.set(&["s_b"]);
    assert!(
        pipeline.registry().get("s_b").is_none(),
        "not before a refresh"
    );
    let (changed, errors) = pipeline.refresh_tools();
    assert!(changed && errors.is_empty());
    assert!(pipeline.registry().get("s_b").is_some());
    assert!(pipeline.registry().get("s_a").is_none());
}
