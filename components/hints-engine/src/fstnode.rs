//! FST nodes read for walking: fst 0.4's nodes decoded once into offsets
//! (many transitions) or whole (one transition).
//!
//! `fst::raw::Node::new` works out every field of a node (its end, final
//! output, pack sizes) and each `transition(i)` works out the node's layout
//! again (whether it has an index, where its inputs and addresses start):
//! over the hint bench's log that was a third of the engine's
//! instructions. A Levenshtein walk opens a node for every live
//! transition, reads a few of its inputs and follows one or two.
//!
//! fst 0.4 (pinned in Cargo.toml) lays a many-transition node out, from its
//! address (its last byte) down: the state byte (0b00 or 0b01 for final in
//! its top bits; in its low six the number of transitions, or 0 when the
//! byte below holds it), that count byte (where 1 means 256), the pack sizes
//! (transition addresses' bytes in the high nibble, outputs' in the low),
//! a 256-byte index of inputs for nodes of more than 32 transitions (format
//! 2 on), the inputs (transition 0 nearest the top), the addresses as
//! deltas below the node's lowest byte, the outputs, then the final
//! output. A test reads every node of a dictionary with every layout both
//! ways.

use fst::raw::Output;

/// A node of an FST, small enough to stack: its bytes are the FST's,
/// passed to each method.
#[derive(Clone, Copy)]
pub(crate) enum View {
    /// The final node without transitions (address 0).
    Empty,
    /// One transition, not final: decoded whole.
    One {
        input: u8,
        out: u64,
        target: u32,
    },
    Any(AnyTrans),
}

/// A node of many transitions (or final with one), its layout worked out.
#[derive(Clone, Copy)]
pub(crate) struct AnyTrans {
    /// Input `i` is at `inputs_top - 1 - i`; below the inputs, the
    /// addresses, then the outputs; above them the index, if any.
    inputs_top: u32,
    /// The node's lowest byte: addresses are deltas below it.
    end: u32,
    ntrans: u16,
    tsize: u8,
    osize: u8,
    is_final: bool,
    indexed: bool,
}

impl AnyTrans {
    fn addrs_top(&self) -> usize {
        self.inputs_top as usize - self.ntrans as usize
    }

    fn outs_top(&self) -> usize {
        self.addrs_top() - self.ntrans as usize * self.tsize as usize
    }
}

/// Nodes with more transitions than this carry an input index (format 2).
const TRANS_INDEX_THRESHOLD: usize = 32;

/// The `n`-byte little-endian number at `at`.
#[inline]
fn unpack(data: &[u8], at: usize, n: usize) -> u64 {
    // Nodes sit below the FST's 16-byte trailer: eight bytes can be read.
    match data.get(at..at + 8) {
        Some(eight) if n > 0 => {
            let v = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
            v & (u64::MAX >> (64 - 8 * n))
        }
        _ => data[at..at + n]
            .iter()
            .rev()
            .fold(0, |v, &b| v << 8 | u64::from(b)),
    }
}

/// The inputs fst 0.4 stores in a one-transition node's state byte, by
/// their index there (1 to 63; 0: the input is in the byte below). Part of
/// the format: a test checks them against nodes `fst` builds.
const COMMON_INPUTS: &[u8; 63] = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHG";

/// A node's target address from its delta below `end` (0: the empty node).
#[inline]
fn target(end: usize, delta: u64) -> usize {
    if delta == 0 { 0 } else { end - delta as usize }
}

