//! The Jobs REST API of one Ray cluster (its dashboard's `/api/jobs/` and
//! `/api/packages/`): submit, state, output, stop, package upload. A connection failure is
//! retried twice, a submission the cluster cannot take yet (no job agent up) for up to a
//! minute; every error names the cluster and what was asked.

use serde_json::Value;
use std::time::Duration;

/// How long a submission waits for a cluster's job agent to come up ([`Api::submit`]).
const AGENT_WAIT: Duration = Duration::from_secs(60);

/// Ray's answer while no job agent can take a submission yet (the dashboard's
/// `No available agent to submit job, please try again later.`).
fn no_agent_yet(status: u16, body: &str) -> bool {
    matches!(status, 500 | 503) && body.contains("No available agent")
}

/// Why a call to a Ray cluster failed (each names the cluster and what was asked).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// `--address` is not a URL.
    #[error("--address {address} is not a URL: {error}")]
    NotUrl {
        /// The address.
        address: String,
        /// What the parser said.
        error: url::ParseError,
    },
    /// `--address` is not http or https.
    #[error("--address {address}: the Ray dashboard's address is http:// or https://")]
    Scheme {
        /// The address.
        address: String,
    },
    /// No HTTP client could be made.
    #[error("cannot make an HTTP client: {error}")]
    Client {
        /// Why.
        error: reqwest::Error,
    },
    /// The cluster could not be reached.
    #[error("{what}: cannot reach the Ray cluster at {base}: {error}")]
    Unreachable {
        /// What was asked.
        what: String,
        /// The cluster's address.
        base: String,
        /// Why.
        error: reqwest::Error,
    },
    /// The cluster refused.
    #[error("the Ray cluster at {base} answered {status} to {what}: {body}")]
    Refused {
        /// What was asked.
        what: String,
        /// The cluster's address.
        base: String,
        /// Its HTTP status.
        status: u16,
        /// The start of its answer.
        body: String,
    },
    /// An answer that should be JSON is not.
    #[error("{what}: not JSON: {error}")]
    NotJson {
        /// What was asked.
        what: String,
        /// What the parser said.
        error: serde_json::Error,
    },
}

