//! Background jobs (work in progress).
