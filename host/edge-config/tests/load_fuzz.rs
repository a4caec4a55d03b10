//! Property tests (fuzzing where cargo-fuzz cannot run) of what operators
//! and, soon, tenants hand the loader: an edge-config and the Spin manifest
//! it names.
//!
//! Inputs come from three generators: documents built from the grammar of
//! every key in `edge-config/REFERENCE.md` (and the manifest keys edge
//! reads) with plausible, borderline and wrongly typed values laid out as
//! sections, dotted keys or inline tables; the repository's own
//! `edge-config/default.toml` and `spin.toml` with random byte edits; and
//! TOML token soup.
//!
//! Whatever the text, `edge_config::load_with` returns; when it refuses,
//! the error names one of the files, with a LINE:COL inside that file when
//! the file could be read, and a key unless the fault is TOML's own
//! (syntax, unknown field, wrong type: those messages name what is wrong).
//!
//! `make test` runs the default number of cases (256 each);
//! `scripts/fuzz.sh SECONDS` runs them with fresh seeds until the time is
//! up. A failure is saved (shrunk) in `load_fuzz.proptest-regressions`,
//! which is checked in and replayed first by every run. `EDGE_FUZZ_SHOW=1`
//! prints each outcome (run with `--nocapture`), to see how deep the
//! generated documents get.

use proptest::prelude::*;
use std::path::PathBuf;

const DEFAULT_EDGE: &str = include_str!("../../../edge-config/default.toml");
const DEFAULT_SPIN: &str = include_str!("../../../spin.toml");

/// Values that are fine somewhere, wrong elsewhere, or at a boundary.
const ANY_VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "63",
    "64",
    "1023",
    "1024",
    "4096",
    "8191",
    "8192",
    "65535",
    "65536",
    "65537",
    "16777216",
    "134217728",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1e3",
    "0.5",
    "nan",
    "-inf",
    "true",
    "false",
    "\"\"",
    "\"*\"",
    "\"x\"",
    "\"workers\"",
    "\"é\u{301}\"",
    "\"\\u0000\"",
    "'lit'",
    "'''multi\nline'''",
    "\"\"\"\nbasic\\\n  multi\"\"\"",
    "[]",
    "[1, \"a\"]",
    "[\"*\"]",
    "[[]]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "07:32:00",
];

/// Every edge-config key, by section, with values that mean something to it.
const SERVER_KEYS: &[(&str, &[&str])] = &[
    (
        "listen",
        &[
            "\"127.0.0.1:0\"",
            "\"localhost\"",
            "\"[::1]:0\"",
            "\"127.0.0.1:99999\"",
            "\"127.0.0.1\"",
        ],
    ),
    (
        "admin_listen",
        &["\"127.0.0.1:0\"", "\"::1\"", "\"0.0.0.0:9080\""],
    ),
    ("data_dir", &["\"data\"", "\"\"", "\"/\"", "\"..\""]),
    ("http2", &["true", "false", "\"yes\""]),
    ("workers", &["1", "0", "2", "\"workers\"", "100000"]),
    ("max_connections", &["1", "0", "10000"]),
    ("max_header_bytes", &["8192", "8191", "16384", "0"]),
    ("max_body_bytes", &["0", "10485760", "-5"]),
    ("header_read_timeout_ms", &["1", "0", "10000"]),
    ("body_read_timeout_ms", &["1", "0", "10000"]),
    ("min_body_rate", &["0", "1024"]),
    ("write_timeout_ms", &["1", "0"]),
    ("idle_timeout_ms", &["1", "0"]),
    ("drain_timeout_ms", &["0", "10000"]),
    ("watch_interval_ms", &["0", "1000"]),
];

const POOL_KEYS: &[(&str, &[&str])] = &[
    ("total_component_instances", &["1000", "1", "0", "2"]),
    ("total_core_instances", &["4000", "0", "4"]),
    ("total_memories", &["2000", "0", "2"]),
    ("total_tables", &["4000", "0", "4"]),
    ("total_stacks", &["1000", "0", "1"]),
    (
        "max_memory_bytes",
        &["134217728", "65536", "65537", "0", "4294967296"],
    ),
    ("max_core_instances_per_component", &["16", "0"]),
    ("max_memories_per_component", &["4", "0"]),
    ("max_tables_per_component", &["8", "0"]),
    ("keep_resident_bytes", &["0", "16777216"]),
    (
        "total_memory_bytes",
        &["17179869184", "134217728", "134217727", "0"],
    ),
];

