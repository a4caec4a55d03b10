//! Name lookups a tenant cannot pile up, each waiting on a socket rather
//! than a thread.
//!
//! A name listed in `/etc/hosts` has the addresses listed there, and only
//! those; any other is resolved by hickory-resolver with the servers,
//! search domains and options of `/etc/resolv.conf`, on a thread of its
//! own, over UDP. Both files are looked at again at each lookup and read
//! again when they changed, as glibc does. The system resolver
//! (`getaddrinfo`) would hold a blocking thread per lookup for as long as
//! the name's servers take: seconds for a name whose servers are silent,
//! which any tenant can own, and a few tenants would hold every thread the
//! host could spare.
//!
//! Answers are kept as their records' TTLs allow (and that a name has
//! none as its zone's SOA says, within an hour), at most
//! [`ADDRESSES_PER_NAME`] addresses of each and [`CACHE_BYTES`] for the
//! host, least recently used out first. (hickory's own cache keeps whole
//! messages by count: a tenant's server answering names of 253 bytes with
//! sixty records each, the name copied into every one, had the host keep
//! 33 KB a name, 136 MB for its 4,096.)
//!
//! A lookup holds one of its tenant's [`PER_TENANT`] places while its
//! query runs, so a tenant cannot pile queries onto the operator's DNS
//! servers, and one of the host's [`PER_HOST`] (each query takes a socket
//! or two), in the order asked but tenants running many set back. Its
//! caller giving up while it waits for a place ends it; once sent, a
//! query runs to its answer or its timeout in its places (a loop of
//! lookups given up at once is held to the caps, not to the caller's
//! patience). A and AAAA are asked on their own, so that a name whose
//! one family's query failed is not kept as having the other alone. Why
//! a lookup found nothing is said in fixed words (the resolver's own
//! errors name the operator's search domains).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use edge_outbound_http::{TenantOutbound, lookup};
//! let tenant = std::sync::Arc::new(TenantOutbound::new("acme", 4));
//! let found = lookup::resolve(tenant.clone(), "localhost".into(), 80).await.unwrap();
//! assert!(found.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
//! assert_eq!(tenant.lookups_running(), 0);
//! # });
//! ```

use crate::limit::TenantOutbound;
use hickory_resolver::config::{
    ConnectionConfig, NameServerConfig, ProtocolConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError, NoRecords};
use hickory_resolver::proto::op::Query;
use hickory_resolver::proto::rr::{Name, RecordType};
use hickory_resolver::{Hosts, TokioResolver};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Lookups one tenant may have running at once.
pub const PER_TENANT: usize = 16;

/// Queries the host has running at once, whatever their tenants: a bound
/// on the sockets they take and the load on the operator's DNS servers,
/// thirty-two tenants' worth.
pub const PER_HOST: usize = 512;

/// Addresses kept of a name's answer, in the order found (IPv4 first): a
/// connection tries a few.
pub const ADDRESSES_PER_NAME: usize = 32;

/// Bytes of answers the host keeps, counted as [`weight`] counts them.
pub const CACHE_BYTES: u64 = 4 << 20;

/// A resolver, and the runtime its queries run on: a thread of its own, so
/// the sockets and tasks a query leaves for the next outlive any serving
/// runtime (and a test's).
pub struct Resolver {
    runtime: tokio::runtime::Handle,
    /// Where its configuration comes from.
    files: Option<Files>,
    /// Its configuration as last read.
    current: Mutex<Arc<Configured>>,
    /// Answers, by name as asked.
    kept: moka::sync::Cache<String, Kept>,
    queries: Arc<Places>,
    /// Lookups that found nothing, by [`FAILURES`].
    failures: [AtomicU64; 3],
    /// Lookups answered from `kept`.
    hits: AtomicU64,
}

/// Why a lookup found nothing, as `/metrics` names it.
const FAILURES: [&str; 3] = ["no_address", "timeout", "other"];

/// The host's resolver, once a lookup has made it.
static SYSTEM: OnceLock<Arc<Resolver>> = OnceLock::new();

/// The paths of a `resolv.conf` and a hosts file.
struct Files {
    resolv_conf: PathBuf,
    hosts: PathBuf,
}

/// What identifies a file's contents without reading it: device, inode,
/// modification time and size (`None` if it cannot be looked at).
type Stamp = Option<(u64, u64, i64, i64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
}

/// A configuration in force: the hosts file's names, a resolver for the
/// others, and the stamps of the files they were read from.
struct Configured {
    hosts: Hosts,
    /// Asked for each name's A and AAAA records on their own.
    names: TokioResolver,
    read: (Stamp, Stamp),
}

