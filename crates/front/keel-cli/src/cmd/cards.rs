//! `keel cards import|show|list`, `keel chat --card`, and the built-in `roleplay` profile.

use super::Ctx;
use crate::cli::{CardsCommand, ChatArgs, ResumeArgs, RunArgs};
use anyhow::{Context, Result};
use keel_memory::roleplay::{Card, Lorebook, cards};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// The built-in profile's name.
pub const PROFILE: &str = "roleplay";

/// The persona of the built-in profile (`-c agent.persona=…` still wins).
const PERSONA: &str = "You are a creative writing partner in a fictional role-play, running the {{model}} model. The character you play and the scene are described below.";

fn builtin_profile(ctx: &Ctx) -> bool {
    ctx.common.profile.as_deref() == Some(PROFILE)
        && !ctx.home.join("profiles").join("roleplay.toml").exists()
}

/// The profile and overrides to load: the built-in `roleplay` profile is no file, but a
/// persona override placed before the user's own `-c`.
pub(crate) fn profile_sources(ctx: &Ctx) -> (Option<String>, Vec<String>) {
    if !builtin_profile(ctx) {
        return (ctx.common.profile.clone(), ctx.common.overrides.clone());
    }
    let mut overrides = vec![format!("agent.persona={PERSONA}")];
    overrides.extend(ctx.common.overrides.iter().cloned());
    (None, overrides)
}

/// The roleplay row's config with `card` set (the card `keel chat` runs with).
fn with_card(mut config: Value, card: Option<&str>) -> Value {
    if let (Some(card), Some(obj)) = (card, config.as_object_mut()) {
        obj.insert("card".into(), json!(card));
    }
    config
}

/// The row edits of the roleplay profile (or of `keel chat`): the `roleplay` row on (with the
/// chat's card), and the `memory` row on in managed mode with the `relevant` policy.
pub(crate) fn roleplay_edits(ctx: &Ctx) -> Vec<keel_host::RowEdit> {
    let on = ctx.common.profile.as_deref() == Some(PROFILE) || ctx.common.card.is_some();
    if !on {
        return Vec::new();
    }
    let card = ctx.common.card.clone();
    vec![
        keel_host::RowEdit::new(keel_memory::roleplay::ID.as_str(), move |c| {
            with_card(c, card.as_deref())
        }),
        keel_host::RowEdit::new(
            keel_memory::ID.as_str(),
            keel_memory::plugin::context_relevant,
        ),
    ]
}

/// A resumed session that was a role-play chat (its log names the card) is resumed as one: the
/// card and the profile again, unless the command line names a card or a profile itself.
pub(crate) fn resumed(ctx: &Ctx, session: &keel_session::Session) -> Option<Ctx> {
    if ctx.common.card.is_some() || ctx.common.profile.is_some() {
        return None;
    }
    let card = keel_memory::roleplay::logged_card(session)?;
    let mut ctx = ctx.clone();
    ctx.common.card = Some(card);
    ctx.common.profile = Some(PROFILE.into());
    Some(ctx)
}

