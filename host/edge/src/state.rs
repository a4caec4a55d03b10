//! What each store carries: WASI and wasi:http contexts, the resource table,
//! the memory limiter and the capabilities granted to this component for
//! this tenant.

use edge_keyvalue::{Grants, KeyValue, KeyValueView};
use edge_outbound_http::OutboundPolicy;
use edge_variables::{Variables, VariablesView};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
    WasiHttpView,
};

/// Everything needed to create a store for one (tenant, component), built
/// once per config load.
#[derive(Clone)]
pub struct StoreSpec {
    /// Linear-memory cap per instance.
    pub memory_bytes: u64,
    /// The tenant's share, which the instance's memories are taken from
    /// (`max_total_memory_bytes`, within the host's).
    pub memory_share: std::sync::Arc<crate::share::TenantShare>,
    /// Host resources (fields, streams, requests...) an instance may hold:
    /// each is host memory the guest's own cap does not see.
    pub max_resources: usize,
    /// Bytes one set of header fields the guest builds may hold.
    pub max_fields_bytes: usize,
    /// Where outbound HTTP may go.
    pub outbound: OutboundPolicy,
    /// Whether `outbound` grants `wasi:sockets` TCP and UDP (known once
    /// per config, not per store).
    pub sockets: Sockets,
    /// Resolved variables (empty when the component declares none).
    pub variables: Variables,
    /// Key-value stores granted (empty when the component names none).
    pub kv: Grants,
    /// SQLite databases granted (empty when the component names none).
    pub sqlite: edge_sqlite::Grant,
    /// Environment variables (Spin's `environment`).
    pub environment: std::sync::Arc<[(String, String)]>,
    /// A directory holding the component's files (Spin's `files`),
    /// mounted read-only at `/`.
    pub files: Option<std::sync::Arc<std::path::Path>>,
    /// Sidecar programs the tenant may run.
    pub process: edge_process::Grant,
    /// The tenant's mixing rooms.
    pub mixer: edge_mixer::MixerGrant,
    /// The apps its service bindings call, if it is a Worker with some.
    pub services: Option<crate::services::Grant>,
    /// The Worker script the Workers engine runs, for a script.
    pub script: Option<std::sync::Arc<str>>,
    /// The tenant's running HTML rewriting threads.
    pub html_threads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The bytes the tenant's instances' unread result streams hold.
    pub unread_bytes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The tenant's open descriptors (`max_open_files`).
    pub open_files: std::sync::Arc<edge_open_files::OpenFiles>,
    /// The tenant's work on the blocking pool (its lane, its CPU).
    pub blocking: edge_blocking::TenantWork,
}

