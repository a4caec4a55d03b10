//! A MariaDB server from Debian's packages in a temporary directory,
//! reached over its socket, stopped on drop: for the UDF tests and the
//! control plane's database tests.

use crate::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server.
pub struct Mariadb {
    child: Child,
    dir: TempDir,
    /// Its loopback TCP port, if started with one.
    pub port: Option<u16>,
}

impl Mariadb {
    /// Starts a fresh server with `database` created. `prepare` gets the
    /// server's directory before it starts (to write files there) and
    /// returns variables for the server's environment.
    pub fn start(database: &str, prepare: impl FnOnce(&TempDir) -> Vec<(String, String)>) -> Self {
        Self::start_on(database, None, prepare)
    }

    /// Like [`Mariadb::start`], listening on a free loopback port too
    /// (for clients that speak TCP, such as Spin's MySQL interface).
    pub fn start_tcp(database: &str) -> Self {
        Self::start_on(database, Some(crate::services::free_port()), |_| Vec::new())
    }

    /// Like [`Mariadb::start_tcp`], with `prepare` as in [`Mariadb::start`]
    /// (a UDF key file beside a TCP client, say).
    pub fn start_tcp_with(
        database: &str,
        prepare: impl FnOnce(&TempDir) -> Vec<(String, String)>,
    ) -> Self {
        Self::start_on(database, Some(crate::services::free_port()), prepare)
    }

    fn start_on(
        database: &str,
        port: Option<u16>,
        prepare: impl FnOnce(&TempDir) -> Vec<(String, String)>,
    ) -> Self {
        let dir = TempDir::new("mariadb");
        let data = dir.path().join("data");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        // The server's own plugins beside the UDFs a test installs there
        // (ed25519 authentication, say).
        if let Ok(system) = std::fs::read_dir("/usr/lib/mysql/plugin") {
            for plugin in system.flatten() {
                let _ = std::os::unix::fs::symlink(plugin.path(), plugins.join(plugin.file_name()));
            }
        }
        let env = prepare(&dir);
        // Its own temporary directory: two bootstraps at once in one /tmp
        // collide on temporary table names.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        crate::run_ok(
            Command::new("mariadb-install-db")
                .args([
                    "--no-defaults",
                    "--user=root",
                    "--auth-root-authentication-method=normal",
                ])
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--tmpdir={}", tmp.display()))
                .env("TMPDIR", &tmp),
            "mariadb-install-db (the test command installs mariadb-server)",
        );
        let network = match port {
            Some(p) => vec![
                format!("--port={p}"),
                "--bind-address=127.0.0.1".to_string(),
            ],
            None => vec!["--skip-networking".to_string()],
        };
        let child = Command::new("mariadbd")
            .args(["--no-defaults", "--user=root"])
            .args(network)
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.path().join("sock").display()))
            .arg(format!("--plugin-dir={}", plugins.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("error.log").display()
            ))
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd");
        let db = Self { child, dir, port };
        let start = Instant::now();
        while db.client(None, "SELECT 1").is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "mariadbd did not start: {}",
                db.error_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        db.client(None, &format!("CREATE DATABASE {database}"))
            .unwrap();
        db
    }

    /// The server's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// A sqlx URL for `database` as root over the socket.
    pub fn url(&self, database: &str) -> String {
        format!(
            "mysql://root@localhost/{database}?socket={}",
            self.socket().display()
        )
    }

    /// Runs SQL as root; the tab-separated rows or the client's error.
    pub fn client(&self, database: Option<&str>, statements: &str) -> Result<String, String> {
        self.client_as(&["--user=root".to_string()], database, statements)
    }

    /// Runs the `mariadb` client with `account` (its `--user`/`--password`
    /// arguments) on this server.
    pub fn client_as(
        &self,
        account: &[String],
        database: Option<&str>,
        statements: &str,
    ) -> Result<String, String> {
        let mut cmd = Command::new("mariadb");
        cmd.args(["--batch", "--skip-column-names"])
            .args(account)
            .arg(format!("--socket={}", self.socket().display()));
        if let Some(d) = database {
            cmd.arg(format!("--database={d}"));
        }
        let out = cmd
            .arg("--execute")
            .arg(statements)
            .output()
            .expect("mariadb client");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