const LIMITS_KEYS: &[(&str, &[&str])] = &[
    ("request_deadline_ms", &["30000", "1", "0"]),
    (
        "memory_bytes",
        &["67108864", "65536", "65535", "999999999999"],
    ),
    ("kv_store_bytes", &["67108864", "4096", "4095"]),
    ("max_instances", &["500", "1", "0", "1001"]),
    (
        "max_total_memory_bytes",
        &["1073741824", "65536", "65535", "99999999999999999"],
    ),
    ("max_sessions", &["250", "1", "0", "501"]),
    ("max_inflight", &["4096", "1", "0"]),
    ("session_rate", &["200", "1", "0"]),
    ("max_host_resources", &["1024", "64", "63"]),
    ("max_fields_bytes", &["32768", "1024", "1023"]),
    ("max_outbound_requests", &["64", "1", "0"]),
];

const MIXER_KEYS: &[(&str, &[&str])] = &[
    ("max_rooms", &["1", "0", "32"]),
    ("max_members", &["1", "0", "64"]),
    ("room_idle_timeout_ms", &["1", "0", "300000"]),
];

const RANGES: &[&str] = &[
    "[\"127.0.0.1/32\"]",
    "[\"10.0.0.0/8\", \"::1\"]",
    "[\"10.0.0.1/8\"]",
    "[\"300.0.0.0/8\"]",
    "[\"::1/129\"]",
    "[\"\"]",
    "[\"fe80::/10\", \"0.0.0.0/0\"]",
];

const CONTROL_KEYS: &[(&str, &[&str])] = &[
    (
        "listen",
        &[
            "\"127.0.0.1:0\"",
            "\"0.0.0.0:8790\"",
            "\"[::1]:0\"",
            "\"nope\"",
            "8790",
        ],
    ),
    ("allow_public", &["true", "false", "\"yes\""]),
    (
        "database",
        &[
            "\"sqlite://control.db\"",
            "\"mysql://edge@localhost/edge?socket=/run/m.sock\"",
            "\"postgres://x\"",
            "\"\"",
        ],
    ),
    ("max_upload_bytes", &["1", "0", "134217728", "-1"]),
    ("compile_timeout_ms", &["1", "0", "120000"]),
    ("compile_memory_bytes", &["0", "4294967296"]),
    (
        "registry",
        &[
            "\"http://127.0.0.1:5000/edge\"",
            "\"https://r.example/\"",
            "\"oci://r.example/edge\"",
        ],
    ),
];

const SIDECAR_KEYS: &[(&str, &[&str])] = &[
    (
        "socket",
        &["\"s.sock\"", "\"\"", "\"/nonexistent/dir/s.sock\""],
    ),
    (
        "allow",
        &[
            "[\"/bin/true\"]",
            "[\"bin/true\"]",
            "[\"/bin/../bin/true\"]",
            "[\"//bin/true\"]",
            "[]",
        ],
    ),
    ("max_concurrent", &["1", "0"]),
    ("max_concurrent_per_tenant", &["1", "0", "16", "17"]),
    ("timeout_ms", &["1", "0"]),
    ("max_output_bytes", &["1", "0", "8388608", "8388609"]),
    ("child_cpu_seconds", &["1", "0"]),
    (
        "child_address_space_bytes",
        &["16777216", "16777215", "4294967296"],
    ),
    ("child_processes", &["1", "0"]),
    ("child_file_bytes", &["1", "0"]),
];

