//! `edge rules test` and `edge rules import` on real files.

use edge_tests::{TempDir, edge_bin};
use std::io::Write;
use std::process::{Command, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(edge_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run edge");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const NGINX: &str = r#"
http {
    server {
        # a clone of python.org
        subs_filter 'https://(www|docs)\.python\.org' 'https://$1.example.nl' gr;
        subs_filter '(?i)\bpython\b' 'Snake' gir;
        subs_filter UA-1234 UA-0000 o;
    }
}
"#;

#[test]
fn nginx_rules_rewrite_stdin_and_import_as_toml() {
    let dir = TempDir::new("rules");
    let conf = dir.write("site.conf", NGINX);
    let input = b"Python at https://docs.python.org; UA-1234 UA-1234 pythonic";
    let (code, out, err) = run(&["rules", "test", "--rules", conf.to_str().unwrap()], input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "Snake at https://docs.example.nl; UA-0000 UA-1234 pythonic"
    );
    assert!(
        err.contains("3 rules") && err.contains("3 replacements"),
        "{err}"
    );

    let (code, toml, err) = run(&["rules", "import", conf.to_str().unwrap()], b"");
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("pattern = 'UA\\-1234'"), "{toml}");
    // The imported TOML behaves the same.
    let imported = dir.write("site.toml", &toml);
    let (code, out2, _) = run(
        &["rules", "test", "--rules", imported.to_str().unwrap()],
        input,
    );
    assert_eq!((code, out2), (0, out));
}

#[test]
fn bad_rules_are_refused_with_rule_and_position() {
    let dir = TempDir::new("badrules");
    let toml = dir.write(
        "r.toml",
        "[[rule]]\npattern = 'ok'\nreplacement = 'x'\n[[rule]]\npattern = 'a(?=b)'\nreplacement = 'x'\n",
    );
    let (code, _, err) = run(&["rules", "test", "--rules", toml.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(
        err.contains("r.toml: rule 2: pattern \"a(?=b)\" is not supported: look-around, including look-ahead and look-behind, is not supported at byte 1"),
        "{err}"
    );
    let groups = dir.write(
        "g.toml",
        "[[rule]]\npattern = '(a)(b)'\nreplacement = '$7'\n",
    );
    let (code, _, err) = run(&["rules", "test", "--rules", groups.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(
        err.contains("rule 1: replacement \"$7\": $7 at byte 0, but the pattern has 2 groups"),
        "{err}"
    );
}

#[test]
fn verbose_patterns_work_and_unicode_word_assertions_are_named() {
    let dir = TempDir::new("xrules");
    // A `#` comment of `(?x)` used to swallow the engine's own wrapping and
    // the rule was refused as "error parsing pattern 0".
    let toml = dir.write(
        "x.toml",
        "[[rule]]\npattern = '''(?x) c (a) t  # the animal'''\nreplacement = '[$1]'\n",
    );
    let (code, out, err) = run(
        &["rules", "test", "--rules", toml.to_str().unwrap()],
        b"a cat",
    );
    assert_eq!((code, out.as_str()), (0, "a [a]"), "{err}");

    let toml = dir.write(
        "u.toml",
        "[[rule]]\npattern = 'ok'\nreplacement = 'x'\n[[rule]]\npattern = 'cat\\>'\nreplacement = 'x'\n",
    );
    let (code, _, err) = run(&["rules", "test", "--rules", toml.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(
        err.contains("u.toml: rule 2: pattern \"cat\\\\>\" is not supported: \\> at byte 3 is a Unicode word boundary"),
        "{err}"
    );
}

#[test]
fn replace_filter_destinations_import_as_the_module_reads_them() {
    let dir = TempDir::new("dollars");
    // No variable in the value: ngx_replace_filter copies it verbatim.
    let conf = dir.write(
        "r.conf",
        "replace_filter 'a+' '$$&' g;\nreplace_filter 'b+' '<$&|$$>' g;\n",
    );
    let (code, toml, err) = run(&["rules", "import", conf.to_str().unwrap()], b"");
    assert_eq!(code, 0, "{err}");
    let imported = dir.write("r.toml", &toml);
    for rules in [&conf, &imported] {
        let (code, out, err) = run(
            &["rules", "test", "--rules", rules.to_str().unwrap()],
            b"aa bb",
        );
        assert_eq!((code, out.as_str()), (0, "$$& <bb|$>"), "{toml}\n{err}");
    }
    let conf = dir.write("v.conf", "\n\nreplace_filter a '$host';\n");
    let (code, _, err) = run(&["rules", "import", conf.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(
        err.contains("v.conf: line 3: replace_filter: replacement \"$host\": nginx variable $host at byte 0 is not supported"),
        "{err}"
    );
}
