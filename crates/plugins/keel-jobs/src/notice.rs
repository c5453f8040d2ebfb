//! [`JobNotice`]: the model-visible message that tells an owner one of its background jobs
//! finished. A user message with plugin source `keel/jobs` (so it is never mistaken for the
//! human), capped in size: the job's state and the last part of its output.

use keel_protocol::{ContentBlock, KnownSource, Message, MessageSource, Role};
use keel_tools::JobOutput;
use serde_json::{Map, json};

/// Bytes of a job's output tail quoted in its notice.
pub const NOTICE_OUTPUT_CAP: usize = 1_500;

/// A finished job, as announced to its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNotice {
    id: String,
    kind: String,
    description: String,
    status: &'static str,
    summary: String,
    output_bytes: u64,
    tail: String,
}

impl JobNotice {
    /// The notice for a settled job.
    pub fn new(job: &JobOutput) -> Self {
        let text = job.text.as_str();
        let cut = text.ceil_char_boundary(text.len().saturating_sub(NOTICE_OUTPUT_CAP));
        JobNotice {
            id: job.info.id.clone(),
            kind: job.info.kind.clone(),
            description: job.info.description.clone(),
            status: job.info.status.as_str(),
            summary: job.info.summary.clone().unwrap_or_default(),
            output_bytes: job.info.output_bytes,
            tail: text[cut..].to_owned(),
        }
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let mut out = format!(
            "Background job {} ({}: {}) finished: {}",
            self.id, self.kind, self.description, self.status
        );
        if !self.summary.is_empty() && self.summary != self.status {
            out.push_str(&format!(" ({})", self.summary));
        }
        out.push('.');
        if self.tail.is_empty() {
            out.push_str("\nIt produced no output.");
        } else {
            let shown = self.tail.len() as u64;
            if shown < self.output_bytes {
                out.push_str(&format!(
                    "\nLast {shown} of {} bytes of output:\n",
                    self.output_bytes
                ));
            } else {
                out.push_str("\nOutput:\n");
            }
            out.push_str(&self.tail);
            if shown < self.output_bytes {
                out.push_str(&format!(
                    "\n(more with job_output {{\"job_id\":\"{}\"}})",
                    self.id
                ));
            }
        }
        out
    }

    /// The notice as a user message with source `{"kind":"plugin","plugin":"keel/jobs"}`.
    pub fn message(&self) -> Message {
        notice_message(&self.id, self.status, self.render())
    }

    /// A running job's interim notice (a continuable subagent's answer or report): `text`
    /// as the job wrote it, with the job's id and status `running` in the source.
    pub fn interim(id: &str, text: String) -> Message {
        notice_message(id, "running", text)
    }
}

fn notice_message(id: &str, status: &str, text: String) -> Message {
    let mut extra = Map::new();
    extra.insert("jobId".into(), json!(id));
    extra.insert("status".into(), json!(status));
    Message {
        role: Role::User,
        content: vec![ContentBlock::text(text)],
        source: MessageSource::Known(KnownSource::Plugin {
            plugin: crate::ID.source().into(),
            extra,
        }),
        id: uuid::Uuid::new_v4().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_tools::{JobInfo, JobStatus};

    fn job(text: &str, total: u64) -> JobOutput {
        JobOutput {
            info: JobInfo {
                id: "bash-1".into(),
                kind: "bash".into(),
                description: "make test".into(),
                owner: "s".into(),
                status: JobStatus::Failed,
                summary: Some("exit code 2".into()),
                waiting: false,
                output_bytes: total,
                elapsed_ms: 5,
            },
            text: text.into(),
            truncated: total > text.len() as u64,
        }
    }

    #[test]
    fn renders_state_and_a_capped_tail() {
        let n = JobNotice::new(&job("boom\n", 5));
        assert_eq!(
            n.render(),
            "Background job bash-1 (bash: make test) finished: failed (exit code 2).\nOutput:\nboom\n"
        );
        let long = "x".repeat(5_000);
        let n = JobNotice::new(&job(&long, 9_000));
        let text = n.render();
        assert!(text.contains("Last 1500 of 9000 bytes"), "{text}");
        assert!(text.len() < NOTICE_OUTPUT_CAP + 300);
        assert_eq!(n.message().source.plugin_id(), Some(crate::ID.source()));
    }
}