impl StoreSpec {
    /// Whether `other` grants exactly the same (so a store built from one
    /// is a store built from the other).
    pub fn same_grants(&self, other: &StoreSpec) -> bool {
        self.memory_bytes == other.memory_bytes
            && self.max_resources == other.max_resources
            && self.max_fields_bytes == other.max_fields_bytes
            && self.outbound.same_rules(&other.outbound)
            && self.variables.same_values(&other.variables)
            && self.kv.same_stores(&other.kv)
            && self.sqlite.same(&other.sqlite)
            && self.environment == other.environment
            && self.files == other.files
            && self.process.same(&other.process)
            && self.script == other.script
            && match (&self.services, &other.services) {
                (Some(a), Some(b)) => a.same(b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }
}

/// The `T` of `Store<T>`.
pub struct HostState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    /// Bytes one set of header fields may hold (`http`'s limit, which it
    /// does not tell).
    max_fields_bytes: usize,
    hooks: HttpHooks,
    variables: Variables,
    kv: Grants,
    /// Bytes of values the instance's key-value CAS handles hold.
    kv_cas_bytes: usize,
    /// Host memory the instance's unread result streams hold.
    unread: edge_unread::UnreadBudget,
    sqlite: edge_sqlite::Grant,
    process: edge_process::Grant,
    mixer: edge_mixer::MixerGrant,
    html: edge_html::Rewriters,
    /// The places in the tenant's outbound cap its sockets hold.
    socket_places: crate::sockets::SocketPlaces,
    /// Whether `wasi:sockets` name lookups are granted.
    name_lookup: bool,
    /// Its tenant's open descriptors.
    open_files: std::sync::Arc<edge_open_files::OpenFiles>,
    /// Its tenant's work on the blocking pool.
    blocking: edge_blocking::TenantWork,
    /// The Worker script its instance runs (the Workers engine asks).
    pub script: Option<std::sync::Arc<str>>,
    /// The memory cap, read by the store's limiter.
    pub limiter: MemoryCap,
    /// When the current request must be done; read at each epoch tick.
    pub deadline: std::time::Instant,
    /// Whether the current request's body waits on its client.
    pub client_pace: Option<crate::body::ClientPace>,
    /// The guest's stdout and stderr, bounded.
    pub log: crate::guest_log::GuestLog,
    /// Metrics of this tenant and component (guest counters go here).
    pub metrics: std::sync::Arc<crate::metrics::RouteMetrics>,
    /// Counts the epoch ticks the current call runs through.
    pub call_clock: Option<crate::lanes::CallClock>,
}

/// Caps each linear memory of an instance, takes what its memories hold
/// together, and what its host resources are counted as, from its
/// tenant's share (and so the host's), and remembers which bound a guest
/// hit, so a trap can be reported as a memory-cap kill or a refusal rather
/// than a bug.
pub struct MemoryCap {
    bytes: usize,
    /// Set when the guest asked for more than `bytes`.
    pub hit: bool,
    /// Set when its tenant's share or the host's had no more memory.
    pub refused: Option<crate::share::MemoryRefusal>,
    share: std::sync::Arc<crate::share::TenantShare>,
    /// Bytes of linear memory taken from `share` (memories never shrink;
    /// a growth that fails after it was allowed, which the caps below make
    /// rare, stays counted until the store is dropped).
    linear: u64,
    /// Bytes taken from `share` for host memory the instance holds
    /// ([`HostState::host_bytes`], counted at epoch ticks).
    host: u64,
}

impl MemoryCap {
    fn new(bytes: usize, share: std::sync::Arc<crate::share::TenantShare>) -> Self {
        Self {
            bytes,
            hit: false,
            refused: None,
            share,
            linear: 0,
            host: 0,
        }
    }

    /// Bytes of linear memory taken so far.
    pub fn linear(&self) -> u64 {
        self.linear
    }

    /// Counts the instance's host memory as `bytes` from now on: takes
    /// what it grew by from the share, or gives back what it shrank by.
    fn count_host(&mut self, bytes: u64) -> Result<(), crate::share::MemoryRefusal> {
        if bytes > self.host {
            if let Err(refusal) = self.share.take_memory(bytes - self.host) {
                self.refused = Some(refusal);
                return Err(refusal);
            }
        } else {
            self.share.give_memory(self.host - bytes);
        }
        self.host = bytes;
        Ok(())
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        self.share.give_memory(self.linear + self.host);
    }
}

impl ResourceLimiter for MemoryCap {
    // Called for each memory when it is made (from 0) and each time it
    // grows.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.bytes {
            // Trapping (rather than failing memory.grow) stops a guest that
            // would otherwise limp on or abort with a less clear message.
            self.hit = true;
            wasmtime::bail!(
                "memory cap of {} bytes exceeded: the guest asked for {desired}",
                self.bytes
            );
        }
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        let more = desired.saturating_sub(current) as u64;
        if let Err(refusal) = self.share.take_memory(more) {
            // Trapping too: the request is answered 503 (Retry-After), the
            // guest does not go on without the memory it asked for.
            self.refused = Some(refusal);
            let bound = match refusal {
                crate::share::MemoryRefusal::Tenant => {
                    "the tenant's instances hold its limits.max_total_memory_bytes"
                }
                crate::share::MemoryRefusal::Host => {
                    "every tenant's instances hold the host's pool.total_memory_bytes"
                }
            };
            wasmtime::bail!("memory refused: the guest asked for {more} bytes more and {bound}");
        }
        self.linear += more;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(maximum.is_none_or(|m| desired <= m))
    }
}

