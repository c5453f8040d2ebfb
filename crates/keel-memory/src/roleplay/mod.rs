//! The role-play preset (in progress).
