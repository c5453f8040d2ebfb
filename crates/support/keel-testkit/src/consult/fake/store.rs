//! The fake's state: its jobs, their envelopes, and the state file under a lock.

use super::*;

/// Everything the fake remembers between invocations: one JSON file in the state directory.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
pub(super) struct State {
    pub(super) counters: BTreeMap<String, u64>,
    pub(super) next_job: u64,
    pub(super) next_chain: u64,
    pub(super) jobs: Vec<Job>,
}

/// One job, with the scenario captured when it was submitted.
#[derive(Serialize, Deserialize, Default, Clone)]
#[serde(default)]
pub(super) struct Job {
    pub(super) id: String,
    pub(super) label: Option<String>,
    pub(super) kind: String,
    pub(super) profile: Option<String>,
    pub(super) mode: String,
    pub(super) confinement: String,
    pub(super) prompt: String,
    pub(super) model: Option<String>,
    pub(super) effort: Option<String>,
    pub(super) after: Vec<String>,
    pub(super) host_session_id: Option<String>,
    pub(super) submitted_ms: u64,
    pub(super) run_ms: u64,
    pub(super) final_status: String,
    pub(super) cancelled_ms: Option<u64>,
    pub(super) final_text: Option<String>,
    pub(super) error_message: Option<String>,
    pub(super) stop_reason: String,
    pub(super) touched_files: Vec<String>,
    pub(super) log_lines: u64,
    pub(super) log_every_ms: u64,
    pub(super) log_path: Option<String>,
    pub(super) patch_path: Option<String>,
    pub(super) events: Vec<Value>,
    pub(super) steers: Vec<String>,
    pub(super) chain_id: String,
    pub(super) parent_job_id: Option<String>,
    pub(super) depth: u64,
}

impl Job {
    pub(super) fn status(&self, now: u64) -> String {
        if self.cancelled_ms.is_some() {
            "cancelled".to_owned()
        } else if now < self.submitted_ms.saturating_add(self.run_ms) {
            "running".to_owned()
        } else {
            self.final_status.clone()
        }
    }

    pub(super) fn completed_ms(&self, now: u64) -> Option<u64> {
        if let Some(at) = self.cancelled_ms {
            return Some(at);
        }
        let done = self.submitted_ms.saturating_add(self.run_ms);
        let status = self.status(now);
        (is_terminal(&status) && now >= done).then_some(done)
    }

    pub(super) fn object(&self, now: u64) -> Value {
        json!({
            "id": self.id,
            "label": self.label,
            "kind": self.kind,
            "status": self.status(now),
            "profile": self.profile,
            "authority": {"mode": self.mode, "confinement": self.confinement},
            "prompt": self.prompt,
            "submittedAt": rfc3339(self.submitted_ms),
            "startedAt": rfc3339(self.submitted_ms),
            "completedAt": self.completed_ms(now).map(rfc3339),
            "model": self.model,
            "effort": self.effort,
            "afterJobIds": self.after,
            "hostSessionId": self.host_session_id,
        })
    }
}

pub(super) fn is_terminal(status: &str) -> bool {
    !matches!(status, "queued" | "running")
}

/// The job result v1 envelope.
pub(super) fn envelope(schema: u64, state: &State, job: &Job, now: u64) -> Value {
    let status = job.status(now);
    let terminal = is_terminal(&status);
    let children: Vec<&str> = state
        .jobs
        .iter()
        .filter(|j| j.parent_job_id.as_deref() == Some(job.id.as_str()))
        .map(|j| j.id.as_str())
        .collect();
    let error_message = match status.as_str() {
        "failed" => Some(
            job.error_message
                .clone()
                .unwrap_or_else(|| "the delegate failed".to_owned()),
        ),
        _ => job.error_message.clone().filter(|_| terminal),
    };
    json!({
        "schemaVersion": schema,
        "job": job.object(now),
        "outcome": {
            "stopReason": terminal.then(|| match status.as_str() {
                "cancelled" => "cancelled".to_owned(),
                "failed" => "error".to_owned(),
                _ => job.stop_reason.clone(),
            }),
            "sessionId": format!("sess-{}", job.id),
            "errorMessage": error_message,
            "finalText": if terminal && status != "cancelled" { job.final_text.clone() } else { None },
        },
        "artifacts": {
            "touchedFiles": job.touched_files,
            "logPath": job.log_path,
            "patchPath": job.patch_path,
        },
        "lineage": {
            "chainId": job.chain_id,
            "parentJobId": job.parent_job_id,
            "childJobIds": children,
            "delegationDepth": job.depth,
        },
    })
}

pub(super) struct Store {
    pub(super) dir: PathBuf,
}

/// Removes the lock file when the critical section ends.
pub(super) struct Lock(PathBuf);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

impl Store {
    pub(super) fn open() -> Result<Self, Fail> {
        let dir = var("STATE_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| fail(1, "consult (fake): FAKE_CONSULT_STATE_DIR is not set"))?;
        fs::create_dir_all(&dir).map_err(|e| {
            fail(
                1,
                format!("consult (fake): state dir {}: {e}", dir.display()),
            )
        })?;
        Ok(Self { dir })
    }

    pub(super) fn lock(&self) -> Result<Lock, Fail> {
        let path = self.dir.join("state.lock");
        let start = Instant::now();
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Ok(Lock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // A holder killed mid-section leaves the file behind; sections are tiny.
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|m| m.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(5));
                    if stale {
                        let _ = fs::remove_file(&path);
                    } else if start.elapsed() > Duration::from_secs(20) {
                        return Err(fail(1, "consult (fake): state lock timeout"));
                    } else {
                        sleep_ms(2);
                    }
                }
                Err(e) => return Err(fail(1, format!("consult (fake): lock: {e}"))),
            }
        }
    }

    pub(super) fn read(&self) -> Result<State, Fail> {
        let path = self.dir.join("state.json");
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| fail(1, format!("consult (fake): corrupt state: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(fail(1, format!("consult (fake): state: {e}"))),
        }
    }

    pub(super) fn write(&self, state: &State) -> Result<(), Fail> {
        let text = serde_json::to_string_pretty(state)
            .map_err(|e| fail(1, format!("consult (fake): state: {e}")))?;
        let tmp = self.dir.join(format!("state.json.{}", std::process::id()));
        fs::write(&tmp, text)
            .and_then(|()| fs::rename(&tmp, self.dir.join("state.json")))
            .map_err(|e| fail(1, format!("consult (fake): state: {e}")))
    }

    /// Reads, changes and writes the state under the lock.
    pub(super) fn update<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let _lock = self.lock()?;
        let mut state = self.read()?;
        let out = f(&mut state)?;
        self.write(&state)?;
        Ok(out)
    }

    pub(super) fn snapshot(&self) -> Result<State, Fail> {
        let _lock = self.lock()?;
        self.read()
    }

    pub(super) fn count(&self, name: &str) -> Result<u64, Fail> {
        self.update(|s| {
            let n = s.counters.entry(name.to_owned()).or_insert(0);
            *n += 1;
            Ok(*n)
        })
    }
}

pub(super) fn find<'a>(state: &'a State, id: &str) -> Result<&'a Job, Fail> {
    state
        .jobs
        .iter()
        .find(|j| j.id == id)
        .ok_or_else(|| not_found(id))
}

pub(super) fn find_mut<'a>(state: &'a mut State, id: &str) -> Result<&'a mut Job, Fail> {
    state
        .jobs
        .iter_mut()
        .find(|j| j.id == id)
        .ok_or_else(|| not_found(id))
}

// ---------------------------------------------------------------------------------------------
// Arguments
