//! The approval policy a run gets, and where it came from: a flag, a configuration file's key,
//! or keel's default. A call refused under `deny` names that source (not a flag the user never
//! passed), and a flag or file that still says the old word `never` gets a note, since Codex
//! users read it the other way ([`ApprovalPolicy::misread`]).

use crate::Flags;
use crate::config::Loaded;
use keel_agent::{ApprovalPolicy, DEFAULT_APPROVAL_SOURCE};

/// The run's approval policy with its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) policy: ApprovalPolicy,
    /// `--approval deny`, `approval = "never" in FILE`, `-c approval=deny`, keel's default.
    pub(crate) source: String,
    /// Said once when the policy comes from an old `never` (a flag's or a file's).
    pub(crate) note: Option<String>,
}

/// The flag over the configuration over the default.
pub(crate) fn resolve(flags: &Flags, loaded: &Loaded) -> Resolved {
    if let Some(policy) = flags.approval {
        let source = flags
            .approval_from
            .clone()
            .unwrap_or_else(|| format!("approval {} given to this run", policy.as_str()));
        let note = flags
            .approval_word
            .as_deref()
            .and_then(ApprovalPolicy::misread)
            .map(|n| format!("{n} ({source})"));
        return Resolved {
            policy,
            source,
            note,
        };
    }
    let layer = loaded.origin.get("approval").map_or("", String::as_str);
    let policy = match loaded.config.approval {
        Some(policy) if layer != "defaults" => Some(policy),
        _ => None,
    };
    let Some(policy) = policy else {
        return Resolved {
            policy: ApprovalPolicy::default(),
            source: DEFAULT_APPROVAL_SOURCE.to_owned(),
            note: None,
        };
    };
    let word = loaded
        .table
        .get("approval")
        .and_then(toml::Value::as_str)
        .unwrap_or(policy.as_str());
    let source = if layer.starts_with("-c ") || layer.is_empty() {
        format!("-c approval={word}")
    } else {
        format!("approval = {word:?} in {layer}")
    };
    let note = ApprovalPolicy::misread(word).map(|n| format!("{n} ({source})"));
    Resolved {
        policy,
        source,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Layer, layer_from_text, merge_layers};

    fn loaded(layers: &[(&str, &str)]) -> Loaded {
        let layers: Vec<Layer> = layers
            .iter()
            .map(|(name, text)| layer_from_text(name, text).unwrap())
            .collect();
        merge_layers(&layers).unwrap()
    }

    #[test]
    fn the_file_and_key_that_set_the_policy_are_named() {
        let l = loaded(&[("/home/u/.keel/config.toml", "approval = \"deny\"\n")]);
        let r = resolve(&Flags::default(), &l);
        assert_eq!(r.policy, ApprovalPolicy::Deny);
        assert_eq!(r.source, "approval = \"deny\" in /home/u/.keel/config.toml");
        assert_eq!(r.note, None);
    }

    #[test]
    fn the_old_word_never_still_denies_and_gets_a_note() {
        let l = loaded(&[
            ("/home/u/.keel/config.toml", "approval = \"ask\"\n"),
            ("/ws/.keel/config.toml", "approval = \"never\"\n"),
        ]);
        let r = resolve(&Flags::default(), &l);
        assert_eq!(r.policy, ApprovalPolicy::Deny);
        assert_eq!(r.source, "approval = \"never\" in /ws/.keel/config.toml");
        let note = r.note.unwrap_or_default();
        assert!(note.contains("old word for \"deny\"") && note.contains("/ws/.keel/config.toml"));
        // `auto` reads as allow, with no note: nobody reads it the other way.
        let l = loaded(&[("/f.toml", "approval = \"auto\"\n")]);
        let r = resolve(&Flags::default(), &l);
        assert_eq!((r.policy, r.note), (ApprovalPolicy::Allow, None));
    }

    #[test]
    fn a_flag_wins_and_names_itself() {
        let l = loaded(&[("/f.toml", "approval = \"allow\"\n")]);
        let flags = Flags {
            approval: Some(ApprovalPolicy::Deny),
            approval_from: Some("--permission-mode dontAsk".into()),
            ..Flags::default()
        };
        let r = resolve(&flags, &l);
        assert_eq!(r.policy, ApprovalPolicy::Deny);
        assert_eq!(r.source, "--permission-mode dontAsk");
        assert_eq!(r.note, None);
        // A typed `--approval never` gets the old word's note, naming the flag.
        let typed = Flags {
            approval: Some(ApprovalPolicy::Deny),
            approval_from: Some("--approval never".into()),
            approval_word: Some("never".into()),
            ..Flags::default()
        };
        let note = resolve(&typed, &l).note.unwrap_or_default();
        assert!(
            note.contains("old word for \"deny\"") && note.ends_with("(--approval never)"),
            "{note}"
        );
        let r = resolve(&Flags::default(), &loaded(&[]));
        assert_eq!(
            (r.policy, r.source.as_str()),
            (ApprovalPolicy::Ask, "keel's default")
        );
        let defaults = loaded(&[("defaults", "approval = \"ask\"\n")]);
        let r = resolve(&Flags::default(), &defaults);
        assert_eq!(
            (r.policy, r.source.as_str()),
            (ApprovalPolicy::Ask, "keel's default")
        );
        let c = loaded(&[("-c approval=never", "approval = \"never\"\n")]);
        assert_eq!(resolve(&Flags::default(), &c).source, "-c approval=never");
    }
}