impl Files {
    fn stamps(&self) -> (Stamp, Stamp) {
        (stamp(&self.resolv_conf), stamp(&self.hosts))
    }

    /// Both files as they are now (stamped first: a change while they are
    /// read is seen at the next lookup). A `resolv.conf` that cannot be
    /// read or names no server means a server on this machine, as glibc
    /// takes it; a hosts file that cannot be read lists nothing.
    fn read(&self) -> Configured {
        let read = self.stamps();
        let (config, options) = std::fs::read(&self.resolv_conf)
            .map_err(NetError::from)
            .and_then(hickory_resolver::system_conf::parse_resolv_conf)
            .unwrap_or_else(|e| {
                tracing::warn!(file = %self.resolv_conf.display(), error = %e, "no DNS server named: asking 127.0.0.1");
                let local = NameServerConfig::udp([127, 0, 0, 1].into());
                (
                    ResolverConfig::from_parts(None, Vec::new(), vec![local]),
                    ResolverOpts::default(),
                )
            });
        let hosts = std::fs::File::open(&self.hosts)
            .and_then(|file| {
                let mut hosts = Hosts::default();
                hosts.read_hosts_conf(file)?;
                Ok(hosts)
            })
            .unwrap_or_else(|e| {
                tracing::warn!(file = %self.hosts.display(), error = %e, "the hosts file could not be read");
                Hosts::default()
            });
        configured(config, options, hosts, read)
    }
}

/// hickory's resolver for `config`'s servers over UDP, with `options`
/// (`attempts` counted as `resolv.conf` counts them), beside `hosts`.
fn configured(
    config: ResolverConfig,
    mut options: ResolverOpts,
    hosts: Hosts,
    read: (Stamp, Stamp),
) -> Configured {
    // (hickory's attempts are tries after the first.)
    options.attempts = options.attempts.saturating_sub(1);
    options.use_hosts_file = ResolveHosts::Never;
    // Answers are kept by `Resolver::kept`, bounded in bytes.
    options.cache_size = 0;
    // EDNS always, with hickory's 1,232 bytes (the DNS flag day's): without
    // it an answer is read in at most 512 bytes, and one longer is refused
    // (truncated over UDP, and no TCP here).
    options.edns0 = true;
    // UDP only: an answer is at most one message of the size above, never a
    // TCP stream of up to 64 KiB, each record of which hickory holds with
    // a copy of its name (a tenant's server can answer with thousands).
    let servers = config
        .name_servers()
        .iter()
        .map(|s| {
            let port = s.connections.first().map_or(53, |c| c.port);
            let mut udp = ConnectionConfig::new(ProtocolConfig::Udp);
            udp.port = port;
            NameServerConfig::new(s.ip, s.trust_negative_responses, vec![udp])
        })
        .collect();
    let config =
        ResolverConfig::from_parts(config.domain().cloned(), config.search().to_vec(), servers);
    Configured {
        names: TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options)
            .build()
            .expect("a resolver of a configuration without encryption"),
        hosts,
        read,
    }
}

/// How long a name found to have no address is kept so at most.
const NEGATIVE_TTL_MAX: Duration = Duration::from_secs(3600);

fn no_address(name: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("no address found for {name}"),
    )
}

/// A name's addresses, as kept (none: the name has none).
#[derive(Clone)]
struct Kept {
    addresses: Arc<[IpAddr]>,
    until: Instant,
}

