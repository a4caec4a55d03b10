//! Bad configs are refused with the file, line, column, key and what is
//! allowed, and nothing starts serving.

use edge_tests::{TempDir, component, edge_bin, edge_check as check, shared_cache};
use std::process::Command;

const GOOD_EDGE: &str = r#"app = "spin.toml"
[[tenant]]
name = "default"
hosts = ["*"]
components = ["*"]
"#;

fn good_spin() -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "t"
[variables]
token = {{ required = true }}
[[trigger.http]]
route = "/..."
component = "echo"
[component.echo]
source = "{}"
"#,
        component("echo")
    )
}

/// Runs `edge check` on the pair and returns (exit code, stderr).
fn assert_error(spin: &str, edge: &str, expected: &str) {
    let (code, stderr) = check(spin, edge);
    assert_eq!(
        code, 2,
        "expected exit 2 (invalid config), stderr: {stderr}"
    );
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in:\n{stderr}"
    );
}

fn spin_without_required() -> String {
    good_spin().replace("token = { required = true }", "token = { default = \"x\" }")
}

#[test]
fn valid_config_checks_clean() {
    let (code, stderr) = check(&spin_without_required(), GOOD_EDGE);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn unknown_keys_are_errors() {
    let edge = GOOD_EDGE.replace(
        "app = \"spin.toml\"",
        "app = \"spin.toml\"\n[server]\nlisen = \"x\"",
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:3:1: unknown field `lisen`, expected one of `listen`, `admin_listen`",
    );
}

#[test]
fn bad_listen_address_says_what_is_allowed() {
    let edge = GOOD_EDGE.replace(
        "app = \"spin.toml\"",
        "app = \"spin.toml\"\n[server]\nlisten = \"localhost\"",
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:3:10: server.listen: \"localhost\" is not a socket address (allowed: \"127.0.0.1:8080\"",
    );
}

#[test]
fn tenant_with_unknown_component() {
    let edge = GOOD_EDGE.replace("components = [\"*\"]", "components = [\"echo\", \"ecco\"]");
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:5:23: tenant[0].components[1]: no component \"ecco\" in the application; it has: echo (or \"*\" for all)",
    );
}

#[test]
fn duplicate_host_across_tenants() {
    let edge = format!(
        "{GOOD_EDGE}[[tenant]]\nname = \"other\"\nhosts = [\"*\"]\ncomponents = [\"echo\"]\n"
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:8:10: tenant[1].hosts[0]: host \"*\" is already served by tenant \"default\"",
    );
}

#[test]
fn bad_session_key() {
    let edge = format!(
        "{GOOD_EDGE}[component.echo]\ninstance = \"session\"\nsession_key = \"query:id\"\n"
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:8:15: component.echo.session_key: \"query:id\" is not a session key (allowed: \"header:NAME\", \"cookie:NAME\", \"path:N\"",
    );
}

