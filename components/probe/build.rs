// A 64 KiB shadow stack instead of Rust's default 1 MiB: the probe needs little,
// and a smaller linear memory is cheaper to scan and reset per request.
fn main() {
    println!("cargo:rustc-link-arg=-zstack-size=65536");
}
