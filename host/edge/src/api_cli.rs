//! The control API's client for the command line: where the API is, the
//! token, requests, and errors printed as the API gives them (`field:
//! message`).
//!
//! Credentials come, first found first, from flags, the environment
//! (`EDGE_API_URL`, `EDGE_API_TOKEN`, `EDGE_API_TOKEN_FILE`) or
//! `~/.config/edge/credentials.toml` (`api = "..."`, `token = "..."`), as
//! wrangler reads `CLOUDFLARE_API_TOKEN` or its config file.

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value;
use std::path::PathBuf;

/// Where the API is and who calls it.
#[derive(clap::Args, Clone)]
pub struct ApiArgs {
    /// The control API's URL.
    #[arg(long, env = "EDGE_API_URL")]
    api: Option<String>,
    /// An API token.
    #[arg(long, env = "EDGE_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the API token (such as the data directory's
    /// `control/operator.token`).
    #[arg(long, env = "EDGE_API_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// A PEM file of certificate authorities to trust for an https API
    /// (a private CA), beside the public roots.
    #[arg(long, env = "EDGE_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Print the API's JSON instead of lines for people.
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CredentialsFile {
    api: Option<String>,
    token: Option<String>,
    ca_cert: Option<PathBuf>,
}

fn credentials_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("edge").join("credentials.toml"))
}

/// A client of one API with one token.
pub struct Api {
    base: String,
    token: String,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    rt: tokio::runtime::Runtime,
    /// Print JSON.
    pub json: bool,
}

impl Api {
    /// A client from `args`, the environment or the credentials file.
    pub fn new(args: &ApiArgs) -> Result<Self> {
        let file: CredentialsFile = match credentials_file() {
            Some(p) if p.exists() => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?;
                toml::from_str(&text).with_context(|| format!("{}", p.display()))?
            }
            _ => CredentialsFile::default(),
        };
        let token = match (&args.token, &args.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => std::fs::read_to_string(f)
                .with_context(|| format!("reading the token file {}", f.display()))?
                .trim()
                .to_string(),
            (None, None) => file.token.clone().ok_or_else(|| {
                anyhow!("no API token: pass --token or --token-file, set EDGE_API_TOKEN, or write token = \"...\" in ~/.config/edge/credentials.toml")
            })?,
        };
        let base = args
            .api
            .clone()
            .or(file.api)
            .unwrap_or_else(|| "http://127.0.0.1:8790".into());
        let tls = match args.ca_cert.as_ref().or(file.ca_cert.as_ref()) {
            Some(path) => {
                edge_outbound_http::pool::tls_config_trusting(path).map_err(|e| anyhow!(e))?
            }
            None => edge_outbound_http::pool::tls_config(),
        };
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            token,
            // https for an API behind TLS (as docs/CONTROL.md advises);
            // http for one on the node's loopback.
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build(
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config((*tls).clone())
                    .https_or_http()
                    .enable_http1()
                    .build(),
            ),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            json: args.json,
        })
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Value> {
        self.call("GET", path, None, Bytes::new())
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(
            "POST",
            path,
            Some("application/json"),
            Bytes::from(body.to_string()),
        )
    }

    /// `POST path` with bytes of `content_type`.
    pub fn upload(&self, path: &str, content_type: &str, bytes: Vec<u8>) -> Result<Value> {
        self.call("POST", path, Some(content_type), Bytes::from(bytes))
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Value> {
        self.call("DELETE", path, None, Bytes::new())
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut req = http::Request::builder().method(method).uri(&url).header(
            http::header::AUTHORIZATION,
            format!("Bearer {}", self.token),
        );
        if let Some(ct) = content_type {
            req = req.header(http::header::CONTENT_TYPE, ct);
        }
        let req = req
            .body(Full::new(body))
            .with_context(|| format!("{method} {url}"))?;
        self.rt.block_on(async {
            let resp =
                self.client.request(req).await.with_context(|| {
                    format!("{method} {url}: is the control API running there?")
                })?;
            let status = resp.status();
            let bytes = resp.into_body().collect().await?.to_bytes();
            let value: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
            };
            if status.is_success() {
                return Ok(value);
            }
            let e = &value["error"];
            match (e["field"].as_str(), e["message"].as_str()) {
                (Some(f), Some(m)) => bail!("{} {status}: {f}: {m}", method),
                (None, Some(m)) => bail!("{} {status}: {m}", method),
                _ => bail!("{method} {url}: {status}: {value}"),
            }
        })
    }

    /// The tenant to act on: `given`, else the token's own.
    pub fn tenant(&self, given: &Option<String>) -> Result<String> {
        if let Some(t) = given {
            return Ok(t.clone());
        }
        let me = self.get("/v1/whoami")?;
        me["tenant"]
            .as_str()
            .map(Into::into)
            .ok_or_else(|| anyhow!("this is an operator's token: say which tenant with --tenant"))
    }

    /// Prints `value` as JSON if asked, else `human`'s lines.
    pub fn print(&self, value: &Value, human: impl FnOnce() -> String) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(value).unwrap_or_default()
            );
        } else {
            println!("{}", human());
        }
    }
}