/// The Jobs REST API of one cluster.
pub(super) struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// The API of the cluster whose dashboard is at `address` (nothing is contacted yet).
    pub(super) fn new(address: &str) -> Result<Api, ApiError> {
        let base = address.trim_end_matches('/').to_owned();
        let parsed = url::Url::parse(&base).map_err(|error| ApiError::NotUrl {
            address: address.to_owned(),
            error,
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ApiError::Scheme {
                address: address.to_owned(),
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| ApiError::Client { error })?;
        Ok(Api { http, base })
    }

    /// Send, retrying a connection failure twice; the body of a 2xx answer.
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(u16, String), ApiError> {
        let mut tries = 0;
        loop {
            match make().send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let body = resp.text().await.unwrap_or_default();
                    return Ok((status, body));
                }
                Err(e) if tries < 2 && (e.is_connect() || e.is_timeout()) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(500 * tries)).await;
                }
                Err(error) => {
                    return Err(ApiError::Unreachable {
                        what: what.to_owned(),
                        base: self.base.clone(),
                        error,
                    });
                }
            }
        }
    }

    fn refused(&self, what: &str, status: u16, body: &str) -> ApiError {
        ApiError::Refused {
            what: what.to_owned(),
            base: self.base.clone(),
            status,
            body: body.trim().chars().take(400).collect(),
        }
    }

    /// [`Api::send`], insisting on a 200; its body.
    async fn call(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<String, ApiError> {
        match self.send(what, make).await? {
            (200, body) => Ok(body),
            (status, body) => Err(self.refused(what, status, &body)),
        }
    }

    /// `GET path` as JSON.
    async fn get_json(&self, what: &str, path: &str, timeout: u64) -> Result<Value, ApiError> {
        let url = format!("{}{path}", self.base);
        let body = self
            .call(what, || {
                self.http.get(&url).timeout(Duration::from_secs(timeout))
            })
            .await?;
        serde_json::from_str(&body).map_err(|error| ApiError::NotJson {
            what: what.to_owned(),
            error,
        })
    }

    fn package_url(&self, name: &str) -> String {
        format!("{}/api/packages/gcs/{name}", self.base)
    }

    /// Whether the cluster has the package `name` already.
    pub(super) async fn package_exists(&self, name: &str) -> Result<bool, ApiError> {
        let url = self.package_url(name);
        let what = format!("asking for package {name}");
        match self
            .send(&what, || {
                self.http.get(&url).timeout(Duration::from_secs(60))
            })
            .await?
        {
            (200, _) => Ok(true),
            (404, _) => Ok(false),
            (status, body) => Err(self.refused(&what, status, &body)),
        }
    }

    /// Upload the package `name`.
    pub(super) async fn upload(&self, name: &str, data: Vec<u8>) -> Result<(), ApiError> {
        let url = self.package_url(name);
        let what = format!("the upload of {name} ({} bytes)", data.len());
        let data = bytes::Bytes::from(data);
        self.call(&what, || {
            self.http
                .put(&url)
                .timeout(Duration::from_secs(900))
                .body(data.clone())
        })
        .await
        .map(drop)
    }

    /// Submit a job. A cluster whose job agent is not up yet (a node just started, or busy)
    /// answers 500 "No available agent to submit job, please try again later": that is
    /// retried, backing off from 0.5 s to 4 s, for up to [`AGENT_WAIT`]; any other refusal is
    /// the task's error at once.
    pub(super) async fn submit(&self, body: &Value) -> Result<(), ApiError> {
        let url = format!("{}/api/jobs/", self.base);
        let text = body.to_string();
        let what = "a job submission";
        let started = std::time::Instant::now();
        let mut wait = Duration::from_millis(500);
        loop {
            let answer = self
                .send(what, || {
                    self.http
                        .post(&url)
                        .timeout(Duration::from_secs(120))
                        .header("content-type", "application/json")
                        .body(text.clone())
                })
                .await?;
            match answer {
                (200, _) => return Ok(()),
                (status, body)
                    if no_agent_yet(status, &body) && started.elapsed() + wait < AGENT_WAIT =>
                {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(4));
                }
                (status, body) => return Err(self.refused(what, status, &body)),
            }
        }
    }

    /// The job's state (Ray's JSON: `status`, `message`, `error_type`, …).
    pub(super) async fn status(&self, job: &str) -> Result<Value, ApiError> {
        self.get_json(
            &format!("the state of job {job}"),
            &format!("/api/jobs/{job}"),
            30,
        )
        .await
    }

    /// The job's whole output so far.
    pub(super) async fn logs(&self, job: &str) -> Result<String, ApiError> {
        let v = self
            .get_json(
                &format!("the output of job {job}"),
                &format!("/api/jobs/{job}/logs"),
                60,
            )
            .await?;
        Ok(v.get("logs")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned())
    }

    /// Ask Ray to stop the job.
    pub(super) async fn stop(&self, job: &str) -> Result<(), ApiError> {
        let url = format!("{}/api/jobs/{job}/stop", self.base);
        self.call(&format!("stopping job {job}"), || {
            self.http.post(&url).timeout(Duration::from_secs(30))
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback server answering each request with the next of `answers` (status, body);
    /// returns its address and the number of requests it saw.
    async fn server(answers: Vec<(u16, &'static str)>) -> (String, tokio::task::JoinHandle<usize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut seen = 0;
            for (status, body) in answers {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                let mut got = Vec::new();
                // Read the head and the announced body.
                loop {
                    let n = conn.read(&mut buf).await.unwrap();
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                seen += 1;
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                conn.write_all(reply.as_bytes()).await.unwrap();
            }
            seen
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_submission_waits_for_the_job_agent_and_other_refusals_fail_at_once() {
        let no_agent = "No available agent to submit job, please try again later.";
        let (addr, seen) = server(vec![(500, no_agent), (500, no_agent), (200, "{}")]).await;
        let api = Api::new(&addr).unwrap();
        api.submit(&serde_json::json!({"entrypoint": "true"}))
            .await
            .unwrap();
        assert_eq!(seen.await.unwrap(), 3);

        let (addr, seen) = server(vec![(500, "Job with id x already exists")]).await;
        let api = Api::new(&addr).unwrap();
        let err = api
            .submit(&serde_json::json!({"entrypoint": "true"}))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the Ray cluster at {addr} answered 500 to a job submission: Job with id x \
                 already exists"
            )
        );
        assert_eq!(seen.await.unwrap(), 1);
    }
}
