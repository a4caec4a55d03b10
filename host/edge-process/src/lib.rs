//! Process capability: `edge:platform/process` (WIT in `wit/edge.wit`).
//!
//! Components cannot start processes; the native sidecar (`edge-sidecar`)
//! can, for an allowlist. This crate forwards a component's `run` to it,
//! after checking the calling tenant's grant (`sidecar_programs` in
//! edge-config): a program the tenant was not granted is refused here and
//! never reaches the sidecar, which checks its allowlist and, for the
//! tenant named in the request, the same grant again. Arguments past the
//! sidecar's limits (`MAX_ARGS`, `MAX_ARG_BYTES`) are refused here too,
//! as `failed` with the reason. The call runs on a blocking thread, so a
//! long program does not hold the worker thread the component runs on.
#![deny(missing_docs)]

use edge_outbound_http::limit::TenantOutbound;
use edge_sidecar::protocol::{self, Request, Response};
pub use edge_sidecar::{Grants, publish_grants};
use std::path::PathBuf;
use std::sync::Arc;
use wasmtime::component::{HasData, Linker};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "edge:platform/process-imports",
        imports: { default: async },
    });
}

use generated::edge::platform::process::{self as wit, Error, Output};

/// What one tenant's components may run, and where the sidecar is.
#[derive(Clone, Debug, Default)]
pub struct Grant {
    socket: Option<PathBuf>,
    tenant: Arc<str>,
    programs: Arc<[PathBuf]>,
    /// The tenant's outbound cap (`max_outbound_requests`): each run holds
    /// a place in it while it waits for the sidecar, as an outbound
    /// request does. A call waits on a blocking-pool thread, which the
    /// host's disk work shares: uncapped, one tenant's slow runs could
    /// take them all.
    outbound: Option<Arc<TenantOutbound>>,
}

/// The most standard input a run may pass: base64 makes 4 bytes of 3, and
/// the request, arguments (JSON-escaped) included, must stay within the
/// sidecar's [`protocol::MAX_MESSAGE`]. Refused before it is copied.
pub const MAX_STDIN: usize = 16 << 20;

const _: () =
    assert!(MAX_STDIN / 3 * 4 + 6 * protocol::MAX_ARG_BYTES + 65536 <= protocol::MAX_MESSAGE);

impl Grant {
    /// A grant of `programs` to `tenant` through the sidecar at `socket`
    /// (`None`: no sidecar configured).
    pub fn new(socket: Option<PathBuf>, tenant: &str, programs: Vec<PathBuf>) -> Self {
        Self {
            socket,
            tenant: tenant.into(),
            programs: programs.into(),
            outbound: None,
        }
    }

    /// The same, with each run holding a place in the tenant's outbound
    /// cap while it runs.
    pub fn with_outbound(mut self, outbound: Arc<TenantOutbound>) -> Self {
        self.outbound = Some(outbound);
        self
    }

    /// Whether both allow the same.
    pub fn same(&self, other: &Grant) -> bool {
        self.socket == other.socket
            && self.tenant == other.tenant
            && self.programs == other.programs
            && self.outbound.as_ref().map(Arc::as_ptr) == other.outbound.as_ref().map(Arc::as_ptr)
    }
}

/// Store data that carries a [`Grant`].
pub trait ProcessView: Send {
    /// The grant of the component running in this store.
    fn process(&mut self) -> &Grant;
}

struct HasProcess;

impl HasData for HasProcess {
    type Data<'a> = &'a Grant;
}

/// Adds `edge:platform/process` to a linker.
pub fn add_to_linker<T: ProcessView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasProcess>(linker, |t: &mut T| t.process())
}