/// What a kept answer counts against [`CACHE_BYTES`]: its name, its
/// addresses, and the cache's own bookkeeping of an entry (its node, key
/// and value handles, its place in the access order; about 200 bytes).
fn weight(name: &str, kept: &Kept) -> u32 {
    let bytes = 256 + name.len() + std::mem::size_of_val(&*kept.addresses);
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Each kept answer is dropped when its records' TTLs run out.
struct UntilItsTtl;

impl moka::Expiry<String, Kept> for UntilItsTtl {
    fn expire_after_create(&self, _: &String, kept: &Kept, now: Instant) -> Option<Duration> {
        Some(kept.until.saturating_duration_since(now))
    }

    // A name answered again (two lookups that missed at once) is kept as
    // its newer answer says.
    fn expire_after_update(
        &self,
        _: &String,
        kept: &Kept,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(kept.until.saturating_duration_since(now))
    }
}

/// What a lookup of one address family found.
enum Family {
    /// Addresses, valid until then.
    Found(hickory_resolver::lookup_ip::LookupIp),
    /// None, for the zone's negative TTL if it gave one.
    None(Option<Duration>),
    /// No answer to go by (a timeout, a server failure).
    Failed(NetError),
}

impl Family {
    fn of(result: Result<hickory_resolver::lookup_ip::LookupIp, NetError>) -> Family {
        match result {
            Ok(found) => Family::Found(found),
            Err(NetError::Dns(DnsError::NoRecordsFound(NoRecords { negative_ttl, .. }))) => {
                Family::None(negative_ttl.map(|s| Duration::from_secs(u64::from(s))))
            }
            Err(e) => Family::Failed(e),
        }
    }

    fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        match self {
            Family::Found(found) => Some(found.iter()),
            _ => None,
        }
        .into_iter()
        .flatten()
    }

    /// Until when both families' answers may be kept together: never if
    /// either failed; as long as the addresses found are valid, a family
    /// without any kept as long; a name with none, for the zones' negative
    /// TTLs (within [`NEGATIVE_TTL_MAX`]) if they gave them.
    fn keep_until(a: &Family, b: &Family) -> Option<Instant> {
        let now = Instant::now();
        let found = [a, b].into_iter().filter_map(|f| match f {
            Family::Found(found) => Some(found.valid_until()),
            _ => None,
        });
        match (a, b) {
            (Family::Failed(_), _) | (_, Family::Failed(_)) => None,
            (Family::None(a), Family::None(b)) => {
                let ttl = a.zip(*b).map(|(a, b)| a.min(b).min(NEGATIVE_TTL_MAX))?;
                Some(now + ttl)
            }
            _ => found.min(),
        }
    }
}

/// The host's query places, handed out in the order queries asked, each
/// set back [`SET_BACK_PER_LOOKUP`] places for every lookup its tenant had
/// running when it asked: a place that comes free goes to a tenant running
/// few before tenants running many (who still get theirs, however many
/// others keep asking). In plain arrival order, tenants looking up names
/// whose servers are silent, each within its 16, would have every other
/// tenant's query wait behind theirs for their timeouts.
struct Places {
    state: Mutex<Queue>,
}

struct Queue {
    free: usize,
    running: usize,
    asked: u64,
    /// By place in the queue, then the order of asking.
    waiting: BTreeMap<(u64, u64), oneshot::Sender<Place>>,
}

/// How far back in the host's queue each lookup its tenant runs sets a
/// query.
const SET_BACK_PER_LOOKUP: u64 = 64;

/// One of the host's query places, given back when dropped (also when
/// handed to a query that gave up before taking it).
struct Place(Option<Arc<Places>>);

impl Places {
    fn new(places: usize) -> Arc<Places> {
        Arc::new(Places {
            state: Mutex::new(Queue {
                free: places,
                running: 0,
                asked: 0,
                waiting: BTreeMap::new(),
            }),
        })
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place, for a tenant with `held` lookups running.
    async fn take(self: &Arc<Self>, held: usize) -> Place {
        let waiting = {
            let mut queue = self.queue();
            if queue.free > 0 && queue.waiting.is_empty() {
                queue.free -= 1;
                queue.running += 1;
                return Place(Some(self.clone()));
            }
            let (tx, rx) = oneshot::channel();
            queue.asked += 1;
            let order = queue.asked;
            let place = order + held as u64 * SET_BACK_PER_LOOKUP;
            queue.waiting.insert((place, order), tx);
            rx
        };
        waiting
            .await
            .expect("a waiting query's sender is kept until it is sent a place")
    }

    /// A place back: to the first waiting query still waiting, or free.
    fn give_back(self: &Arc<Self>) {
        let mut queue = self.queue();
        while let Some((_, waiter)) = queue.waiting.pop_first() {
            match waiter.send(Place(Some(self.clone()))) {
                Ok(()) => return,
                // That query gave up: its place is passed on, not dropped.
                Err(mut place) => place.0 = None,
            }
        }
        queue.running -= 1;
        queue.free += 1;
    }

    /// Places taken, and queries waiting for one (some of which may have
    /// given up since).
    fn counts(&self) -> (usize, usize) {
        let queue = self.queue();
        (queue.running, queue.waiting.len())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(places) = self.0.take() {
            places.give_back();
        }
    }
}

impl Resolver {
    /// The host's resolver, under the system's configuration
    /// (`/etc/resolv.conf` and `/etc/hosts`).
    pub fn system() -> Arc<Resolver> {
        SYSTEM
            .get_or_init(|| Resolver::from_files("/etc/resolv.conf", "/etc/hosts"))
            .clone()
    }

    /// A resolver configured by the files at these paths, read now and
    /// again whenever a lookup finds them changed.
    pub fn from_files(resolv_conf: impl Into<PathBuf>, hosts: impl Into<PathBuf>) -> Arc<Resolver> {
        let files = Files {
            resolv_conf: resolv_conf.into(),
            hosts: hosts.into(),
        };
        let current = files.read();
        Resolver::with(Some(files), current)
    }

