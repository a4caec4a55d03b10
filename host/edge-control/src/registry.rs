//! Artifacts shared through an OCI registry (the distribution API), so
//! that several nodes serve what one of them accepted. Each component is
//! one artifact in the CNCF Wasm OCI format (a `application/wasm` layer,
//! a Wasm config), tagged by its digest (`sha256-HEX`) in one repository;
//! the local blob directory is each node's pull-through cache, and what is
//! pulled is checked against the digest before it is kept.
//!
//! Credentials, when the registry needs them: `EDGE_REGISTRY_USERNAME` and
//! `EDGE_REGISTRY_PASSWORD` in the node's environment.

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

/// The layer's media type (what Spin and wasmCloud publish components as).
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer's media type of a Spin app's file (Spin's `files`).
pub const FILE_MEDIA_TYPE: &str = "application/octet-stream";
/// The config's media type (CNCF Wasm OCI artifact).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// A registry repository holding artifacts.
pub struct Registry {
    client: Client,
    host: String,
    repository: String,
    auth: RegistryAuth,
}

impl Registry {
    /// The repository at `url` (`http://HOST[:PORT]/REPO/PATH` or
    /// `https://...`).
    pub fn new(url: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{url:?} is not a registry repository URL ({why}; allowed: \"https://registry.example/edge/components\", \"http://127.0.0.1:5000/edge\")"
            )
        };
        let (protocol, rest) = if let Some(r) = url.strip_prefix("https://") {
            (ClientProtocol::Https, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (ClientProtocol::Http, r)
        } else {
            return Err(bad("scheme"));
        };
        let (host, repository) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository path"))?;
        let repository = repository.trim_end_matches('/');
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c);
        if host.is_empty() || repository.is_empty() || !repository.chars().all(ok) {
            return Err(bad(
                "repository: lower-case letters, digits, '.', '_', '-', '/'",
            ));
        }
        // reqwest's TLS needs a process-wide provider; ring is the one
        // the workspace already builds.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let auth = match (
            std::env::var("EDGE_REGISTRY_USERNAME"),
            std::env::var("EDGE_REGISTRY_PASSWORD"),
        ) {
            (Ok(u), Ok(p)) => RegistryAuth::Basic(u, p),
            _ => RegistryAuth::Anonymous,
        };
        Ok(Self {
            client: Client::new(ClientConfig {
                protocol,
                ..Default::default()
            }),
            host: host.to_string(),
            repository: repository.to_string(),
            auth,
        })
    }

    fn reference(&self, digest: &str) -> Reference {
        Reference::with_tag(
            self.host.clone(),
            self.repository.clone(),
            digest.replace(':', "-"),
        )
    }

    /// Pushes the component `bytes` (whose digest is `digest`).
    pub async fn push(&self, digest: &str, bytes: &[u8]) -> Result<(), String> {
        self.push_as(digest, bytes, LAYER_MEDIA_TYPE).await
    }

    /// Pushes the file `bytes` of a Spin app (whose digest is `digest`),
    /// tagged as a component is (the same digest is the same bytes).
    pub async fn push_file(&self, digest: &str, bytes: &[u8]) -> Result<(), String> {
        self.push_as(digest, bytes, FILE_MEDIA_TYPE).await
    }

    async fn push_as(&self, digest: &str, bytes: &[u8], media_type: &str) -> Result<(), String> {
        let layer = ImageLayer::new(bytes.to_vec(), media_type.into(), None);
        let config = Config::new(
            br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec(),
            CONFIG_MEDIA_TYPE.into(),
            None,
        );
        self.client
            .push(&self.reference(digest), &[layer], config, &self.auth, None)
            .await
            .map(|_| ())
            .map_err(|e| format!("pushing {digest} to {}/{}: {e}", self.host, self.repository))
    }

    /// Pulls the component or file with `digest`, checked against it.
    pub async fn pull(&self, digest: &str) -> Result<Vec<u8>, String> {
        let image = self
            .client
            .pull(
                &self.reference(digest),
                &self.auth,
                vec![LAYER_MEDIA_TYPE, FILE_MEDIA_TYPE],
            )
            .await
            .map_err(|e| {
                format!(
                    "pulling {digest} from {}/{}: {e}",
                    self.host, self.repository
                )
            })?;
        let layer = image
            .layers
            .into_iter()
            .next()
            .ok_or_else(|| format!("{digest} in the registry has no layer"))?;
        let data = layer.data.to_vec();
        if crate::blobs::digest(&data) != digest {
            return Err(format!(
                "{digest} in the registry has other bytes than its digest says"
            ));
        }
        Ok(data)
    }
}
