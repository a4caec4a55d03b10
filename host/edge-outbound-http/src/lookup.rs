//! Name lookups a tenant cannot pile up, each waiting on a socket rather
//! than a thread.
//!
//! A name listed in `/etc/hosts` has the addresses listed there, and only
//! those; any other is resolved by hickory-resolver with the servers,
//! search domains and options of `/etc/resolv.conf` (both files read at
//! the first lookup), on a thread of its own, over UDP; answers are kept
//! as their records' TTLs allow (up to [`CACHE_NAMES`] names for the
//! host). The system resolver (`getaddrinfo`) would hold a blocking thread
//! per lookup for as long as the name's servers take: seconds for a name
//! whose servers are silent, which any tenant can own, and a few tenants
//! would hold every thread the host could spare.
//!
//! A lookup holds one of its tenant's [`PER_TENANT`] places while its
//! query runs, so a tenant cannot pile queries onto the operator's DNS
//! servers, and one of the host's [`PER_HOST`] (each query takes a socket
//! or two). Its caller giving up while it waits for a place ends it; once
//! sent, a query runs to its answer or its timeout in its places (a loop
//! of lookups given up at once is held to the caps, not to the caller's
//! patience). Why a lookup found nothing is said in fixed words (the
//! resolver's own errors name the operator's search domains).
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
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ProtocolConfig, ResolveHosts,
    ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::op::Query;
use hickory_resolver::proto::rr::{Name, RecordType};
use hickory_resolver::{Hosts, TokioResolver};
use std::fmt::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use tokio::sync::Semaphore;

/// Lookups one tenant may have running at once.
pub const PER_TENANT: usize = 16;

/// Queries the host has running at once, whatever their tenants: a bound
/// on the sockets they take and the load on the operator's DNS servers,
/// thirty-two tenants' worth.
pub const PER_HOST: usize = 512;

/// Names whose answers the host keeps. An answer is one UDP message (at
/// most 4 KiB), so the cache holds at most some tens of MiB.
pub const CACHE_NAMES: u64 = 4096;

/// A resolver, and the runtime its queries run on: a thread of its own, so
/// the sockets and tasks a query leaves for the next outlive any serving
/// runtime (and a test's).
pub struct Resolver {
    runtime: tokio::runtime::Handle,
    hosts: Hosts,
    names: TokioResolver,
    queries: Semaphore,
    /// Lookups that found nothing, by [`FAILURES`].
    failures: [AtomicU64; 3],
}

/// Why a lookup found nothing, as `/metrics` names it.
const FAILURES: [&str; 3] = ["no_address", "timeout", "other"];

/// The host's resolver, once a lookup has made it.
static SYSTEM: OnceLock<Arc<Resolver>> = OnceLock::new();

