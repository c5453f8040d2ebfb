//! The surface: the ordered seqs of the surface nodes that make up model-visible history, and
//! the messages derived from it.
//!
//! `surfaceOp: "append"` pushes the event's seq; `{op:"replace", start, end}` removes the
//! inclusive span of current nodes from the node with seq `start` to the node with seq `end`
//! (in surface order) and puts the new event's seq in its place. keel's `surface/rewind
//! {toSeq}` (not a surface event itself) sets the nodes back to what they were just before
//! event `toSeq`. Every replace and rewind bumps the generation, which tells [`Derived`] to
//! rebuild instead of extending.

use keel_protocol::{Message, Role, Seq};

/// Current surface nodes in order, and how many replacements produced them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Surface {
    nodes: Vec<Seq>,
    generation: u64,
    last_replacement: Option<Seq>,
}

impl Surface {
    /// The seqs of the current surface nodes, in model order.
    pub fn nodes(&self) -> &[Seq] {
        &self.nodes
    }

    /// The replace generation: 0 until the first replacement, +1 for each.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The seq of the last event that replaced surface nodes (`surfaceOp` replace), if any.
    pub fn last_replacement(&self) -> Option<Seq> {
        self.last_replacement
    }

    /// Position of the node with seq `seq`, if it is on the surface.
    pub fn position(&self, seq: Seq) -> Option<usize> {
        // Recent nodes are the usual targets; search from the end.
        self.nodes.iter().rposition(|&s| s == seq)
    }

    pub(crate) fn append(&mut self, seq: Seq) {
        self.nodes.push(seq);
    }

    /// Return to `nodes`, an earlier surface (`surface/rewind`): a new generation, so derived
    /// messages are rebuilt. `last_replacement` is unchanged: a rewind shadows nothing that a
    /// projection would have to carry over.
    pub(crate) fn rewind(&mut self, nodes: Vec<Seq>) {
        self.nodes = nodes;
        self.generation += 1;
    }

    /// Replace positions `from..=to` by `seq` (positions already validated).
    pub(crate) fn replace(&mut self, from: usize, to: usize, seq: Seq) {
        self.nodes.splice(from..=to, std::iter::once(seq));
        self.generation += 1;
        self.last_replacement = Some(seq);
    }
}

/// One derived model message with the seq of the surface node it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct DerivedMessage {
    /// Seq of the surface node.
    pub seq: Seq,
    /// The message.
    pub message: Message,
}

/// Whether a surface node's message becomes a derived message (empty assistant messages do
/// not).
pub(crate) fn derives(m: &Message) -> bool {
    !(m.role == Role::Assistant && m.is_empty())
}

/// Incrementally maintained derived messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct Derived {
    pub(crate) messages: Vec<DerivedMessage>,
    /// Surface nodes already mapped.
    pub(crate) upto: usize,
    pub(crate) generation: u64,
}

impl Derived {
    /// Bring the derived messages up to date with `surface`; `message(seq)` looks up a node's
    /// message. Work is proportional to the nodes added since the last call unless a replace
    /// changed the generation, in which case everything is rebuilt.
    pub(crate) fn update<'a>(
        &mut self,
        surface: &Surface,
        mut message: impl FnMut(Seq) -> Option<&'a Message>,
    ) {
        if surface.generation != self.generation || self.upto > surface.nodes.len() {
            self.messages.clear();
            self.upto = 0;
            self.generation = surface.generation;
        }
        for &seq in &surface.nodes[self.upto..] {
            if let Some(m) = message(seq)
                && derives(m)
            {
                self.messages.push(DerivedMessage {
                    seq,
                    message: m.clone(),
                });
            }
        }
        self.upto = surface.nodes.len();
    }
}
