//! Property test of the beneath-open helper: random trees of files, directories and symlinks
//! (links inside, out of the root, absolute, dangling, loops, `..`), random paths, and three
//! answers compared: the kernel's `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, keel's
//! own component walk (used where the kernel has no `openat2`), and a reference model written
//! from the rules alone. Each answer is the file reached (device and inode) or the error class.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::beneath::{Beneath, BeneathError, MAX_LINKS, Resolver};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const NAMES: &[&str] = &["a", "b", "c", "d"];
const TARGETS: &[&str] = &[
    "a",
    "b",
    "a/b",
    "b/c",
    ".",
    "..",
    "../..",
    "../a",
    "../../secret",
    "../outside",
    "../root/a",
    "/",
    "/etc/passwd",
    "c/../a",
    "a/",
    "d",
];

#[derive(Debug, Clone)]
enum Kind {
    Dir,
    File,
    Link(&'static str),
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    children: BTreeMap<String, usize>,
    rel: PathBuf,
}

/// The reference model: a tree of nodes, node 0 the root.
struct Model {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Reached this path (relative to the root).
    At(PathBuf),
    NotFound,
    NotDir,
    Escapes,
    Loop,
}

enum Step {
    Here,
    Up,
    Name(String),
}

fn steps(path: &str) -> Result<Vec<Step>, Outcome> {
    if path.starts_with('/') {
        return Err(Outcome::Escapes);
    }
    let mut out: Vec<Step> = path
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| match p {
            "." => Step::Here,
            ".." => Step::Up,
            n => Step::Name(n.to_owned()),
        })
        .collect();
    if path.len() > 1 && path.ends_with('/') {
        out.push(Step::Here);
    }
    Ok(out)
}

impl Model {
    fn build(entries: &[(usize, usize, Kind)]) -> Model {
        let mut nodes = vec![Node {
            kind: Kind::Dir,
            children: BTreeMap::new(),
            rel: PathBuf::new(),
        }];
        for (parent, name, kind) in entries {
            let dirs: Vec<usize> = (0..nodes.len())
                .filter(|&i| matches!(nodes[i].kind, Kind::Dir))
                .collect();
            let parent = dirs[parent % dirs.len()];
            let name = NAMES[name % NAMES.len()].to_owned();
            if nodes[parent].children.contains_key(&name)
                || nodes[parent].rel.components().count() >= 3
            {
                continue;
            }
            let rel = nodes[parent].rel.join(&name);
            nodes.push(Node {
                kind: kind.clone(),
                children: BTreeMap::new(),
                rel,
            });
            let id = nodes.len() - 1;
            nodes[parent].children.insert(name, id);
        }
        Model { nodes }
    }

    fn materialize(&self, root: &Path) {
        for node in &self.nodes[1..] {
            let at = root.join(&node.rel);
            match node.kind {
                Kind::Dir => std::fs::create_dir(&at).unwrap(),
                Kind::File => std::fs::write(&at, "x").unwrap(),
                Kind::Link(t) => std::os::unix::fs::symlink(t, &at).unwrap(),
            }
        }
    }

    /// The rules, as documented in `keel_tools::beneath`.
    fn resolve(&self, path: &str, follow_final: bool) -> Outcome {
        let mut pending: std::collections::VecDeque<Step> = match steps(path) {
            Ok(s) => s.into(),
            Err(o) => return o,
        };
        let mut stack: Vec<usize> = Vec::new();
        let mut links = 0;
        loop {
            let here = stack.last().copied().unwrap_or(0);
            let Some(step) = pending.pop_front() else {
                return Outcome::At(self.nodes[here].rel.clone());
            };
            let last = pending.is_empty();
            let name = match step {
                Step::Here => continue,
                Step::Up => {
                    if stack.pop().is_none() {
                        return Outcome::Escapes;
                    }
                    continue;
                }
                Step::Name(n) => n,
            };
            let Some(&id) = self.nodes[here].children.get(&name) else {
                return Outcome::NotFound;
            };
            match self.nodes[id].kind {
                Kind::Link(target) if !last || follow_final => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Outcome::Loop;
                    }
                    if target.is_empty() {
                        return Outcome::NotFound;
                    }
                    match steps(target) {
                        Ok(s) => {
                            for st in s.into_iter().rev() {
                                pending.push_front(st);
                            }
                        }
                        Err(o) => return o,
                    }
                }
                _ if last => return Outcome::At(self.nodes[id].rel.clone()),
                Kind::Dir => stack.push(id),
                _ => return Outcome::NotDir,
            }
        }
    }
}

/// What an implementation answered, in the model's terms.
fn observed(root: &Path, got: Result<std::fs::Metadata, BeneathError>, model: &Model) -> Outcome {
    match got {
        Ok(md) => {
            let key = (md.dev(), md.ino());
            for node in &model.nodes {
                let m = std::fs::symlink_metadata(root.join(&node.rel)).unwrap();
                if (m.dev(), m.ino()) == key {
                    return Outcome::At(node.rel.clone());
                }
            }
            panic!("resolved to something outside the model: {key:?}")
        }
        Err(BeneathError::Escapes { .. }) => Outcome::Escapes,
        Err(BeneathError::Loop { .. }) => Outcome::Loop,
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOENT) => Outcome::NotFound,
            Some(libc::ENOTDIR) => Outcome::NotDir,
            _ => panic!("unexpected error: {e}"),
        },
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        2 => Just(Kind::Dir),
        2 => Just(Kind::File),
        3 => proptest::sample::select(TARGETS).prop_map(Kind::Link),
    ]
}

fn query() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        proptest::sample::select(&["a", "b", "c", "d", "..", "."][..]),
        1..5,
    )
    .prop_map(|parts| parts.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn kernel_walk_and_model_agree(
        entries in proptest::collection::vec((0usize..8, 0usize..4, kind()), 0..14),
        queries in proptest::collection::vec((query(), any::<bool>(), any::<bool>()), 1..12),
    ) {
        let model = Model::build(&entries);
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("secret"), "secret").unwrap();
        model.materialize(&root);
        let kernel = Beneath::open_with(&root, Resolver::Openat2).unwrap();
        let walk = Beneath::open_with(&root, Resolver::Walk).unwrap();
        for (q, follow, slash) in queries {
            let q = if slash { format!("{q}/") } else { q };
            let flags = if follow { libc::O_PATH } else { libc::O_PATH | libc::O_NOFOLLOW };
            let meta = |b: &Beneath| {
                b.open_raw(Path::new(&q), flags)
                    .and_then(|fd| std::fs::File::from(fd).metadata().map_err(|e| {
                        BeneathError::Io { path: PathBuf::from(&q), source: e }
                    }))
            };
            let expected = model.resolve(&q, follow);
            let by_kernel = observed(&root, meta(&kernel), &model);
            let by_walk = observed(&root, meta(&walk), &model);
            prop_assert_eq!(&by_kernel, &expected, "kernel vs model on {:?} (follow {})", q, follow);
            prop_assert_eq!(&by_walk, &expected, "walk vs model on {:?} (follow {})", q, follow);
        }
    }
}
