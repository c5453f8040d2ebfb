//! The session log: header, event envelope, and every core event payload.
//!
//! A log line is one of three records ([`LogRecord`]): the header (first line), an event, or a
//! packed run of stream chunks (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) standing
//! for consecutive `assistant/chunk` events, as DeepSeek Harness writes them. Event types this
//! crate does not know are kept verbatim in [`EventBody::Other`] together with their envelope's
//! `ignorable` flag; deciding whether to accept them is the loader's job.
//!
//! Layout (everything is re-exported here, so paths stay `keel_protocol::X` /
//! `keel_protocol::event::X`):
//! - `envelope.rs`: the header line ([`SessionHeader`]) and the event envelope ([`SessionEvent`],
//!   [`SurfaceOp`]) with its serialization;
//! - `body.rs`: [`EventBody`], the typed payload chosen by the `type` string (parse and write
//!   `data` by type), and [`OtherEvent`] for types keel does not model;
//! - `payloads.rs`: one struct per core event's `data`;
//! - `packed.rs`: packed chunk rows ([`PackedKind`], [`PackedChunks`]) and their expansion;
//! - `record.rs`: one line of a file ([`LogRecord`]), the borrowed envelope readers look at first
//!   ([`RecordEnvelope`]) and [`RecordError`].
//!
//! Data flow: writing, a [`SessionEvent`] or [`PackedChunks`] serializes itself as one line
//! (`type`, envelope fields, `data` written by its [`EventBody`] variant); reading, a reader
//! deserializes a [`RecordEnvelope`] (or reads its fields by hand), then hands `data` to
//! [`EventBody::parse`] / [`EventBody::parse_prefix`] under the `type` it found.

mod body;
mod envelope;
mod packed;
mod payloads;
mod record;

pub use body::*;
pub use envelope::*;
pub use packed::*;
pub use payloads::*;
pub use record::*;
