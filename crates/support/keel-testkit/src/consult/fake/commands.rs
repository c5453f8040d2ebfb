//! The subcommands that work on jobs: `delegate`, `review`, `status`, `wait`, `result`,
//! `logs`, `cancel`, `steer`, `events`, `report`, `chain`.

use super::*;

pub(super) struct Submission {
    kind: &'static str,
    label: Option<String>,
    profile: Option<String>,
    mode: String,
    confinement: String,
    prompt: String,
    model: Option<String>,
    effort: Option<String>,
    after: Vec<String>,
    isolated: bool,
    final_text: Option<String>,
}

pub(super) fn submit(store: &Store, sub: Submission) -> Result<String, Fail> {
    let now = now_ms();
    let run_ms = var_u64("RUN_MS", 0)?;
    let final_status = var("STATUS").unwrap_or_else(|| "completed".to_owned());
    let error_message = var("ERROR_MESSAGE");
    let stop_reason = var("STOP_REASON").unwrap_or_else(|| "end_turn".to_owned());
    let touched = var_list("TOUCHED_FILES");
    let log_lines = var_u64("LOG_LINES", 3)?;
    let log_every_ms = var_u64("LOG_EVERY_MS", 0)?;
    let events = scripted_events(now)?;
    let host_session = std::env::var("CONSULT_HOST_SESSION_ID").ok();
    let parent = std::env::var("CONSULT_JOB_ID").ok();
    let dir = store.dir.clone();
    store.update(move |state| {
        for id in &sub.after {
            find(state, id)?;
        }
        state.next_job += 1;
        let id = format!("job-{}", state.next_job);
        let (chain_id, parent_job_id, depth) = match parent.and_then(|p| {
            state
                .jobs
                .iter()
                .find(|j| j.id == p)
                .map(|j| (j.chain_id.clone(), j.id.clone(), j.depth + 1))
        }) {
            Some((chain, parent, depth)) => (chain, Some(parent), depth),
            None => {
                state.next_chain += 1;
                (format!("chain-{}", state.next_chain), None, 0)
            }
        };
        let log_path = dir.join("logs").join(format!("{id}.log"));
        let lines: String = (1..=log_lines)
            .map(|i| format!("[{id}] log line {i}\n"))
            .collect();
        let _ = fs::create_dir_all(dir.join("logs"));
        let _ = fs::write(&log_path, lines);
        let patch_path = (sub.isolated && sub.mode == "write").then(|| {
            let path = dir.join("patches").join(format!("{id}.patch"));
            let _ = fs::create_dir_all(dir.join("patches"));
            let _ = fs::write(
                &path,
                "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n",
            );
            path.display().to_string()
        });
        let final_text = sub
            .final_text
            .or_else(|| var("FINAL_TEXT"))
            .or_else(|| Some(format!("Done: {}", sub.prompt)));
        state.jobs.push(Job {
            id: id.clone(),
            label: sub.label,
            kind: sub.kind.to_owned(),
            profile: sub.profile,
            mode: sub.mode,
            confinement: sub.confinement,
            prompt: sub.prompt,
            model: sub.model,
            effort: sub.effort,
            after: sub.after,
            host_session_id: host_session,
            submitted_ms: now,
            run_ms,
            final_status,
            cancelled_ms: None,
            final_text,
            error_message,
            stop_reason,
            touched_files: touched,
            log_lines,
            log_every_ms,
            log_path: Some(log_path.display().to_string()),
            patch_path,
            events,
            steers: Vec::new(),
            chain_id,
            parent_job_id,
            depth,
        });
        Ok(id)
    })
}

pub(super) fn print_envelope(store: &Store, sub: &str, id: &str) -> Result<(), Fail> {
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    emit(sub, &envelope(schema()?, &state, job, now_ms()))
}