impl Resolver {
    /// The host's resolver, under the system's configuration.
    pub fn system() -> Arc<Resolver> {
        SYSTEM
            .get_or_init(|| {
                let (config, options) = hickory_resolver::system_conf::read_system_conf()
                    .unwrap_or_else(|e| {
                        // As glibc without a usable file: a server on this
                        // machine.
                        tracing::warn!(error = %e, "/etc/resolv.conf names no DNS server: asking 127.0.0.1");
                        let local = NameServerConfig::udp([127, 0, 0, 1].into());
                        (
                            ResolverConfig::from_parts(None, Vec::new(), vec![local]),
                            ResolverOpts::default(),
                        )
                    });
                let hosts = Hosts::from_system().unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "/etc/hosts could not be read");
                    Hosts::default()
                });
                Resolver::new(config, options, hosts)
            })
            .clone()
    }

    /// A resolver asking `config`'s servers over UDP, with `options`
    /// (`attempts` counted as `resolv.conf` counts them) after `hosts`.
    pub fn new(config: ResolverConfig, mut options: ResolverOpts, hosts: Hosts) -> Arc<Resolver> {
        // (hickory's attempts are tries after the first.)
        options.attempts = options.attempts.saturating_sub(1);
        options.use_hosts_file = ResolveHosts::Never;
        // IPv4 first, as most hosts here reach it.
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        options.cache_size = CACHE_NAMES;
        // UDP only: an answer is at most one message, never a TCP stream
        // of them to cache.
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
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for name lookups");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("edge-dns".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("a thread for name lookups");
        let names = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options)
            .build()
            .expect("a resolver of a configuration without encryption");
        Arc::new(Resolver {
            runtime: handle,
            hosts,
            names,
            queries: Semaphore::new(PER_HOST),
            failures: Default::default(),
        })
    }

    /// The addresses `/etc/hosts` lists for `name`, if it lists any.
    fn listed(&self, name: &str) -> Option<Vec<IpAddr>> {
        let name = Name::from_ascii(name).ok()?;
        let found: Vec<IpAddr> = [RecordType::A, RecordType::AAAA]
            .into_iter()
            .filter_map(|t| {
                self.hosts
                    .lookup_static_host(&Query::query(name.clone(), t))
            })
            .flat_map(|l| {
                l.answers()
                    .iter()
                    .filter_map(|r| r.data.ip_addr())
                    .collect::<Vec<_>>()
            })
            .collect();
        (!found.is_empty()).then_some(found)
    }

    /// The addresses of `name`, or why there are none in fixed words.
    async fn addresses(&self, name: &str) -> std::io::Result<Vec<IpAddr>> {
        use std::io::{Error, ErrorKind};
        if let Some(listed) = self.listed(name) {
            return Ok(listed);
        }
        let _query = self
            .queries
            .acquire()
            .await
            .expect("the host's semaphore is never closed");
        let (failure, error) = match self.names.lookup_ip(name).await {
            Ok(found) => return Ok(found.iter().collect()),
            Err(e) if e.is_no_records_found() => (
                0,
                Error::new(ErrorKind::NotFound, format!("no address found for {name}")),
            ),
            Err(hickory_resolver::net::NetError::Timeout) => (
                1,
                Error::new(
                    ErrorKind::TimedOut,
                    format!("the DNS servers did not answer for {name} in time"),
                ),
            ),
            Err(e) => {
                tracing::debug!(name, error = %e, "name lookup failed");
                (2, Error::other(format!("{name} could not be resolved")))
            }
        };
        self.failures[failure].fetch_add(1, Relaxed);
        Err(error)
    }

    /// Its figures in the Prometheus text format.
    fn render(&self, out: &mut String) {
        let running = PER_HOST - self.queries.available_permits();
        let _ = writeln!(
            out,
            "# HELP edge_dns_queries_running Name queries the host's resolver has running (at most {PER_HOST}).\n# TYPE edge_dns_queries_running gauge\nedge_dns_queries_running {running}"
        );
        out.push_str("# HELP edge_dns_failures_total Name lookups that found nothing: no_address (the name has none), timeout (its servers did not answer in time), other.\n# TYPE edge_dns_failures_total counter\n");
        for (reason, n) in FAILURES.iter().zip(&self.failures) {
            let _ = writeln!(
                out,
                "edge_dns_failures_total{{reason=\"{reason}\"}} {}",
                n.load(Relaxed)
            );
        }
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
        let query = tokio::spawn(charged(tenant.work(), async move {
            let _place = place;
            resolver.addresses(&name).await
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
    /// starting with `nx` do not exist, and it counts the A queries for
    /// each; it never answers others. And a resolver asking only it, once,
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
                    let a = qtype == 1 && labels[0].starts_with("ok");
                    let rcode = match &labels[0] {
                        l if l.starts_with("ok") => 0,
                        l if l.starts_with("nx") => 3,
                        _ => continue,
                    };
                    if a {
                        *counts.lock().unwrap().entry(labels.join(".")).or_insert(0) += 1;
                    }
                    let mut answer = query[..2].to_vec();
                    answer.extend_from_slice(&[
                        0x81,
                        0x80 | rcode,
                        0,
                        1,
                        0,
                        u8::from(a),
                        0,
                        0,
                        0,
                        0,
                    ]);
                    answer.extend_from_slice(&query[12..question_end]);
                    if a {
                        answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
                        answer.extend_from_slice(&60u32.to_be_bytes());
                        answer.extend_from_slice(&[0, 4, 127, 0, 0, 1]);
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

    async fn until(what: impl Fn() -> bool) {
        for _ in 0..500 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
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
