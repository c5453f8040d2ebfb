//! The role-play preset: character cards ([`card`], read from JSON, [`png`] and [`charx`]),
//! lorebooks ([`lore`]), the card store under `$KEEL_HOME/cards` ([`cards`]), the `roleplay`
//! plugin row ([`plugin`]) and its tools ([`tools`]). Design: `docs/roleplay.md`.

pub mod card;
pub mod cards;
pub mod charx;
pub mod lore;
pub mod plugin;
pub mod png;
pub mod tools;

pub use card::{Card, CardData, CardError, Spec};
pub use lore::{Activation, Active, Key, Logic, LoreEntry, Lorebook};
pub use plugin::{CARD_EVENT, ID, RoleplayConfig, RoleplayPlugin, logged_card};