/// `keel cards …`.
pub fn run(ctx: &Ctx, cmd: CardsCommand) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cmd {
        CardsCommand::Import { file } => {
            let (card, id) = cards::import(&ctx.home, &file)?;
            writeln!(out, "{id}")?;
            let mut err = std::io::stderr().lock();
            writeln!(
                err,
                "keel: imported {:?} ({}) as {id}",
                card.data.name, card.spec
            )?;
        }
        CardsCommand::Show { id, json } => {
            let card = cards::load(&ctx.home, &id)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&card)?)?;
            } else {
                write!(out, "{}", describe(&id, &card))?;
            }
        }
        CardsCommand::List { json } => {
            let list = cards::list(&ctx.home);
            if json {
                let rows: Vec<Value> = list
                    .iter()
                    .map(|(id, name, spec)| json!({"id": id, "name": name, "spec": spec}))
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else if list.is_empty() {
                writeln!(
                    std::io::stderr(),
                    "keel: no cards under {} (import one with `keel cards import FILE`)",
                    cards::cards_dir(&ctx.home).display()
                )?;
            } else {
                for (id, name, spec) in list {
                    writeln!(out, "{id}\t{name}\t{spec}")?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(id: &str, card: &Card) -> String {
    let d = &card.data;
    let mut s = format!(
        "id: {id}\nname: {}\nspec: {} {}\n",
        d.name, card.spec, card.spec_version
    );
    for (k, v) in [
        ("description", &d.description),
        ("personality", &d.personality),
        ("scenario", &d.scenario),
        ("greeting", &d.first_mes),
        ("system_prompt", &d.system_prompt),
        ("creator", &d.creator),
    ] {
        if !v.trim().is_empty() {
            s.push_str(&format!("{k}: {}\n", v.trim()));
        }
    }
    if !d.tags.is_empty() {
        s.push_str(&format!("tags: {}\n", d.tags.join(", ")));
    }
    if !d.alternate_greetings.is_empty() {
        s.push_str(&format!(
            "alternate greetings: {}\n",
            d.alternate_greetings.len()
        ));
    }
    if let Some(book) = &d.character_book {
        match Lorebook::from_character_book(id, book) {
            Ok(b) => s.push_str(&format!(
                "lorebook: {:?}, {} entries\n",
                b.name,
                b.entries.len()
            )),
            Err(e) => s.push_str(&format!("lorebook: unreadable: {}\n", e.what)),
        }
    }
    if !d.extensions.is_empty() {
        let keys: Vec<&str> = d.extensions.keys().map(String::as_str).collect();
        s.push_str(&format!("extensions: {}\n", keys.join(", ")));
    }
    s
}

/// `keel chat --card FILE_OR_ID [PROMPT]`: import the card if it is a file, then run the turn
/// under the roleplay profile (a new session, or `--resume` / `--last`).
pub fn chat(mut ctx: Ctx, args: ChatArgs) -> Result<ExitCode> {
    let path = Path::new(&args.card);
    let id = if path.is_file() {
        let (card, id) = cards::import(&ctx.home, path)?;
        writeln!(
            std::io::stderr(),
            "keel: imported {:?} ({}) as {id}",
            card.data.name,
            card.spec
        )?;
        id
    } else {
        cards::load(&ctx.home, &args.card).with_context(|| {
            format!("--card {:?} is neither a file nor a stored card", args.card)
        })?;
        args.card.clone()
    };
    ctx.common.card = Some(id.clone());
    if ctx.common.profile.is_none() {
        ctx.common.profile = Some(PROFILE.into());
    }
    if args.resume.is_none() && !args.last {
        if let Ok(card) = cards::load(&ctx.home, &id)
            && !card.data.first_mes.trim().is_empty()
            && !args.json
        {
            let greeting = card
                .data
                .first_mes
                .trim()
                .replace("{{char}}", &card.data.name)
                .replace("{{user}}", "User");
            writeln!(std::io::stderr(), "{}: {greeting}", card.data.name)?;
        }
        return super::run::run(
            &ctx,
            RunArgs {
                prompt: args.prompt,
                json: args.json,
                script: args.script,
                zstd: false,
                inbox_stdin: false,
                delegated_from: None,
                delegation_depth: None,
                mode: Default::default(),
                ..Default::default()
            },
        );
    }
    let (session, last) = match args.resume {
        Some(s) => (Some(s), false),
        None => (None, true),
    };
    let (session, prompt) = if last {
        (args.prompt, None)
    } else {
        (session, args.prompt)
    };
    super::run::resume(
        &ctx,
        ResumeArgs {
            session,
            prompt,
            last,
            json: args.json,
            script: args.script,
            approve_plan: false,
            mode: Default::default(),
        },
    )
}