const TENANT_KEYS: &[(&str, &[&str])] = &[
    (
        "name",
        &["\"t\"", "\"u\"", "\"T\"", "\"\"", "\"a b\"", "\"é\""],
    ),
    (
        "hosts",
        &[
            "[\"*\"]",
            "[\"example.com\"]",
            "[\"*.example.com\"]",
            "[\"a.example.com\", \"A.EXAMPLE.COM\"]",
            "[\"*.*\"]",
            "[\"\"]",
            "[\"ex ample\"]",
        ],
    ),
    (
        "components",
        &[
            "[\"*\"]",
            "[\"echo\"]",
            "[\"echo\", \"web\"]",
            "[\"ecco\"]",
            "[]",
            "[\"*\", \"echo\"]",
        ],
    ),
    ("sidecar_programs", &["[]", "[\"/bin/true\"]", "[\"true\"]"]),
];

const COMPONENT_KEYS: &[(&str, &[&str])] = &[
    (
        "instance",
        &["\"session\"", "\"per-request\"", "\"pooled\""],
    ),
    (
        "session_key",
        &[
            "\"host\"",
            "\"bearer\"",
            "\"header:x-user\"",
            "\"header:\"",
            "\"cookie:sid\"",
            "\"path:1\"",
            "\"path:0\"",
            "\"path:x\"",
            "\"query:id\"",
        ],
    ),
    ("max_sessions", &["100", "1", "0", "1000"]),
    ("idle_timeout_ms", &["1", "0"]),
    ("max_queued_per_session", &["1", "0"]),
    ("instances_per_key", &["1", "0", "\"workers\"", "\"cores\""]),
    ("memory_bytes", &["67108864", "65536", "65535", "134217728"]),
];

const SITE_KEYS: &[(&str, &[&str])] = &[
    ("name", &["\"demo\"", "\"Demo\"", "\"\""]),
    (
        "hosts",
        &[
            "[\"site.example.com\"]",
            "[\"*.example.com\"]",
            "[\"other.org\"]",
            "[]",
        ],
    ),
    (
        "origin",
        &[
            "\"http://127.0.0.1:8080\"",
            "\"https://origin.example\"",
            "\"https://origin.example/path\"",
            "\"ftp://x\"",
            "\"http://\"",
            "\"http://[::1\"",
        ],
    ),
    ("component", &["\"rewriter\"", "\"echo\"", "\"nope\""]),
    ("origin_timeout_ms", &["1", "0"]),
    (
        "content_types",
        &[
            "[\"text/html\"]",
            "[\"text/html; charset=utf-8\"]",
            "[\"\"]",
        ],
    ),
    (
        "rules_file",
        &[
            "\"site.conf\"",
            "\"rules.toml\"",
            "\"missing.conf\"",
            "\"bad.conf\"",
        ],
    ),
];

const RULE_KEYS: &[(&str, &[&str])] = &[
    (
        "pattern",
        &[
            "'hello (\\w+)'",
            "'a'",
            "''",
            "'(?=a)'",
            "'\\b{start}'",
            "'a*'",
            "'('",
            "'é\u{301}'",
        ],
    ),
    (
        "replacement",
        &["'x'", "'$1'", "'${1}'", "'$7'", "'$$'", "'${name}'"],
    ),
    ("flags", &["\"i\"", "\"g\"", "\"o\"", "\"x\"", "\"ig\""]),
    ("content_types", &["[\"text/html\"]", "[\"image/png\"]"]),
];

const VARIABLE_VALUES: &[(&str, &[&str])] = &[
    ("greeting", &["\"hi\"", "1", "\"{{ x }}\""]),
    ("token", &["\"t\"", "\"\""]),
    ("undeclared", &["\"u\""]),
];

const SECRET_VALUES: &[(&str, &[&str])] = &[(
    "token",
    &[
        "{ generate = \"api-key\" }",
        "{ generate = \"ed25519\" }",
        "{ generate = \"rsa\" }",
        "{ file = \"secret.txt\" }",
        "{ file = \"missing.txt\" }",
        "{ env = \"EDGE_FUZZ_UNSET\" }",
        "{ env = \"PATH\", file = \"secret.txt\" }",
        "\"literal\"",
    ],
)];

/// A value for a key: mostly one that means something to it, sometimes
/// any value; and the key itself, now and then misspelled or quoted.
fn entry_text(key: &str, values: &[&str], i: prop::sample::Index, dice: u8, any: &str) -> String {
    // The first value of each key is a good one: most entries take it,
    // so a document gets past its early sections to the later checks.
    let value = match dice {
        0..120 => values[0],
        120..196 => values[i.index(values.len())],
        _ => any,
    };
    match dice {
        198 => format!("{key}x = {value}"),
        199 => format!("\"{key}\" = {value}"),
        _ => format!("{key} = {value}"),
    }
}