pub(super) fn delegate(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &["agent", "sandbox", "model", "effort", "label", "after"],
        &["background", "json", "read-only", "write", "isolated"],
    )?;
    if !a.positional.is_empty() {
        return Err(usage(format!(
            "consult delegate: unexpected argument {:?} (the prompt goes after --)",
            a.positional[0]
        )));
    }
    let prompt = a.rest.join(" ");
    if prompt.trim().is_empty() {
        return Err(usage("consult delegate: missing prompt"));
    }
    if let Some(label) = a.value("label") {
        let n = label.chars().count();
        if n == 0 || n > 80 {
            return Err(usage("consult delegate: --label must be 1-80 characters"));
        }
    }
    if let Some(agent) = a.value("agent")
        && !agent_names().iter().any(|n| n == agent)
    {
        return Err(usage(format!("unknown agent: {agent}")));
    }
    let id = submit(
        store,
        Submission {
            kind: "task",
            label: a.value("label").map(str::to_owned),
            profile: Some(
                a.value("agent")
                    .map(str::to_owned)
                    .unwrap_or_else(|| agent_names().first().cloned().unwrap_or_default()),
            ),
            mode: a.mode()?.to_owned(),
            confinement: a.sandbox()?,
            prompt,
            model: a.value("model").map(str::to_owned),
            effort: a.value("effort").map(str::to_owned),
            after: a.values.get("after").cloned().unwrap_or_default(),
            isolated: a.flag("isolated"),
            final_text: None,
        },
    )?;
    if !a.flag("background") {
        wait_terminal(store, std::slice::from_ref(&id))?;
    }
    print_envelope(store, "delegate", &id)
}

pub(super) fn review(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &[
            "agent", "base", "job", "sandbox", "model", "effort", "label",
        ],
        &["json"],
    )?;
    if a.value("base").is_some() && a.value("job").is_some() {
        return Err(usage("--base and --job are exclusive"));
    }
    if let Some(job) = a.value("job") {
        find(&store.snapshot()?, job)?;
    }
    let target = a
        .value("job")
        .map(|j| format!("job {j}"))
        .or_else(|| a.value("base").map(|b| format!("changes since {b}")))
        .unwrap_or_else(|| "the working tree".to_owned());
    let text = var("REVIEW_TEXT")
        .unwrap_or_else(|| format!("Findings for {target}:\n1. [minor] no blocking issues found."));
    let id = submit(
        store,
        Submission {
            kind: "review",
            label: a.value("label").map(str::to_owned),
            profile: a.value("agent").map(str::to_owned),
            mode: "read-only".to_owned(),
            confinement: a.sandbox()?,
            prompt: format!("review {target}"),
            model: a.value("model").map(str::to_owned),
            effort: a.value("effort").map(str::to_owned),
            after: Vec::new(),
            isolated: false,
            final_text: Some(text),
        },
    )?;
    // consult has no queued review: it blocks until the review is done.
    wait_terminal(store, std::slice::from_ref(&id))?;
    print_envelope(store, "review", &id)
}

pub(super) fn status(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json", "all"])?;
    let state = store.snapshot()?;
    let now = now_ms();
    let session = std::env::var("CONSULT_HOST_SESSION_ID").ok();
    let jobs: Vec<Value> = match a.positional.as_slice() {
        [id] => vec![find(&state, id)?.object(now)],
        [] => state
            .jobs
            .iter()
            .filter(|j| a.flag("all") || session.is_none() || j.host_session_id == session)
            .map(|j| j.object(now))
            .collect(),
        _ => return Err(usage("consult status: too many arguments")),
    };
    emit("status", &json!({"schemaVersion": schema()?, "jobs": jobs}))
}

/// Blocks until every job is terminal, or exits 4 after `FAKE_CONSULT_WAIT_LIMIT_MS`.
pub(super) fn wait_terminal(store: &Store, ids: &[String]) -> Result<(), Fail> {
    let limit = var_u64("WAIT_LIMIT_MS", 60_000)?;
    let start = Instant::now();
    loop {
        let state = store.snapshot()?;
        let now = now_ms();
        let mut all = true;
        for id in ids {
            all &= is_terminal(&find(&state, id)?.status(now));
        }
        if all {
            return Ok(());
        }
        if start.elapsed() >= Duration::from_millis(limit) {
            return Err(fail(4, "consult wait: timed out"));
        }
        sleep_ms(20);
    }
}

pub(super) fn wait(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["timeout"], &["json", "keep-running"])?;
    if a.positional.is_empty() {
        return Err(usage("consult wait: missing job id"));
    }
    wait_terminal(store, &a.positional)?;
    let state = store.snapshot()?;
    let now = now_ms();
    let mut jobs = Vec::new();
    for id in &a.positional {
        jobs.push(find(&state, id)?.object(now));
    }
    emit("wait", &json!({"schemaVersion": schema()?, "jobs": jobs}))
}