impl wit::Host for &Grant {
    async fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
        timeout_ms: Option<u32>,
        max_output: Option<u32>,
    ) -> Result<Output, Error> {
        if !self
            .programs
            .iter()
            .any(|p| p.as_os_str() == program.as_str())
        {
            return Err(Error::NotAllowed(format!(
                "{program:?} is not among this tenant's sidecar_programs"
            )));
        }
        // Refused here, not by the sidecar after it has read them all.
        protocol::check_args(&args).map_err(Error::Failed)?;
        if stdin.len() > MAX_STDIN {
            return Err(Error::Failed(format!(
                "standard input of {} bytes; at most {MAX_STDIN}",
                stdin.len()
            )));
        }
        let Some(socket) = self.socket.clone() else {
            return Err(Error::Unavailable("no [sidecar] is configured".into()));
        };
        let place = match &self.outbound {
            Some(tenant) => Some(tenant.acquire().ok_or_else(|| {
                Error::Busy(
                    "this tenant's runs and outbound requests in flight are at its max_outbound_requests; retry later"
                        .into(),
                )
            })?),
            None => None,
        };
        let request = Request {
            tenant: Some(self.tenant.to_string()),
            program,
            args,
            stdin: protocol::encode(&stdin),
            timeout_ms: timeout_ms.map(u64::from),
            max_output: max_output.map(|m| m as usize),
            metrics: false,
        };
        // The sidecar caps runs at its own timeout; past that (asked for or
        // its default of at most a few minutes) plus a margin, stop waiting.
        let limit = std::time::Duration::from_millis(timeout_ms.map_or(600_000, u64::from) + 5_000);
        // The place goes with the wait: a guest call dropped (its deadline,
        // its client gone) leaves the run going on at the sidecar, and the
        // thread waiting for it, both still counted.
        let answer = tokio::task::spawn_blocking(move || {
            let _place = place;
            protocol::call_within(&socket, &request, Some(limit))
        })
        .await
        .map_err(|e| Error::Failed(format!("sidecar call: {e}")))?;
        match answer {
            Ok(Response::Ok(out)) => Ok(Output {
                exit_code: out.exit_code,
                stdout: out.stdout_bytes(),
                stderr: out.stderr_bytes(),
            }),
            Ok(Response::Error(e)) => Err(match e.kind.as_str() {
                protocol::KIND_NOT_ALLOWED => Error::NotAllowed(e.message),
                protocol::KIND_BAD_PATH => Error::BadPath(e.message),
                protocol::KIND_NOT_FOUND => Error::NotFound(e.message),
                protocol::KIND_TIMEOUT => Error::Timeout(e.message),
                protocol::KIND_OUTPUT_TOO_LARGE => Error::OutputTooLarge(e.message),
                protocol::KIND_BUSY => Error::Busy(e.message),
                protocol::KIND_PEER_REFUSED => {
                    // The host itself was refused: it runs as another user
                    // than the sidecar (or was started by it).
                    tracing::error!(
                        "the sidecar refused this host's connection: run both as the same user, neither started by the other's programs"
                    );
                    Error::Unavailable("the sidecar refused this host".into())
                }
                _ => Error::Failed(e.message),
            }),
            Ok(Response::Metrics(_)) => Err(Error::Failed("unexpected answer".into())),
            Err(e) => {
                tracing::warn!(error = %e, "the sidecar does not answer");
                Err(Error::Unavailable(format!(
                    "the sidecar does not answer: {e}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `args` for a tenant granted `/bin/echo`, through a sidecar
    /// that is not there.
    async fn run(args: Vec<String>) -> Result<Output, Error> {
        let grant = Grant::new(
            Some("/nonexistent/edge-process-test.sock".into()),
            "t",
            vec!["/bin/echo".into()],
        );
        wit::Host::run(
            &mut &grant,
            "/bin/echo".into(),
            args,
            Vec::new(),
            None,
            None,
        )
        .await
    }

    #[tokio::test]
    async fn runs_hold_places_in_the_tenants_outbound_cap() {
        let registry = edge_outbound_http::Registry::default();
        let tenant = registry.tenant("t", 1);
        let grant = Grant::new(
            Some("/nonexistent/edge-process-test.sock".into()),
            "t",
            vec!["/bin/echo".into()],
        )
        .with_outbound(tenant.clone());
        let call = || {
            let grant = grant.clone();
            async move {
                wit::Host::run(
                    &mut &grant,
                    "/bin/echo".into(),
                    Vec::new(),
                    Vec::new(),
                    None,
                    None,
                )
                .await
            }
        };
        // A place free: the (missing) sidecar is asked, and the place
        // comes back with the answer.
        assert!(matches!(call().await, Err(Error::Unavailable(_))));
        let held = tenant.acquire().expect("the place came back");
        match call().await {
            Err(Error::Busy(m)) => assert!(m.contains("max_outbound_requests"), "{m}"),
            other => panic!("{other:?}"),
        }
        drop(held);
        assert!(matches!(call().await, Err(Error::Unavailable(_))));
    }

    #[tokio::test]
    async fn standard_input_past_the_cap_is_refused_before_it_is_copied() {
        let grant = Grant::new(
            Some("/nonexistent/edge-process-test.sock".into()),
            "t",
            vec!["/bin/echo".into()],
        );
        let r = wit::Host::run(
            &mut &grant,
            "/bin/echo".into(),
            Vec::new(),
            vec![0; MAX_STDIN + 1],
            None,
            None,
        )
        .await;
        match r {
            Err(Error::Failed(m)) => assert!(m.contains(&format!("at most {MAX_STDIN}")), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn too_many_or_too_long_arguments_are_refused_before_the_sidecar_is_asked() {
        let many = vec![String::new(); protocol::MAX_ARGS + 1];
        match run(many).await {
            Err(Error::Failed(m)) => assert!(
                m.contains(&format!("more than {} arguments", protocol::MAX_ARGS)),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        let long = vec!["x".repeat(protocol::MAX_ARG_BYTES)];
        match run(long).await {
            Err(Error::Failed(m)) => assert!(
                m.contains(&format!(
                    "arguments of more than {} bytes",
                    protocol::MAX_ARG_BYTES
                )),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        // Within the limits, the (missing) sidecar is asked.
        let r = run(vec![String::new(); protocol::MAX_ARGS]).await;
        assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    }
}