type Keys = &'static [(&'static str, &'static [&'static str])];

/// One entry of a table.
fn entry(keys: Keys) -> BoxedStrategy<String> {
    (
        prop::sample::select(keys),
        any::<prop::sample::Index>(),
        0u8..200,
        prop::sample::select(ANY_VALUES),
    )
        .prop_map(|((key, values), i, dice, any)| entry_text(key, values, i, dice, any))
        .boxed()
}

/// A table: `[header]` and some of its keys, each once (a repeated key is
/// TOML's error, found at once; the values are what is fuzzed).
fn table(header: &'static str, keys: Keys) -> BoxedStrategy<String> {
    table_with(header, keys, 0)
}

/// [`table`] whose first `required` keys are always there (dropped only
/// now and then, which is the schema's error).
fn table_with(header: &'static str, keys: Keys, required: usize) -> BoxedStrategy<String> {
    let optional = keys.len() - required;
    (
        prop::sample::subsequence(keys[required..].to_vec(), 0..=optional.min(6)),
        prop::bool::weighted(0.99),
    )
        .prop_map(move |(mut chosen, all_required)| {
            if all_required {
                chosen.extend_from_slice(&keys[..required]);
            }
            chosen
        })
        .prop_flat_map(move |chosen| {
            let len = chosen.len();
            (
                Just(chosen),
                prop::collection::vec(
                    (
                        any::<prop::sample::Index>(),
                        0u8..200,
                        prop::sample::select(ANY_VALUES),
                    ),
                    len,
                ),
                prop::sample::Index::arbitrary(),
            )
        })
        .prop_map(move |(chosen, values, shuffle)| {
            let mut entries: Vec<String> = chosen
                .iter()
                .zip(values)
                .map(|((key, vals), (i, dice, any))| entry_text(key, vals, i, dice, any))
                .collect();
            // Order within a table does not matter to TOML: rotate, so a
            // fault is found on other lines.
            if !entries.is_empty() {
                let k = shuffle.index(entries.len());
                entries.rotate_left(k);
            }
            format!("{header}\n{}\n", entries.join("\n"))
        })
        .boxed()
}

/// A site with its inline rules.
fn site() -> BoxedStrategy<String> {
    (
        table_with("[[tenant.site]]", SITE_KEYS, 3),
        prop::collection::vec(table_with("[[tenant.site.rules]]", RULE_KEYS, 2), 0..3),
    )
        .prop_map(|(s, rules)| format!("{s}{}", rules.concat()))
        .boxed()
}

/// A tenant with its sub-tables.
fn tenant() -> BoxedStrategy<String> {
    let outbound = prop::sample::select(RANGES)
        .prop_map(|r| format!("[tenant.outbound]\nallow_ranges = {r}\n"));
    (
        table_with("[[tenant]]", TENANT_KEYS, 3),
        prop::option::of(table("[tenant.limits]", LIMITS_KEYS)),
        prop::option::of(table("[tenant.mixer]", MIXER_KEYS)),
        prop::option::of(outbound),
        prop::option::of(table("[tenant.variables]", VARIABLE_VALUES)),
        prop::option::of(table("[tenant.secrets]", SECRET_VALUES)),
        prop::collection::vec(site(), 0..2),
    )
        .prop_map(|(t, l, m, o, v, s, sites)| {
            let opt = |x: Option<String>| x.unwrap_or_default();
            format!(
                "{t}{}{}{}{}{}{}",
                opt(l),
                opt(m),
                opt(o),
                opt(v),
                opt(s),
                sites.concat()
            )
        })
        .boxed()
}

