//! A store in Redis (Spin's runtime configuration, `type = "redis"`): the
//! same operations and limits as a file store, for stores that several
//! hosts share or that live beside other data.
//!
//! Each tenant's store is one hash, `edge:kv:{TENANT/LABEL}`, so tenants
//! sharing a server never see each other's keys (tenant names have no
//! `/`); `edge:kv:{TENANT/LABEL}:bytes` counts its keys' and values'
//! bytes for the cap (the braces are a hash tag: both keys live on one
//! cluster node). Every write is one Lua script, so the cap check and the
//! write are atomic whoever else writes the store. Counters are Redis'
//! integers: `increment` stops at 2^63 - 1.
//!
//! A server that does not answer within [`IO_TIMEOUT`] (or cannot be
//! reached within [`CONNECT_TIMEOUT`]) is a storage fault: the guest gets
//! fixed words, the log the server's.

use crate::error::KvError;
use crate::handle::Swap;
use crate::store::{MAX_BATCH_BYTES, PAGE};
use redis::{Client, Connection, RedisError, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Longest wait for a connection to the server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for one reply.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections (and blocking threads) one store may hold for reads.
const READERS: usize = 4;

/// Sets pairs (`ARGV[2..]`: key, value, ...) all or none, unless the
/// store's bytes would grow past the cap (`ARGV[1]`). A key written twice
/// counts once, with its last value.
const SET: &str = r#"
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local total = used
local seen = {}
for i = 2, #ARGV, 2 do
  local k, v = ARGV[i], ARGV[i + 1]
  local old = seen[k]
  if old == nil then
    if redis.call('HEXISTS', KEYS[1], k) == 1 then
      old = redis.call('HSTRLEN', KEYS[1], k)
    else
      old = false
    end
  end
  if old then total = total - #k - old end
  total = total + #k + #v
  seen[k] = #v
end
if total > tonumber(ARGV[1]) and total > used then
  return redis.error_reply('EDGEFULL ' .. used .. ' ' .. total)
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[2], total)
return total
"#;

/// The values of the keys `ARGV[2..]`, unless they come to more than
/// `ARGV[1]` bytes: measured first, so that the server never builds (nor
/// the host reads) a reply of a thousand values of a MiB each.
const GET_MANY: &str = r#"
local limit = tonumber(ARGV[1])
local total = 0
for i = 2, #ARGV do
  total = total + redis.call('HSTRLEN', KEYS[1], ARGV[i])
  if total > limit then
    return redis.error_reply('EDGEBATCH ' .. total)
  end
end
return redis.call('HMGET', KEYS[1], unpack(ARGV, 2))
"#;

/// Deletes the keys in `ARGV` (absent ones are fine).
const DELETE: &str = r#"
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
for i = 1, #ARGV do
  local k = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], k) == 1 then
    used = used - #k - redis.call('HSTRLEN', KEYS[1], k)
    redis.call('HDEL', KEYS[1], k)
  end
end
if used < 0 then used = 0 end
redis.call('SET', KEYS[2], used)
return used
"#;

/// Adds `ARGV[2]` to the decimal number at `ARGV[1]` (absent: 0), within
/// the cap `ARGV[3]`; unsigned unless `ARGV[4]` is `signed`. Returns the
/// new value as text (a Lua number would lose digits past 2^53).
const INCREMENT: &str = r#"
local k = ARGV[1]
local old = redis.call('HGET', KEYS[1], k)
local pattern = '^%d+$'
if ARGV[4] == 'signed' then pattern = '^-?%d+$' end
if old and not string.match(old, pattern) then
  return redis.error_reply('EDGENAN ' .. string.sub(old, 1, 64))
end
local r = redis.pcall('HINCRBY', KEYS[1], k, ARGV[2])
if type(r) == 'table' and r.err then
  return redis.error_reply('EDGEOVERFLOW ' .. r.err)