impl HostState {
    /// Fresh state for one instance. No ambient authority: no preopened
    /// directories, no environment, no sockets; stdout and stderr kept (bounded) for the log.
    pub fn new(spec: &StoreSpec, metrics: std::sync::Arc<crate::metrics::RouteMetrics>) -> Self {
        let log = crate::guest_log::GuestLog::default();
        let mut wasi = WasiCtx::builder();
        wasi.stdout(log.clone()).stderr(log.clone());
        allow_sockets(&mut wasi, &spec.outbound, spec.sockets);
        if !spec.environment.is_empty() {
            wasi.envs(&spec.environment);
        }
        if let Some(dir) = &spec.files {
            // Read-only: neither the files nor the directory can change.
            if let Err(e) =
                wasi.preopened_dir(dir, "/", wasmtime_wasi::filesystem::FsPerms::ReadOnly)
            {
                tracing::warn!(dir = %dir.display(), error = %e, "the component's files are unavailable");
            }
        }
        // Wasmtime's defaults (a million table entries, 128 KiB per fields)
        // let one guest grow the host by gigabytes: each entry and field
        // lives in host memory, outside the guest's memory cap.
        let mut table = ResourceTable::new();
        table.set_max_capacity(spec.max_resources);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(spec.max_fields_bytes);
        Self {
            table,
            wasi: wasi.build(),
            http,
            max_fields_bytes: spec.max_fields_bytes,
            hooks: HttpHooks {
                outbound: spec.outbound.clone(),
                body_bytes_left: BODY_BUFFER_BYTES,
                services: spec.services.clone(),
                chain: Default::default(),
            },
            variables: spec.variables.clone(),
            kv: spec.kv.clone(),
            kv_cas_bytes: 0,
            unread: edge_unread::UnreadBudget::for_tenant(spec.unread_bytes.clone()),
            sqlite: spec.sqlite.clone(),
            process: spec.process.clone(),
            mixer: spec.mixer.clone(),
            html: edge_html::Rewriters::for_tenant(
                spec.html_threads.clone(),
                spec.blocking.clone(),
            ),
            socket_places: Default::default(),
            name_lookup: spec.sockets.tcp || spec.sockets.udp,
            open_files: spec.open_files.clone(),
            blocking: spec.blocking.clone(),
            script: spec.script.clone(),
            limiter: MemoryCap::new(spec.memory_bytes as usize, spec.memory_share.clone()),
            deadline: std::time::Instant::now(),
            client_pace: None,
            log,
            metrics,
            call_clock: None,
        }
    }
}

impl HostState {
    /// Bytes one set of header fields the guest builds may hold.
    pub fn max_fields_bytes(&self) -> usize {
        self.max_fields_bytes
    }

    /// Where the instance may connect, and its tenant's outbound cap.
    pub fn outbound(&self) -> &OutboundPolicy {
        &self.hooks.outbound
    }

    /// The instance's resource table.
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// Whether `wasi:sockets` name lookups are granted.
    pub(crate) fn name_lookup_granted(&self) -> bool {
        self.name_lookup
    }

    /// Its tenant's open descriptors (`max_open_files`).
    pub(crate) fn open_files(&self) -> &std::sync::Arc<edge_open_files::OpenFiles> {
        &self.open_files
    }

    /// Its tenant's work on the blocking pool (its lane, its CPU).
    pub(crate) fn blocking(&self) -> &edge_blocking::TenantWork {
        &self.blocking
    }

    /// The resource table, and the places in the outbound cap its sockets
    /// hold.
    pub(crate) fn table_and_socket_places(
        &mut self,
    ) -> (&ResourceTable, &mut crate::sockets::SocketPlaces) {
        (&self.table, &mut self.socket_places)
    }
}

/// Links `p2`'s definitions, and `p3`'s in the concurrent engine, over
/// wasmtime-wasi's own (call it after the library's `add_to_linker`s).
pub(crate) fn link_over_library(
    linker: &mut wasmtime::component::Linker<HostState>,
    concurrent: bool,
    p2: fn(&mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()>,
    p3: fn(&mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = p2(linker).and_then(|()| if concurrent { p3(linker) } else { Ok(()) });
    // Anything linked after this must not replace a definition by mistake.
    linker.allow_shadowing(false);
    linked
}

/// Links the resource `name` of `instance` as the host type `T`, kept in
/// the instance's resource table and deleted from it when the guest drops
/// it (for resources linked over wasmtime-wasi's own).
pub(crate) fn link_table_resource<T: Send + 'static>(
    instance: &mut wasmtime::component::LinkerInstance<'_, HostState>,
    name: &str,
) -> wasmtime::Result<()> {
    use wasmtime::component::{Resource, ResourceType};
    instance.resource(name, ResourceType::host::<T>(), |mut store, rep| {
        let state: &mut HostState = store.data_mut();
        state.table().delete(Resource::<T>::new_own(rep))?;
        Ok(())
    })
}

/// Which `wasi:sockets` a component's allowlist grants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sockets {
    /// Some entry may match `tcp://...`.
    pub tcp: bool,
    /// Some entry may match `udp://...`.
    pub udp: bool,
}

