//! What every client command shares: where the server is, which token to send, and one HTTP
//! helper that turns the API's `{error: …}` answers into messages.

use std::path::{Path, PathBuf};

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
    /// For an https:// server whose certificate a private CA signed: that CA's certificate
    /// (PEM), trusted besides the system's roots. Default: $WEIR_CA_CERT.
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
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
        let ca = self.ca_cert.clone().or_else(|| std::env::var_os("WEIR_CA_CERT").map(PathBuf::from));
        let http = http_client(ca.as_deref())?;
        Ok(Client { base: base.trim_end_matches('/').to_string(), token, http })
    }
}

/// An HTTP(S) client trusting the system's roots and, if given, the CA certificate in `ca`.
pub fn http_client(ca: Option<&Path>) -> Result<reqwest::Client> {
    let mut b = reqwest::Client::builder();
    if let Some(path) = ca {
        let pem =
            std::fs::read(path).with_context(|| format!("--ca-cert: cannot read {}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("--ca-cert: {} is not a PEM certificate", path.display()))?;
        if certs.is_empty() {
            bail!("--ca-cert: {} holds no certificate (no `BEGIN CERTIFICATE` block)", path.display());
        }
        b = b.tls_certs_merge(certs);
    }
    b.build().context("cannot set up the HTTP client")
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
        let resp = req
            .send()
            .await
            .map_err(|e| anyhow!(describe(&e)))
            .with_context(|| format!("cannot reach the weir server at {}", self.base))?;
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

/// A request error with its causes (reqwest's own message hides them: an unknown certificate
/// authority says only "error sending request").
fn describe(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
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
