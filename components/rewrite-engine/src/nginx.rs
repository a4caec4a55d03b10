//! Reads nginx `subs_filter` and `replace_filter` directives as [`Rule`]s,
//! so existing configs carry over.
//!
//! - `subs_filter SOURCE DEST [FLAGS];` (ngx_http_subs_filter): flags `g`
//!   (all, the default), `i` (case-insensitive), `o` (first only), `r`
//!   (SOURCE is a regex; without it SOURCE is a literal string).
//! - `replace_filter REGEX DEST [OPTIONS];` (ngx_replace_filter): options
//!   `g` and `i`; without `g` only the first match is replaced. DEST is read
//!   as the module reads it: `$&` is the whole match, `$N` a group, `$$` a
//!   `$`; but a DEST with no `$&`, `$N` or `$name` is copied as it is,
//!   `$$` included.
//!
//! Other directives, blocks and comments are skipped. Quoting follows
//! nginx: single or double quotes, with `\"`, `\'` and `\\` unescaped and
//! other backslashes kept (so regex escapes pass through).
//!
//! ```
//! let rules = rewrite_engine::nginx::import(
//!     "location / { subs_filter 'a\\.com' 'b.com' gir; subs_filter x.y z o; }",
//! ).unwrap();
//! assert_eq!(rules[0].pattern, "a\\.com");
//! assert!(rules[0].case_insensitive);
//! assert_eq!(rules[1].pattern, "x\\.y"); // a literal: escaped
//! assert!(rules[1].once);
//! ```

use crate::Rule;

