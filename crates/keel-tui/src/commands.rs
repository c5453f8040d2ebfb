//! Slash commands: the built-in ones, and custom commands from Markdown files.
//! (Being written.)
