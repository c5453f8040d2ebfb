//! The Jobs REST API of one Ray cluster (its dashboard's `/api/jobs/` and
//! `/api/packages/`): submit, state, output, stop, package upload. A connection failure is
//! retried twice; every error names the cluster and what was asked.

use serde_json::Value;
use std::time::Duration;

/// The Jobs REST API of one cluster.
pub(super) struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    pub(super) fn new(address: &str) -> Result<Api, String> {
        let base = address.trim_end_matches('/').to_owned();
        let parsed =
            url::Url::parse(&base).map_err(|e| format!("--address {address} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "--address {address}: the Ray dashboard's address is http:// or https://"
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Api { http, base })
    }

    fn unreachable(&self, e: &reqwest::Error) -> String {
        format!("cannot reach the Ray cluster at {}: {e}", self.base)
    }

    /// Send, retrying a connection failure twice; the body of a 2xx answer.
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(u16, String), String> {
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
                Err(e) => return Err(format!("{what}: {}", self.unreachable(&e))),
            }
        }
    }

    fn refused(&self, what: &str, status: u16, body: &str) -> String {
        let body: String = body.trim().chars().take(400).collect();
        format!(
            "the Ray cluster at {} answered {status} to {what}: {body}",
            self.base
        )
    }

    /// [`Api::send`], insisting on a 200; its body.
    async fn call(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<String, String> {
        match self.send(what, make).await? {
            (200, body) => Ok(body),
            (status, body) => Err(self.refused(what, status, &body)),
        }
    }

    /// `GET path` as JSON.
    async fn get_json(&self, what: &str, path: &str, timeout: u64) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let body = self
            .call(what, || {
                self.http.get(&url).timeout(Duration::from_secs(timeout))
            })
            .await?;
        serde_json::from_str(&body).map_err(|e| format!("{what}: not JSON: {e}"))
    }

    fn package_url(&self, name: &str) -> String {
        format!("{}/api/packages/gcs/{name}", self.base)
    }

    pub(super) async fn package_exists(&self, name: &str) -> Result<bool, String> {
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

    pub(super) async fn upload(&self, name: &str, data: Vec<u8>) -> Result<(), String> {
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

    pub(super) async fn submit(&self, body: &Value) -> Result<(), String> {
        let url = format!("{}/api/jobs/", self.base);
        let text = body.to_string();
        self.call("a job submission", || {
            self.http
                .post(&url)
                .timeout(Duration::from_secs(120))
                .header("content-type", "application/json")
                .body(text.clone())
        })
        .await
        .map(drop)
    }

    pub(super) async fn status(&self, job: &str) -> Result<Value, String> {
        self.get_json(
            &format!("the state of job {job}"),
            &format!("/api/jobs/{job}"),
            30,
        )
        .await
    }

    pub(super) async fn logs(&self, job: &str) -> Result<String, String> {
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

    pub(super) async fn stop(&self, job: &str) -> Result<(), String> {
        let url = format!("{}/api/jobs/{job}/stop", self.base);
        self.call(&format!("stopping job {job}"), || {
            self.http.post(&url).timeout(Duration::from_secs(30))
        })
        .await
        .map(drop)
    }
}