/// Why a directive could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {what}")]
pub struct ImportError {
    /// 1-based line of the directive.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// The `subs_filter` and `replace_filter` rules of an nginx config, in
/// order.
pub fn import(text: &str) -> Result<Vec<Rule>, ImportError> {
    let mut rules = Vec::new();
    for (line, words) in directives(text)? {
        let err = |what: String| ImportError { line, what };
        let Some(name) = words.first() else { continue };
        match name.as_str() {
            "subs_filter" => {
                let (src, dst, flags) = arguments(&words).map_err(err)?;
                let mut rule = Rule::new("", dst);
                let mut regex = false;
                for c in flags.chars() {
                    match c {
                        'g' => rule.once = false,
                        'o' => rule.once = true,
                        'i' => rule.case_insensitive = true,
                        'r' => regex = true,
                        other => {
                            return Err(err(format!(
                                "subs_filter: unknown flag {other:?} (allowed: g, i, o, r)"
                            )));
                        }
                    }
                }
                rule.pattern = if regex {
                    src.to_string()
                } else {
                    regex_syntax::escape(src)
                };
                if !regex {
                    // A literal destination: no group references.
                    rule.replacement = dst.replace('$', "$$");
                }
                rules.push(rule);
            }
            "replace_filter" => {
                let (src, dst, flags) = arguments(&words).map_err(err)?;
                let mut rule = Rule::new(src, &replace_filter_replacement(dst).map_err(err)?);
                rule.once = true;
                for c in flags.chars() {
                    match c {
                        'g' => rule.once = false,
                        'i' => rule.case_insensitive = true,
                        other => {
                            return Err(err(format!(
                                "replace_filter: unknown option {other:?} (allowed: g, i)"
                            )));
                        }
                    }
                }
                rules.push(rule);
            }
            _ => {}
        }
    }
    Ok(rules)
}

/// A `replace_filter` replacement in this engine's syntax, read as
/// ngx_replace_filter reads it (`ngx_http_replace_script.c`):
///
/// - A value with no variable in it is used as it is, `$$` and all: the
///   module counts variables first (`$$` is no variable, `$&`, `$1`..`$9`
///   and `$name` are) and copies a value without any verbatim. So
///   `'$$&'` is the three bytes `$$&`, not `$&` and not the match.
/// - Otherwise `$$` is one `$`, `$&` the whole match, `$N` and `${N}`
///   group N (every digit that follows is part of N), and a `&` right after
///   the digits of `$N` is swallowed as the module does.
/// - `$name` is an nginx variable, which this engine has no value for: an
///   error, as is a `$` at the end or an unclosed `${`.
fn replace_filter_replacement(dst: &str) -> Result<String, String> {
    let b = dst.as_bytes();
    if !has_variables(b) {
        return Ok(dst.replace('$', "$$"));
    }
    let mut out = String::with_capacity(dst.len() + 8);
    let mut i = 0;
    while i < b.len() {
        let Some(dollar) = dst[i..].find('$') else {
            out.push_str(&dst[i..]);
            break;
        };
        out.push_str(&dst[i..i + dollar]);
        let at = i + dollar;
        i = at + 1;
        let Some(&c) = b.get(i) else {
            return Err(format!(
                "replace_filter: replacement {dst:?}: '$' at byte {at} ends the value"
            ));
        };
        if c == b'$' {
            out.push_str("$$");
            i += 1;
            continue;
        }
        let bracket = c == b'{';
        if bracket {
            i += 1;
        }
        match b.get(i) {
            Some(&(b'&' | b'1'..=b'9')) => {
                let mut group = 0usize;
                while let Some(&d) = b.get(i) {
                    match d {
                        b'}' if bracket => break,
                        b'0'..=b'9' => {
                            group = group.saturating_mul(10).saturating_add((d - b'0') as usize);
                            i += 1;
                        }
                        b'&' => {
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                }
                if bracket {
                    if b.get(i) != Some(&b'}') {
                        return Err(format!(
                            "replace_filter: replacement {dst:?}: unclosed ${{ at byte {at}"
                        ));
                    }
                    i += 1;
                }
                out.push_str(&format!("${{{group}}}"));
            }
            _ => {
                let name: String = dst[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                return Err(format!(
                    "replace_filter: replacement {dst:?}: nginx variable ${name} at byte {at} is not supported (allowed: $&, $1..$9, ${{N}}, $$)"
                ));
            }
        }
    }
    Ok(out)
}

/// Whether ngx_replace_filter sees a variable in a value
/// (`ngx_http_replace_count_variables`): a `$` not paired with the `$`
/// before it, followed by anything but `$`.
fn has_variables(b: &[u8]) -> bool {
    let mut dollar = false;
    for &c in b {
        if c == b'$' {
            dollar = !dollar;
        } else if dollar {
            return true;
        }
    }
    false
}

fn arguments(words: &[String]) -> Result<(&str, &str, &str), String> {
    match words {
        [_, src, dst] => Ok((src, dst, "")),
        [_, src, dst, flags] => Ok((src, dst, flags)),
        _ => Err(format!(
            "{} takes 2 or 3 arguments, found {}",
            words[0],
            words.len() - 1
        )),
    }
}

/// Splits a config into directives: (line, words), ending at `;`.
fn directives(text: &str) -> Result<Vec<(usize, Vec<String>)>, ImportError> {
    let mut out = Vec::new();
    let mut words = Vec::new();
    let mut start_line = 1;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            ';' => {
                out.push((start_line, std::mem::take(&mut words)));
            }
            '{' | '}' => words.clear(),
            '\'' | '"' => {
                if words.is_empty() {
                    start_line = line;
                }
                let quote = c;
                let mut word = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(ImportError {
                                line,
                                what: format!("unclosed {quote} quote"),
                            });
                        }
                        Some(q) if q == quote => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\'' | '\\')) => word.push(e),
                            Some(e) => {
                                word.push('\\');
                                word.push(e);
                            }
                            None => {}
                        },
                        Some(ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            word.push(ch);
                        }
                    }
                }
                words.push(word);
            }
            c => {
                if words.is_empty() {
                    start_line = line;
                }
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, ';' | '{' | '}') {
                        break;
                    }
                    word.push(n);
                    chars.next();
                }
                words.push(word);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_shared_bench_rules() {
        let text = "subs_filter 'href=\\\"https://github\\.com/([a-z]+)' 'href=\\\"x/$1' gr;\n# c\nsubs_filter '(?i)python' 'Py' gir;";
        let rules = import(text).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].pattern, "href=\"https://github\\.com/([a-z]+)");
        assert_eq!(rules[0].replacement, "href=\"x/$1");
        assert!(crate::RuleSet::new(&rules).is_ok());
    }

    #[test]
    fn literal_sources_and_destinations_are_escaped() {
        let rules = import("subs_filter a.b $5 g;").unwrap();
        assert_eq!(rules[0].pattern, "a\\.b");
        assert_eq!(rules[0].replacement, "$$5");
        let set = crate::RuleSet::new(&rules).unwrap();
        assert_eq!(crate::Rewriter::rewrite_all(&set, b"a.b axb"), b"$5 axb");
    }

    #[test]
    fn replace_filter_defaults_to_once() {
        let rules = import("replace_filter 'a+' '<$&>';\nreplace_filter b c gi;").unwrap();
        assert!(rules[0].once);
        assert_eq!(rules[0].replacement, "<${0}>");
        assert!(!rules[1].once && rules[1].case_insensitive);
    }

    /// What ngx_replace_filter makes of a replacement, through this
    /// engine: `$$&` with no variable beside it is copied verbatim (the
    /// importer made it `$&`); with one, `$$` is a `$`.
    #[test]
    fn replace_filter_replacements_read_as_the_module_reads_them() {
        for (dst, out) in [
            ("$$&", "$$&"),
            ("$$", "$$"),
            ("<$$&>", "<$$&>"),
            ("$$&-$&", "$&-ab"),
            ("$$$&", "$ab"),
            ("[$1]", "[a]"),
            ("[${1}0]", "[a0]"),
            ("$10", ""),
            ("$1&x", "ax"),
            ("$&5", "ab5"),
            ("a$", "a$"),
        ] {
            let text = format!("replace_filter '(a)(b)(c)?(d)?(e)?(f)?(g)?(h)?(i)?(j)?' '{dst}';");
            let rules = import(&text).unwrap_or_else(|e| panic!("{dst}: {e}"));
            let set = crate::RuleSet::new(&rules).unwrap_or_else(|e| panic!("{dst}: {e}"));
            assert_eq!(
                String::from_utf8_lossy(&crate::Rewriter::rewrite_all(&set, b"ab")),
                out,
                "{dst}"
            );
        }
        let rules = import("replace_filter a '$10 ${2}';").unwrap();
        assert_eq!(rules[0].replacement, "${10} ${2}");
        for (dst, what) in [
            ("$host", "nginx variable $host at byte 0 is not supported"),
            ("${1", "unclosed ${ at byte 0"),
            ("x$1$", "'$' at byte 3 ends the value"),
        ] {
            let e = import(&format!("\n\nreplace_filter '(a)' '{dst}';"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("line 3: replace_filter: replacement"), "{e}");
            assert!(e.contains(what), "{dst}: {e}");
        }
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            import("http {\n  subs_filter a b c d;\n}")
                .unwrap_err()
                .to_string(),
            "line 2: subs_filter takes 2 or 3 arguments, found 4"
        );
        assert_eq!(
            import("\nsubs_filter a b x;").unwrap_err().to_string(),
            "line 2: subs_filter: unknown flag 'x' (allowed: g, i, o, r)"
        );
        assert_eq!(
            import("subs_filter 'a b;").unwrap_err().to_string(),
            "line 1: unclosed ' quote"
        );
    }
}
