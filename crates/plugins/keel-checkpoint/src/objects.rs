//! Git objects written in-process: what a checkpoint stores without starting `git`. Blobs,
//! trees and commits (named by the SHA-1 of `"<kind> <len>\0<body>"`, as git names them) are
//! written into the shadow repository's object store as packs in git's own format ([`Odb`]),
//! so the `git` commands that restore files read them as their own.
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
    hex::encode(oid)
}

/// The object id of 40 hex digits.
pub(crate) fn parse_hex(text: &str) -> Option<Oid> {
    let mut oid = [0u8; 20];
    hex::decode_to_slice(text, &mut oid).ok()?;
    Some(oid)
}

/// Most bytes of compressed objects held before they are written out as a pack.
const PENDING_MAX: usize = 8 * 1024 * 1024;

/// One object waiting for the next pack: its id and its entry in the pack (the type and size
/// header, then the zlib body).
#[derive(Debug)]
struct Pending {
    oid: Oid,
    entry: Vec<u8>,
}

/// The object store of a repository. New objects are held in memory and written out
/// together as one pack (`objects/pack/pack-<id>.pack` + `.idx`, git's formats, version 2) by
/// [`Odb::flush`]: a checkpoint then costs two new files at most, not one per object (new
/// files are what costs most on a busy file system).
#[derive(Debug)]
pub(crate) struct Odb {
    objects: PathBuf,
    pending: Vec<Pending>,
    pending_ids: std::collections::HashSet<Oid>,
    pending_bytes: usize,
}

impl Odb {
    pub(crate) fn new(git_dir: &Path) -> Odb {
        Odb {
            objects: git_dir.join("objects"),
            pending: Vec::new(),
            pending_ids: std::collections::HashSet::new(),
            pending_bytes: 0,
        }
    }

    /// Store `body` as an object of `kind` (`blob`, `tree`, `commit`) unless it is held
    /// already; its id. It is on disk after the next [`Odb::flush`] (done here when many bytes
    /// are held).
    pub(crate) fn write(&mut self, kind: &str, body: &[u8]) -> std::io::Result<Oid> {
        let header = format!("{kind} {}\0", body.len());
        let mut hasher = Sha1::new();
        hasher.update(header.as_bytes());
        hasher.update(body);
        let oid: Oid = hasher.finalize().into();
        if self.pending_ids.contains(&oid) || self.loose(&hex(&oid)).exists() {
            return Ok(oid);
        }
        let kind: u8 = match kind {
            "commit" => 1,
            "tree" => 2,
            _ => 3,
        };
        // The pack entry: type and size in a variable-length header, then the zlib body.
        let mut entry = Vec::with_capacity(body.len() / 2 + 16);
        let mut size = body.len();
        let mut byte = ((kind as usize) << 4 | (size & 0x0f)) as u8;
        size >>= 4;
        while size > 0 {
            entry.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        entry.push(byte);
        let mut z = flate2::write::ZlibEncoder::new(entry, flate2::Compression::fast());
        z.write_all(body)?;
        let entry = z.finish()?;
        self.pending_bytes += entry.len();
        self.pending_ids.insert(oid);
        self.pending.push(Pending { oid, entry });
        if self.pending_bytes > PENDING_MAX {
            self.flush()?;
        }
        Ok(oid)
    }

    fn loose(&self, hex: &str) -> PathBuf {
        self.objects.join(&hex[..2]).join(&hex[2..])
    }

    /// Whether object `hex` is in the store: held, loose, or possibly in a pack (a store that
    /// has packs is trusted to hold what it was given).
    pub(crate) fn has(&self, hex: &str) -> bool {
        if hex.len() != 40 {
            return false;
        }
        parse_hex(hex).is_some_and(|oid| self.pending_ids.contains(&oid))
            || self.loose(hex).exists()
            || std::fs::read_dir(self.objects.join("pack")).is_ok_and(|mut d| d.next().is_some())
    }

    /// Write the held objects out as one pack and its index (nothing when none is held).
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // A store without `objects/` is damaged, not new: only `pack/` is made.
        let dir = self.objects.join("pack");
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let mut pack = Vec::with_capacity(self.pending_bytes + 32);
        pack.extend_from_slice(b"PACK");
        pack.extend_from_slice(&2u32.to_be_bytes());
        pack.extend_from_slice(&(self.pending.len() as u32).to_be_bytes());
        let mut index: Vec<(Oid, u32, u64)> = Vec::with_capacity(self.pending.len());
        for p in &self.pending {
            index.push((p.oid, crc32fast::hash(&p.entry), pack.len() as u64));
            pack.extend_from_slice(&p.entry);
        }
        let pack_sum: Oid = Sha1::digest(&pack).into();
        pack.extend_from_slice(&pack_sum);
        index.sort_by_key(|e| e.0);
        let mut idx = Vec::with_capacity(8 + 1024 + index.len() * 28 + 40);
        idx.extend_from_slice(&[0xff, b't', b'O', b'c']);
        idx.extend_from_slice(&2u32.to_be_bytes());
        for first in 0..=255u8 {
            let upto = index.partition_point(|e| e.0[0] <= first);
            idx.extend_from_slice(&(upto as u32).to_be_bytes());
        }
        for e in &index {
            idx.extend_from_slice(&e.0);
        }
        for e in &index {
            idx.extend_from_slice(&e.1.to_be_bytes());
        }
        // Offsets past 2 GiB go in a second table (a pack is at most ~8 MiB past the cap,
        // but a single large file can make one bigger).
        let mut large: Vec<u64> = Vec::new();
        for e in &index {
            if e.2 < 0x8000_0000 {
                idx.extend_from_slice(&(e.2 as u32).to_be_bytes());
            } else {
                idx.extend_from_slice(&(0x8000_0000 | large.len() as u32).to_be_bytes());
                large.push(e.2);
            }
        }
        for offset in large {
            idx.extend_from_slice(&offset.to_be_bytes());
        }
        idx.extend_from_slice(&pack_sum);
        let idx_sum: Oid = Sha1::digest(&idx).into();
        idx.extend_from_slice(&idx_sum);
        let name = format!("pack-{}", hex(&pack_sum));
        // The pack first, then its index: git looks for packs by their index.
        for (ext, bytes) in [("pack", &pack), ("idx", &idx)] {
            let tmp = dir.join(format!("tmp_keel_{}_{name}.{ext}", std::process::id()));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, dir.join(format!("{name}.{ext}")))?;
        }
        self.pending.clear();
        self.pending_ids.clear();
        self.pending_bytes = 0;
        Ok(())
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
    pub(crate) fn write(&mut self, odb: &mut Odb) -> std::io::Result<Oid> {
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
