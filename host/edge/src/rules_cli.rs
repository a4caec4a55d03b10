//! `edge rules`: try rewrite rules without a server, and import nginx ones.
//!
//! A rules file is either an nginx config (`*.conf`: its `subs_filter` and
//! `replace_filter` directives) or TOML:
//!
//! ```toml
//! [[rule]]
//! pattern = 'origin\.example'
//! replacement = "clone.example"
//! flags = "gi"            # optional: i (case-insensitive), g (all), o (once)
//! ```

use anyhow::{Context, Result, bail};
use rewrite_engine::{Rewriter, Rule, RuleSet};
use std::io::{Read, Write};
use std::path::Path;

/// Reads a rules file (nginx `.conf` or TOML), as `[[tenant.site]]`'s
/// `rules_file` does.
pub fn load(path: &Path) -> Result<Vec<Rule>> {
    edge_config::read_rules_file(path).map_err(|e| anyhow::anyhow!(e))
}

/// Compiles rules, naming the file in errors.
pub fn compile(path: &Path, rules: &[Rule]) -> Result<RuleSet> {
    RuleSet::new(rules).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `edge rules test`: stdin through the rules to stdout, in chunks as they
/// come; a summary on stderr.
pub fn test(path: &Path) -> Result<()> {
    let rules = load(path)?;
    let set = compile(path, &rules)?;
    let mut rw = Rewriter::new(&set);
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(128 * 1024);
    let (mut read, mut written) = (0u64, 0u64);
    let start = std::time::Instant::now();
    loop {
        let n = stdin.read(&mut buf).context("reading stdin")?;
        if n == 0 {
            break;
        }
        read += n as u64;
        rw.write(&buf[..n], &mut out);
        written += out.len() as u64;
        stdout.write_all(&out).context("writing stdout")?;
        out.clear();
    }
    rw.finish(&mut out);
    written += out.len() as u64;
    stdout.write_all(&out).context("writing stdout")?;
    stdout.flush()?;
    let secs = start.elapsed().as_secs_f64();
    let stats = rw.stats();
    eprintln!(
        "{} rules, {read} bytes in, {written} out, {} replacements, {} forced emits, {:.1} MB/s",
        set.len(),
        stats.replacements,
        stats.forced_emits,
        read as f64 / secs / 1e6
    );
    Ok(())
}

/// `edge rules import`: an nginx config's rules as TOML on stdout, checked.
pub fn import(path: &Path) -> Result<()> {
    if path.extension().is_none_or(|e| e != "conf") {
        bail!("{}: expected an nginx config (*.conf)", path.display());
    }
    let rules = load(path)?;
    compile(path, &rules)?;
    let mut out = String::new();
    for r in &rules {
        let mut flags = String::new();
        if r.case_insensitive {
            flags.push('i');
        }
        flags.push(if r.once { 'o' } else { 'g' });
        out.push_str(&format!(
            "[[rule]]\npattern = {}\nreplacement = {}\nflags = \"{flags}\"\n\n",
            toml_string(&r.pattern),
            toml_string(&r.replacement)
        ));
    }
    print!("{out}");
    Ok(())
}

/// A TOML literal string when possible (no escapes to read), else basic.
fn toml_string(s: &str) -> String {
    if !s.contains('\'') && !s.contains('\n') {
        format!("'{s}'")
    } else {
        format!("{s:?}")
    }
}