/// An edge-config from the grammar of its keys. Sections come in a usual
/// order, shuffled now and then (a `[tenant.limits]` before any tenant),
/// and some entries are written as dotted keys or inline tables, so the
/// same fault sits at other lines and columns.
fn edge_config() -> impl Strategy<Value = String> {
    let app = prop_oneof![
        24 => Just("app = \"spin.toml\"\n"),
        1 => prop::sample::select(&[
            "app = \"missing.toml\"\n",
            "app = \"\"\n",
            "app = \".\"\n",
            "app = 2\n",
            "",
        ][..]),
    ];
    let component = (
        prop::sample::select(&["echo", "web", "rewriter", "ecco", "\"é\""][..]),
        table("", COMPONENT_KEYS),
    )
        .prop_map(|(id, t)| (id, format!("[component.{id}]{t}")));
    let outbound =
        prop::sample::select(RANGES).prop_map(|r| format!("[outbound]\nallow_ranges = {r}\n"));
    let sections = (
        prop::option::of(table("[server]", SERVER_KEYS)),
        prop::option::of(table("[pool]", POOL_KEYS)),
        prop::option::of(table("[limits]", LIMITS_KEYS)),
        prop::option::of(table("[mixer]", MIXER_KEYS)),
        prop::option::of(outbound),
        prop::option::weighted(0.15, table_with("[sidecar]", SIDECAR_KEYS, 2)),
        prop::option::weighted(0.2, table("[control]", CONTROL_KEYS)),
        prop_oneof![
            1 => Just(Vec::new()),
            12 => prop::collection::vec(tenant(), 1..2),
            3 => prop::collection::vec(tenant(), 2..4),
        ],
        prop::collection::vec(component, 0..3),
    )
        .prop_map(|(s, p, l, m, o, sc, ctl, tenants, comps)| {
            let mut v: Vec<String> = [s, p, l, m, o, sc, ctl].into_iter().flatten().collect();
            v.extend(tenants);
            // One table per component (a second is TOML's duplicate key).
            let mut seen = std::collections::HashSet::new();
            v.extend(
                comps
                    .into_iter()
                    .filter(|(id, _)| seen.insert(*id))
                    .map(|(_, t)| t),
            );
            v
        });
    let top_dotted = prop::collection::vec(
        prop_oneof![
            entry(SERVER_KEYS).prop_map(|e| format!("server.{e}")),
            entry(LIMITS_KEYS).prop_map(|e| format!("limits.{e}")),
            entry(POOL_KEYS).prop_map(|e| format!("pool = {{ {e} }}")),
        ],
        0..2,
    );
    // Dotted keys at the top collide with a later table of the same name
    // (TOML's duplicate key): only now and then.
    let top_dotted = prop_oneof![7 => Just(Vec::new()), 1 => top_dotted];
    (
        app,
        top_dotted,
        sections,
        any::<prop::sample::Index>(),
        0u8..8,
        layout(),
    )
        .prop_map(|(app, dotted, mut sections, i, dice, (prefix, crlf))| {
            if dice == 0 && sections.len() > 1 {
                let j = i.index(sections.len());
                sections.swap(0, j);
            }
            let text = format!("{prefix}{app}{}\n{}", dotted.join("\n"), sections.concat());
            if crlf {
                text.replace('\n', "\r\n")
            } else {
                text
            }
        })
}

/// What comes before the first key: nothing, comments with wide characters
/// (columns count characters), blank lines; and whether lines end in CRLF.
fn layout() -> impl Strategy<Value = (String, bool)> {
    (
        prop::sample::select(
            &[
                "",
                "",
                "# ☃ комментарий\n",
                "\n\n",
                "   # x\n\t\n",
                "\u{feff}",
            ][..],
        ),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(p, crlf)| (p.to_string(), crlf))
}