impl View {
    /// The node at `addr` of an FST whose bytes are `data` (and whose
    /// format has input indexes if `indexed`). `data` must be shorter than
    /// 4 GiB.
    #[inline(always)]
    pub fn at(data: &[u8], indexed: bool, addr: usize) -> View {
        if addr == 0 {
            return View::Empty;
        }
        let v = data[addr];
        if v >> 6 >= 0b10 {
            // One transition: its input in the state byte or the one below.
            let (input, below) = match v & 0b0011_1111 {
                0 => (data[addr - 1], addr - 1),
                i => (COMMON_INPUTS[i as usize - 1], addr),
            };
            if v >> 6 == 0b11 {
                // ... to the node just below, without output.
                return View::One {
                    input,
                    out: 0,
                    target: (below - 1) as u32,
                };
            }
            let sizes = data[below - 1];
            let (tsize, osize) = ((sizes >> 4) as usize, (sizes & 0x0f) as usize);
            let at = below - 1 - tsize;
            let end = at - osize;
            return View::One {
                input,
                out: if osize == 0 {
                    0
                } else {
                    unpack(data, end, osize)
                },
                target: target(end, unpack(data, at, tsize)) as u32,
            };
        }
        let mut at = addr - 1;
        let ntrans = match v & 0b0011_1111 {
            0 => {
                let n = data[at] as usize;
                at -= 1;
                if n == 1 { 256 } else { n }
            }
            n => n as usize,
        };
        let sizes = data[at];
        let (tsize, osize) = ((sizes >> 4) as usize, (sizes & 0x0f) as usize);
        let indexed = indexed && ntrans > TRANS_INDEX_THRESHOLD;
        let inputs_top = if indexed { at - 256 } else { at };
        let is_final = v & 0b0100_0000 != 0;
        let end = inputs_top - ntrans * (1 + tsize + osize) - if is_final { osize } else { 0 };
        View::Any(AnyTrans {
            inputs_top: inputs_top as u32,
            end: end as u32,
            ntrans: ntrans as u16,
            tsize: tsize as u8,
            osize: osize as u8,
            is_final,
            indexed,
        })
    }

    #[inline]
    pub fn len(&self) -> usize {
        match self {
            View::Empty => 0,
            View::One { .. } => 1,
            View::Any(a) => a.ntrans as usize,
        }
    }

    #[inline]
    pub fn is_final(&self) -> bool {
        match self {
            View::Empty => true,
            View::One { .. } => false,
            View::Any(a) => a.is_final,
        }
    }

    #[inline]
    pub fn final_output(&self, data: &[u8]) -> Output {
        match self {
            View::Any(a) if a.is_final && a.osize > 0 => {
                let osize = a.osize as usize;
                let at = a.outs_top() - (a.ntrans as usize + 1) * osize;
                Output::new(unpack(data, at, osize))
            }
            _ => Output::zero(),
        }
    }

    /// The input byte of transition `i`.
    #[inline]
    pub fn input(&self, data: &[u8], i: usize) -> u8 {
        match self {
            View::Empty => panic!("the empty node has no transitions"),
            View::One { input, .. } => *input,
            View::Any(a) => data[a.inputs_top as usize - 1 - i],
        }
    }

    /// The output and target address of transition `i`.
    #[inline(always)]
    pub fn target(&self, data: &[u8], i: usize) -> (Output, usize) {
        match self {
            View::Empty => panic!("the empty node has no transitions"),
            View::One { out, target, .. } => (Output::new(*out), *target as usize),
            View::Any(a) => {
                assert!(i < a.ntrans as usize);
                let (tsize, osize) = (a.tsize as usize, a.osize as usize);
                let out = if osize == 0 {
                    Output::zero()
                } else {
                    Output::new(unpack(data, a.outs_top() - (i + 1) * osize, osize))
                };
                let delta = unpack(data, a.addrs_top() - (i + 1) * tsize, tsize);
                (out, target(a.end as usize, delta))
            }
        }
    }