impl Sockets {
    /// What `outbound` grants.
    pub fn of(outbound: &OutboundPolicy) -> Self {
        Self {
            tcp: outbound.covers_scheme("tcp"),
            udp: outbound.covers_scheme("udp"),
        }
    }
}

/// `wasi:sockets` as Spin grants it: TCP if some `allowed_outbound_hosts`
/// entry may match `tcp://ADDRESS:PORT` (`*://...` included), UDP
/// likewise with `udp`; each connection (or datagram) to an address is
/// checked against the allowlist and the tenant's address policy. No
/// socket may listen, and none may bind but the implicit bind of a
/// connect. Name lookup comes with either.
fn allow_sockets(
    wasi: &mut wasmtime_wasi::WasiCtxBuilder,
    outbound: &OutboundPolicy,
    sockets: Sockets,
) {
    let Sockets { tcp, udp } = sockets;
    if !tcp && !udp {
        return;
    }
    wasi.allow_tcp(tcp)
        .allow_udp(udp)
        .allow_ip_name_lookup(true);
    let outbound = outbound.clone();
    wasi.socket_addr_check(move |addr, usage| {
        use wasmtime_wasi::sockets::SocketAddrUse as Use;
        let implicit = addr.ip().is_unspecified() && addr.port() == 0;
        let allowed = match usage {
            Use::TcpBind | Use::UdpBind => implicit,
            Use::TcpConnect => outbound.allows_socket("tcp", addr),
            Use::UdpSend | Use::UdpReceive => outbound.allows_socket("udp", addr),
            _ => false,
        };
        Box::pin(std::future::ready(allowed))
    });
}

/// Host memory one request's outgoing bodies may buffer in big chunks.
///
/// Each outgoing body (a response's, or an outbound request's) buffers up
/// to two writes in the host until its reader takes them: with wasi-http's
/// 1 MiB writes, a guest making hundreds of bodies it never sends could pin
/// hundreds of MiB outside its memory cap. The first bodies of a request
/// (four, at 2 MiB each) get 1 MiB writes, for fast large bodies; later
/// ones get [`SMALL_CHUNK`] writes, which bounds the rest by the resource
/// table's cap.
pub const BODY_BUFFER_BYTES: usize = 8 << 20;

/// The write size of outgoing bodies past a request's big-chunk budget.
pub const SMALL_CHUNK: usize = 16 << 10;

/// What one entry of an instance's resource table other than a set of
/// header fields (counted as its `max_fields_bytes`) is counted as in its
/// tenant's memory share: the most one holds in host memory (an outgoing
/// body's two [`SMALL_CHUNK`] writes). Measured: 50 instances each
/// holding 1,000 sets of 24 KiB of fields grew the host by 24.5 MiB each;
/// each holding 300 unsent bodies (17 MiB written), by 19.1 MiB each.
pub const HOST_BYTES_PER_RESOURCE: usize = 32 << 10;

/// What wasi-http asks of the host for one store: where outbound requests
/// may go, and how much each outgoing body may buffer.
struct HttpHooks {
    outbound: OutboundPolicy,
    /// What is left of this request's [`BODY_BUFFER_BYTES`].
    body_bytes_left: usize,
    /// The apps its service bindings may call.
    services: Option<crate::services::Grant>,
    /// Where the request it serves is in a chain of service calls.
    chain: crate::services::Chain,
}

/// What `send_request` answers: the response and the body's completion.
type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        if request.headers().contains_key(crate::services::HEADER) {
            return crate::services::call(self.services.as_ref(), &self.chain, request);
        }
        self.outbound.send_request(request, options, fut)
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        let big = wasmtime_wasi_http::p2::DEFAULT_OUTGOING_BODY_CHUNK_SIZE;
        // The body's channel holds buffer_chunks + 1 writes.
        let cost = big * (self.p2_outgoing_body_buffer_chunks() + 1);
        match self.body_bytes_left.checked_sub(cost) {
            Some(left) => {
                self.body_bytes_left = left;
                big
            }
            None => SMALL_CHUNK,
        }
    }
}

