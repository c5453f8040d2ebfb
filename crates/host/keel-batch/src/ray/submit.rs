//! A task's Ray job: its package (workspace, [`Spec`], the session it resumes, the user's
//! configuration) uploaded, keel's binary shipped once per batch as a content-addressed
//! package (unless `--keel-on-nodes`), and the job submitted with its entrypoint and
//! environment.

use super::api::ApiError;
use super::reader::MirrorError;
use super::{Reader, Shared};
use crate::engine::Attempt;
use crate::job::{LINE, Spec, hex_sha256};
use crate::pack::{Pack, PackError};
use serde_json::{Value, json};
use sha2::Digest as _;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a task's job could not be submitted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The cluster failed or refused.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The task's package or the binary's could not be made.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// The session to resume could not be made ready.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// The keel binary to ship could not be read.
    #[error("cannot read the keel binary {}: {error}", path.display())]
    Binary {
        /// The binary.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Hashing or zipping the keel binary stopped (its thread panicked or was cancelled).
    #[error("shipping the keel binary failed: {error}")]
    Shipping {
        /// What the runtime said.
        error: tokio::task::JoinError,
    },
    /// The job's spec could not be written.
    #[error("cannot write the job spec of task {task}: {error}")]
    Spec {
        /// The task's id.
        task: String,
        /// What the serializer said.
        error: serde_json::Error,
    },
    /// The session to resume could not be read.
    #[error("cannot read the session {}: {error}", path.display())]
    Session {
        /// Its file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Packaging the task stopped (its thread panicked or was cancelled).
    #[error("packaging the task failed: {error}")]
    Packaging {
        /// What the runtime said.
        error: tokio::task::JoinError,
    },
    /// Neither `--keel-on-nodes` nor a shipped binary.
    #[error("no keel binary for the nodes")]
    NoBinary,
}

/// Package the task and submit its job; returns the submission id. Without a prompt the
/// job runs only the task's check, in its workspace.
pub(super) async fn submit(
    shared: &Arc<Shared>,
    attempt: &Attempt,
    resume: Option<&str>,
    prompt: Option<&str>,
    reader: &mut Reader,
) -> Result<String, SubmitError> {
    let opts = &shared.opts;
    let binary = match &opts.keel_on_nodes {
        Some(_) => None,
        None => Some(binary_package(shared).await?),
    };
    let session_file = match (prompt, resume) {
        (Some(_), Some(id)) => Some(reader.mirror.repaired(id)?),
        _ => None,
    };
    let mut args = Vec::new();
    if let Some(prompt) = prompt {
        args.extend(opts.common.iter().cloned());
        if let Some(model) = &attempt.model {
            args.push("--model".into());
            args.push(model.clone());
        }
        args.extend(attempt.flags.iter().cloned());
        match resume {
            None => args.extend(["run".into(), "--json".into(), prompt.to_owned()]),
            Some(id) => args.extend([
                "resume".into(),
                "--json".into(),
                id.to_owned(),
                prompt.to_owned(),
            ]),
        }
    }
    let task = attempt.id.clone();
    let job = format!(
        "keel-{task}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let spec = Spec {
        task: task.clone(),
        args,
        import: session_file
            .as_ref()
            .map(|_| "job/session.jsonl".to_owned()),
        check: attempt.check.clone(),
        check_timeout: opts.check_timeout.as_secs(),
    };
    let workspace = attempt.workspace.clone();
    let home_files = opts.home_files.clone();
    let job_id = job.clone();
    let data = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, SubmitError> {
        let mut pack = Pack::new(1);
        pack.tree(&workspace, "ws")?;
        let spec = serde_json::to_vec_pretty(&spec).map_err(|error| SubmitError::Spec {
            task: spec.task.clone(),
            error,
        })?;
        pack.file("job/spec.json", 0o644, &spec)?;
        // The submission id makes each job's package its own: Ray reuses an unpacked
        // working directory for the same package, and a job changes its directory.
        pack.file("job/submission", 0o644, job_id.as_bytes())?;
        if let Some(file) = &session_file {
            let data = std::fs::read(file).map_err(|error| SubmitError::Session {
                path: file.clone(),
                error,
            })?;
            pack.file("job/session.jsonl", 0o644, &data)?;
        }
        for (rel, data) in &home_files {
            pack.file(&format!("job/home/{rel}"), 0o600, data)?;
        }
        Ok(pack.finish()?)
    })
    .await
    .map_err(|error| SubmitError::Packaging { error })??;
    let name = format!("_ray_pkg_keel_task_{}.zip", &hex_sha256(&data)[..32]);
    shared.api.upload(&name, data).await?;
    let mut env: serde_json::Map<String, Value> = opts
        .env
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    // A stop is SIGINT (keel's Ctrl-C: the turn ends and is logged) with time to finish.
    env.insert("RAY_JOB_STOP_SIGNAL".into(), json!("SIGINT"));
    env.insert("RAY_JOB_STOP_WAIT_TIME_S".into(), json!("30"));
    let mut runtime_env = json!({"working_dir": format!("gcs://{name}"), "env_vars": env});
    let entrypoint = match (&binary, &opts.keel_on_nodes) {
        (_, Some(path)) => format!("exec {} batch-job job/spec.json", shell_quote(path)),
        (Some(uri), None) => {
            runtime_env["py_modules"] = json!([uri]);
            format!(
                "k=; for d in $(printf %s \"$PYTHONPATH\" | tr : ' '); do if [ -x \"$d/keel\" ]; \
                 then k=\"$d/keel\"; break; fi; done; if [ -z \"$k\" ]; then echo \
                 '{{\"{LINE}\":\"error\",\"message\":\"the shipped keel binary is not among the \
                 py_modules of the job\"}}'; exit 1; fi; exec \"$k\" batch-job job/spec.json"
            )
        }
        (None, None) => return Err(SubmitError::NoBinary),
    };
    let body = json!({
        "entrypoint": entrypoint,
        "submission_id": job,
        "entrypoint_num_cpus": opts.cpus,
        "runtime_env": runtime_env,
        "metadata": {"keel_task": task},
    });
    shared.api.submit(&body).await?;
    Ok(job)
}