end
local new = redis.call('HGET', KEYS[1], k)
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local total = used + #new
if old then total = total - #old else total = total + #k end
if total > tonumber(ARGV[3]) and total > used then
  if old then redis.call('HSET', KEYS[1], k, old) else redis.call('HDEL', KEYS[1], k) end
  return redis.error_reply('EDGEFULL ' .. used .. ' ' .. total)
end
redis.call('SET', KEYS[2], total)
return new
"#;

/// Sets `ARGV[1]` to `ARGV[3]` if it holds `ARGV[2]` (`ARGV[4]` is `absent`
/// when it must not exist), within the cap `ARGV[5]`: `{1}` when swapped,
/// `{0, now}` (`{0}` if absent) when not.
const SWAP: &str = r#"
local k = ARGV[1]
local now = redis.call('HGET', KEYS[1], k)
if ARGV[4] == 'absent' then
  if now then return {0, now} end
elseif now ~= ARGV[2] then
  if now then return {0, now} end
  return {0}
end
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local total = used + #ARGV[3]
if now then total = total - #now else total = total + #k end
if total > tonumber(ARGV[5]) and total > used then
  return redis.error_reply('EDGEFULL ' .. used .. ' ' .. total)
end
redis.call('HSET', KEYS[1], k, ARGV[3])
redis.call('SET', KEYS[2], total)
return {1}
"#;

/// One page of keys (never values) from `HSCAN` at cursor `ARGV[1]`.
const KEYS_PAGE: &str = r#"
local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local keys = {}
for i = 1, #r[2], 2 do keys[#keys + 1] = r[2][i] end
return {r[1], keys}
"#;

/// One tenant's store for one label, in Redis.
pub(crate) struct RedisStore {
    tenant: String,
    label: String,
    /// The server, for the log (without credentials).
    server: String,
    client: Client,
    data_key: String,
    bytes_key: String,
    /// Connections not in use (at most one per permit).
    idle: Mutex<Vec<Connection>>,
    errors: Arc<AtomicU64>,
    pub(crate) readers: Arc<Semaphore>,
    pub(crate) writers: Arc<Semaphore>,
}

impl RedisStore {
    /// The store of `tenant` named `label` on the server at `url`; nothing
    /// connects until the first operation.
    pub(crate) fn new(
        tenant: &str,
        label: &str,
        url: &str,
        errors: Arc<AtomicU64>,
    ) -> Result<Self, KvError> {
        let client = Client::open(url)
            .map_err(|e| KvError::Storage(format!("Redis server {:?}: {e}", server_of(url))))?;
        let tag = format!("{{{tenant}/{label}}}");
        Ok(Self {
            tenant: tenant.to_string(),
            label: label.to_string(),
            server: server_of(url),
            client,
            data_key: format!("edge:kv:{tag}"),
            bytes_key: format!("edge:kv:{tag}:bytes"),
            idle: Mutex::new(Vec::new()),
            errors,
            readers: Arc::new(Semaphore::new(READERS)),
            writers: Arc::new(Semaphore::new(1)),
        })
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        self.run(|c| redis::cmd("HGET").arg(&self.data_key).arg(key).query(c))
    }