    /// A resolver asking `config`'s servers over UDP, with `options`
    /// (`attempts` counted as `resolv.conf` counts them) after `hosts`.
    pub fn new(config: ResolverConfig, options: ResolverOpts, hosts: Hosts) -> Arc<Resolver> {
        Resolver::with(None, configured(config, options, hosts, (None, None)))
    }

    fn with(files: Option<Files>, current: Configured) -> Arc<Resolver> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for name lookups");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("edge-dns".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("a thread for name lookups");
        let kept = moka::sync::Cache::builder()
            .max_capacity(CACHE_BYTES)
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .weigher(|name: &String, kept: &Kept| weight(name, kept))
            .expire_after(UntilItsTtl)
            .build();
        Arc::new(Resolver {
            runtime: handle,
            files,
            current: Mutex::new(Arc::new(current)),
            kept,
            queries: Places::new(PER_HOST),
            failures: Default::default(),
            hits: AtomicU64::new(0),
        })
    }

    /// The configuration in force, read again first if its files changed
    /// since (answers kept are dropped with the servers that gave them).
    fn configured(&self) -> Arc<Configured> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(files) = &self.files
            && files.stamps() != current.read
        {
            let servers_changed = stamp(&files.resolv_conf) != current.read.0;
            *current = Arc::new(files.read());
            if servers_changed {
                self.kept.invalidate_all();
            }
        }
        current.clone()
    }

    /// The addresses `/etc/hosts` lists for `name`, if it lists any.
    fn listed(hosts: &Hosts, name: &str) -> Option<Vec<IpAddr>> {
        let name = Name::from_ascii(name).ok()?;
        let found: Vec<IpAddr> = [RecordType::A, RecordType::AAAA]
            .into_iter()
            .filter_map(|t| hosts.lookup_static_host(&Query::query(name.clone(), t)))
            .flat_map(|l| {
                l.answers()
                    .iter()
                    .filter_map(|r| r.data.ip_addr())
                    .collect::<Vec<_>>()
            })
            .collect();
        (!found.is_empty()).then_some(found)
    }

    /// The addresses of `name`, or why there are none in fixed words, for
    /// a tenant running `held` lookups.
    async fn addresses(&self, name: &str, held: usize) -> std::io::Result<Vec<IpAddr>> {
        use std::io::{Error, ErrorKind};
        let configured = self.configured();
        if let Some(listed) = Self::listed(&configured.hosts, name) {
            return Ok(listed);
        }
        if let Some(kept) = self.kept.get(name) {
            self.hits.fetch_add(1, Relaxed);
            if kept.addresses.is_empty() {
                self.failures[0].fetch_add(1, Relaxed);
                return Err(no_address(name));
            }
            return Ok(kept.addresses.to_vec());
        }
        let _query = self.queries.take(held).await;
        // Each family on its own: a combined lookup answers with one
        // family when the other's query failed, and that half would be
        // kept as the whole for the answer's TTL.
        // (Names only: address literals never come here.)
        let (v4, v6) = tokio::join!(
            configured.names.lookup(name, RecordType::A),
            configured.names.lookup(name, RecordType::AAAA)
        );
        let (v4, v6) = (
            Family::of(v4.map(hickory_resolver::lookup_ip::LookupIp::from)),
            Family::of(v6.map(hickory_resolver::lookup_ip::LookupIp::from)),
        );
        let addresses: Arc<[IpAddr]> = v4
            .addresses()
            .chain(v6.addresses())
            .take(ADDRESSES_PER_NAME)
            .collect();
        if let Some(until) = Family::keep_until(&v4, &v6) {
            let kept = Kept {
                addresses: addresses.clone(),
                until,
            };
            self.kept.insert(name.to_owned(), kept);
        }
        if !addresses.is_empty() {
            return Ok(addresses.to_vec());
        }
        let (failure, error) = match (&v4, &v6) {
            (Family::Failed(NetError::Timeout), _) | (_, Family::Failed(NetError::Timeout)) => (
                1,
                Error::new(
                    ErrorKind::TimedOut,
                    format!("the DNS servers did not answer for {name} in time"),
                ),
            ),
            (Family::Failed(e), _) | (_, Family::Failed(e)) => {
                tracing::debug!(name, error = %e, "name lookup failed");
                (2, Error::other(format!("{name} could not be resolved")))
            }
            _ => (0, no_address(name)),
        };
        self.failures[failure].fetch_add(1, Relaxed);
        Err(error)
    }

    /// Its figures in the Prometheus text format.
    fn render(&self, out: &mut String) {
        let (running, waiting) = self.queries.counts();
        let _ = writeln!(
            out,
            "# HELP edge_dns_queries_running Name queries the host's resolver has running (at most {PER_HOST}).\n# TYPE edge_dns_queries_running gauge\nedge_dns_queries_running {running}\n# HELP edge_dns_queries_waiting Name queries waiting for one of those places.\n# TYPE edge_dns_queries_waiting gauge\nedge_dns_queries_waiting {waiting}"
        );
        out.push_str("# HELP edge_dns_failures_total Name lookups that found nothing: no_address (the name has none), timeout (its servers did not answer in time), other.\n# TYPE edge_dns_failures_total counter\n");
        for (reason, n) in FAILURES.iter().zip(&self.failures) {
            let _ = writeln!(
                out,
                "edge_dns_failures_total{{reason=\"{reason}\"}} {}",
                n.load(Relaxed)
            );
        }
        self.kept.run_pending_tasks();
        let _ = writeln!(
            out,
            "# HELP edge_dns_cache_hits_total Name lookups answered from the answers kept.\n# TYPE edge_dns_cache_hits_total counter\nedge_dns_cache_hits_total {}\n# HELP edge_dns_cache_bytes What the answers kept count against their {CACHE_BYTES} bytes.\n# TYPE edge_dns_cache_bytes gauge\nedge_dns_cache_bytes {}",
            self.hits.load(Relaxed),
            self.kept.weighted_size()
        );
    }
}

