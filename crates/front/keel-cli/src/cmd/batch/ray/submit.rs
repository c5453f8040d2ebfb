//! A task's Ray job: its package (workspace, [`Spec`], the session it resumes, the user's
//! configuration) uploaded, keel's binary shipped once per batch as a content-addressed
//! package (unless `--keel-on-nodes`), and the job submitted with its entrypoint and
//! environment.

use super::{Reader, Shared};
use crate::cmd::batch::engine::Attempt;
use crate::cmd::batch::job::{LINE, Spec, hex_sha256};
use crate::cmd::batch::pack::Pack;
use serde_json::{Value, json};
use sha2::Digest as _;
use std::sync::Arc;

/// Package the task and submit its job; returns the submission id.
pub(super) async fn submit(
    shared: &Arc<Shared>,
    attempt: &Attempt,
    resume: Option<&str>,
    prompt: &str,
    reader: &mut Reader,
) -> Result<String, String> {
    let opts = &shared.opts;
    let binary = match &opts.keel_on_nodes {
        Some(_) => None,
        None => Some(binary_package(shared).await?),
    };
    let session_file = match resume {
        Some(id) => Some(reader.mirror.repaired(id)?),
        None => None,
    };
    let mut args = opts.common.clone();
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
    let data = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
        let mut pack = Pack::new(1);
        pack.tree(&workspace, "ws")?;
        let spec = serde_json::to_vec_pretty(&spec).map_err(|e| e.to_string())?;
        pack.file("job/spec.json", 0o644, &spec)?;
        // The submission id makes each job's package its own: Ray reuses an unpacked
        // working directory for the same package, and a job changes its directory.
        pack.file("job/submission", 0o644, job_id.as_bytes())?;
        if let Some(file) = &session_file {
            let data = std::fs::read(file)
                .map_err(|e| format!("cannot read the session {}: {e}", file.display()))?;
            pack.file("job/session.jsonl", 0o644, &data)?;
        }
        for (rel, data) in &home_files {
            pack.file(&format!("job/home/{rel}"), 0o600, data)?;
        }
        pack.finish()
    })
    .await
    .map_err(|e| format!("packaging the task failed: {e}"))??;
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
        (None, None) => return Err("no keel binary for the nodes".into()),
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
async fn binary_package(shared: &Arc<Shared>) -> Result<String, String> {
    shared
        .binary
        .get_or_try_init(|| async {
            // Hashed and zipped as a stream: the binary (hundreds of MB with debug line
            // tables) is never held in memory, only its zip while it is uploaded.
            let exe = shared.opts.exe.clone();
            let open = move || {
                std::fs::File::open(&exe)
                    .map_err(|e| format!("cannot read the keel binary {}: {e}", exe.display()))
            };
            let hashed = open.clone();
            let name = tokio::task::spawn_blocking(move || {
                let mut hasher = sha2::Sha256::new();
                std::io::copy(&mut hashed()?, &mut hasher)
                    .map_err(|e| format!("cannot read the keel binary: {e}"))?;
                let digest = hex::encode(hasher.finalize());
                Ok::<_, String>(format!("_ray_pkg_keel_bin_{}.zip", &digest[..32]))
            })
            .await
            .map_err(|e| e.to_string())??;
            if !shared.api.package_exists(&name).await? {
                let data = tokio::task::spawn_blocking(move || {
                    let mut pack = Pack::new(1);
                    pack.copy("keel", 0o755, &mut open()?)?;
                    pack.finish()
                })
                .await
                .map_err(|e| e.to_string())??;
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
