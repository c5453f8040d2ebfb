//! `keel mcp test` and `keel mcp prompts`: servers started the way `keel run` starts them,
//! asked for their tools or prompts, and stopped.

use super::*;

/// What came of starting one server.
pub(super) type Started = Result<
    (
        Vec<rmcp::model::Tool>,
        Option<Result<Vec<rmcp::model::Prompt>, keel_mcp::client::server::PromptsError>>,
    ),
    StartFailure,
>;

/// Start every one of `configs` at once (each within its startup timeout), list its tools
/// (and its prompts when `with_prompts`), stop it; in the order given.
pub(super) fn start_all(
    ctx: &Ctx,
    host: &Host,
    configs: Vec<ServerConfig>,
    with_prompts: bool,
) -> Result<Vec<Started>> {
    let runtime = McpRuntime::start().context("cannot start the MCP runtime")?;
    let sp = host.subprocess(&ctx.home.join("spill").join("mcp"));
    let servers: Vec<Arc<Server>> = configs
        .into_iter()
        .map(|c| {
            let tokens = keel_mcp::auth::TokenStore::new(&ctx.home);
            Arc::new(Server::new(c, sp.clone(), ctx.cwd.clone()).with_oauth(tokens))
        })
        .collect();
    runtime
        .wait(async move {
            let tasks: Vec<_> = servers
                .into_iter()
                .map(|s| {
                    tokio::spawn(async move {
                        let tools = s.start().await?;
                        let prompts = if with_prompts {
                            Some(s.prompts().await)
                        } else {
                            None
                        };
                        s.stop().await;
                        Ok((tools, prompts))
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap_or_else(|e| {
                    Err(StartFailure {
                        reason: format!("the start task failed: {e}"),
                        stderr_tail: String::new(),
                    })
                }));
            }
            out
        })
        .ok_or_else(|| anyhow!("the MCP runtime stopped while the server started"))
}

pub(super) fn failure_text(name: &str, f: &StartFailure) -> String {
    let mut s = format!("MCP server '{name}' could not start: {}", f.reason);
    if !f.stderr_tail.is_empty() {
        s.push_str("\nits stderr ends:\n");
        s.push_str(&f.stderr_tail);
    }
    s
}

/// Why a configured server is not started.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unusable {
    /// A `.mcp.json` server of an untrusted workspace ([`inert`] says why).
    #[error("MCP server '{name}' ({origin}): {why}")]
    Inert {
        name: String,
        origin: String,
        why: String,
    },
    /// Its settings cannot be read.
    #[error("MCP server '{name}' ({origin}): {problem}")]
    Invalid {
        name: String,
        origin: String,
        problem: String,
    },
}

pub(super) fn usable<'e>(host: &Host, e: &'e Entry) -> Result<&'e ServerConfig, Unusable> {
    if let Some(why) = inert(host, e) {
        return Err(Unusable::Inert {
            name: e.name.clone(),
            origin: e.origin.clone(),
            why,
        });
    }
    e.resolved.as_ref().map_err(|p| Unusable::Invalid {
        name: e.name.clone(),
        origin: e.origin.clone(),
        problem: p.message.clone(),
    })
}

/// Why a `.mcp.json` server, or a `[mcp_servers]` table of the project's `.keel/config.toml`,
/// of an untrusted workspace (or of a trusted one whose file changed since it was trusted) is
/// not started (docs/trust.md).
pub(super) fn inert(host: &Host, e: &Entry) -> Option<String> {
    let trust = &host.config().trust;
    let pinned = match &e.source {
        Source::McpJson { .. } => ".mcp.json",
        Source::LeftOut { .. } => ".keel/config.toml",
        Source::Toml { .. } | Source::Bundle { .. } => return None,
    };
    if !trust.is_trusted() {
        return Some(format!(
            "not started: workspace {} is not trusted (keel trust, or --trust-project for one run)",
            trust.root.display()
        ));
    }
    let Some(changed) = trust.changed.iter().find(|c| c.pinned == pinned) else {
        // Trusted and unchanged: a left-out table is one the project may not set at all.
        return matches!(e.source, Source::LeftOut { .. })
            .then(|| format!("not started: {pinned} may not set it (docs/trust.md)"));
    };
    Some(format!(
        "not started: {pinned} changed since you trusted workspace {} ({}; keel trust accepts it)",
        trust.root.display(),
        changed.change
    ))
}