pub(super) fn result(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let id = a.one_id("result")?;
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    let now = now_ms();
    let status = job.status(now);
    if !is_terminal(&status) {
        return Err(fail(
            5,
            format!("consult result: job {id} is not final ({status})"),
        ));
    }
    emit("result", &envelope(schema()?, &state, job, now))?;
    if status == "failed" {
        return Err(fail(6, format!("consult result: job {id} failed")));
    }
    Ok(())
}

pub(super) fn logs(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["tail"], &[])?;
    let id = a.one_id("logs")?;
    let tail = match a.value("tail") {
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| usage(format!("--tail: {t:?} is not a number")))?,
        ),
        None => None,
    };
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    let elapsed = now_ms().saturating_sub(job.submitted_ms);
    // One line at submission, one more every LOG_EVERY_MS, up to LOG_LINES.
    let available = elapsed
        .checked_div(job.log_every_ms)
        .map_or(job.log_lines, |steps| (steps + 1).min(job.log_lines));
    let first = tail.map_or(1, |t| available.saturating_sub(t) + 1);
    let text: String = (first..=available)
        .map(|i| format!("[{id}] log line {i}\n"))
        .collect();
    write_stdout(&text)
}

pub(super) fn cancel(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let id = a.one_id("cancel")?.to_owned();
    let now = now_ms();
    let cancelled = store.update(|state| {
        let job = find_mut(state, &id)?;
        if is_terminal(&job.status(now)) {
            return Ok(false);
        }
        job.cancelled_ms = Some(now);
        Ok(true)
    })?;
    let line = if cancelled {
        format!("cancelled {id}\n")
    } else {
        format!("{id} is already final\n")
    };
    write_stdout(&line)
}

pub(super) fn steer(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["message"], &["json"])?;
    let id = a.one_id("steer")?.to_owned();
    let message = a
        .value("message")
        .ok_or_else(|| usage("consult steer: --message is required"))?
        .to_owned();
    let now = now_ms();
    store.update(|state| {
        let job = find_mut(state, &id)?;
        let status = job.status(now);
        if is_terminal(&status) {
            return Err(fail(
                5,
                format!("consult steer: job {id} is final ({status})"),
            ));
        }
        let seq = job.events.len() as u64 + 1;
        job.events.push(make_event(
            seq,
            now,
            &json!({"type": "steer", "urgency": "info", "message": message}),
        ));
        job.steers.push(message);
        Ok(())
    })?;
    write_stdout(&format!("steer accepted for {id}\n"))
}

pub(super) fn events(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["since"], &["json", "follow"])?;
    let id = a.one_id("events")?.to_owned();
    let since = match a.value("since") {
        Some(s) => s
            .parse::<u64>()
            .map_err(|_| usage(format!("--since: {s:?} is not a number")))?,
        None => 0,
    };
    let schema = schema()?;
    let seq_of = |e: &Value| e.get("seq").and_then(Value::as_u64).unwrap_or(0);
    if !a.flag("follow") {
        let state = store.snapshot()?;
        let job = find(&state, &id)?;
        let events: Vec<&Value> = job.events.iter().filter(|e| seq_of(e) > since).collect();
        return emit(
            "events",
            &json!({"schemaVersion": schema, "jobId": id, "events": events}),
        );
    }
    let follow_n = store.count("events-follow")?;
    let die_after = var("FOLLOW_DIE_AFTER")
        .map(|_| var_u64("FOLLOW_DIE_AFTER", 0))
        .transpose()?;
    let die_times = var("FOLLOW_DIE_TIMES")
        .map(|_| var_u64("FOLLOW_DIE_TIMES", 0))
        .transpose()?;
    let die_after = die_after.filter(|_| die_times.is_none_or(|t| follow_n <= t));
    let step = var_u64("EVENT_STEP_MS", 0)?;
    let limit = Duration::from_millis(var_u64("FOLLOW_LIMIT_MS", 60_000)?);
    let start = Instant::now();
    let mut last = since;
    let mut emitted = 0u64;
    loop {
        let state = store.snapshot()?;
        let job = find(&state, &id)?;
        let terminal = is_terminal(&job.status(now_ms()));
        let pending: Vec<Value> = job
            .events
            .iter()
            .filter(|e| seq_of(e) > last)
            .cloned()
            .collect();
        if pending.is_empty() && terminal {
            return Ok(());
        }
        for event in pending {
            sleep_ms(step);
            last = seq_of(&event);
            let line = json!({"schemaVersion": schema, "jobId": id, "event": event});
            if var_list("BAD_JSON")
                .iter()
                .any(|s| s == "events" || s == "all")
            {
                write_stdout("{\"event\": <<not json>>\n")?;
            } else {
                write_stdout(&format!("{line}\n"))?;
            }
            emitted += 1;
            if die_after.is_some_and(|n| emitted >= n) {
                return Err(fail(4, "consult events: follow stream lost"));
            }
        }
        if start.elapsed() >= limit {
            return Err(fail(4, "consult events: follow timed out"));
        }
        sleep_ms(20);
    }
}

