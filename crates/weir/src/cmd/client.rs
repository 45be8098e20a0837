//! What every client command shares: where the server is, which token to send, and one HTTP
//! helper that turns the API's `{error: …}` answers into messages.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::de::DeserializeOwned;
use weir_api::ErrorBody;

/// Where the server is and who is asking.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The server's URL. Default: $WEIR_SERVER, else http://127.0.0.1:8470.
    #[arg(long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// The local server's data directory, whose admin.token is used when $WEIR_TOKEN is unset.
    #[arg(long, global = true, value_name = "DIR", default_value = "weir-data")]
    pub data_dir: PathBuf,
}

pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Connection {
    pub fn client(&self) -> Result<Client> {
        let base = self
            .server
            .clone()
            .or_else(|| std::env::var("WEIR_SERVER").ok())
            .unwrap_or_else(|| "http://127.0.0.1:8470".to_string());
        let token = match std::env::var("WEIR_TOKEN") {
            Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
            _ => {
                let path = weir_server::admin_token_path(&self.data_dir);
                std::fs::read_to_string(&path)
                    .with_context(|| {
                        format!(
                            "no token: set WEIR_TOKEN, or run next to the server's data directory \
                             ({} not readable; --data-dir names another)",
                            path.display()
                        )
                    })?
                    .trim()
                    .to_string()
            }
        };
        Ok(Client { base: base.trim_end_matches('/').to_string(), token, http: reqwest::Client::new() })
    }
}

impl Client {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(&self.token)
    }

    /// Send and decode a JSON answer; an error answer becomes its message.
    pub async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        let resp = self.checked(req).await?;
        resp.json::<T>().await.context("the server's answer is not the expected JSON")
    }

    /// Send; fail with the server's message on an error status.
    pub async fn checked(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp =
            req.send().await.with_context(|| format!("cannot reach the weir server at {}", self.base))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        match serde_json::from_str::<ErrorBody>(&text) {
            Ok(e) => {
                let field = e.error.field.map(|f| format!(" (at {f})")).unwrap_or_default();
                bail!("{} {}{field}: {}", status.as_u16(), e.error.code, e.error.message)
            }
            Err(_) => Err(anyhow!("{status}: {text}")),
        }
    }
}

/// `12s`, `3m 04s`, `1h 02m` for a span in milliseconds.
pub fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, s % 3600 / 60)
    }
}
