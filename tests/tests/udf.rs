//! The MariaDB UDF library in a real, throw-away MariaDB server: installed
//! with `edge udf install`, every function called from SQL, and the example
//! billing schema's trigger signing rows and catching a tampered one.

use edge_tests::{TempDir, edge_bin, repo};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A MariaDB server in a temporary directory, stopped on drop.
struct Mariadb {
    child: Child,
    dir: TempDir,
}

impl Mariadb {
    fn start(key_file: &str) -> Self {
        let dir = TempDir::new("mariadb");
        let data = dir.path().join("data");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        let keys = dir.write("udf-keys", key_file);
        // Its own temporary directory: two bootstraps at once in one /tmp
        // collide on temporary table names.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let out = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .env("TMPDIR", &tmp)
            .output()
            .expect("mariadb-install-db (the test command installs mariadb-server)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let child = Command::new("mariadbd")
            .args(["--no-defaults", "--user=root", "--skip-networking"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.path().join("sock").display()))
            .arg(format!("--plugin-dir={}", plugins.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("error.log").display()
            ))
            .env("EDGE_UDF_KEY_FILE", &keys)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd");
        let db = Self { child, dir };
        let start = Instant::now();
        while db.client(None, "SELECT 1").is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "mariadbd did not start: {}",
                std::fs::read_to_string(db.dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        db.client(None, "CREATE DATABASE billing").unwrap();
        db
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// Runs SQL in the `billing` database; returns the tab-separated rows
    /// or the client's error.
    fn sql(&self, statements: &str) -> Result<String, String> {
        self.client(Some("billing"), statements)
    }

    fn client(&self, database: Option<&str>, statements: &str) -> Result<String, String> {
        let mut cmd = Command::new("mariadb");
        cmd.args(["--batch", "--skip-column-names", "--user=root"])
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

    fn one(&self, expr: &str) -> String {
        let out = self
            .sql(&format!("SELECT {expr}"))
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
        out.strip_suffix('\n').unwrap_or(&out).to_string()
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const KEYS: &str = "hs256 billing MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n";

fn installed() -> Mariadb {
    let db = Mariadb::start(KEYS);
    let out = Command::new(edge_bin())
        .args(["udf", "install", "--socket"])
        .arg(db.socket())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "edge udf install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("created sys_exec, sys_eval"));
    db
}

#[test]
fn process_functions_from_sql() {
    let db = installed();
    // lib_mysqludf_sys compatibility: the shell, the raw wait status.
    assert_eq!(db.one("sys_exec('exit 1')"), "256");
    assert_eq!(db.one("sys_exec('true')"), "0");
    assert_eq!(
        db.one("sys_eval('echo hello; echo world')"),
        "hello\\nworld\\n"
    );
    // Empty output is an empty string, not garbage and not NULL.
    assert_eq!(db.one("CONCAT('[', sys_eval('true'), ']')"), "[]");
    assert_eq!(db.one("sys_eval(NULL) IS NULL"), "1");

    // The fast pair: no shell, exit codes, arguments verbatim.
    assert_eq!(db.one("sys_exec_fast('false')"), "1");
    assert_eq!(db.one("sys_exec_fast('sh', '-c', 'exit 7')"), "7");
    assert_eq!(db.one("sys_eval_fast('echo', '$(id)')"), "$(id)\\n");
    assert_eq!(
        db.one(r#"sys_eval_fast('printf', '%s|', 'a b', 'q''"', 'x\ny', '')"#),
        r#"a b|q'"|x\ny||"#
    );
    assert_eq!(db.one("sys_exec_fast('/nonexistent/program') IS NULL"), "1");
    assert_eq!(db.one("sys_eval_fast('echo', NULL) IS NULL"), "1");
    // The program sees the server's PATH and nothing else of its
    // environment; a locale is asked for explicitly.
    let env = db.one("sys_eval_fast('env')");
    assert!(
        env.starts_with("PATH=") && env.matches("\\n").count() == 1,
        "{env}"
    );
    assert_eq!(
        db.one("sys_eval_fast('env', 'LANG=C.UTF-8', 'sh', '-c', 'echo $LANG')"),
        "C.UTF-8\\n"
    );
    // Many calls in one statement reuse one buffer (2,000 rows).
    assert_eq!(
        db.one("SUM(LENGTH(sys_eval_fast('echo', seq))) FROM seq_1_to_2000"),
        (1..=2000)
            .map(|n: u32| n.to_string().len() as u32 + 1)
            .sum::<u32>()
            .to_string()
    );

    // A failing row is that row's NULL; later rows still run.
    assert_eq!(
        db.sql("SELECT sys_exec_fast(c) FROM (SELECT 'true' c UNION ALL SELECT '/nonexistent' UNION ALL SELECT 'false') t")
            .unwrap(),
        "0\nNULL\n1\n"
    );
    // Not folded as a constant: runs once per row.
    assert_eq!(
        db.one("COUNT(*) FROM seq_1_to_3 WHERE sys_exec_fast('true') = 0"),
        "3"
    );

    // Wrong argument counts: refused with the function's usage.
    let e = db.sql("SELECT sys_exec()").unwrap_err();
    assert!(e.contains("sys_exec(command): one argument"), "{e}");
    let e = db.sql("SELECT sys_eval_fast()").unwrap_err();
    assert!(e.contains("sys_eval_fast(program, arg...)"), "{e}");
}

#[test]
fn billing_rows_are_signed_by_the_trigger_and_tampering_shows() {
    let db = installed();
    let schema =
        std::fs::read_to_string(repo().join("host/edge-udf/examples/billing.sql")).unwrap();
    db.sql(&schema).unwrap();
    db.sql(
        "INSERT INTO billing_rows (id, dealer, amount, note, billed_at, sig) VALUES
           (1, 'acme', 10.50, NULL, '2026-11-01 10:00:00', ''),
           (2, 'acme', 99.99, 'rebate', '2026-11-02 11:00:00', ''),
           (3, 'globex', 0.00, '', '2026-11-03 12:00:00', '')",
    )
    .unwrap();
    assert_eq!(
        db.one("COUNT(*) FROM billing_rows WHERE LENGTH(sig) = 64"),
        "3"
    );
    assert_eq!(db.sql("SELECT id FROM billing_rows_tampered").unwrap(), "");

    // An update through the trigger is re-signed; one behind its back is caught.
    db.sql("UPDATE billing_rows SET amount = 11.00 WHERE id = 1")
        .unwrap();
    db.sql(
        "DROP TRIGGER billing_rows_sign_update; UPDATE billing_rows SET amount = 0.01 WHERE id = 2",
    )
    .unwrap();
    assert_eq!(
        db.sql("SELECT id FROM billing_rows_tampered").unwrap(),
        "2\n"
    );
    // NULL and '' sign differently, so swapping them is tampering too.
    db.sql("UPDATE billing_rows SET note = NULL WHERE id = 3")
        .unwrap();
    assert_eq!(
        db.sql("SELECT id FROM billing_rows_tampered ORDER BY id")
            .unwrap(),
        "2\n3\n"
    );

    // The same signature from the library directly (what the component and
    // other services use).
    let sig = db.one("sig FROM billing_rows WHERE id = 1");
    let expected = signing::row::sign_row(
        b"0123456789abcdef0123456789abcdef",
        &[
            signing::row::Column::Int(1),
            signing::row::Column::Str(b"acme"),
            signing::row::Column::Decimal(b"11.00"),
            signing::row::Column::Null,
            signing::row::Column::Str(b"2026-11-01 10:00:00"),
        ],
    );
    assert_eq!(sig, expected);

    // A numeric key id is not read as a string at init (it sits in an
    // 8-byte slot); at call time it is the string "1": no such key, NULL.
    assert_eq!(db.one("edge_sign_row(1, 'x') IS NULL"), "1");
    // An unknown key is refused when the statement starts.
    let e = db.sql("SELECT edge_sign_row('nope', 1)").unwrap_err();
    assert!(e.contains("no key \"nope\" in the key file"), "{e}");
    let e = db.sql("SELECT edge_verify_row('billing')").unwrap_err();
    assert!(
        e.contains("edge_verify_row(key_id, signature, column...)"),
        "{e}"
    );
}