/// A Spin manifest from the grammar edge reads.
fn spin_manifest() -> impl Strategy<Value = String> {
    let version = prop_oneof![
        12 => Just("2"),
        1 => prop::sample::select(&["\"2\"", "1", "\"x\"", "2.0"][..]),
    ];
    let variables = prop::collection::vec(
        (
            prop::sample::select(&["greeting", "token", "Greeting", "a-b"][..]),
            prop::sample::select(
                &[
                    "{ default = \"hello\" }",
                    "{ required = true }",
                    "{ required = true, secret = true }",
                    "{ default = \"x\", required = true }",
                    "{ secret = \"yes\" }",
                    "{ default = 1 }",
                    "{}",
                    "\"bare\"",
                ][..],
            ),
        )
            .prop_map(|(k, v)| format!("{k} = {v}")),
        0..3,
    );
    let trigger = (
        prop::sample::select(
            &[
                "\"/...\"",
                "\"/a\"",
                "\"/a/...\"",
                "\"/users/:id\"",
                "\"\"",
                "\"a\"",
                "\"/a/.../b\"",
                "\"/:x/:y\"",
                "\"//\"",
                "\"/a/...\"",
                "{ private = true }",
                "1",
            ][..],
        ),
        prop::sample::select(
            &[
                "\"echo\"",
                "\"web\"",
                "\"nope\"",
                "{ source = \"e.wasm\" }",
                "1",
            ][..],
        ),
    )
        .prop_map(|(route, component)| {
            format!("[[trigger.http]]\nroute = {route}\ncomponent = {component}\n")
        });
    let component = (
        prop::sample::select(&["echo", "web", "echo", "Echo", "\"a.b\""][..]),
        prop::sample::select(
            &[
                "\"echo.wasm\"",
                "\"missing.wasm\"",
                "{ url = \"https://x/y.wasm\", digest = \"sha256:00\" }",
                "1",
            ][..],
        ),
        prop::collection::vec(
            prop::sample::select(
                &[
                    "allowed_outbound_hosts = [\"http://a.example\"]",
                    "allowed_outbound_hosts = [\"*://*:*\"]",
                    "allowed_outbound_hosts = [\"https://*.example:443\", \"http://[::1]:80\"]",
                    "allowed_outbound_hosts = [\"ftp://x\"]",
                    "allowed_outbound_hosts = [\"http://x:port\"]",
                    "allowed_outbound_hosts = [\"bad\"]",
                    "variables = { greeting = \"{{ greeting }}\" }",
                    "variables = { x = \"{{ missing }}\" }",
                    "variables = { y = \"{{\" }",
                    "variables = { z = \"{{ token }} and {{ greeting }}\" }",
                    "key_value_stores = [\"default\"]",
                    "key_value_stores = [\"\", \"../x\"]",
                    "files = [\"a\"]",
                    "[component.echo.build]\ncommand = \"make\"",
                ][..],
            ),
            0..3,
        ),
    )
        .prop_map(|(id, source, extra)| {
            format!(
                "[component.{id}]\nsource = {source}\n{}\n",
                extra.join("\n")
            )
        });
    (
        version,
        prop::bool::weighted(0.9),
        variables,
        prop::collection::vec(trigger, 0..4),
        prop::collection::vec(component, 0..3),
    )
        .prop_map(|(version, app, mut vars, triggers, mut comps)| {
            // Each name once (a second is TOML's duplicate key).
            let mut seen = std::collections::HashSet::new();
            vars.retain(|v| seen.insert(v.split(' ').next().unwrap_or_default().to_string()));
            comps.retain(|c| seen.insert(c.lines().next().unwrap_or_default().to_string()));
            let application = if app {
                "[application]\nname = \"fuzz\"\n"
            } else {
                ""
            };
            format!(
                "spin_manifest_version = {version}\n{application}[variables]\n{}\n{}{}",
                vars.join("\n"),
                triggers.concat(),
                comps.concat()
            )
        })
}

/// TOML tokens for mutations and soup.
const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    ",",
    ".",
    "\"",
    "'",
    "\"\"\"",
    "'''",
    "\\",
    "\\u",
    "#",
    "\n",
    "\r",
    "\t",
    " ",
    "0",
    "-",
    "+",
    "_",
    "e",
    "inf",
    "true",
    "x",
    "é",
    "\u{301}",
    "\u{0}",
    "[tenant]",
    "[[tenant]]",
    "[server]",
    "[[tenant.site]]",
    "[component.echo]",
    "name",
    "hosts",
    "limits.",
    "app = \"spin.toml\"\n",
];

