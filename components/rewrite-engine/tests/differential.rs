//! The streaming engine against an independent reference: a plain
//! non-streaming leftmost-longest loop over `regex` matches, on random rule
//! sets, inputs and chunk splits (down to one byte).

use proptest::prelude::*;
use rewrite_engine::{Rewriter, Rule, RuleSet};

/// The reference: at each position, the longest match of any enabled rule
/// that starts exactly there (ties: the earlier rule); replace it and skip
/// it, else copy one byte.
fn reference(rules: &[Rule], input: &[u8]) -> Vec<u8> {
    let whole: Vec<regex::bytes::Regex> = rules
        .iter()
        .map(|r| {
            let flags = if r.case_insensitive {
                "(?i-u)"
            } else {
                "(?-u)"
            };
            regex::bytes::Regex::new(&format!("{flags}^(?:{})$", r.pattern)).unwrap()
        })
        .collect();
    let mut disabled = vec![false; rules.len()];
    let mut out = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let mut best: Option<(usize, usize)> = None; // (end, rule)
        for (r, re) in whole.iter().enumerate() {
            if disabled[r] {
                continue;
            }
            for end in (i + 1..=input.len()).rev() {
                if best.is_some_and(|(e, _)| end <= e) {
                    break;
                }
                if re.is_match(&input[i..end]) {
                    best = Some((end, r));
                    break;
                }
            }
        }
        match best {
            Some((end, r)) => {
                let caps = whole[r].captures(&input[i..end]).unwrap();
                let mut expanded = Vec::new();
                caps.expand(rules[r].replacement.as_bytes(), &mut expanded);
                out.extend_from_slice(&expanded);
                if rules[r].once {
                    disabled[r] = true;
                }
                i = end;
            }
            None => {
                out.push(input[i]);
                i += 1;
            }
        }
    }
    out
}

fn streamed(set: &RuleSet, input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rw = Rewriter::new(set);
    let mut at = 0;
    for &c in cuts {
        let c = c.min(input.len()).max(at);
        rw.write(&input[at..c], &mut out);
        at = c;
    }
    rw.write(&input[at..], &mut out);
    rw.finish(&mut out);
    out
}

/// Rewrites `input` by each way of finding match starts (whichever pays,
/// the meta regex, the start filter), whole and streamed at every cut set,
/// and checks each output against `expected`.
fn same_on_every_search_path(
    rules: &[Rule],
    input: &[u8],
    cut_sets: &[&[usize]],
    expected: &[u8],
) -> Result<(), TestCaseError> {
    for filter in [None, Some(false), Some(true)] {
        let set = RuleSet::new(rules).unwrap().with_start_filter(filter);
        let whole = Rewriter::rewrite_all(&set, input);
        prop_assert_eq!(
            String::from_utf8_lossy(&whole),
            String::from_utf8_lossy(expected)
        );
        for cuts in cut_sets {
            prop_assert_eq!(streamed(&set, input, cuts), expected.to_vec());
        }
    }
    Ok(())
}

fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        "[abc]{1,3}".prop_map(|s| s),
        Just("[ab]".to_string()),
        Just("a+".to_string()),
        Just("b*c".to_string()),
        Just("(ab|a)".to_string()),
        Just("c{1,2}".to_string()),
        Just("[^a]".to_string()),
        Just("(a|aa)*b".to_string()),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(atom(), 1..3).prop_map(|v| v.concat())
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        pattern(),
        prop_oneof![
            Just("<$0>"),
            Just("X"),
            Just(""),
            Just("[${1}]"),
            Just("$$")
        ],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(p, rep, i, o)| {
            // Only use ${1} where there is a group to refer to.
            let rep = if rep.contains("${1}") && !p.contains('(') {
                "<$0>"
            } else {
                rep
            };
            Rule {
                pattern: p,
                replacement: rep.to_string(),
                case_insensitive: i,
                once: o,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn streaming_equals_whole_equals_reference(
        rules in prop::collection::vec(rule(), 1..6),
        input in "[abcAB x]{0,60}",
        cuts in prop::collection::vec(0usize..60, 0..12),
    ) {
        let input = input.as_bytes();
        let expected = reference(&rules, input);
        let mut cuts = cuts;
        cuts.sort();
        let bytewise: Vec<usize> = (1..input.len()).collect();
        same_on_every_search_path(&rules, input, &[&cuts, &bytewise], &expected)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Long runs where walks for the longest match go far past the match
    /// they take, so they stop at known dead ends (`dead_ends.rs`).
    #[test]
    fn long_walks_stop_at_dead_ends_with_the_same_output(
        rules in prop::collection::vec(
            (
                prop_oneof![
                    Just("a"), Just("a+b"), Just("(ab|a)+c"), Just("b"), Just("aa"),
                    Just("a{3}"), Just("[ab]+c"), Just("a{20}"), Just("ba+d"), Just("a+c"),
                ],
                any::<bool>(),
            ),
            1..4,
        ),
        input in "(a{0,40}[abc]){0,6}",
        cut in 0usize..240,
    ) {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|(p, once)| Rule { once: *once, ..Rule::new(p, "<$0>") })
            .collect();
        let input = input.as_bytes();
        let expected = reference(&rules, input);
        same_on_every_search_path(&rules, input, &[&[cut]], &expected)?;
    }
}

/// A rule with an ASCII word boundary (`\b`) or non-boundary (`\B`)
/// before and/or after a core pattern, so the reference can check them
/// from the bytes around a candidate match (a cut slice would hide them).
/// The core is the whole match or group 1 (the same bytes): a group must
/// come out whole when an assertion after it looks at the next byte.
#[derive(Clone, Debug)]
struct Bounded {
    core: String,
    before: Boundary,
    after: Boundary,
    case_insensitive: bool,
    group: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Boundary {
    None,
    Word,
    NotWord,
}

fn boundary() -> impl Strategy<Value = Boundary> {
    prop_oneof![
        2 => Just(Boundary::None),
        2 => Just(Boundary::Word),
        1 => Just(Boundary::NotWord),
    ]
}

impl Bounded {
    fn rule(&self) -> Rule {
        let b = |on: Boundary| match on {
            Boundary::None => "",
            Boundary::Word => r"\b",
            Boundary::NotWord => r"\B",
        };
        let (core, replacement) = if self.group {
            (format!("({})", self.core), "<$1>")
        } else {
            (format!("(?:{})", self.core), "<$0>")
        };
        Rule {
            case_insensitive: self.case_insensitive,
            ..Rule::new(
                &format!("{}{core}{}", b(self.before), b(self.after)),
                replacement,
            )
        }
    }
}

/// The reference for [`Bounded`] rules: as [`reference`], with the word
/// boundaries checked against the bytes outside the match.
fn bounded_reference(rules: &[Bounded], input: &[u8]) -> Vec<u8> {
    let cores: Vec<regex::bytes::Regex> = rules
        .iter()
        .map(|r| {
            // Unicode case folding, as the rules have it: `s` is `ſ` too.
            let flags = if r.case_insensitive { "(?i)" } else { "" };
            regex::bytes::Regex::new(&format!("{flags}^(?:{})$", r.core)).unwrap()
        })
        .collect();
    let word = |i: Option<usize>| {
        i.and_then(|i| input.get(i))
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    let holds = |on: Boundary, at: usize| {
        let word_boundary = word(at.checked_sub(1)) != word(Some(at));
        match on {
            Boundary::None => true,
            Boundary::Word => word_boundary,
            Boundary::NotWord => !word_boundary,
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let mut best: Option<usize> = None;
        for (r, core) in rules.iter().zip(&cores) {
            if !holds(r.before, i) {
                continue;
            }
            for end in (i + 1..=input.len()).rev() {
                if best.is_some_and(|e| end <= e) {
                    break;
                }
                if core.is_match(&input[i..end]) && holds(r.after, end) {
                    best = Some(end);
                    break;
                }
            }
        }
        match best {
            Some(end) => {
                out.push(b'<');
                out.extend_from_slice(&input[i..end]);
                out.push(b'>');
                i = end;
            }
            None => {
                out.push(input[i]);
                i += 1;
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Word boundaries narrow what the start filter admits around a
    /// match (`starts.rs`); no start where a match is possible is lost.
    #[test]
    fn word_boundaries_equal_the_reference(
        rules in prop::collection::vec(
            (
                prop_oneof![
                    Just("[ab]{1,3}"), Just("ab"), Just("a+"), Just("[. ]"), Just("b[. ]a"),
                    Just("[^a]"), Just("x?ab"), Just("(ab|a)c"), Just("[a.]"), Just("abcab"),
                    Just("sab"), Just("k"), Just("as"),
                ],
                boundary(),
                boundary(),
                any::<bool>(),
                any::<bool>(),
            ),
            1..5,
        ),
        input in "[abcAB x._sSkKſK]{0,60}",
        cuts in prop::collection::vec(0usize..60, 0..8),
    ) {
        let bounded: Vec<Bounded> = rules
            .iter()
            .map(|&(core, before, after, case_insensitive, group)| Bounded {
                core: core.into(),
                before,
                after,
                case_insensitive,
                group,
            })
            .collect();
        let rules: Vec<Rule> = bounded.iter().map(Bounded::rule).collect();
        let input = input.as_bytes();
        let expected = bounded_reference(&bounded, input);
        let mut cuts = cuts;
        cuts.sort();
        same_on_every_search_path(&rules, input, &[&cuts], &expected)?;
    }
}

#[test]
fn longest_then_first_listed() {
    let rules = [
        Rule::new("ab", "1"),
        Rule::new("abc", "2"),
        Rule::new("abc", "3"),
        Rule::new("b", "4"),
    ];
    let set = RuleSet::new(&rules).unwrap();
    assert_eq!(Rewriter::rewrite_all(&set, b"abcab b"), b"21 4");
}

#[test]
fn held_bytes_are_capped() {
    let set = RuleSet::new(&[Rule::new("a+b", "X")]).unwrap();
    let mut rw = Rewriter::new(&set).with_hold_cap(16);
    let mut out = Vec::new();
    rw.write(&[b'a'; 100], &mut out);
    assert!(
        out.len() >= 84,
        "only the cap is held: {} emitted",
        out.len()
    );
    rw.write(b"b", &mut out);
    rw.finish(&mut out);
    assert!(rw.stats().forced_emits > 0);
    // The emitted prefix is untouched; the held tail still matched.
    assert!(out.ends_with(b"X"));
}

#[test]
fn a_match_past_the_cap_is_given_up_at_once_not_byte_by_byte() {
    // The chunk ends right after the `b`: the match is not decided before
    // the next byte, and it is far longer than the cap. Giving it up one
    // start at a time rescanned the window per byte (0.1 MB/s at 64 KiB).
    let set = RuleSet::new(&[Rule::new("a+b", "X")]).unwrap();
    let mut rw = Rewriter::new(&set).with_hold_cap(16);
    let mut out = Vec::new();
    let mut input = vec![b'a'; 1000];
    input.push(b'b');
    rw.write(&input, &mut out);
    rw.finish(&mut out);
    assert_eq!(rw.stats().forced_emits, 1);
    // The 986 starts older than the window go out as they are; the 15
    // bytes within it still match.
    let kept = out.iter().take_while(|&&b| b == b'a').count();
    assert_eq!((kept, &out[kept..]), (986, &b"X"[..]));
}

#[test]
fn shared_bench_rule_files_load() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/rewriter");
    if !dir.exists() {
        return; // the shared inputs live beside the repository on dev machines
    }
    for n in [1, 10, 50, 200] {
        let text = std::fs::read_to_string(dir.join(format!("rules-{n}.conf"))).unwrap();
        let rules = rewrite_engine::nginx::import(&text).unwrap();
        assert_eq!(rules.len(), n);
        RuleSet::new(&rules).unwrap_or_else(|e| panic!("rules-{n}.conf: {e}"));
    }
}

#[test]
fn word_boundaries_see_the_bytes_around_the_match_across_chunks() {
    let set = RuleSet::new(&[Rule::new(r"\bcat\b", "dog").with_flags("i").unwrap()]).unwrap();
    let input = b"cat concat cats Cat. xcat cat";
    let expected = b"dog concat cats dog. xcat dog".to_vec();
    assert_eq!(Rewriter::rewrite_all(&set, input), expected);
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(streamed(&set, input, &bytewise), expected);
}

#[test]
fn groups_of_matches_that_end_in_an_assertion_are_filled() {
    // The assertions at the end look at the byte after the match: the
    // groups must be resolved with that byte in view, not at a cut text.
    let set = RuleSet::new(&[
        Rule::new(r"(?P<p>api)\B", "${p}-v2"),
        Rule::new(r"(/)\b", "${1}x/"),
        Rule::new(r"(x|x\w)\B", "[$1]"),
    ])
    .unwrap();
    let input = b"apis api /path xyz";
    let expected = b"api-v2s api /x/path [xy]z".to_vec();
    assert_eq!(Rewriter::rewrite_all(&set, input), expected);
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(streamed(&set, input, &bytewise), expected);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Rewriting with only the rules that matched gives the same output:
    /// what the match cache relies on.
    #[test]
    fn only_the_matching_rules_give_the_same_output(
        rules in prop::collection::vec(rule(), 1..6),
        input in "[abcAB x]{0,60}",
    ) {
        let set = RuleSet::new(&rules).unwrap();
        let mut full = Rewriter::new(&set);
        let mut out = Vec::new();
        full.write(input.as_bytes(), &mut out);
        full.finish(&mut out);
        let mut sub = Rewriter::with_rules(&set, full.matched_rules());
        let mut out2 = Vec::new();
        sub.write(input.as_bytes(), &mut out2);
        sub.finish(&mut out2);
        prop_assert_eq!(out, out2);
    }
}

#[test]
fn characters_split_between_chunks_still_match() {
    for (pattern, flags, input) in [
        ("a.c", "", "aéc"),
        ("[äé]", "", "é"),
        ("é", "i", "É"),
        ("[^x]y", "", "éy"),
        ("k", "i", "\u{212A}"),
    ] {
        let set = RuleSet::new(&[Rule::new(pattern, "X").with_flags(flags).unwrap()]).unwrap();
        let input = input.as_bytes();
        let bytewise: Vec<usize> = (1..input.len()).collect();
        assert_eq!(
            streamed(&set, input, &bytewise),
            b"X",
            "{pattern} on {:?}",
            String::from_utf8_lossy(input)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Bodies of several kilobytes, where the start filter works through
    /// whole windows and its four-block steps (`starts.rs`), against the
    /// meta regex's scan (checked against the reference above): word
    /// rules that share letters and prefixes, literals several of which
    /// start at one place, and rules with fixed first bytes.
    #[test]
    fn long_bodies_through_the_start_filter_equal_the_meta_regex(
        rules in prop::collection::vec(
            (
                prop_oneof![
                    Just(r"\bvalue\b"), Just(r"\bvalues\b"), Just(r"\btype\b"),
                    Just(r"\btypes\b"), Just("type"), Just("href=\"https://g[a-z]+"),
                    Just("href=\"h"), Just("ab[0-9]+"), Just("abc"), Just("(?i)python"),
                    Just(r"\bx\b"), Just("(a|aa)*b"), Just("e+s"),
                ],
                any::<bool>(),
                any::<bool>(),
            ),
            1..10,
        ),
        words in prop::collection::vec(
            prop_oneof![
                Just("value"), Just("values"), Just("Value"), Just("type"), Just("TYPES"),
                Just("typeface"), Just("href=\"https://github"), Just("href=\"x"),
                Just("ab12"), Just("abc"), Just("Python"), Just("x"), Just(" "), Just(" "),
                Just("."), Just("\n"), Just("aaab"), Just("es"),
            ],
            0..2500,
        ),
        cuts in prop::collection::vec(0usize..12_000, 0..10),
    ) {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|&(pattern, case_insensitive, once)| Rule {
                pattern: pattern.to_string(),
                replacement: "<$0>".to_string(),
                case_insensitive,
                once,
            })
            .collect();
        let body = words.concat();
        let input = body.as_bytes();
        let meta = RuleSet::new(&rules).unwrap().with_start_filter(Some(false));
        let expected = Rewriter::rewrite_all(&meta, input);
        let filtered = RuleSet::new(&rules).unwrap().with_start_filter(Some(true));
        let whole = Rewriter::rewrite_all(&filtered, input);
        prop_assert_eq!(
            String::from_utf8_lossy(&whole),
            String::from_utf8_lossy(&expected)
        );
        let mut cuts = cuts;
        cuts.sort();
        prop_assert_eq!(streamed(&filtered, input, &cuts), expected);
    }
}

/// Streams `input` in `cuts` recording the trace; (output, trace).
fn traced(
    set: &RuleSet,
    input: &[u8],
    cuts: &[usize],
) -> (Vec<u8>, Vec<rewrite_engine::Replacement>) {
    let mut out = Vec::new();
    let mut rw = Rewriter::new(set).with_trace(usize::MAX);
    let mut at = 0;
    for &c in cuts {
        let c = c.min(input.len()).max(at);
        // A fresh buffer per chunk, as the rewriter component's: offsets
        // count from the body's start whatever the caller's buffers.
        let mut chunk_out = Vec::new();
        rw.write(&input[at..c], &mut chunk_out);
        out.extend_from_slice(&chunk_out);
        at = c;
    }
    rw.write(&input[at..], &mut out);
    rw.finish(&mut out);
    (out, rw.trace().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The trace a preview highlights accounts for the whole output: the
    /// bytes between replacements are the input's, in order, and each
    /// replacement's output is what its rule wrote.
    #[test]
    fn the_trace_rebuilds_the_output_from_the_input(
        rules in prop::collection::vec(rule(), 1..6),
        input in "[abcAB x]{0,60}",
        cuts in prop::collection::vec(0usize..60, 0..12),
    ) {
        let input = input.as_bytes();
        let set = RuleSet::new(&rules).unwrap();
        let mut cuts = cuts;
        cuts.sort();
        let (out, trace) = traced(&set, input, &cuts);
        prop_assert_eq!(&out, &Rewriter::rewrite_all(&set, input));
        let (mut i, mut o) = (0usize, 0usize);
        for r in &trace {
            let (is, ie) = (r.input.start as usize, r.input.end as usize);
            let (os, oe) = (r.output.start as usize, r.output.end as usize);
            prop_assert!(is >= i && os >= o && ie <= input.len() && oe <= out.len());
            prop_assert_eq!(&input[i..is], &out[o..os]);
            prop_assert!(r.rule < rules.len());
            // What the rule wrote: its literal replacement, exactly.
            if rules[r.rule].replacement == "X" {
                prop_assert_eq!(&out[os..oe], b"X");
            }
            (i, o) = (ie, oe);
        }
        prop_assert_eq!(&input[i..], &out[o..]);
        let mut counts = vec![0u64; rules.len()];
        for r in &trace {
            counts[r.rule] += 1;
        }
        // (the traced rewriter is gone; count again with a fresh one)
        let mut rw = Rewriter::new(&set).with_trace(0);
        let mut sink = Vec::new();
        rw.write(input, &mut sink);
        rw.finish(&mut sink);
        prop_assert_eq!(rw.rule_counts(), &counts[..]);
        prop_assert!(rw.trace().is_empty());
        prop_assert_eq!(trace.len() as u64, {
            let mut rw = Rewriter::new(&set);
            let mut sink = Vec::new();
            rw.write(input, &mut sink);
            rw.finish(&mut sink);
            rw.stats().replacements
        });
    }
}

#[test]
fn the_trace_stops_at_its_cap() {
    let set = RuleSet::new(&[Rule::new("a", "b")]).unwrap();
    let mut rw = Rewriter::new(&set).with_trace(2);
    let mut out = Vec::new();
    rw.write(b"aaaa", &mut out);
    rw.finish(&mut out);
    assert_eq!(out, b"bbbb");
    assert_eq!(rw.trace().len(), 2);
    assert_eq!(rw.trace()[1].input, 1..2);
    assert_eq!(rw.stats().replacements, 4);
    assert_eq!(rw.rule_counts(), &[4]);
}
