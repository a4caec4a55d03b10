//! `wasi:sockets` sockets hold places in their tenant's outbound cap.
//!
//! A guest's socket is a descriptor of the host process from the moment
//! it is created (`create-tcp-socket`, `tcp-socket.create`, and their UDP
//! twins), connected or not. wasmtime-wasi bounds them only by the
//! instance's resource table: a tenant's instances together could open
//! tens of thousands and take the process's last descriptors, and then
//! every tenant's `accept` fails. So each socket holds a place in its
//! tenant's `max_outbound_requests` (shared with outbound HTTP and the
//! database clients) for as long as it lives, and a creation past the cap
//! fails with `new-socket-limit` (WASI 0.2) or `other` (0.3, which has no
//! such code).
//!
//! The library creates sockets; these functions are linked over its own
//! (as [`crate::outgoing_handler`] is) to take the place first. A socket's
//! end is not reported to the host, so the places of sockets the instance
//! dropped are given back when it creates its next socket (the table says
//! which are gone) and, at the latest, when the instance ends. A WASI 0.3
//! TCP socket keeps its place until the instance ends: the streams its
//! `send` and `receive` return hold the connection open after the
//! socket's handle is dropped, and they are not its children in the table.

use crate::state::HostState;
use edge_outbound_http::limit::Permit;
use std::collections::HashMap;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::TrappableError;
use wasmtime_wasi::sockets::WasiSocketsView;

/// The interfaces as wasmtime-wasi 48 names them (guests importing an
/// older 0.2 are matched to them by semver).
const P2_TCP: &str = "wasi:sockets/tcp-create-socket@0.2.12";
const P2_UDP: &str = "wasi:sockets/udp-create-socket@0.2.12";
const P3_TYPES: &str = "wasi:sockets/types@0.3.0";

/// Which library type a socket's table entry has.
#[derive(Clone, Copy, Debug)]
enum Kind {
    P2Tcp,
    P2Udp,
    P3Tcp,
    P3Udp,
}

impl Kind {
    /// Whether the entry `rep` is still this kind of socket.
    fn alive(self, table: &ResourceTable, rep: u32) -> bool {
        use wasmtime_wasi::{p2, sockets};
        match self {
            Kind::P2Tcp => table
                .get(&Resource::<p2::TcpSocket>::new_borrow(rep))
                .is_ok(),
            Kind::P2Udp => table
                .get(&Resource::<p2::UdpSocket>::new_borrow(rep))
                .is_ok(),
            // Its streams may outlive it (see the module's comment).
            Kind::P3Tcp => true,
            Kind::P3Udp => table
                .get(&Resource::<sockets::UdpSocket>::new_borrow(rep))
                .is_ok(),
        }
    }
}

/// The places an instance's sockets hold, by table entry.
#[derive(Default)]
pub struct SocketPlaces {
    held: HashMap<u32, (Kind, Permit)>,
}

impl SocketPlaces {
    /// How many places are held.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

impl HostState {
    /// Gives back the places of sockets no longer in the table, then takes
    /// one for a new socket (`None` at the tenant's cap).
    fn socket_place(&mut self) -> Option<Permit> {
        let (table, places) = self.table_and_socket_places();
        places.held.retain(|rep, (kind, _)| kind.alive(table, *rep));
        self.outbound().place()
    }

    /// What the library made of a socket: a socket now holding `place`,
    /// the guest's error code (the place given back), or a trap.
    fn holding<T, E>(
        &mut self,
        kind: Kind,
        place: Permit,
        made: Result<Resource<T>, TrappableError<E>>,
    ) -> wasmtime::Result<Result<Resource<T>, E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        match made {
            Ok(socket) => {
                // (An entry of a socket gone and its key reused: its place
                // goes.)
                self.table_and_socket_places()
                    .1
                    .held
                    .insert(socket.rep(), (kind, place));
                Ok(Ok(socket))
            }
            Err(e) => Ok(Err(e.downcast()?)),
        }
    }
}

/// Links the four socket constructors over the library's (call it after
/// `wasmtime_wasi::p2::add_to_linker_async` and, in the concurrent
/// engine, `wasmtime_wasi::p3::add_to_linker`).
pub fn add_to_linker(linker: &mut Linker<HostState>, concurrent: bool) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode as P2Error, IpAddressFamily};
    use wasmtime_wasi::p2::bindings::sockets::{tcp_create_socket, udp_create_socket};
    linker.allow_shadowing(true);
    linker.instance(P2_TCP)?.func_wrap(
        "create-tcp-socket",
        |mut store, (family,): (IpAddressFamily,)| {
            let state: &mut HostState = store.data_mut();
            let Some(place) = state.socket_place() else {
                return Ok((Err(P2Error::NewSocketLimit),));
            };
            let made = tcp_create_socket::Host::create_tcp_socket(&mut state.sockets(), family);
            Ok((state.holding(Kind::P2Tcp, place, made)?,))
        },
    )?;
    linker.instance(P2_UDP)?.func_wrap_async(
        "create-udp-socket",
        |mut store, (family,): (IpAddressFamily,)| {
            Box::new(async move {
                let state: &mut HostState = store.data_mut();
                let Some(place) = state.socket_place() else {
                    return Ok((Err(P2Error::NewSocketLimit),));
                };
                let made =
                    udp_create_socket::Host::create_udp_socket(&mut state.sockets(), family).await;
                Ok((state.holding(Kind::P2Udp, place, made)?,))
            })
        },
    )?;
    if concurrent {
        add_p3(linker)?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// The WASI 0.3 constructors (`[static]tcp-socket.create`,
/// `[static]udp-socket.create`).
fn add_p3(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p3::bindings::sockets::types::{
        ErrorCode, HostTcpSocket, HostUdpSocket, IpAddressFamily,
    };
    let at_cap = || ErrorCode::Other(Some("the tenant's max_outbound_requests are open".into()));
    let mut types = linker.instance(P3_TYPES)?;
    types.func_wrap(
        "[static]tcp-socket.create",
        move |mut store, (family,): (IpAddressFamily,)| {
            let state: &mut HostState = store.data_mut();
            let Some(place) = state.socket_place() else {
                return Ok((Err(at_cap()),));
            };
            let made = HostTcpSocket::create(&mut state.sockets(), family);
            Ok((state.holding(Kind::P3Tcp, place, made)?,))
        },
    )?;
    types.func_wrap_async(
        "[static]udp-socket.create",
        move |mut store, (family,): (IpAddressFamily,)| {
            Box::new(async move {
                let state: &mut HostState = store.data_mut();
                let Some(place) = state.socket_place() else {
                    return Ok((Err(at_cap()),));
                };
                let made = HostUdpSocket::create(&mut state.sockets(), family).await;
                Ok((state.holding(Kind::P3Udp, place, made)?,))
            })
        },
    )?;
    Ok(())
}