/// An edit of a document: at a place (a fraction of its length), delete a
/// few bytes, insert a token, set a byte, or repeat a line.
#[derive(Debug, Clone)]
enum Edit {
    Delete(prop::sample::Index, usize),
    Insert(prop::sample::Index, &'static str),
    Byte(prop::sample::Index, u8),
    RepeatLine(prop::sample::Index),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        (any::<prop::sample::Index>(), 1usize..12).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<prop::sample::Index>(), prop::sample::select(TOKENS))
            .prop_map(|(i, t)| Edit::Insert(i, t)),
        // Mostly ASCII: a byte that breaks UTF-8 only gets "cannot read".
        (
            any::<prop::sample::Index>(),
            prop_oneof![4 => 0u8..0x80, 1 => any::<u8>()]
        )
            .prop_map(|(i, b)| Edit::Byte(i, b)),
        any::<prop::sample::Index>().prop_map(Edit::RepeatLine),
    ];
    prop::collection::vec(edit, 1..6)
}

fn apply(text: &str, edits: &[Edit]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for e in edits {
        let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
        match e {
            Edit::Delete(i, n) => {
                let s = at(i, b.len());
                let end = (s + n).min(b.len());
                b.drain(s..end);
            }
            Edit::Insert(i, t) => {
                let s = at(i, b.len());
                b.splice(s..s, t.bytes());
            }
            Edit::Byte(i, v) if !b.is_empty() => {
                let s = i.index(b.len());
                b[s] = *v;
            }
            Edit::Byte(..) => {}
            Edit::RepeatLine(i) => {
                let s = at(i, b.len());
                let start = b[..s]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |p| p + 1);
                let end = b[s..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| s + p + 1);
                let line = b[start..end].to_vec();
                b.splice(start..start, line);
            }
        }
    }
    b
}

/// The repository's default config, pointing at the manifest beside it.
fn default_edge() -> String {
    DEFAULT_EDGE.replace("app = \"../spin.toml\"", "app = \"spin.toml\"")
}

/// A scratch directory with the files the configs name, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("edge-config-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (name, text) in [
            ("echo.wasm", "\0asm"),
            ("secret.txt", "s3cret\n"),
            ("site.conf", "subs_filter 'hello' 'bye' gi;\n"),
            ("bad.conf", "subs_filter '(' 'x';\nlocation / {\n"),
            (
                "rules.toml",
                "[[rule]]\npattern = 'a(b)'\nreplacement = '$1'\n",
            ),
        ] {
            std::fs::write(dir.join(name), text).expect("fixture");
        }
        Self(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Messages of TOML's own faults (syntax, schema): they carry a position
/// and say what is wrong, but name no key path.
fn is_toml_fault(message: &str, text: Option<&str>) -> bool {
    const SERDE: &[&str] = &[
        "unknown field",
        "invalid type",
        "missing field",
        "invalid value",
        "invalid length",
        "unknown variant",
        "duplicate",
        "data did not match",
        "wanted ",
    ];
    SERDE.iter().any(|s| message.starts_with(s))
        || text.is_some_and(|t| toml::from_str::<toml::Table>(t).is_err())
}

/// Faults that are something missing from the whole file.
fn is_absence(message: &str) -> bool {
    ["no [[tenant]]", "the application has no ", "missing field"]
        .iter()
        .any(|m| message.starts_with(m))
}

/// Loads the two texts from a scratch directory and checks the outcome.
fn check(edge: &[u8], spin: &[u8]) -> Result<(), TestCaseError> {
    let dir = Dir::new();
    let edge_path = dir.0.join("edge.toml");
    std::fs::write(&edge_path, edge).expect("edge.toml");
    std::fs::write(dir.0.join("spin.toml"), spin).expect("spin.toml");
    let data = dir.0.join("data");
    let result = edge_config::load_with(&edge_path, Some(&data));
    if std::env::var_os("EDGE_FUZZ_SHOW").is_some() {
        eprintln!(
            "outcome: {:?} IN {:?}",
            result.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            String::from_utf8_lossy(edge)
        );
    }
    let Err(e) = result else {
        return Ok(());
    };
    let shown = e.to_string();
    prop_assert!(
        shown.starts_with(&e.file.display().to_string()),
        "the error does not begin with its file: {shown}"
    );
    prop_assert!(
        e.file.starts_with(&dir.0),
        "the error names a file outside the config's directory: {shown}"
    );
    if e.message.starts_with("cannot read file") {
        return Ok(());
    }
    let text = std::fs::read(&e.file)
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    prop_assert!(text.is_some(), "an error at an unreadable file: {shown}");
    let text = text.unwrap_or_default();
    let Some((line, col)) = e.position else {
        // A fault that is an absence has no place to point at.
        prop_assert!(is_absence(&e.message), "no LINE:COL in: {shown}");
        return Ok(());
    };
    check_position(&text, line, col)
        .map_err(|why| TestCaseError::fail(format!("{why}: {shown}")))?;
    prop_assert!(
        e.key.is_some() || is_toml_fault(&e.message, Some(&text)),
        "no key in: {shown}"
    );
    Ok(())
}

/// LINE:COL is 1-based, within the text (columns count characters; the
/// column just past a line's end is where a missing token would go).
fn check_position(text: &str, line: usize, col: usize) -> Result<(), String> {
    let lines: Vec<&str> = text.split('\n').collect();
    if line == 0 || col == 0 || line > lines.len() {
        return Err(format!(
            "{line}:{col} is outside the file ({} lines)",
            lines.len()
        ));
    }
    let width = lines[line - 1].chars().count();
    if col > width + 1 {
        return Err(format!(
            "{line}:{col} is past the line's end (width {width})"
        ));
    }
    Ok(())
}

/// A manifest with what the grammar's configs name: echo, web and rewriter
/// components, a default and a required secret variable.
fn good_manifest() -> &'static str {
    "spin_manifest_version = 2\n[application]\nname = \"a\"\n[variables]\ngreeting = { default = \"hi\" }\ntoken = { required = true, secret = true }\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[[trigger.http]]\nroute = \"/web/...\"\ncomponent = \"web\"\n[[trigger.http]]\nroute = \"/rewriter/...\"\ncomponent = \"rewriter\"\n[component.echo]\nsource = \"echo.wasm\"\nvariables = { greeting = \"{{ greeting }}\" }\n[component.web]\nsource = \"echo.wasm\"\nkey_value_stores = [\"default\"]\n[component.rewriter]\nsource = \"echo.wasm\"\nvariables = { token = \"{{ token }}\" }\n"
}