    /// The values of `keys`, in order.
    pub(crate) fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.run(|c| {
            self.script(GET_MANY)
                .arg(MAX_BATCH_BYTES)
                .arg(keys)
                .query(c)
        })
        .map_err(|e| match e {
            KvError::Script(code, _) if code == "EDGEBATCH" => KvError::BatchTooLarge(format!(
                "the values come to more than {MAX_BATCH_BYTES} bytes; ask for fewer keys"
            )),
            other => other,
        })
    }

    /// Sets every pair, all or none, within `cap` bytes.
    pub(crate) fn set_many(&self, pairs: &[(&str, &[u8])], cap: u64) -> Result<(), KvError> {
        self.run(|c| {
            let mut cmd = self.script(SET);
            cmd.arg(cap);
            for (k, v) in pairs {
                cmd.arg(*k).arg(*v);
            }
            cmd.query::<Value>(c)
        })
        .map(drop)
        .map_err(|e| self.full(e, cap))
    }

    /// Deletes every key (absent ones are fine).
    pub(crate) fn delete_many(&self, keys: &[&str]) -> Result<(), KvError> {
        self.run(|c| self.script(DELETE).arg(keys).query::<Value>(c))
            .map(drop)
    }

    /// Adds `delta` to the number at `key`; the new value.
    pub(crate) fn increment(&self, key: &str, delta: u64, cap: u64) -> Result<u64, KvError> {
        self.add_to(key, delta, "unsigned", cap)
    }

    /// Adds `delta` (signed) to the number at `key`; the new value.
    pub(crate) fn add(&self, key: &str, delta: i64, cap: u64) -> Result<i64, KvError> {
        self.add_to(key, delta, "signed", cap)
    }

    /// The [`INCREMENT`] script: `sign` says which numbers it accepts.
    fn add_to<N: std::str::FromStr>(
        &self,
        key: &str,
        delta: impl redis::ToRedisArgs,
        sign: &str,
        cap: u64,
    ) -> Result<N, KvError> {
        let new: String = self
            .run(|c| {
                self.script(INCREMENT)
                    .arg(key)
                    .arg(delta)
                    .arg(cap)
                    .arg(sign)
                    .query(c)
            })
            .map_err(|e| match e {
                KvError::Script(code, detail) if code == "EDGENAN" => KvError::NotANumber(detail),
                KvError::Script(code, _) if code == "EDGEOVERFLOW" => {
                    KvError::Overflow(key.to_string())
                }
                other => self.full(other, cap),
            })?;
        new.parse().map_err(|_| KvError::NotANumber(new))
    }

    /// `EVAL script` on this store's two keys; the caller adds `ARGV`.
    fn script(&self, script: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script)
            .arg(2)
            .arg(&self.data_key)
            .arg(&self.bytes_key);
        cmd
    }

    /// Sets `key` to `value` if it holds `expected` (`None`: absent).
    pub(crate) fn swap_if(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
        cap: u64,
    ) -> Result<Swap, KvError> {
        let answer: Vec<Value> = self
            .run(|c| {
                self.script(SWAP)
                    .arg(key)
                    .arg(expected.unwrap_or_default())
                    .arg(value)
                    .arg(if expected.is_some() {
                        "present"
                    } else {
                        "absent"
                    })
                    .arg(cap)
                    .query(c)
            })
            .map_err(|e| self.full(e, cap))?;
        match answer.as_slice() {
            [Value::Int(1)] => Ok(Swap::Done),
            [Value::Int(0)] => Ok(Swap::Changed(None)),
            [Value::Int(0), Value::BulkString(now)] => Ok(Swap::Changed(Some(now.clone()))),
            other => Err(self.fault(format!("the swap script answered {other:?}"))),
        }
    }

    /// A page of keys from `cursor` (0: the first), and the next page's
    /// cursor if there is one. Keys come in Redis' order, not sorted.
    pub(crate) fn list_keys(&self, cursor: u64) -> Result<(Vec<String>, Option<u64>), KvError> {
        let (next, keys): (String, Vec<String>) = self.run(|c| {
            redis::cmd("EVAL")
                .arg(KEYS_PAGE)
                .arg(1)
                .arg(&self.data_key)
                .arg(cursor)
                .arg(PAGE)
                .query(c)
        })?;
        let next: u64 = next
            .parse()
            .map_err(|_| self.fault(format!("HSCAN answered the cursor {next:?}")))?;
        Ok((keys, (next != 0).then_some(next)))
    }

    /// Bytes of keys plus values stored.
    pub(crate) fn used_bytes(&self) -> Result<u64, KvError> {
        let used: Option<u64> = self.run(|c| redis::cmd("GET").arg(&self.bytes_key).query(c))?;
        Ok(used.unwrap_or(0))
    }

    /// `EDGEFULL used needed` from a script as [`KvError::StoreFull`].
    fn full(&self, e: KvError, cap: u64) -> KvError {
        match e {
            KvError::Script(code, detail) if code == "EDGEFULL" => {
                let mut n = detail.split(' ').map(|n| n.parse().unwrap_or(0));
                KvError::StoreFull {
                    label: self.label.clone(),
                    used: n.next().unwrap_or(0),
                    needed: n.next().unwrap_or(0),
                    cap,
                }
            }
            other => other,
        }
    }

    /// Runs `f` on an idle connection (or a new one). A connection that
    /// failed is dropped; the scripts' own refusals come back as
    /// [`KvError::Script`].
    fn run<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<R>,
    ) -> Result<R, KvError> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match idle {
            Some(c) => c,
            None => self.connect().map_err(|e| self.fault(e.to_string()))?,
        };
        match f(&mut conn) {
            Ok(v) => {
                self.idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(conn);
                Ok(v)
            }
            Err(e) => match script_refusal(&e) {
                Some((code, detail)) => {
                    self.idle
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(conn);
                    Err(KvError::Script(code, detail))
                }
                None => Err(self.fault(e.to_string())),
            },
        }
    }

    fn connect(&self) -> redis::RedisResult<Connection> {
        let conn = self.client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        conn.set_read_timeout(Some(IO_TIMEOUT))?;
        conn.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(conn)
    }

    /// Logs a server fault (with tenant, store and server) and counts it;
    /// the guest gets fixed words.
    fn fault(&self, detail: String) -> KvError {
        self.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(tenant = %self.tenant, store = %self.label, server = %self.server, error = %detail, "key-value store's Redis server failed");
        KvError::ServerUnavailable
    }
}