pub(super) fn test(ctx: &Ctx, host: &Host, name: &str, as_json: bool) -> Result<ExitCode> {
    let listing = listing(host, &real_var);
    let e = listing.get(name)?;
    let c = match usable(host, e) {
        Ok(c) => c.clone(),
        Err(problem) => {
            writeln!(std::io::stderr(), "keel: {problem}")?;
            return Ok(ExitCode::from(1));
        }
    };
    if !c.enabled && !as_json {
        writeln!(
            std::io::stderr(),
            "note: '{name}' is disabled (keel run does not start it); testing it anyway"
        )?;
    }
    let began = Instant::now();
    let started = start_all(ctx, host, vec![c.clone()], false)?
        .pop()
        .ok_or_else(|| anyhow!("no outcome"))?;
    let secs = began.elapsed().as_secs_f64();
    let (mut tools, _) = match started {
        Ok(t) => t,
        Err(f) => {
            if as_json {
                let mut out = std::io::stdout().lock();
                serde_json::to_writer_pretty(
                    &mut out,
                    &json!({"server": name, "origin": e.origin, "transport": c.transport.describe(),
                            "started": false, "error": f.reason, "stderrTail": f.stderr_tail}),
                )?;
                writeln!(out)?;
            }
            writeln!(std::io::stderr(), "keel: {}", failure_text(name, &f))?;
            return Ok(ExitCode::from(1));
        }
    };
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut skipped: Vec<Value> = Vec::new();
    let mut allowed = Vec::new();
    for t in tools.iter() {
        if c.allows(&t.name) {
            allowed.push(t);
        } else {
            let why = if c.disabled_tools.iter().any(|d| d == t.name.as_ref()) {
                "listed in disabled_tools"
            } else {
                "not listed in enabled_tools"
            };
            skipped.push(json!({"tool": t.name, "name": null, "reason": why}));
        }
    }
    let names = assign_names(
        &allowed
            .iter()
            .map(|t| (c.name.clone(), t.name.to_string()))
            .collect::<Vec<_>>(),
    );
    let mut offered: Vec<Value> = Vec::new();
    for (t, keel_name) in allowed.into_iter().zip(names) {
        let checked = normalise_schema(&t.input_schema).and_then(|s| {
            keel_tools::schema::check_foreign_schema(&s)
                .map(|()| s)
                .map_err(SchemaError::Unsupported)
        });
        match checked {
            Ok(schema) => offered.push(json!({
                "tool": t.name,
                "name": keel_name,
                "schema_bytes": serde_json::to_vec(&schema)?.len(),
            })),
            Err(why) => {
                skipped.push(json!({"tool": t.name, "name": keel_name, "reason": why.to_string()}))
            }
        }
    }
    let total: u64 = offered
        .iter()
        .filter_map(|t| t["schema_bytes"].as_u64())
        .sum();
    let mut out = std::io::stdout().lock();
    if as_json {
        serde_json::to_writer_pretty(
            &mut out,
            &json!({
                "server": name, "origin": e.origin, "transport": c.transport.describe(),
                "enabled": c.enabled, "started": true, "seconds": secs,
                "tools": offered, "skipped": skipped, "schema_bytes": total,
            }),
        )?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "MCP server '{name}' ({}; from {}) started in {secs:.2} s and listed {} tools",
        c.transport.describe(),
        e.origin,
        tools.len()
    )?;
    let width = offered
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::len))
        .max()
        .unwrap_or(0);
    for t in &offered {
        writeln!(
            out,
            "  {:width$}  {} bytes",
            t["name"].as_str().unwrap_or(""),
            t["schema_bytes"]
        )?;
    }
    if !skipped.is_empty() {
        writeln!(out, "skipped:")?;
        for s in &skipped {
            let tool = s["tool"].as_str().unwrap_or("");
            match s["name"].as_str() {
                Some(n) => writeln!(
                    out,
                    "  {tool} ({n}): {}",
                    s["reason"].as_str().unwrap_or("")
                )?,
                None => writeln!(out, "  {tool}: {}", s["reason"].as_str().unwrap_or(""))?,
            }
        }
    }
    writeln!(
        out,
        "{} offered ({total} schema bytes), {} skipped; stopped",
        offered.len(),
        skipped.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn prompts(
    ctx: &Ctx,
    host: &Host,
    name: Option<&str>,
    as_json: bool,
) -> Result<ExitCode> {
    let listing = listing(host, &real_var);
    let entries: Vec<&Entry> = match name {
        Some(n) => vec![listing.get(n)?],
        None => listing
            .servers
            .values()
            .filter(|e| e.resolved.as_ref().map_or(true, |c| c.enabled))
            .collect(),
    };
    let mut failed = false;
    let mut results: Vec<Value> = Vec::new();
    let mut configs = Vec::new();
    for e in &entries {
        match usable(host, e) {
            Ok(c) => configs.push(c.clone()),
            Err(problem) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: {problem}")?;
                results.push(json!({"server": e.name, "error": problem.to_string()}));
            }
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    let outcomes = if configs.is_empty() {
        Vec::new()
    } else {
        start_all(ctx, host, configs, true)?
    };
    let mut out = std::io::stdout().lock();
    if entries.is_empty() && !as_json {
        writeln!(out, "no enabled MCP servers configured")?;
    }
    for (server, outcome) in names.iter().zip(outcomes) {
        match outcome {
            Err(f) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: {}", failure_text(server, &f))?;
                results.push(
                    json!({"server": server, "error": f.reason, "stderrTail": f.stderr_tail}),
                );
            }
            Ok((_, None)) => {}
            Ok((_, Some(Err(why)))) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: MCP server '{server}': {why}")?;
                results.push(json!({"server": server, "error": why.to_string()}));
            }
            Ok((_, Some(Ok(prompts)))) => {
                if !as_json {
                    print_prompts(&mut out, server, &prompts)?;
                }
                results.push(json!({"server": server, "prompts": prompts}));
            }
        }
    }
    if as_json {
        serde_json::to_writer_pretty(&mut out, &results)?;
        writeln!(out)?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub(super) fn print_prompts(
    out: &mut impl Write,
    server: &str,
    prompts: &[rmcp::model::Prompt],
) -> Result<()> {
    match prompts.len() {
        0 => writeln!(out, "{server}: no prompts")?,
        1 => writeln!(out, "{server}: 1 prompt")?,
        n => writeln!(out, "{server}: {n} prompts")?,
    }
    for p in prompts {
        match p.description.as_deref().filter(|d| !d.is_empty()) {
            Some(d) => writeln!(out, "  {}  {d}", p.name)?,
            None => writeln!(out, "  {}", p.name)?,
        }
        for a in p.arguments.iter().flatten() {
            let required = if a.required == Some(true) {
                " (required)"
            } else {
                ""
            };
            match a.description.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => writeln!(out, "      {}{required}  {d}", a.name)?,
                None => writeln!(out, "      {}{required}", a.name)?,
            }
        }
    }
    Ok(())
}
