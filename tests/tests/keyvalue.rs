//! Key-value through faults, with the probe component (`/probe/kv/...`):
//! a full disk (a real tmpfs filled up) answers errors and the store
//! recovers without a restart, keeping every acknowledged write; a stalled
//! disk (a real ext4 on a loop device, frozen with `fsfreeze`) does not
//! stall other requests on the same worker thread; a refused reload leaves
//! the caps as they were.
//!
//! The disk tests mount filesystems, so they need root (the test machine
//! runs as root); they fail, not skip, without it.

use bytes::Bytes;
use edge_tests::{Edge, TempDir, client, component, get_host, request};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn spin() -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "kv-faults"

[[trigger.http]]
route = "/probe/..."
component = "probe"

[[trigger.http]]
route = "/..."
component = "echo"

[component.probe]
source = "{probe}"
key_value_stores = ["default"]
# The probe imports wasi:config too.
[component.probe.variables]
greeting = "hi"

[component.echo]
source = "{echo}"
"#,
        probe = component("probe"),
        echo = component("echo"),
    )
}

const HOST: &str = "alpha.test";

fn edge_toml(extra: &str) -> String {
    format!(
        "app = \"spin.toml\"\n{extra}\n[[tenant]]\nname = \"alpha\"\nhosts = [\"{HOST}\"]\ncomponents = [\"probe\", \"echo\"]\n"
    )
}