/// A script's `redis.error_reply('EDGE... detail')`: (code, detail).
fn script_refusal(e: &RedisError) -> Option<(String, String)> {
    let code = e.code()?;
    code.starts_with("EDGE")
        .then(|| (code.to_string(), e.detail().unwrap_or("").to_string()))
}

/// `url` without its user and password, for logs.
fn server_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => "(not a URL)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Backend;
    use crate::store::MAX_VALUE_BYTES;
    use crate::{Handle, Placement, Registry, Swap};

    /// A Redis server from the machine's `redis-server`, on a Unix socket
    /// in a temporary directory; killed when dropped.
    struct Server {
        child: std::process::Child,
        dir: tempfile::TempDir,
    }

    impl Server {
        fn start() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("redis.sock");
            let child = std::process::Command::new("redis-server")
                .args(["--port", "0", "--save", "", "--appendonly", "no"])
                .arg("--unixsocket")
                .arg(&socket)
                .arg("--dir")
                .arg(dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server (make test installs it)");
            // Ready once it accepts (a loaded machine may take seconds).
            for _ in 0..1000 {
                if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Self { child, dir }
        }

        fn url(&self) -> String {
            format!(
                "redis+unix://{}",
                self.dir.path().join("redis.sock").display()
            )
        }

        fn store(&self, tenant: &str, cap: u64) -> Handle {
            Registry::in_memory()
                .open_at(tenant, "default", cap, Some(&Placement::Redis(self.url())))
                .unwrap()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[test]
    fn a_batch_read_past_its_bytes_is_refused_before_the_server_builds_it() {
        let server = Server::start();
        let s = server.store("acme", 1 << 30);
        s.set("big", &vec![7; MAX_VALUE_BYTES]).unwrap();
        // A thousand of one MiB value: a reply of 1 GiB, refused by the
        // script after the seventeenth.
        let many: Vec<String> = vec!["big".into(); 1000];
        let refused = s.get_many(&many).unwrap_err();
        assert!(matches!(refused, KvError::BatchTooLarge(_)), "{refused:?}");
        let sixteen = s.get_many(&many[..16]).unwrap();
        assert!(
            sixteen
                .iter()
                .all(|v| v.as_ref().map(Vec::len) == Some(MAX_VALUE_BYTES))
        );
        assert_eq!(
            s.get_many(&["big".into(), "none".into()]).unwrap()[1],
            None,
            "absent keys count nothing"
        );
    }

    #[test]
    fn every_operation_against_a_real_server() {
        let server = Server::start();
        let s = server.store("acme", 1 << 20);
        assert_eq!(s.get("a").unwrap(), None);
        s.set("a", b"1").unwrap();
        s.set_many(&[("b".into(), b"22".to_vec()), ("b".into(), b"333".to_vec())])
            .unwrap();
        assert_eq!(
            s.get_many(&["a".into(), "b".into(), "c".into()]).unwrap(),
            vec![Some(b"1".to_vec()), Some(b"333".to_vec()), None]
        );
        // A key written twice in one batch counts once, with its last value.
        assert_eq!(s.used_bytes().unwrap(), 2 + 4);
        assert_eq!(s.increment("n", 5).unwrap(), 5);
        assert_eq!(s.increment("n", 10).unwrap(), 15);
        assert_eq!(s.used_bytes().unwrap(), 2 + 4 + 3);
        assert!(matches!(s.increment("b", 1), Ok(334)));
        s.set("t", b"text").unwrap();
        assert!(matches!(s.increment("t", 1), Err(KvError::NotANumber(v)) if v == "text"));
        s.set("big", i64::MAX.to_string().as_bytes()).unwrap();
        assert!(matches!(s.increment("big", 1), Err(KvError::Overflow(_))));
        assert_eq!(
            s.get("big").unwrap(),
            Some(i64::MAX.to_string().into_bytes())
        );
        s.delete_many(&["a".into(), "missing".into(), "t".into(), "big".into()])
            .unwrap();
        s.delete("n").unwrap();
        assert_eq!(s.used_bytes().unwrap(), 1 + 3);
        // Another tenant on the same server sees nothing of it.
        let other = server.store("other", 1 << 20);
        assert_eq!(other.get("b").unwrap(), None);
        assert_eq!(other.list_keys(0).unwrap(), (vec![], None));
    }

    #[test]
    fn signed_increments_and_compare_and_swap() {
        let server = Server::start();
        let s = server.store("acme", 1 << 20);
        assert_eq!(s.add("n", -3).unwrap(), -3);
        assert_eq!(s.add("n", 10).unwrap(), 7);
        // The unsigned increment refuses what the signed one wrote below 0.
        s.add("m", -1).unwrap();
        assert!(matches!(s.increment("m", 1), Err(KvError::NotANumber(_))));
        assert_eq!(s.swap_if("k", None, b"first").unwrap(), Swap::Done);
        assert_eq!(
            s.swap_if("k", None, b"again").unwrap(),
            Swap::Changed(Some(b"first".to_vec()))
        );
        assert_eq!(
            s.swap_if("k", Some(b"first"), b"second").unwrap(),
            Swap::Done
        );
        assert_eq!(
            s.swap_if("k", Some(b"first"), b"third").unwrap(),
            Swap::Changed(Some(b"second".to_vec()))
        );
        assert_eq!(
            s.swap_if("gone", Some(b"x"), b"y").unwrap(),
            Swap::Changed(None)
        );
        assert_eq!(s.get("k").unwrap(), Some(b"second".to_vec()));
        assert_eq!(s.used_bytes().unwrap(), 2 + 3 + 7);
    }

    #[test]
    fn the_cap_refuses_growth_but_not_shrinking() {
        let server = Server::start();
        let s = server.store("acme", 16);
        s.set("k", b"0123456789").unwrap();
        let err = s.set("j", b"0123456789").unwrap_err();
        assert!(
            matches!(
                err,
                KvError::StoreFull {
                    used: 11,
                    needed: 22,
                    cap: 16,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(s.get("j").unwrap(), None);
        // A batch past the cap writes none of it.
        assert!(
            s.set_many(&[("x".into(), b"1".to_vec()), ("y".into(), vec![0; 20])])
                .is_err()
        );
        assert_eq!(s.get("x").unwrap(), None);
        // Over the cap (a lower cap now), a write that shrinks still goes.
        let tight = Registry::in_memory()
            .open_at("acme", "default", 4, Some(&Placement::Redis(server.url())))
            .unwrap();
        tight.set("k", b"01").unwrap();
        assert_eq!(tight.used_bytes().unwrap(), 3);
        // An increment that would pass the cap is undone.
        tight.set("n", b"9").unwrap_err();
        let s = server.store("acme", 5);
        s.set("n", b"9").unwrap();
        assert!(matches!(
            s.increment("n", 1),
            Err(KvError::StoreFull { .. })
        ));
        assert_eq!(s.get("n").unwrap(), Some(b"9".to_vec()));
    }

    /// A flood of calls from guests holds at most the store's permits'
    /// worth of connections to the server (and blocking threads).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_calls_holds_a_bounded_number_of_connections() {
        let server = Server::start();
        let s = server.store("acme", 1 << 20);
        s.set("k", b"v").unwrap();
        let calls: Vec<_> = (0..200)
            .map(|i| {
                let s = s.clone();
                let access = if i % 10 == 0 {
                    crate::handle::Access::Write
                } else {
                    crate::handle::Access::Read
                };
                tokio::spawn(async move {
                    s.blocking(access, |h| {
                        h.get("k")?;
                        // Hold the connection a moment so calls overlap.
                        std::thread::sleep(Duration::from_millis(2));
                        Ok(())
                    })
                    .await
                })
            })
            .collect();
        for c in calls {
            c.await.unwrap().unwrap();
        }
        let Backend::Redis(store) = &s.store else {
            unreachable!("a Redis store")
        };
        let idle = store.idle.lock().unwrap().len();
        assert!(
            idle <= READERS + 1,
            "{idle} connections for {} permits",
            READERS + 1
        );
        let mut conn = store.connect().unwrap();
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
        // Ours, plus the one just made to ask.
        assert!(clients.lines().count() <= READERS + 2, "{clients}");
    }

    #[test]
    fn keys_page_through_hscan_without_values() {
        let server = Server::start();
        let s = server.store("acme", 1 << 30);
        let keys: Vec<(String, Vec<u8>)> = (0..2500)
            .map(|i| (format!("k{i:04}"), vec![b'v'; 100]))
            .collect();
        for chunk in keys.chunks(500) {
            s.set_many(chunk).unwrap();
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = 0;
        loop {
            let (page, next) = s.list_keys(cursor).unwrap();
            assert!(page.len() <= 2 * PAGE, "{}", page.len());
            seen.extend(page);
            match next {
                Some(n) => cursor = n,
                None => break,
            }
        }
        assert_eq!(seen.len(), 2500);
    }

    #[test]
    fn logs_never_carry_credentials() {
        assert_eq!(
            server_of("redis://user:secret@cache:6379/2"),
            "redis://cache:6379/2"
        );
        assert_eq!(server_of("redis://cache"), "redis://cache");
    }

    #[test]
    fn an_unreachable_server_is_a_fault_in_fixed_words() {
        let errors = Arc::new(AtomicU64::new(0));
        // A port nothing listens on (refused at once).
        let store = RedisStore::new("t", "default", "redis://127.0.0.1:1", errors.clone()).unwrap();
        let err = store.get("k").unwrap_err();
        assert!(matches!(err, KvError::ServerUnavailable), "{err}");
        assert!(!err.to_string().contains("127.0.0.1"), "{err}");
        assert_eq!(errors.load(Ordering::Relaxed), 1);
    }
}