impl HostState {
    /// Takes `bytes` from this request's [`BODY_BUFFER_BYTES`] for a body
    /// the host holds whole (a complete response made in one call); false,
    /// and nothing taken, if they are not left.
    pub fn take_body_bytes(&mut self, bytes: usize) -> bool {
        match self.hooks.body_bytes_left.checked_sub(bytes) {
            Some(left) => {
                self.hooks.body_bytes_left = left;
                true
            }
            None => false,
        }
    }

    /// What the instance's host resources are counted as in its tenant's
    /// memory share: for each entry of its resource table the most it may
    /// hold (a set of header fields its `max_fields_bytes`, any other
    /// [`HOST_BYTES_PER_RESOURCE`]), and its key-value CAS handles' values.
    /// (Not the big writes of a request's first outgoing bodies: those are
    /// bounded by [`BODY_BUFFER_BYTES`] a request, and taken from it when a
    /// body is made, the guest's own response's too, whether or not it
    /// ever writes that much.)
    pub fn host_bytes(&mut self) -> u64 {
        let fields = self.max_fields_bytes as u64;
        let other = HOST_BYTES_PER_RESOURCE as u64;
        let resources: u64 = self
            .table
            .iter_mut()
            .map(|entry| {
                if entry.is::<wasmtime_wasi_http::FieldMap>() {
                    fields
                } else {
                    other
                }
            })
            .sum();
        resources + self.kv_cas_bytes as u64
    }

    /// Counts [`HostState::host_bytes`] in the tenant's memory share (at
    /// each epoch tick of a running guest: a guest making resources runs,
    /// and one waiting keeps what it was counted). An error when the share
    /// or the host's memory has no room for them: the guest is stopped.
    pub fn count_host_memory(&mut self) -> wasmtime::Result<()> {
        let bytes = self.host_bytes();
        if self.limiter.count_host(bytes).is_err() {
            wasmtime::bail!(
                "memory refused: the instance's host resources are counted as {bytes} bytes, more than its tenant's share or the host's has left"
            );
        }
        Ok(())
    }

    /// A new request on this store (a session's next job) gets its own
    /// body budget, and its place in a chain of service calls.
    pub fn begin_request(&mut self, chain: crate::services::Chain) {
        self.hooks.body_bytes_left = BODY_BUFFER_BYTES;
        self.hooks.chain = chain;
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl VariablesView for HostState {
    fn variables(&mut self) -> &Variables {
        &self.variables
    }
}

impl edge_html::HtmlView for HostState {
    fn html(&mut self) -> edge_html::Html<'_> {
        edge_html::Html {
            rewriters: &mut self.html,
            table: &mut self.table,
        }
    }
}

impl KeyValueView for HostState {
    fn keyvalue(&mut self) -> KeyValue<'_> {
        KeyValue {
            grants: &self.kv,
            table: &mut self.table,
            cas_bytes: &mut self.kv_cas_bytes,
            unread: &self.unread,
        }
    }
}

impl edge_sqlite::SqliteView for HostState {
    fn sqlite(&mut self) -> edge_sqlite::Sqlite<'_> {
        edge_sqlite::Sqlite {
            grant: &self.sqlite,
            table: &mut self.table,
            deadline: self.deadline,
            unread: &self.unread,
        }
    }
}

impl edge_redis::RedisView for HostState {
    fn redis(&mut self) -> edge_redis::Redis<'_> {
        edge_redis::Redis {
            outbound: &self.hooks.outbound,
            table: &mut self.table,
        }
    }
}

impl edge_mqtt::MqttView for HostState {
    fn mqtt(&mut self) -> edge_mqtt::Mqtt<'_> {
        edge_mqtt::Mqtt {
            outbound: &self.hooks.outbound,
            table: &mut self.table,
        }
    }
}

impl edge_postgres::PostgresView for HostState {
    fn postgres(&mut self) -> edge_postgres::Postgres<'_> {
        edge_postgres::Postgres {
            outbound: &self.hooks.outbound,
            table: &mut self.table,
            unread: &self.unread,
        }
    }
}

impl edge_mysql::MysqlView for HostState {
    fn mysql(&mut self) -> edge_mysql::Mysql<'_> {
        edge_mysql::Mysql {
            outbound: &self.hooks.outbound,
            table: &mut self.table,
            unread: &self.unread,
        }
    }
}

impl edge_process::ProcessView for HostState {
    fn process(&mut self) -> &edge_process::Grant {
        &self.process
    }
}

impl edge_mixer::MixerView for HostState {
    fn mixer(&mut self) -> &edge_mixer::MixerGrant {
        &self.mixer
    }
}
