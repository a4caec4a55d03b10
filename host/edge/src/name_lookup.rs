//! `wasi:sockets/ip-name-lookup`, with each lookup holding a place of its
//! tenant's ([`edge_outbound_http::lookup`]).
//!
//! wasmtime-wasi resolves every name a guest asks for with the system
//! resolver on tokio's blocking pool and leaves it running when the guest
//! drops the lookup: a loop of lookups of slow names, each dropped at
//! once, would fill the pool that every tenant's disk work runs on. Its
//! stream type cannot be
//! built outside the library, so the whole interface (the function, and
//! in WASI 0.2 the stream resource with its methods) is linked over the
//! library's, as [`crate::sockets`] does for the socket constructors.
//!
//! What a guest sees is the library's behaviour: lookups only with
//! `wasi:sockets` granted, address literals answered at once, other names
//! checked as the URL standard reads hosts (so Unicode names become
//! punycode) and resolved by the host's resolver.

use crate::state::HostState;
use edge_outbound_http::TenantOutbound;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use wasmtime::component::{Linker, Resource};

/// The interfaces as wasmtime-wasi 48 names them.
const P2: &str = "wasi:sockets/ip-name-lookup@0.2.12";
const P3: &str = "wasi:sockets/ip-name-lookup@0.3.0";

/// Why a lookup found nothing, in the terms both WASI versions share.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// `wasi:sockets` is not granted.
    NotGranted,
    /// Not a host name or address.
    InvalidName,
    /// The resolver found no address.
    Unresolvable,
}

type Found = Result<Vec<IpAddr>, Failure>;

/// The longest name looked up, in bytes: a host name is at most 253
/// characters in its ASCII form, each of which a Unicode name's text may
/// spend up to four bytes on. (A lookup holds its name until it ends: a
/// stream the guest never reads holds it for the instance's life, and an
/// instance may hold a thousand streams.)
const MAX_NAME_BYTES: usize = 1024;

/// What `name` is: a domain to resolve, or the answer at once (an
/// address literal, a refusal).
fn domain(granted: bool, name: &str) -> Result<String, Found> {
    if !granted {
        return Err(Err(Failure::NotGranted));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Err(Failure::InvalidName));
    }
    match url::Host::parse(name) {
        Ok(url::Host::Domain(domain)) => Ok(domain),
        Ok(url::Host::Ipv4(a)) => Err(Ok(vec![IpAddr::V4(a)])),
        Ok(url::Host::Ipv6(a)) => Err(Ok(vec![IpAddr::V6(a)])),
        // The URL parser wants IPv6 in brackets; guests may not.
        Err(_) => Err(name
            .parse()
            .map(|a| vec![a])
            .map_err(|_| Failure::InvalidName)),
    }
}

/// The addresses of `domain`, as `tenant`'s lookup: started at once (it
/// goes on whether or not the future is polled), given up on when the
/// future is dropped.
fn resolve(
    tenant: Arc<TenantOutbound>,
    domain: String,
) -> impl Future<Output = Found> + Send + 'static {
    let lookup = edge_outbound_http::lookup::resolve(tenant, domain.clone(), 0);
    async move {
        match lookup.await {
            Ok(found) => Ok(found.into_iter().map(|a| a.ip().to_canonical()).collect()),
            Err(e) => {
                tracing::debug!(name = %domain, error = %e, "name lookup failed");
                Err(Failure::Unresolvable)
            }
        }
    }
}

impl HostState {
    /// What this instance's lookup of `name` is: a domain to resolve, or
    /// the answer.
    fn name_lookup(&self, name: &str) -> Result<(Arc<TenantOutbound>, String), Found> {
        let domain = domain(self.name_lookup_granted(), name)?;
        Ok((self.outbound().tenant().clone(), domain))
    }
}

/// A WASI 0.2 `resolve-address-stream`: the lookup until it is done, then
/// the addresses not yet taken.
pub struct AddressStream(Stage);

enum Stage {
    Running(Pin<Box<dyn Future<Output = Found> + Send>>),
    Done(Result<std::vec::IntoIter<IpAddr>, Failure>),
}

