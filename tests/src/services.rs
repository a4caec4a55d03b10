//! Servers from Debian's packages that Spin apps reach (Redis, Mosquitto,
//! PostgreSQL), each as a child process on a free loopback port with its
//! data in a temporary directory, stopped on drop.

use crate::TempDir;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (a listener bound and dropped: another process
/// could take it meanwhile, which a test would see as a failed start).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running server.
pub struct Service {
    child: Child,
    /// Its loopback port.
    pub port: u16,
    /// Its directory (data, logs).
    pub dir: TempDir,
}

impl Service {
    fn start(name: &str, mut command: Command, port: u16, dir: TempDir) -> Self {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} (the test command installs it): {e}"));
        let service = Self { child, port, dir };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{name} did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        service
    }

    /// `redis-server` without persistence.
    pub fn redis() -> Self {
        let dir = TempDir::new("redis");
        let port = free_port();
        let mut c = Command::new("redis-server");
        c.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--port", &port.to_string()])
            .arg("--dir")
            .arg(dir.path());
        Self::start("redis-server", c, port, dir)
    }

    /// `mosquitto` accepting anonymous clients on loopback.
    pub fn mosquitto() -> Self {
        let dir = TempDir::new("mosquitto");
        let port = free_port();
        let conf = dir.write(
            "mosquitto.conf",
            &format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"),
        );
        let mut c = Command::new("mosquitto");
        c.arg("-c").arg(conf);
        Self::start("mosquitto", c, port, dir)
    }

    /// A PostgreSQL server (the newest Debian installs) with trust
    /// authentication on loopback, user `postgres`, database `postgres`.
    /// PostgreSQL refuses to run as root: it runs as `nobody`.
    pub fn postgres() -> Self {
        let dir = TempDir::new("postgres");
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL (the test command installs it)")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .max()
            .expect("a PostgreSQL version");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let as_nobody = |program: &str| {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(bin.join(program));
            c
        };
        let _ = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(dir.path())
            .status();
        crate::run_ok(
            as_nobody("initdb")
                .args(["--auth=trust", "-U", "postgres", "-D"])
                .arg(&data),
            "initdb",
        );
        let port = free_port();
        let mut c = as_nobody("postgres");
        c.arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(dir.path());
        Self::start("postgres", c, port, dir)
    }

    /// `psql` as `postgres` against this server: its output (unaligned,
    /// tuples only).
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-At",
                "-c",
                sql,
            ])
            .output()
            .expect("psql");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `redis-cli` against this server: its output.
    pub fn redis_cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
