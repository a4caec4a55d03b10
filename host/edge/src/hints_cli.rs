//! `edge hints`: build the hint engine's indexes, and try queries on them
//! without a server.

use anyhow::{Context, Result, bail};
use hints_engine::address::{AddressIndex, build_address_index};
use hints_engine::names::{NameIndex, build_name_index};
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// Arguments of `edge hints build`.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// Address records, JSON Lines (see docs/HINTS.md).
    #[arg(long)]
    addresses: Option<PathBuf>,
    /// Name records, JSON Lines (see docs/HINTS.md).
    #[arg(long)]
    names: Option<PathBuf>,
    /// Where to write `address.idx` and `names.idx`.
    #[arg(long)]
    out_dir: PathBuf,
}

/// Arguments of `edge hints query`.
#[derive(clap::Args)]
pub struct QueryArgs {
    /// The index file (`address.idx` or `names.idx`).
    #[arg(long)]
    index: PathBuf,
    /// Suggestions to print.
    #[arg(long, default_value_t = 5)]
    count: usize,
    /// Run the query this many more times and report the mean time (the
    /// first run of a process also builds the automaton tables).
    #[arg(long, default_value_t = 0)]
    repeat: u32,
    /// Instead of one query, run every line of this file (a query log)
    /// and print latency percentiles and the slowest queries.
    #[arg(long, conflicts_with = "query")]
    log: Option<PathBuf>,
    /// With `--log`: print every query's suggestions (score and id or
    /// text, tab-separated) instead of timing them, so two builds of the
    /// engine can be compared with `diff`.
    #[arg(long, requires = "log")]
    show: bool,
    /// The query; several words are joined with spaces.
    #[arg(required_unless_present = "log")]
    query: Vec<String>,
}