#[test]
fn bad_instances_per_key() {
    let session = "[component.echo]\ninstance = \"session\"\nsession_key = \"header:x-user\"\n";
    for (value, given) in [("0", "0"), ("\"cores\"", "\"cores\"")] {
        let edge = format!("{GOOD_EDGE}{session}instances_per_key = {value}\n");
        assert_error(
            &spin_without_required(),
            &edge,
            &format!(
                "DIR/edge.toml:9:21: component.echo.instances_per_key: {given} is not allowed: a number of at least 1, or \"workers\" for one per worker thread"
            ),
        );
    }
    let edge = format!("{GOOD_EDGE}{session}instances_per_key = \"workers\"\n");
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn sidecar_output_cap_must_fit_an_answer() {
    let sidecar = "[sidecar]\nallow = [\"/bin/echo\"]\n";
    let edge = format!("{GOOD_EDGE}{sidecar}max_output_bytes = 16777216\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "sidecar.max_output_bytes: 16777216 is over the largest allowed, 8388608 (8 MiB): both streams must fit one answer on the socket",
    );
    let edge = format!("{GOOD_EDGE}{sidecar}max_output_bytes = 8388608\n");
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn sidecar_child_limits_are_checked() {
    let sidecar = "[sidecar]\nallow = [\"/bin/echo\"]\n";
    let edge = format!("{GOOD_EDGE}{sidecar}child_address_space_bytes = 1048576\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:8:29: sidecar.child_address_space_bytes: 1048576 is under 16777216 (16 MiB), too little for any program to start",
    );
    let edge = format!("{GOOD_EDGE}{sidecar}child_processes = 0\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:8:19: sidecar.child_processes: must be at least 1",
    );
    let edge = format!(
        "{GOOD_EDGE}{sidecar}child_cpu_seconds = 5\nchild_address_space_bytes = 16777216\nchild_processes = 64\nchild_file_bytes = 1\n"
    );
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn unknown_instance_mode() {
    let edge = format!("{GOOD_EDGE}[component.echo]\ninstance = \"pooled\"\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "component.echo.instance: \"pooled\" is not an instance mode (allowed: \"per-request\", \"session\", \"isolate\")",
    );
}

#[test]
fn isolates_take_no_session_key_and_per_request_keeps_no_instances() {
    let edge =
        format!("{GOOD_EDGE}[component.echo]\ninstance = \"isolate\"\nsession_key = \"host\"\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:8:15: component.echo.session_key: an isolate's instances take every request: it has no session_key",
    );
    let edge =
        format!("{GOOD_EDGE}[component.echo]\ninstance = \"isolate\"\ninstances_per_key = 0\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "component.echo.instances_per_key: 0 is not allowed",
    );
    let edge = format!("{GOOD_EDGE}[component.echo]\ninstances_per_key = 4\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "component.echo.instances_per_key: only components with instance = \"session\" or \"isolate\" keep instances",
    );
    let edge = format!(
        "{GOOD_EDGE}[component.echo]\ninstance = \"isolate\"\ninstances_per_key = 2\nidle_timeout_ms = 5000\n"
    );
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn pop_name_and_country_are_checked() {
    let edge = format!("{GOOD_EDGE}[server]\npop = \"fra 1\"\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "server.pop: \"fra 1\" is not a PoP name (allowed: 1 to 63 letters, digits, - and _)",
    );
    let edge = format!("{GOOD_EDGE}[server]\ncountry = \"de\"\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "server.country: \"de\" is not a country code (allowed: two upper-case letters",
    );
    let edge = format!("{GOOD_EDGE}[server]\npop = \"fra-1\"\ncountry = \"DE\"\n");
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn memory_limit_above_pool_slot() {
    let edge = format!("{GOOD_EDGE}[limits]\nmemory_bytes = 999999999999\n");
    assert_error(
        &spin_without_required(),
        &edge,
        "limits.memory_bytes: 999999999999 exceeds pool.max_memory_bytes (134217728)",
    );
}

#[test]
fn tiny_key_value_cap() {
    let edge = GOOD_EDGE.to_string() + "[tenant.limits]\nkv_store_bytes = 100\n";
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:7:18: tenant[0].limits.kv_store_bytes: must be at least 4096",
    );
}

#[test]
fn open_files_cap_out_of_range() {
    let edge = GOOD_EDGE.to_string() + "[tenant.limits]\nmax_open_files = 0\n";
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:7:18: tenant[0].limits.max_open_files: must be from 1 to 1048576",
    );
}

#[test]
fn key_value_label_with_a_slash() {
    let spin = spin_without_required().replace(
        "[component.echo]\n",
        "[component.echo]\nkey_value_stores = [\"../etc\"]\n",
    );
    assert_error(
        &spin,
        GOOD_EDGE,
        "component.echo.key_value_stores: \"../etc\" is not a store label (lower-case letters, digits, '_' and '-')",
    );
}

#[test]
fn too_many_key_value_labels() {
    let labels: Vec<String> = (0..65).map(|i| format!("\"s{i}\"")).collect();
    let spin = spin_without_required().replace(
        "[component.echo]\n",
        &format!(
            "[component.echo]\nkey_value_stores = [{}]\n",
            labels.join(", ")
        ),
    );
    let (code, stderr) = check(&spin, GOOD_EDGE);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("component.echo.key_value_stores: at most 64 labels per component"),
        "{stderr}"
    );
}

#[test]
fn route_without_slash() {
    let spin = spin_without_required().replace("route = \"/...\"", "route = \"echo\"");
    assert_error(
        &spin,
        GOOD_EDGE,
        "DIR/spin.toml:7:9: trigger.http[0].route: route \"echo\" must start with '/'",
    );
}

#[test]
fn trigger_for_unknown_component() {
    let spin = spin_without_required().replace("component = \"echo\"", "component = \"nope\"");
    assert_error(
        &spin,
        GOOD_EDGE,
        "trigger.http[0].component: no component \"nope\"; the application has: echo",
    );
}

#[test]
fn required_variable_without_value() {
    let spin = good_spin().replace(
        "[component.echo]",
        "[component.echo.variables]\nkey = \"{{ token }}\"\n[component.echo]",
    );
    let spin = spin.replace(
        "[component.echo.variables]\nkey = \"{{ token }}\"\n[component.echo]\nsource",
        "[component.echo]\nsource",
    );
    let spin = format!("{spin}[component.echo.variables]\nkey = \"{{{{ token }}}}\"\n");
    assert_error(
        &spin,
        GOOD_EDGE,
        "component.echo.variables.key: variable \"token\" is required but tenant \"default\" gives no value (for tenant \"default\")",
    );
}

#[test]
fn outbound_host_without_scheme() {
    let spin = spin_without_required().replace(
        "source = ",
        "allowed_outbound_hosts = [\"example.com\"]\nsource = ",
    );
    assert_error(
        &spin,
        GOOD_EDGE,
        "component.echo.allowed_outbound_hosts[0]: \"example.com\" has no scheme",
    );
}

#[test]
fn serve_refuses_a_bad_config_with_exit_code_2() {
    let dir = TempDir::new("cfg");
    dir.write("spin.toml", &spin_without_required());
    let config = dir.write("edge.toml", "app = \"spin.toml\"\n");
    let out = Command::new(edge_bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run edge");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no [[tenant]]"), "{stderr}");
}

fn with_site(site: &str) -> String {
    format!(
        "{GOOD_EDGE}[[tenant.site]]\nname = \"clone\"\nhosts = [\"clone.test\"]\ncomponent = \"echo\"\n{site}"
    )
}

#[test]
fn site_rule_with_look_around() {
    let edge = with_site(
        "origin = \"https://origin.test\"\n[[tenant.site.rules]]\npattern = 'ok'\nreplacement = 'x'\n[[tenant.site.rules]]\npattern = 'a(?=b)'\nreplacement = 'x'\n",
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "DIR/edge.toml:15:11: tenant[0].site[0].rules[1]: pattern \"a(?=b)\" is not supported: look-around, including look-ahead and look-behind, is not supported at byte 1",
    );
}

#[test]
fn site_rules_file_with_bad_group_reference() {
    let dir = TempDir::new("site");
    dir.write("spin.toml", &spin_without_required());
    dir.write(
        "site.conf",
        "subs_filter 'ok' 'x' g;\nsubs_filter '(a)(b)' '$7' gr;\n",
    );
    let config = dir.write(
        "edge.toml",
        &with_site("origin = \"https://origin.test\"\nrules_file = \"site.conf\"\n"),
    );
    let out = Command::new(edge_bin())
        .args(["check", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(shared_cache())
        .output()
        .expect("run edge check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tenant[0].site[0].rules_file: site.conf: rule 2: replacement \"$7\": $7 at byte 0, but the pattern has 2 groups"),
        "{stderr}"
    );
}

#[test]
fn site_origin_with_a_path() {
    assert_error(
        &spin_without_required(),
        &with_site("origin = \"https://origin.test/app\"\n"),
        "tenant[0].site[0].origin: \"https://origin.test/app\" must be a scheme and host only",
    );
}

#[test]
fn a_valid_site_loads() {
    let edge = with_site(
        "origin = \"http://127.0.0.1:9\"\ncontent_types = [\"text/html\"]\n[[tenant.site.rules]]\npattern = 'origin\\.test'\nreplacement = 'clone.test'\nflags = \"gi\"\n",
    );
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn site_without_its_component() {
    let edge = format!(
        "{GOOD_EDGE}[[tenant.site]]\nname = \"clone\"\nhosts = [\"clone.test\"]\norigin = \"http://127.0.0.1:9\"\n"
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "tenant[0].site[0].component: no component \"rewriter\" in the application to proxy this site; it has: echo",
    );
}

#[test]
fn site_host_outside_the_tenant() {
    let edge = GOOD_EDGE.replace("hosts = [\"*\"]", "hosts = [\"*.example.com\"]")
        + "[[tenant.site]]\nname = \"clone\"\nhosts = [\"clone.test\"]\ncomponent = \"echo\"\norigin = \"http://127.0.0.1:9\"\n";
    assert_error(
        &spin_without_required(),
        &edge,
        "tenant[0].site[0].hosts[0]: host \"clone.test\" is not among this tenant's hosts, so no request for it reaches the site",
    );
}

#[test]
fn site_rule_for_a_type_the_site_does_not_rewrite() {
    let edge = with_site(
        "origin = \"http://127.0.0.1:9\"\ncontent_types = [\"text/html\"]\n[[tenant.site.rules]]\npattern = 'a'\nreplacement = 'b'\ncontent_types = [\"text/css\"]\n",
    );
    assert_error(
        &spin_without_required(),
        &edge,
        "tenant[0].site[0].rules[0].content_types[0]: \"text/css\" is not among the site's content_types (text/html), so the rule would never apply",
    );
}

#[test]
fn a_secret_of_a_kind_that_cannot_be_generated() {
    let edge = format!("{GOOD_EDGE}[tenant.secrets]\ntoken = {{ generate = \"rsa\" }}\n");
    assert_error(
        &good_spin(),
        &edge,
        "tenant[0].secrets.token: cannot generate \"rsa\" (allowed: { generate = \"ed25519\" }, { generate = \"api-key\" })",
    );
}

#[test]
fn outbound_ranges_are_checked() {
    let edge =
        format!("{GOOD_EDGE}[outbound]\nallow_ranges = [\"127.0.0.1/32\", \"10.0.0.1/8\"]\n");
    assert_error(
        &good_spin(),
        &edge,
        "DIR/edge.toml:7:33: outbound.allow_ranges[1]: \"10.0.0.1/8\" has bits set past its prefix length: write \"10.0.0.0/8\", or the address alone",
    );
    let edge = format!("{GOOD_EDGE}[tenant.outbound]\nallow_ranges = [\"localhost\"]\n");
    assert_error(
        &good_spin(),
        &edge,
        "DIR/edge.toml:7:17: tenant[0].outbound.allow_ranges[0]: \"localhost\" is not an IP range (allowed: an address or a CIDR range such as \"127.0.0.1/32\", \"10.0.0.0/8\", \"::1/128\")",
    );
    let edge = GOOD_EDGE.replace(
        "[[tenant]]",
        "[limits]\nmax_outbound_requests = 0\n[[tenant]]",
    );
    assert_error(
        &good_spin(),
        &edge,
        "DIR/edge.toml:3:25: limits.max_outbound_requests: must be at least 1",
    );
}

#[test]
fn a_console_directory_must_hold_the_built_console() {
    for (value, expected) in [("nowhere", "has no index.html"), ("  ", "an empty path")] {
        let edge =
            format!("{GOOD_EDGE}[control]\nlisten = \"127.0.0.1:0\"\nconsole = \"{value}\"\n");
        assert_error(&spin_without_required(), &edge, "control.console");
        assert_error(&spin_without_required(), &edge, expected);
    }
    // A directory with an index.html is the console.
    let dir = TempDir::new("console");
    dir.write("index.html", "<!doctype html>");
    let edge = format!(
        "{GOOD_EDGE}[control]\nlisten = \"127.0.0.1:0\"\nconsole = \"{}\"\n",
        dir.path().display()
    );
    let (code, stderr) = check(&spin_without_required(), &edge);
    assert_eq!(code, 0, "{stderr}");
}