pub(super) fn report(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &["type", "message", "urgency", "data", "data-file"],
        &["json"],
    )?;
    let id = match a.positional.as_slice() {
        [id] => id.clone(),
        [] => std::env::var("CONSULT_JOB_ID")
            .map_err(|_| usage("consult report: no job id (argument or CONSULT_JOB_ID)"))?,
        _ => return Err(usage("consult report: too many arguments")),
    };
    let kind = a.value("type").unwrap_or("progress").to_owned();
    if !REPORT_TYPES.contains(&kind.as_str()) {
        return Err(usage(format!("unknown report type: {kind}")));
    }
    let urgency = a
        .value("urgency")
        .unwrap_or(default_urgency(&kind))
        .to_owned();
    if !matches!(urgency.as_str(), "wake" | "info") {
        return Err(usage(format!("unknown urgency: {urgency}")));
    }
    let message = a
        .value("message")
        .ok_or_else(|| usage("consult report: --message is required"))?
        .to_owned();
    // `--data-file` (a test convenience: argv strings are limited to 128 KiB) reads the JSON
    // from a file.
    let from_file = match a.value("data-file") {
        Some(path) => {
            Some(fs::read_to_string(path).map_err(|e| usage(format!("--data-file {path}: {e}")))?)
        }
        None => None,
    };
    let data = match from_file.as_deref().or(a.value("data")) {
        Some(raw) => Some(
            serde_json::from_str::<Value>(raw)
                .map_err(|e| usage(format!("--data is not JSON: {e}")))?,
        ),
        None => None,
    };
    let now = now_ms();
    let seq = store.update(|state| {
        let job = find_mut(state, &id)?;
        let seq = job.events.len() as u64 + 1;
        let mut spec = json!({"type": kind, "urgency": urgency, "message": message});
        if let (Some(data), Some(obj)) = (data, spec.as_object_mut()) {
            obj.insert("data".to_owned(), data);
        }
        job.events.push(make_event(seq, now, &spec));
        Ok(seq)
    })?;
    emit(
        "report",
        &json!({"schemaVersion": schema()?, "jobId": id, "seq": seq}),
    )
}

pub(super) fn chain(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let state = store.snapshot()?;
    let now = now_ms();
    let wanted = match a.positional.as_slice() {
        [id] => Some(find(&state, id)?.chain_id.clone()),
        [] => std::env::var("CONSULT_JOB_ID")
            .ok()
            .and_then(|id| find(&state, &id).ok().map(|j| j.chain_id.clone())),
        _ => return Err(usage("consult chain: too many arguments")),
    };
    let mut chains: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for job in &state.jobs {
        if wanted.as_deref().is_none_or(|w| w == job.chain_id) {
            chains.entry(&job.chain_id).or_default().push(json!({
                "id": job.id,
                "status": job.status(now),
                "parentJobId": job.parent_job_id,
                "delegationDepth": job.depth,
            }));
        }
    }
    let chains: Vec<Value> = chains
        .into_iter()
        .map(|(chain, jobs)| json!({"chainId": chain, "jobs": jobs}))
        .collect();
    emit(
        "chain",
        &json!({"schemaVersion": schema()?, "chains": chains}),
    )
}