/// `edge hints build`: reads the records, writes the indexes atomically (a
/// failed build leaves the previous index in place).
pub fn build(args: &BuildArgs) -> Result<()> {
    if args.addresses.is_none() && args.names.is_none() {
        bail!("nothing to build: give --addresses and/or --names");
    }
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    if let Some(path) = &args.addresses {
        let started = std::time::Instant::now();
        let (blob, stats) =
            build_address_index(open(path)?).with_context(|| format!("{}", path.display()))?;
        let out = write(&args.out_dir, "address.idx", &blob)?;
        eprintln!(
            "{}: {} places, {} streets, {} houses = {} entries; {} words; {:.1} MB in {:.1} s",
            out.display(),
            stats.places,
            stats.streets,
            stats.houses,
            stats.entries(),
            stats.tokens,
            blob.len() as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
    }
    if let Some(path) = &args.names {
        let started = std::time::Instant::now();
        let (blob, stats) =
            build_name_index(open(path)?).with_context(|| format!("{}", path.display()))?;
        let out = write(&args.out_dir, "names.idx", &blob)?;
        eprintln!(
            "{}: {} surnames, {} given names, {} patronymics = {} entries; {:.1} MB in {:.1} s",
            out.display(),
            stats.surnames,
            stats.names,
            stats.patronymics,
            stats.entries(),
            blob.len() as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// `edge hints query`: prints the suggestions, one per line, with scores and
/// the time the query took.
pub fn query(args: &QueryArgs) -> Result<()> {
    let bytes =
        std::fs::read(&args.index).with_context(|| format!("reading {}", args.index.display()))?;
    if let Some(log) = &args.log {
        return replay(&bytes, log, args.count, args.show);
    }
    let q = args.query.join(" ");
    if let Ok(ix) = AddressIndex::open(&bytes) {
        let started = std::time::Instant::now();
        let mut hits = ix.suggest(&q, args.count);
        let took = timed(started, args.repeat, || hits = ix.suggest(&q, args.count));
        for s in &hits {
            let a = ix.address(s);
            say(format_args!(
                "{:7.2}  {}  [{}]",
                s.score,
                a.unrestricted_value(),
                a.hint_id()
            ));
        }
        eprintln!("{} suggestions in {} µs", hits.len(), took.as_micros());
        return Ok(());
    }
    let ix = NameIndex::open(&bytes).with_context(|| {
        format!(
            "{} is neither an address nor a name index",
            args.index.display()
        )
    })?;
    let started = std::time::Instant::now();
    let mut hits = ix.suggest(&q, args.count, None, None);
    let took = timed(started, args.repeat, || {
        hits = ix.suggest(&q, args.count, None, None)
    });
    for f in &hits {
        say(format_args!(
            "{:7.2}  {}  ({:?})",
            f.score,
            f.value(),
            f.gender
        ));
    }
    eprintln!("{} suggestions in {} µs", hits.len(), took.as_micros());
    Ok(())
}

/// Runs a query; with `true`, also returns its suggestions as "score
/// id-or-text" (formatting is kept out of the timed runs).
type Run<'a> = Box<dyn Fn(&str, bool) -> Vec<String> + 'a>;

/// Runs a query log twice (the first pass warms up) and reports the second;
/// with `show`, prints each query's suggestions once instead.
fn replay(bytes: &[u8], log: &Path, count: usize, show: bool) -> Result<()> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let queries: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let run: Run = match AddressIndex::open(bytes) {
        Ok(ix) => Box::new(move |q, fields| {
            let hits = ix.suggest(q, count);
            let hits = if fields { &hits[..] } else { &[] };
            hits.iter()
                .map(|s| format!("{:.3} {}", s.score, ix.address(s).hint_id()))
                .collect()
        }),
        Err(_) => {
            let ix = NameIndex::open(bytes)?;
            Box::new(move |q, fields| {
                let hits = ix.suggest(q, count, None, None);
                let hits = if fields { &hits[..] } else { &[] };
                hits.iter()
                    .map(|f| format!("{:.3} {}", f.score, f.value()))
                    .collect()
            })
        }
    };
    if show {
        for q in &queries {
            say(format_args!("{q}\t{}", run(q, true).join("\t")));
        }
        return Ok(());
    }
    for q in &queries {
        run(q, false);
    }
    let mut times: Vec<(u128, &str)> = queries
        .iter()
        .map(|q| {
            let started = std::time::Instant::now();
            run(q, false);
            (started.elapsed().as_nanos(), *q)
        })
        .collect();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize].0 as f64 / 1000.0;
    let total: u128 = times.iter().map(|t| t.0).sum();
    say(format_args!(
        "{} queries: mean {:.1} µs, p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        times.len(),
        total as f64 / times.len() as f64 / 1000.0,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    ));
    // How much of the work the slowest queries are: where capping the
    // worst cases would pay.
    let share = |frac: f64| {
        let n = ((times.len() as f64 * frac).ceil() as usize).max(1);
        let slow: u128 = times.iter().rev().take(n).map(|t| t.0).sum();
        100.0 * slow as f64 / total.max(1) as f64
    };
    say(format_args!(
        "time taken by the slowest 1% of queries: {:.1}%, 5%: {:.1}%, 10%: {:.1}%",
        share(0.01),
        share(0.05),
        share(0.10)
    ));
    for (ns, q) in times.iter().rev().take(10) {
        say(format_args!("{:9.1} µs  {q}", *ns as f64 / 1000.0));
    }
    Ok(())
}

/// The first run's time, or the mean of `repeat` more runs.
fn timed(first: std::time::Instant, repeat: u32, mut run: impl FnMut()) -> std::time::Duration {
    let took = first.elapsed();
    if repeat == 0 {
        return took;
    }
    let started = std::time::Instant::now();
    for _ in 0..repeat {
        run();
    }
    started.elapsed() / repeat
}

fn open(path: &Path) -> Result<BufReader<std::fs::File>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(BufReader::with_capacity(1 << 20, f))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    let out = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, &out))
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// Prints a line; a closed stdout (`… | head`) ends the command quietly
/// instead of panicking.
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        std::process::exit(0);
    }
}
