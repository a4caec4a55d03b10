//! The MariaDB UDF library in a real, throw-away MariaDB server: installed
//! with `edge udf install` (the shell pair only when asked, the process
//! functions beside the signing keys only when asked), every function
//! called from SQL, calls bounded by the time limit and by `KILL QUERY`,
//! the process functions limited to listed accounts, a panic contained,
//! and the example billing schema's trigger signing rows and catching a
//! tampered one.

use edge_tests::{edge_bin, repo};
use std::process::Command;
use std::time::{Duration, Instant};

/// The UDF tests' server: the library's key file in its environment and
/// a `billing` database.
struct Mariadb(edge_tests::mariadb::Mariadb);

impl std::ops::Deref for Mariadb {
    type Target = edge_tests::mariadb::Mariadb;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Mariadb {
    fn start(key_file: &str) -> Self {
        Self::start_with(key_file, &[])
    }

    /// With these variables in the server's environment.
    fn start_with(key_file: &str, env: &[(&str, &str)]) -> Self {
        Self(edge_tests::mariadb::Mariadb::start("billing", |dir| {
            let keys = dir.write("udf-keys", key_file);
            let mut vars = vec![("EDGE_UDF_KEY_FILE".to_string(), keys.display().to_string())];
            vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            vars
        }))
    }

    /// Runs SQL in the `billing` database; returns the tab-separated rows
    /// or the client's error.
    fn sql(&self, statements: &str) -> Result<String, String> {
        self.client(Some("billing"), statements)
    }

    /// Runs SQL in `billing` as another account (with a password).
    fn sql_as(&self, user: &str, password: &str, statements: &str) -> Result<String, String> {
        let account = [format!("--user={user}"), format!("--password={password}")];
        self.client_as(&account, Some("billing"), statements)
    }

    fn one(&self, expr: &str) -> String {
        let out = self
            .sql(&format!("SELECT {expr}"))
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
        out.strip_suffix('\n').unwrap_or(&out).to_string()
    }
}

const KEYS: &str = "hs256 billing MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n";

/// Runs `edge udf install` with `flags`; returns its stdout and stderr.
fn install(db: &Mariadb, flags: &[&str]) -> (String, String) {
    let (ok, out, err) = try_install(db, flags);
    assert!(ok, "edge udf install: {err}");
    (out, err)
}

/// Runs `edge udf install` with `flags`; returns whether it succeeded,
/// its stdout and its stderr.
fn try_install(db: &Mariadb, flags: &[&str]) -> (bool, String, String) {
    let out = Command::new(edge_bin())
        .args(["udf", "install", "--socket"])
        .arg(db.socket())
        .args(flags)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The flag that accepts the process functions beside the signing keys.
const KEYS_READABLE: &str = "--process-can-read-keys";

fn installed() -> Mariadb {
    installed_with(&[])
}

/// A server with every function, the shell pair included.
fn installed_with(env: &[(&str, &str)]) -> Mariadb {
    let db = Mariadb::start_with(KEYS, env);
    let (out, _) = install(&db, &["--with-shell", KEYS_READABLE]);
    assert!(
        out.contains("created edge_sign_row, edge_verify_row, sys_exec_fast, sys_eval_fast, sys_exec, sys_eval"),
        "{out}"
    );
    db
}

/// Whether a process whose command line contains `pattern` is running.
fn running(pattern: &str) -> bool {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

#[test]
fn the_process_functions_are_not_installed_beside_the_signing_keys_unless_asked() {
    let db = Mariadb::start(KEYS);
    // Both at once: refused, saying why, and nothing is created.
    for flags in [&[][..], &["--with-shell"]] {
        let (ok, out, err) = try_install(&db, flags);
        assert!(!ok, "{out}");
        assert!(
            err.contains("refusing to create the process functions beside the signing functions"),
            "{err}"
        );
        assert!(
            err.contains("sys_eval_fast('cat', '/etc/edge/udf-keys')"),
            "{err}"
        );
        for flag in ["--no-process", "--no-signing", KEYS_READABLE] {
            assert!(err.contains(flag), "{err}");
        }
    }
    let e = db.sql("SELECT edge_sign_row('billing', 1)").unwrap_err();
    assert!(e.contains("edge_sign_row does not exist"), "{e}");
    assert!(db.sql("SELECT sys_exec_fast('true')").is_err());

    // Why: asked for both, any caller of the process functions reads the
    // keys the signing functions use (the server's environment names the
    // file; the server's user may read both).
    install(&db, &[KEYS_READABLE]);
    assert_eq!(
        db.one(r#"sys_eval_fast('sh', '-c', 'cat "$(xargs -0 -n1 echo < /proc/$PPID/environ | sed -n s/^EDGE_UDF_KEY_FILE=//p)"')"#),
        KEYS.replace('\n', "\\n")
    );

    // Programs only: the signing functions are dropped.
    let (out, err) = install(&db, &["--no-signing"]);
    assert!(
        out.contains("created sys_exec_fast, sys_eval_fast\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "not created (dropped if present): edge_sign_row, edge_verify_row, sys_exec, sys_eval"
        ),
        "{out}"
    );
    assert!(err.contains("no privilege for calling a UDF"), "{err}");
    let e = db.sql("SELECT edge_sign_row('billing', 1)").unwrap_err();
    assert!(e.contains("edge_sign_row does not exist"), "{e}");
    assert_eq!(db.one("sys_exec_fast('true')"), "0");
}

#[test]
fn the_shell_pair_is_installed_only_when_asked_and_the_privilege_gap_is_stated() {
    let db = Mariadb::start(KEYS);
    let (out, err) = install(&db, &[KEYS_READABLE]);
    assert!(
        out.contains("created edge_sign_row, edge_verify_row, sys_exec_fast, sys_eval_fast\n"),
        "{out}"
    );
    assert!(
        out.contains("not created (dropped if present): sys_exec, sys_eval"),
        "{out}"
    );
    assert!(
        err.contains("MariaDB has no privilege for calling a UDF"),
        "{err}"
    );
    let e = db.sql("SELECT sys_eval('id')").unwrap_err();
    assert!(e.contains("sys_eval does not exist"), "{e}");
    assert_eq!(db.one("sys_exec_fast('true')"), "0");

    install(&db, &["--with-shell", KEYS_READABLE]);
    assert_eq!(db.one("sys_eval('echo $((6*7))')"), "42\\n");

    // Installing again without the flag takes the shell pair away;
    // --no-process leaves only the signing functions.
    install(&db, &[KEYS_READABLE]);
    assert!(db.sql("SELECT sys_exec('true')").is_err());
    let (out, err) = install(&db, &["--no-process"]);
    assert!(
        out.contains("created edge_sign_row, edge_verify_row\n"),
        "{out}"
    );
    assert!(!err.contains("no privilege"), "{err}");
    let e = db.sql("SELECT sys_exec_fast('true')").unwrap_err();
    assert!(e.contains("sys_exec_fast does not exist"), "{e}");
    assert_eq!(
        db.one("LENGTH(edge_sign_row('billing', 1))"),
        "64",
        "signing still works"
    );
}

#[test]
fn programs_run_with_resource_limits_and_no_new_privileges() {
    let db = installed_with(&[
        ("EDGE_UDF_CPU_SECONDS", "7"),
        ("EDGE_UDF_FILE_BYTES", "1048576"),
        ("EDGE_UDF_PROCESSES", "333"),
    ]);
    // dash counts `ulimit -f` in 512-byte blocks and `-v` in KiB; `-p` is
    // its processes.
    assert_eq!(
        db.one("sys_eval('ulimit -t; ulimit -f; ulimit -v; ulimit -p')"),
        "7\\n2048\\n4194304\\n333\\n"
    );
    assert_eq!(
        db.one("sys_eval_fast('grep', 'NoNewPrivs', '/proc/self/status')"),
        "NoNewPrivs:\\t1\\n"
    );
    // A program past its file limit is killed (SIGXFSZ: 128 + 25); the
    // server is not.
    assert_eq!(
        db.one("sys_eval('head -c 2000000 /dev/zero > /dev/null; head -c 2000000 /dev/zero > f.tmp 2>/dev/null; echo $?; rm -f f.tmp')"),
        "153\\n"
    );
    assert_eq!(db.one("1"), "1", "the server still answers");
}

#[test]
fn calls_end_at_the_timeout_and_kill_the_process_group() {
    let db = installed_with(&[("EDGE_UDF_TIMEOUT_MS", "1500")]);
    // A background job holding the output open: the call ends when the
    // shell does, and the job dies with its group.
    let start = Instant::now();
    assert_eq!(db.one("sys_eval('sleep 3600.25 & echo hi')"), "hi\\n");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(!running("sleep 3600.25"), "the background job was killed");

    // A program that never ends: NULL at the timeout, its group killed.
    let start = Instant::now();
    assert_eq!(
        db.one("sys_eval('sleep 3600.5 & sleep 3600.5') IS NULL"),
        "1"
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert!(!running("sleep 3600.5"));
    let start = Instant::now();
    assert_eq!(db.one("sys_exec_fast('sleep', '3600.5') IS NULL"), "1");
    assert!(start.elapsed() < Duration::from_secs(10));
    let log = db.error_log();
    assert!(
        log.contains("edge_udf: sys_eval ran past 1500 ms (EDGE_UDF_TIMEOUT_MS); its process group was killed"),
        "{log}"
    );
    // The server's own descriptors (tables, client sockets) stay its own.
    assert_eq!(db.one("sys_eval('ls /proc/$$/fd')"), "0\\n1\\n2\\n");
    assert_eq!(db.one("1"), "1", "the server still answers");
}

#[test]
fn kill_query_and_max_statement_time_interrupt_a_running_call() {
    // A time limit far beyond the test: only the kill can end these.
    let db = installed_with(&[("EDGE_UDF_TIMEOUT_MS", "600000")]);
    let start = Instant::now();
    // The server may end such a statement with an error or with the
    // interrupted row's NULL (the kill is soft); either way, at once.
    let r = db.sql(
        "SET STATEMENT max_statement_time = 1 FOR SELECT sys_eval_fast('sleep', '3600.75') IS NULL",
    );
    assert!(
        matches!(&r, Ok(row) if row == "1\n")
            || matches!(&r, Err(e) if e.contains("maximum statement execution time exceeded")),
        "{r:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(!running("sleep 3600.75"));

    std::thread::scope(|s| {
        let start = Instant::now();
        // Killed, a lone call returns NULL (as SLEEP() returns 1); a
        // statement over rows fails as interrupted, as here.
        let call = s.spawn(|| db.sql("SELECT sys_eval('sleep 3601; echo never') FROM seq_1_to_2"));
        let id = loop {
            let id = db
                .sql("SELECT id FROM information_schema.processlist WHERE info LIKE '%sleep 3601%' AND id <> CONNECTION_ID()")
                .unwrap();
            if !id.trim().is_empty() && running("sleep 3601") {
                break id.trim().to_string();
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the call never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let killed = Instant::now();
        db.sql(&format!("KILL QUERY {id}")).unwrap();
        let e = call.join().unwrap().unwrap_err();
        assert!(e.contains("Query execution was interrupted"), "{e}");
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "{:?}",
            killed.elapsed()
        );
    });
    assert!(!running("sleep 3601"), "the killed call's program is gone");
    assert_eq!(db.one("sys_eval_fast('echo', 'after')"), "after\\n");
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

    // Processes (RLIMIT_NPROC) are limited by default too: a fork bomb
    // stops there, even one that left the call's group.
    assert_eq!(db.one("sys_eval('ulimit -p')"), "4096\\n");

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

#[test]
fn a_panic_inside_the_library_fails_the_call_not_the_server() {
    let db = installed_with(&[("EDGE_UDF_FAULT_INJECTION", "panic")]);
    // Out of an extern "C" function a panic would abort mariadbd (and the
    // next query would find no server); caught, the call is an error
    // (NULL) and the server goes on.
    assert_eq!(db.one("sys_eval_fast('edge-udf-test-panic') IS NULL"), "1");
    assert_eq!(db.one("sys_exec_fast('edge-udf-test-panic') IS NULL"), "1");
    assert_eq!(db.one("sys_eval_fast('echo', 'alive')"), "alive\\n");
    let log = db.error_log();
    assert!(
        log.contains("a panic asked for by EDGE_UDF_FAULT_INJECTION=panic"),
        "{log}"
    );
}

#[test]
fn only_listed_accounts_run_programs_and_a_definer_routine_grants_it() {
    let db = installed_with(&[("EDGE_UDF_PROCESS_USERS", "edge_exec@localhost")]);
    // Not listed: refused when the statement starts, naming the account
    // and the setting.
    let e = db.sql("SELECT sys_eval_fast('echo', 'x')").unwrap_err();
    assert!(
        e.contains(
            "Can't initialize function 'sys_eval_fast'; EDGE_UDF_PROCESS_USERS does not list root@localhost"
        ),
        "{e}"
    );
    assert!(db.sql("SELECT sys_exec('true')").is_err());
    // Signing is not a process function: anyone may.
    assert_eq!(db.one("LENGTH(edge_sign_row('billing', 1))"), "64");

    // The listed account cannot log in; it only lends its rights to one
    // routine, and EXECUTE on that routine is the privilege to grant.
    db.sql(
        "CREATE USER edge_exec@localhost ACCOUNT LOCK;
         CREATE USER app@localhost IDENTIFIED BY 'app-pw';
         CREATE USER other@localhost IDENTIFIED BY 'other-pw';
         GRANT SELECT ON billing.* TO other@localhost;
         CREATE DEFINER = edge_exec@localhost FUNCTION billing.greet(who VARCHAR(64))
           RETURNS TEXT SQL SECURITY DEFINER RETURN sys_eval_fast('echo', 'hello', who);
         GRANT EXECUTE ON FUNCTION billing.greet TO edge_exec@localhost;
         GRANT EXECUTE ON FUNCTION billing.greet TO app@localhost;",
    )
    .unwrap();
    assert_eq!(
        db.sql_as("app", "app-pw", "SELECT greet('ada')").unwrap(),
        "hello ada\\n\n"
    );
    let e = db
        .sql_as("app", "app-pw", "SELECT sys_eval_fast('id')")
        .unwrap_err();
    assert!(
        e.contains("EDGE_UDF_PROCESS_USERS does not list app@localhost"),
        "{e}"
    );
    let e = db
        .sql_as("other", "other-pw", "SELECT greet('eve')")
        .unwrap_err();
    assert!(e.contains("execute command denied"), "{e}");
}