impl AddressStream {
    fn poll_done(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Stage::Running(lookup) = &mut self.0 {
            let Poll::Ready(found) = lookup.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            self.0 = Stage::Done(found.map(Vec::into_iter));
        }
        Poll::Ready(())
    }
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for AddressStream {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.poll_done(cx)).await
    }
}

/// Links both versions' interfaces over the library's.
pub fn add_to_linker(linker: &mut Linker<HostState>, concurrent: bool) -> wasmtime::Result<()> {
    crate::state::link_over_library(linker, concurrent, add_p2, add_p3)
}

fn add_p2(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress};
    use wasmtime_wasi::p2::{DynPollable, Network};
    let code = |failure| match failure {
        Failure::NotGranted => ErrorCode::PermanentResolverFailure,
        Failure::InvalidName => ErrorCode::InvalidArgument,
        Failure::Unresolvable => ErrorCode::NameUnresolvable,
    };
    let mut i = linker.instance(P2)?;
    crate::state::link_table_resource::<AddressStream>(&mut i, "resolve-address-stream")?;
    i.func_wrap(
        "resolve-addresses",
        move |mut store, (network, name): (Resource<Network>, String)| {
            let state: &mut HostState = store.data_mut();
            // The network handle is the capability; it must be one.
            state.table().get(&network)?;
            let stage = match state.name_lookup(&name) {
                Ok((tenant, domain)) => Stage::Running(Box::pin(resolve(tenant, domain))),
                // Refusals are answered at once; literals by the stream.
                Err(Err(failure)) => return Ok((Err(code(failure)),)),
                Err(found) => Stage::Done(found.map(Vec::into_iter)),
            };
            Ok((Ok(state.table().push(AddressStream(stage))?),))
        },
    )?;
    i.func_wrap(
        "[method]resolve-address-stream.resolve-next-address",
        move |mut store, (stream,): (Resource<AddressStream>,)| {
            let stream = store.data_mut().table().get_mut(&stream)?;
            let waker = std::task::Waker::noop();
            if stream
                .poll_done(&mut Context::from_waker(waker))
                .is_pending()
            {
                return Ok((Err(ErrorCode::WouldBlock),));
            }
            let next: Result<Option<IpAddress>, ErrorCode> = match &mut stream.0 {
                Stage::Done(Ok(addresses)) => Ok(addresses.next().map(Into::into)),
                Stage::Done(Err(failure)) => Err(code(*failure)),
                Stage::Running(_) => unreachable!("polled to its end above"),
            };
            Ok((next,))
        },
    )?;
    i.func_wrap(
        "[method]resolve-address-stream.subscribe",
        |mut store, (stream,): (Resource<AddressStream>,)| {
            let pollable: Resource<DynPollable> =
                wasmtime_wasi::p2::subscribe(store.data_mut().table(), stream)?;
            Ok((pollable,))
        },
    )?;
    Ok(())
}

fn add_p3(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p3::bindings::sockets::ip_name_lookup::ErrorCode;
    use wasmtime_wasi::p3::bindings::sockets::types::IpAddress;
    linker.instance(P3)?.func_wrap_concurrent(
        "resolve-addresses",
        |store, (name,): (String,)| {
            Box::pin(async move {
                let found = match store.with(|mut store| store.get().name_lookup(&name)) {
                    Ok((tenant, domain)) => resolve(tenant, domain).await,
                    Err(found) => found,
                };
                let found: Result<Vec<IpAddress>, ErrorCode> = match found {
                    Ok(found) => Ok(found.into_iter().map(Into::into).collect()),
                    Err(Failure::NotGranted) => Err(ErrorCode::PermanentResolverFailure),
                    Err(Failure::InvalidName) => Err(ErrorCode::InvalidArgument),
                    Err(Failure::Unresolvable) => Err(ErrorCode::NameUnresolvable),
                };
                Ok((found,))
            })
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_longer_than_a_host_name_can_be_are_refused_before_a_lookup() {
        let longest = format!("{}.test", "a".repeat(MAX_NAME_BYTES - 5));
        assert!(matches!(domain(true, &longest), Ok(d) if d.len() == MAX_NAME_BYTES));
        let longer = format!("a{longest}");
        assert!(matches!(
            domain(true, &longer),
            Err(Err(Failure::InvalidName))
        ));
        assert!(matches!(domain(true, "127.0.0.1"), Err(Ok(_))));
    }
}