async fn send(method: &str, url: &str, body: Vec<u8>) -> (u16, String) {
    request(&client(), method, url, &[("host", HOST)], Bytes::from(body)).await
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed (these tests mount filesystems and need root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A filesystem mounted for the test; unmounted (lazily, so a process still
/// closing its files cannot make the test hang) when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, bytes: u64) -> Self {
        std::fs::create_dir_all(at).expect("mount point");
        let size = format!("size={bytes}");
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &size,
                "tmpfs",
                &at.display().to_string(),
            ],
        );
        Self(at.to_path_buf())
    }

    fn ext4_loop(image: &Path, at: &Path, bytes: u64) -> Self {
        let file = std::fs::File::create(image).expect("image file");
        file.set_len(bytes).expect("image size");
        run("mkfs.ext4", &["-q", "-F", &image.display().to_string()]);
        std::fs::create_dir_all(at).expect("mount point");
        run(
            "mount",
            &[
                "-o",
                "loop",
                &image.display().to_string(),
                &at.display().to_string(),
            ],
        );
        Self(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A frozen filesystem: every write to it (and fsync) blocks until it is
/// thawed, as on a disk that stopped answering. Thawed when dropped.
struct Frozen(PathBuf);

impl Frozen {
    fn new(at: &Path) -> Self {
        run("fsfreeze", &["-f", &at.display().to_string()]);
        Self(at.to_path_buf())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze").arg("-u").arg(&self.0).status();
    }
}

/// Fills the filesystem holding `dir` with a file, to the last byte.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0xa5u8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
    // Smaller writes take the last partial page.
    while f.write(&[0xa5u8; 512]).is_ok_and(|n| n > 0) {}
    path
}

#[tokio::test]
async fn a_full_disk_answers_errors_and_the_store_recovers_without_restart() {
    let data = TempDir::new("kvfull");
    let kv_dir = data.path().join("kv");
    let mount = Mount::tmpfs(&kv_dir, 8 << 20);
    let toml = edge_toml("");
    let edge = Edge::start_with(&spin(), &toml, data.path());
    let kv = |key: &str| format!("{}/probe/kv/default/{key}", edge.url);

    assert_eq!(send("PUT", &kv("before"), b"kept".to_vec()).await.0, 200);
    let filler = fill(&kv_dir);

    // Writes until the disk's refusal reaches the guest. redb may take a
    // small write into memory and fail only at its flush; whatever was
    // answered 200 on the way was acknowledged and must survive.
    let mut acknowledged = Vec::new();
    let value = vec![b'v'; 256 * 1024];
    let deadline = Instant::now() + Duration::from_secs(20);
    let refusal = loop {
        assert!(
            Instant::now() < deadline,
            "the full disk was never reported"
        );
        let key = format!("k{}", acknowledged.len());
        let (status, body) = send("PUT", &kv(&key), value.clone()).await;
        match status {
            200 => acknowledged.push(key),
            _ => break (status, body),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        refusal,
        (
            500,
            "storage full: the disk holding this store has no space left; nothing was written, try again later\n".into()
        ),
        "a fixed-word error, no path"
    );
    // Still full: still an error, whatever the retries do (a write this
    // size needs new blocks; a tiny one might fit in the file's free pages).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(send("PUT", &kv("during"), value.clone()).await.0, 500);
    let log = edge.log_after("key-value storage failed").await;
    assert!(
        log.contains("key-value storage failed") && log.contains("alpha"),
        "the log names the tenant: {log}"
    );
    assert!(
        edge.metric("edge_kv_storage_errors_total{tenant=\"alpha\"}")
            .await
            >= 2.0
    );

    // Space comes back: the same process takes writes again.
    std::fs::remove_file(&filler).expect("removing the filler");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = send("PUT", &kv("after"), b"fine".to_vec()).await;
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not recover without restart: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(get_host(&kv("before"), HOST).await, (200, "kept".into()));
    assert_eq!(get_host(&kv("during"), HOST).await.0, 404);
    for key in &acknowledged {
        let (status, body) = get_host(&kv(key), HOST).await;
        assert_eq!((status, body.len()), (200, value.len()), "{key}");
    }

    // And the acknowledged writes are on disk: a restart finds them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(edge);
    let edge = Edge::start_with(&spin(), &toml, data.path());
    let kv = |key: &str| format!("{}/probe/kv/default/{key}", edge.url);
    assert_eq!(get_host(&kv("before"), HOST).await, (200, "kept".into()));
    assert_eq!(get_host(&kv("after"), HOST).await, (200, "fine".into()));
    for key in &acknowledged {
        assert_eq!(get_host(&kv(key), HOST).await.0, 200, "{key}");
    }
    drop(edge);
    drop(mount);
}

#[tokio::test]
async fn a_stalled_disk_does_not_stall_other_requests_on_the_worker() {
    let data = TempDir::new("kvstall");
    let kv_dir = data.path().join("kv");
    let _mount = Mount::ext4_loop(&data.path().join("disk.img"), &kv_dir, 32 << 20);
    // One worker thread: every connection shares it.
    let edge = Edge::start_with(&spin(), &edge_toml("[server]\nworkers = 1"), data.path());
    let kv = |key: &str| format!("{}/probe/kv/default/{key}", edge.url);
    let hello = format!("{}/hello", edge.url);

    assert_eq!(send("PUT", &kv("a"), b"1".to_vec()).await.0, 200);
    // The disk stops while that write waits for its flush: the flusher
    // blocks in it holding the store's writer, and the next write blocks
    // behind it (or in its own write to the frozen file).
    let frozen = Frozen::new(&kv_dir);
    let stuck = tokio::spawn({
        let url = kv("b");
        async move { send("PUT", &url, b"2".to_vec()).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!stuck.is_finished(), "the write went through a frozen disk");

    // Another route on the same host and worker answers meanwhile.
    let answer = tokio::time::timeout(Duration::from_secs(5), get_host(&hello, HOST)).await;
    assert_eq!(
        answer.expect("a stalled key-value write held the worker thread"),
        (200, "hello from edge: /hello\n".into())
    );

    drop(frozen);
    let (status, _) = tokio::time::timeout(Duration::from_secs(30), stuck)
        .await
        .expect("the write finished after the thaw")
        .expect("join");
    assert_eq!(status, 200);
    assert_eq!(get_host(&kv("b"), HOST).await, (200, "2".into()));
}

#[tokio::test]
async fn a_refused_reload_leaves_key_value_caps_as_they_were() {
    let data = TempDir::new("kvcaps");
    let capped = "[tenant.limits]\nkv_store_bytes = 4096\n";
    let edge = Edge::start_with(&spin(), &format!("{}{capped}", edge_toml("")), data.path());
    let kv = |key: &str| format!("{}/probe/kv/default/{key}", edge.url);
    let big = vec![b'x'; 8000];
    let (status, body) = send("PUT", &kv("big"), big.clone()).await;
    assert_eq!(status, 500);
    assert!(body.contains("4096-byte cap"), "{body}");

    // A config that raises the cap but breaks a component: built, then
    // refused. The serving config's cap stands.
    let broken = edge.dir.write("broken.wasm", "not a component");
    let broken_spin = format!(
        "{}\n[[trigger.http]]\nroute = \"/broken/...\"\ncomponent = \"broken\"\n\n[component.broken]\nsource = \"{}\"\n",
        spin(),
        broken.display()
    );
    edge.dir.write("spin.toml", &broken_spin);
    let raised = "app = \"spin.toml\"\n[[tenant]]\nname = \"alpha\"\nhosts = [\"alpha.test\"]\ncomponents = [\"probe\", \"echo\", \"broken\"]\n[tenant.limits]\nkv_store_bytes = 1048576\n";
    std::fs::write(&edge.config, raised).expect("rewrite config");
    edge.signal(libc::SIGHUP);
    let log = edge.log_after("reload refused").await;
    // Refused after the new app was built (and its stores opened).
    assert!(log.contains("components that load now would fail"), "{log}");
    let (status, body) = send("PUT", &kv("big"), big.clone()).await;
    assert_eq!(status, 500, "a refused reload applied its cap");
    assert!(body.contains("4096-byte cap"), "{body}");

    // Applied, the same raise takes effect.
    edge.dir.write("spin.toml", &spin());
    let raised_ok = raised.replace(", \"broken\"", "");
    std::fs::write(&edge.config, raised_ok).expect("rewrite config");
    edge.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while send("PUT", &kv("big"), big.clone()).await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the applied reload's cap never took effect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