/// The shipped binary's `gcs://` URI, uploading it the first time (named by its hash, so a
/// cluster that already has this binary gets nothing).
async fn binary_package(shared: &Arc<Shared>) -> Result<String, SubmitError> {
    shared
        .binary
        .get_or_try_init(|| async {
            // Hashed and zipped as a stream: the binary (hundreds of MB with debug line
            // tables) is never held in memory, only its zip while it is uploaded.
            let exe = shared.opts.exe.clone();
            let unreadable = {
                let exe = exe.clone();
                move |error| SubmitError::Binary {
                    path: exe.clone(),
                    error,
                }
            };
            let open = {
                let unreadable = unreadable.clone();
                move || std::fs::File::open(&exe).map_err(unreadable.clone())
            };
            let hashed = open.clone();
            let name = tokio::task::spawn_blocking(move || {
                let mut hasher = sha2::Sha256::new();
                std::io::copy(&mut hashed()?, &mut hasher).map_err(unreadable)?;
                let digest = hex::encode(hasher.finalize());
                Ok::<_, SubmitError>(format!("_ray_pkg_keel_bin_{}.zip", &digest[..32]))
            })
            .await
            .map_err(|error| SubmitError::Shipping { error })??;
            if !shared.api.package_exists(&name).await? {
                let data = tokio::task::spawn_blocking(move || {
                    let mut pack = Pack::new(1);
                    pack.copy("keel", 0o755, &mut open()?)?;
                    Ok::<_, SubmitError>(pack.finish()?)
                })
                .await
                .map_err(|error| SubmitError::Shipping { error })??;
                shared.api.upload(&name, data).await?;
            }
            Ok(format!("gcs://{name}"))
        })
        .await
        .cloned()
}

/// `'…'` for sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