/// The host resolver's figures in the Prometheus text format (nothing
/// before its first lookup).
pub fn render(out: &mut String) {
    if let Some(resolver) = SYSTEM.get() {
        resolver.render(out);
    }
}

/// The addresses of `name` (a domain name, not an address literal) with
/// `port`, as the host's resolver finds them ([`Resolver::system`]).
pub fn resolve(
    tenant: Arc<TenantOutbound>,
    name: String,
    port: u16,
) -> impl Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'static {
    resolve_with(Resolver::system(), tenant, name, port)
}

/// [`resolve`] by `resolver`. The lookup is a task of its own, started at
/// once: it goes on whether or not its caller polls (a place handed to a
/// caller not being polled would sit unused); dropping the handle gives up
/// on it while it waits for a place.
pub fn resolve_with(
    resolver: Arc<Resolver>,
    tenant: Arc<TenantOutbound>,
    name: String,
    port: u16,
) -> impl Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'static {
    let runtime = resolver.runtime.clone();
    let mut task = wasmtime_wasi::runtime::AbortOnDropJoinHandle::from(runtime.spawn(async move {
        tenant
            .lookups_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let place = tenant.lookup_place().await;
        // Once sent, the query ends in its place whatever its caller does;
        // its polls are the tenant's work.
        let held = tenant.lookups_running();
        let query = tokio::spawn(charged(tenant.work(), async move {
            let _place = place;
            resolver.addresses(&name, held).await
        }));
        let found = query.await.map_err(std::io::Error::other)??;
        Ok(found
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }));
    // Through the inner handle: a task cancelled (its runtime shutting
    // down) is an error, not a panic.
    async move {
        (&mut *task)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// `future`, the time each of its polls takes charged to `work`'s tenant.
async fn charged<F: Future>(work: edge_blocking::TenantWork, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let start = std::time::Instant::now();
        let polled = future.as_mut().poll(cx);
        work.charge(start.elapsed());
        polled
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    /// A DNS server of the test's on loopback: names whose first label
    /// starts with `ok` have the address 127.0.0.1 (for 60 s), those
    /// starting with `nx` do not exist (for 60 s, its SOA says), those
    /// starting with `half` have 127.0.0.1 and no answer to AAAA queries,
    /// and it counts the A queries for each; it never answers others. And a resolver asking only it, once,
    /// waiting `timeout`, after `hosts` (a hosts file's text).
    async fn server(
        timeout: Duration,
        hosts: &str,
    ) -> (Arc<Resolver>, Arc<Mutex<HashMap<String, usize>>>) {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let port = socket.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(HashMap::new()));
        let counts = asked.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let socket = tokio::net::UdpSocket::from_std(socket).unwrap();
                let mut buf = [0u8; 512];
                loop {
                    let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                    let query = &buf[..n];
                    // The question: labels up to the root, type, class.
                    let (mut at, mut labels) = (12, Vec::new());
                    while query[at] != 0 {
                        let len = query[at] as usize;
                        labels.push(
                            String::from_utf8_lossy(&query[at + 1..at + 1 + len]).into_owned(),
                        );
                        at += 1 + len;
                    }
                    let qtype = u16::from_be_bytes([query[at + 1], query[at + 2]]);
                    let question_end = at + 5;
                    let half = labels[0].starts_with("half");
                    let a = qtype == 1 && (labels[0].starts_with("ok") || half);
                    let rcode = match &labels[0] {
                        l if l.starts_with("ok") => 0,
                        _ if half && qtype == 1 => 0,
                        l if l.starts_with("nx") => 3,
                        _ => continue,
                    };
                    if qtype == 1 {
                        *counts.lock().unwrap().entry(labels.join(".")).or_insert(0) += 1;
                    }
                    let soa = rcode == 3;
                    let mut answer = query[..2].to_vec();
                    answer.extend_from_slice(&[
                        0x81,
                        0x80 | rcode,
                        0,
                        1,
                        0,
                        u8::from(a),
                        0,
                        u8::from(soa),
                        0,
                        0,
                    ]);
                    answer.extend_from_slice(&query[12..question_end]);
                    if a {
                        answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
                        answer.extend_from_slice(&60u32.to_be_bytes());
                        answer.extend_from_slice(&[0, 4, 127, 0, 0, 1]);
                    }
                    if soa {
                        // The zone's SOA (at the name itself, for brevity):
                        // root names, then serial, refresh, retry, expire
                        // and the minimum, 60 s, as is its TTL.
                        answer.extend_from_slice(&[0xc0, 12, 0, 6, 0, 1]);
                        answer.extend_from_slice(&60u32.to_be_bytes());
                        answer.extend_from_slice(&[0, 22, 0, 0]);
                        for field in [1u32, 3600, 600, 86400, 60] {
                            answer.extend_from_slice(&field.to_be_bytes());
                        }
                    }
                    socket.send_to(&answer, from).await.unwrap();
                }
            });
        });
        let mut udp = ConnectionConfig::udp();
        udp.port = port;
        let config = ResolverConfig::from_parts(
            None,
            Vec::new(),
            vec![NameServerConfig::new(
                "127.0.0.1".parse().unwrap(),
                true,
                vec![udp],
            )],
        );
        let mut options = ResolverOpts::default();
        options.timeout = timeout;
        options.attempts = 1;
        let mut listed = Hosts::default();
        listed.read_hosts_conf(hosts.as_bytes()).unwrap();
        (Resolver::new(config, options, listed), asked)
    }

    /// Waits for `what` to hold; fails the test if it does not in 5 s.
    async fn until(what: impl Fn() -> bool) {
        for _ in 0..500 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("still not so after 5 s");
    }

    #[tokio::test]
    async fn a_lookup_its_caller_gave_up_on_keeps_its_place_until_its_query_ends() {
        let (resolver, _) = server(Duration::from_millis(300), "").await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        let lookup = resolve_with(resolver, tenant.clone(), "silent.test".into(), 80);
        let gave_up = tokio::time::timeout(Duration::from_millis(50), lookup).await;
        assert!(gave_up.is_err());
        assert_eq!(tenant.lookups_running(), 1, "the query still runs");
        until(|| tenant.lookups_running() == 0).await;
        assert_eq!(
            tenant.lookups_running(),
            0,
            "its place is back once it timed out"
        );
    }

    /// Ten tenants each at their cap of lookups of names whose servers are
    /// silent (160 queries waiting: more than the blocking threads the
    /// host could spare the system resolver): another tenant's lookup is
    /// answered while they all still wait.
    #[tokio::test]
    async fn lookups_waiting_on_silent_servers_keep_no_other_tenant_waiting() {
        let (resolver, _) = server(Duration::from_secs(30), "").await;
        let mut tenants = Vec::new();
        let mut waiting = Vec::new();
        for t in 0..10 {
            let tenant = Arc::new(TenantOutbound::new(&format!("silent{t}"), 1));
            for i in 0..PER_TENANT {
                let name = format!("n{i}.t{t}.silent.test");
                waiting.push(resolve_with(resolver.clone(), tenant.clone(), name, 80));
            }
            tenants.push(tenant);
        }
        until(|| tenants.iter().all(|t| t.lookups_running() == PER_TENANT)).await;
        assert!(tenants.iter().all(|t| t.lookups_running() == PER_TENANT));
        let other = Arc::new(TenantOutbound::new("other", 1));
        let found = tokio::time::timeout(
            Duration::from_secs(10),
            resolve_with(resolver, other, "ok.answered.test".into(), 443),
        )
        .await
        .expect("answered while the others wait")
        .unwrap();
        assert_eq!(found, vec!["127.0.0.1:443".parse().unwrap()]);
        assert!(tenants.iter().all(|t| t.lookups_running() == PER_TENANT));
    }

    #[tokio::test]
    async fn answers_are_kept_for_their_ttl() {
        let (resolver, asked) = server(Duration::from_secs(5), "").await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        for port in [80, 443] {
            let found = resolve_with(
                resolver.clone(),
                tenant.clone(),
                "ok.cached.test".into(),
                port,
            )
            .await
            .unwrap();
            assert_eq!(found, vec![SocketAddr::new([127, 0, 0, 1].into(), port)]);
        }
        assert_eq!(asked.lock().unwrap().get("ok.cached.test"), Some(&1));
    }

    /// One family's query unanswered: the other's addresses are the
    /// answer, but not one to keep (the next lookup asks again).
    #[tokio::test]
    async fn an_answer_missing_a_family_is_not_kept() {
        let (resolver, asked) = server(Duration::from_millis(200), "").await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        for _ in 0..2 {
            let found = resolve_with(resolver.clone(), tenant.clone(), "half.test".into(), 80);
            assert_eq!(found.await.unwrap(), vec!["127.0.0.1:80".parse().unwrap()]);
        }
        assert_eq!(asked.lock().unwrap().get("half.test"), Some(&2));
    }

    #[tokio::test]
    async fn a_name_without_address_is_kept_so_as_its_zone_says() {
        let (resolver, asked) = server(Duration::from_secs(5), "").await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        for _ in 0..3 {
            let lookup = resolve_with(resolver.clone(), tenant.clone(), "nx.kept.test".into(), 80);
            let e = lookup.await.unwrap_err();
            assert_eq!(e.to_string(), "no address found for nx.kept.test");
        }
        assert_eq!(asked.lock().unwrap().get("nx.kept.test"), Some(&1));
        let mut figures = String::new();
        resolver.render(&mut figures);
        for line in [
            "edge_dns_failures_total{reason=\"no_address\"} 3",
            "edge_dns_cache_hits_total 2",
        ] {
            assert!(figures.contains(line), "{line} in {figures}");
        }
    }

    /// A name `/etc/hosts` lists has its addresses there and no other: no
    /// query leaves with it (getaddrinfo's `files` before `dns`).
    #[tokio::test]
    async fn a_listed_name_is_answered_by_the_hosts_file_alone() {
        let hosts = "# pinned\n127.0.0.2 ok.listed.test other.test\n::2 ok.listed.test\n";
        let (resolver, asked) = server(Duration::from_secs(5), hosts).await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        let found = resolve_with(resolver, tenant, "OK.Listed.Test".into(), 80)
            .await
            .unwrap();
        let ips: Vec<IpAddr> = found.iter().map(SocketAddr::ip).collect();
        assert_eq!(
            ips,
            [
                "127.0.0.2".parse::<IpAddr>().unwrap(),
                "::2".parse().unwrap()
            ]
        );
        assert!(asked.lock().unwrap().is_empty(), "no query was sent");
    }

    #[tokio::test]
    async fn edits_to_the_files_are_read_at_the_next_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let (resolv_conf, hosts) = (dir.path().join("resolv.conf"), dir.path().join("hosts"));
        // As editors and `sed -i` write: a new file renamed into place.
        let write = |path: &Path, text: &str| {
            let new = path.with_extension("new");
            std::fs::write(&new, text).unwrap();
            std::fs::rename(&new, path).unwrap();
        };
        write(&resolv_conf, "nameserver 127.0.0.1\noptions timeout:1\n");
        write(&hosts, "10.0.0.1 pinned.test\n");
        let resolver = Resolver::from_files(&resolv_conf, &hosts);
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        let pinned = || async {
            let found = resolve_with(resolver.clone(), tenant.clone(), "pinned.test".into(), 80);
            found.await.unwrap()[0].ip().to_string()
        };
        assert_eq!(pinned().await, "10.0.0.1");
        let first = resolver.configured();
        assert!(
            Arc::ptr_eq(&first, &resolver.configured()),
            "files unchanged are not read again"
        );

        write(&hosts, "# moved\n10.0.0.2 pinned.test\n");
        assert_eq!(pinned().await, "10.0.0.2");
        write(&resolv_conf, "nameserver 127.0.0.9\n");
        let servers = resolver.configured();
        assert!(!Arc::ptr_eq(&first, &servers));
        assert_eq!(servers.read, (stamp(&resolv_conf), stamp(&hosts)));

        std::fs::remove_file(&hosts).unwrap();
        let none = resolver.configured();
        assert!(
            !Arc::ptr_eq(&servers, &none),
            "a hosts file gone lists nothing"
        );
        assert!(Resolver::listed(&none.hosts, "pinned.test").is_none());
    }

    #[tokio::test]
    async fn a_host_place_that_comes_free_goes_to_the_tenant_running_fewest() {
        let places = Places::new(2);
        let waiting = |n| {
            let places = places.clone();
            async move { until(|| places.counts().1 == n).await }
        };
        let take = |held| {
            let places = places.clone();
            tokio::spawn(async move { places.take(held).await })
        };
        // Tenant A holds both places and asks for a third; tenant B then
        // asks for its first.
        let (a1, a2) = (places.take(1).await, places.take(2).await);
        let a3 = take(3);
        waiting(1).await;
        let b1 = take(1);
        waiting(2).await;
        drop(a1);
        let b1 = tokio::time::timeout(Duration::from_secs(5), b1)
            .await
            .expect("B had the place A gave back")
            .unwrap();
        assert!(!a3.is_finished(), "A waits for the next");
        drop(a2);
        let a3 = a3.await.unwrap();
        assert_eq!(places.counts(), (2, 0));

        // A query that gave up waiting passes the place on.
        let gone = take(1);
        waiting(1).await;
        gone.abort();
        let _ = gone.await;
        let c = take(5);
        waiting(2).await;
        drop(b1);
        let c = c.await.unwrap();
        assert_eq!(places.counts(), (2, 0));
        drop((a3, c));
        assert_eq!(places.counts(), (0, 0));
        let free = tokio::time::timeout(Duration::from_secs(5), places.take(0)).await;
        assert!(free.is_ok(), "a place is free again");
    }

    #[tokio::test]
    async fn a_tenant_running_many_is_set_back_not_starved() {
        let places = Places::new(1);
        let held = places.take(0).await;
        // A asks with 2 lookups running, then others with 1 each, on and
        // on: A is set back 128 places, those after it 64.
        let (tx, mut served) = tokio::sync::mpsc::unbounded_channel();
        let ask = |who: usize, running: usize| {
            let (places, tx) = (places.clone(), tx.clone());
            tokio::spawn(async move {
                let place = places.take(running).await;
                tx.send(who).unwrap();
                drop(place);
            })
        };
        let mut asked = vec![ask(0, 2)];
        until(|| places.counts().1 == 1).await;
        for who in 1..=100 {
            asked.push(ask(who, 1));
            until(|| places.counts().1 == who + 1).await;
        }
        drop(held);
        let mut order = Vec::new();
        while order.len() < 101 {
            order.push(served.recv().await.unwrap());
        }
        assert_eq!(order.iter().position(|&w| w == 0), Some(63), "{order:?}");
        for task in asked {
            task.await.unwrap();
        }
    }

    /// Why a lookup found nothing, in words that name only the name.
    #[tokio::test]
    async fn failures_are_said_in_fixed_words() {
        let (resolver, _) = server(Duration::from_millis(200), "").await;
        let tenant = Arc::new(TenantOutbound::new("t", 1));
        for (name, words) in [
            ("nx.test", "no address found for nx.test"),
            (
                "silent.test",
                "the DNS servers did not answer for silent.test in time",
            ),
        ] {
            let e = resolve_with(resolver.clone(), tenant.clone(), name.into(), 80)
                .await
                .unwrap_err();
            assert_eq!(e.to_string(), words);
        }
        let mut figures = String::new();
        resolver.render(&mut figures);
        for line in [
            "edge_dns_queries_running 0",
            "edge_dns_failures_total{reason=\"no_address\"} 1",
            "edge_dns_failures_total{reason=\"timeout\"} 1",
            "edge_dns_failures_total{reason=\"other\"} 0",
        ] {
            assert!(figures.contains(line), "{line} in {figures}");
        }
    }

    #[tokio::test]
    async fn a_lookup_past_the_tenants_cap_waits_and_other_tenants_go_on() {
        let tenant = std::sync::Arc::new(TenantOutbound::new("t", 1));
        let mut held = Vec::new();
        for _ in 0..PER_TENANT {
            held.push(tenant.lookup_place().await);
        }
        let waiting = tokio::spawn({
            let tenant = tenant.clone();
            async move { resolve(tenant, "localhost".into(), 2).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a lookup past the cap waits");
        let other = Arc::new(TenantOutbound::new("u", 1));
        assert!(
            !resolve(other, "localhost".into(), 3)
                .await
                .unwrap()
                .is_empty()
        );
        held.pop();
        let found = waiting.await.unwrap().unwrap();
        assert!(!found.is_empty() && found.iter().all(|a| a.port() == 2));
    }
}