proptest! {
    /// Edge-configs from the grammar, with a good manifest.
    #[test]
    fn grammar_configs_load_or_fail_precisely(edge in edge_config()) {
        check(edge.as_bytes(), good_manifest().as_bytes())?;
    }

    /// Edge-configs and manifests both from the grammar.
    #[test]
    fn grammar_manifests_load_or_fail_precisely(edge in edge_config(), spin in spin_manifest()) {
        check(edge.as_bytes(), spin.as_bytes())?;
    }

    /// The repository's default config and manifest, edited at random.
    #[test]
    fn mutated_defaults_load_or_fail_precisely(edge_edits in edits(), spin_edits in edits(), which in 0u8..3) {
        let edge = default_edge();
        let (e, s) = match which {
            0 => (apply(&edge, &edge_edits), DEFAULT_SPIN.as_bytes().to_vec()),
            1 => (edge.into_bytes(), apply(DEFAULT_SPIN, &spin_edits)),
            _ => (apply(&edge, &edge_edits), apply(DEFAULT_SPIN, &spin_edits)),
        };
        check(&e, &s)?;
    }

    /// Token soup after a valid `app` line.
    #[test]
    fn token_soup_fails_precisely(tokens in prop::collection::vec(prop::sample::select(TOKENS), 0..40)) {
        let edge = format!("app = \"spin.toml\"\n{}", tokens.concat());
        check(edge.as_bytes(), good_manifest().as_bytes())?;
    }
}

/// The unmutated default config loads (so the mutations start from a
/// config that works, and a failure above is the edit's doing).
#[test]
fn the_default_config_loads() {
    let dir = Dir::new();
    let edge_path = dir.0.join("edge.toml");
    std::fs::write(&edge_path, default_edge()).expect("edge.toml");
    std::fs::write(dir.0.join("spin.toml"), DEFAULT_SPIN).expect("spin.toml");
    let r = edge_config::load_with(&edge_path, Some(&dir.0.join("data")));
    assert!(
        r.is_ok(),
        "{}",
        r.err().map(|e| e.to_string()).unwrap_or_default()
    );
}
