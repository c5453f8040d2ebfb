//! Git objects written in-process: what a checkpoint stores without starting `git`. Blobs,
//! trees and commits go into the shadow repository's object store as loose objects (a
//! zlib-compressed `"<kind> <len>\0<body>"` at `objects/<2 hex>/<38 hex>`, named by the SHA-1
//! of the uncompressed bytes), exactly as `git hash-object -w` writes them, so the `git`
//! commands that restore files read them as their own.
//!
//! [`Dir`] is the checkpointed tree in memory: each directory keeps the id of the tree object
//! it was last written as, so a checkpoint hashes and writes only the directories on the
//! paths that changed.

use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A git object id (SHA-1).
pub(crate) type Oid = [u8; 20];

/// The object id in hex.
pub(crate) fn hex(oid: &Oid) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

/// The object id of 40 hex digits.
pub(crate) fn parse_hex(text: &str) -> Option<Oid> {
    let text = text.as_bytes();
    if text.len() != 40 {
        return None;
    }
    let mut oid = [0u8; 20];
    for (i, pair) in text.chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).ok()?;
        oid[i] = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(oid)
}

/// The object store of a repository.
#[derive(Debug)]
pub(crate) struct Odb {
    objects: PathBuf,
}

impl Odb {
    pub(crate) fn new(git_dir: &Path) -> Odb {
        Odb {
            objects: git_dir.join("objects"),
        }
    }

    /// Store `body` as an object of `kind` (`blob`, `tree`, `commit`) unless it is there
    /// already; its id.
    pub(crate) fn write(&self, kind: &str, body: &[u8]) -> std::io::Result<Oid> {
        let header = format!("{kind} {}\0", body.len());
        let mut hasher = Sha1::new();
        hasher.update(header.as_bytes());
        hasher.update(body);
        let oid: Oid = hasher.finalize().into();
        let name = hex(&oid);
        let dir = self.objects.join(&name[..2]);
        let path = dir.join(&name[2..]);
        if path.exists() {
            return Ok(oid);
        }
        // Only the fan-out directory is made: a store without `objects/` is damaged, not new.
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let tmp = dir.join(format!("tmp_keel_{}_{}", std::process::id(), &name[2..10]));
        let file = std::fs::File::create(&tmp)?;
        let mut z = flate2::write::ZlibEncoder::new(file, flate2::Compression::fast());
        z.write_all(header.as_bytes())?;
        z.write_all(body)?;
        z.finish()?;
        std::fs::rename(&tmp, &path)?;
        Ok(oid)
    }
}

impl Odb {
    /// Whether object `hex` is in the store (loose, or possibly in a pack: a store that has
    /// packs is trusted to hold what it was given).
    pub(crate) fn has(&self, hex: &str) -> bool {
        hex.len() == 40 && self.objects.join(&hex[..2]).join(&hex[2..]).exists()
            || std::fs::read_dir(self.objects.join("pack")).is_ok_and(|mut d| d.next().is_some())
    }
}

/// One entry of a [`Dir`].
#[derive(Debug)]
enum Node {
    /// A file: its git mode (`0o100644`, `0o100755`, `0o120000`) and blob.
    File(u32, Oid),
    Dir(Dir),
}

/// A directory of the checkpointed tree: its entries by name, and the tree object it was last
/// written as (`None` once something under it changed).
#[derive(Debug, Default)]
pub(crate) struct Dir {
    entries: BTreeMap<String, Node>,
    written: Option<Oid>,
}

impl Dir {
    /// Put the file `path` (`/`-separated) with `mode` and blob `oid` in the tree.
    pub(crate) fn insert(&mut self, path: &str, mode: u32, oid: Oid) {
        self.written = None;
        match path.split_once('/') {
            None => {
                self.entries.insert(path.to_owned(), Node::File(mode, oid));
            }
            Some((name, rest)) => {
                let node = self
                    .entries
                    .entry(name.to_owned())
                    .or_insert_with(|| Node::Dir(Dir::default()));
                if let Node::File(..) = node {
                    *node = Node::Dir(Dir::default());
                }
                if let Node::Dir(dir) = node {
                    dir.insert(rest, mode, oid);
                }
            }
        }
    }

    /// Take the file `path` out of the tree (directories left empty go too).
    pub(crate) fn remove(&mut self, path: &str) {
        match path.split_once('/') {
            None => {
                if self.entries.remove(path).is_some() {
                    self.written = None;
                }
            }
            Some((name, rest)) => {
                let Some(Node::Dir(dir)) = self.entries.get_mut(name) else {
                    return;
                };
                dir.remove(rest);
                if dir.written.is_none() {
                    self.written = None;
                }
                if dir.entries.is_empty() {
                    self.entries.remove(name);
                }
            }
        }
    }

    /// Every file's path, under `prefix`.
    pub(crate) fn paths(&self, prefix: &str, out: &mut Vec<String>) {
        for (name, node) in &self.entries {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            match node {
                Node::File(..) => out.push(path),
                Node::Dir(dir) => dir.paths(&path, out),
            }
        }
    }

    /// Write the tree objects of the directories that changed; the root's id.
    pub(crate) fn write(&mut self, odb: &Odb) -> std::io::Result<Oid> {
        if let Some(oid) = self.written {
            return Ok(oid);
        }
        // git orders a tree's entries by name, a directory's name as if it ended in '/'.
        let mut items: Vec<(Vec<u8>, u32, &str, Oid)> = Vec::with_capacity(self.entries.len());
        for (name, node) in &mut self.entries {
            match node {
                Node::File(mode, oid) => items.push((name.as_bytes().to_vec(), *mode, name, *oid)),
                Node::Dir(dir) => {
                    let oid = dir.write(odb)?;
                    let mut key = name.as_bytes().to_vec();
                    key.push(b'/');
                    items.push((key, 0o40000, name, oid));
                }
            }
        }
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let mut body = Vec::with_capacity(items.len() * 48);
        for (_, mode, name, oid) in &items {
            body.extend_from_slice(format!("{mode:o} {name}\0").as_bytes());
            body.extend_from_slice(oid);
        }
        let oid = odb.write("tree", &body)?;
        self.written = Some(oid);
        Ok(oid)
    }
}

/// The body of a commit of `tree` after `parent`, at `secs` since the epoch.
pub(crate) fn commit_body(tree: &Oid, parent: Option<&str>, secs: u64, message: &str) -> Vec<u8> {
    let mut body = format!("tree {}\n", hex(tree));
    if let Some(parent) = parent {
        body.push_str(&format!("parent {parent}\n"));
    }
    let who = format!("keel <keel@localhost> {secs} +0000");
    body.push_str(&format!("author {who}\ncommitter {who}\n\n{message}\n"));
    body.into_bytes()
}