    /// The transition whose input is `b`.
    #[inline]
    pub fn find_input(&self, data: &[u8], b: u8) -> Option<usize> {
        match self {
            View::Empty => None,
            View::One { input, .. } => (*input == b).then_some(0),
            View::Any(a) => {
                let (top, n) = (a.inputs_top as usize, a.ntrans as usize);
                if a.indexed {
                    let i = data[top + b as usize] as usize;
                    (i < n).then_some(i)
                } else {
                    let inputs = &data[top - n..top];
                    inputs.iter().rposition(|&x| x == b).map(|p| n - 1 - p)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`COMMON_INPUTS`] are the inputs fst puts in a state byte: a key of
    /// one byte is a root of one transition, with the input's index there.
    #[test]
    fn common_inputs_are_fsts() {
        let mut found = [0u8; 63];
        for b in 0..=255u8 {
            let map = fst::Map::from_iter([([b], 1u64)]).unwrap();
            let fst = map.as_fst();
            let root = fst.root().addr();
            let idx = fst.as_bytes()[root] & 0b0011_1111;
            if idx != 0 {
                found[idx as usize - 1] = b;
            }
        }
        assert_eq!(&found, COMMON_INPUTS);
    }

    /// Every node of a dictionary built to hold every node layout (one
    /// transition, a few, more than 32: indexed, more than 63: the count in
    /// its own byte, all 256; final or not; outputs of one to eight bytes),
    /// read both ways: the same transitions, finality, outputs and lookups.
    #[test]
    fn reads_every_node_as_fst_does() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for a in b'a'..=b'f' {
            keys.push(vec![a]);
            for b in 0..=255u8 {
                if (a as usize + b as usize).is_multiple_of(a as usize - 95) {
                    keys.push(vec![a, b]);
                    keys.push(vec![a, b, b'x', b]);
                }
            }
        }
        for (n, lead) in [
            (32u8, b'g'),
            (33, b'h'),
            (63, b'i'),
            (64, b'j'),
            (255, b'k'),
        ] {
            keys.extend((0..n).map(|b| vec![lead, b'!', b]));
        }
        keys.extend((0..=255u8).map(|b| vec![b'l', b]));
        for b in 0..=255u8 {
            keys.push(vec![b]); // a root of 256 transitions
            keys.push(vec![b'x', b, b'y']);
        }
        for (n, lead) in [(3u8, b'm'), (20, b'n'), (200, b'o')] {
            keys.extend((0..n).map(|b| vec![lead, b, b'.']));
        }
        keys.sort();
        keys.dedup();
        for scale in [1u64, 7, 70_000, 1 << 40, 1 << 52] {
            let map =
                fst::Map::from_iter(keys.iter().enumerate().map(|(i, k)| (k, i as u64 * scale)))
                    .unwrap();
            let map = fst::Map::new(map.as_fst().as_bytes()).unwrap();
            let fst = map.as_fst();
            let indexed = crate::fuzzy::fst_version(fst) >= 2;
            let (mut seen, mut any) = (0, 0);
            let mut todo = vec![fst.root().addr()];
            let mut done = std::collections::HashSet::new();
            while let Some(addr) = todo.pop() {
                if !done.insert(addr) {
                    continue;
                }
                seen += 1;
                let node = fst.node(addr);
                let data = fst.as_bytes();
                let view = View::at(data, indexed, addr);
                any += usize::from(matches!(view, View::Any(_)));
                assert_eq!(view.len(), node.len(), "node {addr}");
                assert_eq!(view.is_final(), node.is_final(), "node {addr}");
                assert_eq!(view.final_output(data), node.final_output(), "node {addr}");
                for i in 0..node.len() {
                    let t = node.transition(i);
                    assert_eq!(view.input(data, i), t.inp, "node {addr} input {i}");
                    assert_eq!(
                        view.target(data, i),
                        (t.out, t.addr),
                        "node {addr} transition {i}"
                    );
                    todo.push(t.addr);
                }
                for b in 0..=255u8 {
                    assert_eq!(
                        view.find_input(data, b),
                        node.find_input(b),
                        "node {addr} byte {b}"
                    );
                }
            }
            assert!(any > 10 && seen > any, "{any} of {seen}");
        }
    }
}
