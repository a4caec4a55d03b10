//! Which one-edit typos are likely: slips of the finger or of the ear.
//!
//! A typist's slips are not any edit: a finger lands on a key next to the
//! one meant (`mpscow`), hits two keys at once or one twice (`mospcow`,
//! `mosscow`), swaps two keys (`mocsow`) or misses one (`mosow`); or the
//! ear picks a letter that sounds the same (`масква`, `Moskow`). An edit
//! that needs a key far from the one meant and sounding different
//! (`mqscow`) is rarely a typo, and a word that only such an edit reaches
//! is rarely what was meant: the ranking charges it
//! [`UNLIKELY_TYPO_COST`] more.
//!
//! The layouts are the usual ones of the scripts the data speaks: QWERTY
//! for Latin letters, ЙЦУКЕН for Cyrillic, and the digit row. Letters
//! folded by [`crate::text`] sit where their unfolded key is (`й` is `и`,
//! `é` is `e`); a character on no layout is never ruled out.
//!
//! ```
//! use hints_engine::slips::is_slip;
//! assert!(is_slip("mpsc", b"moscow", true)); // o -> p, the next key
//! assert!(!is_slip("mqsc", b"moscow", true)); // o -> q, far away
//! assert!(is_slip("mocsow", b"moscow", false)); // swapped keys
//! assert!(is_slip("масква", "москва".as_bytes(), false)); // sounds the same
//! assert!(!is_slip("мфсква", "москва".as_bytes(), false)); // neither
//! ```

/// Rows of each layout, as [`crate::text`] folds them (`й` is `и`).
const LAYOUTS: [&[&[char]]; 3] = [
    &[&['1', '2', '3', '4', '5', '6', '7', '8', '9', '0']],
    &[
        &['q', 'w', 'e', 'r', 't', 'y', 'u', 'i', 'o', 'p'],
        &['a', 's', 'd', 'f', 'g', 'h', 'j', 'k', 'l'],
        &['z', 'x', 'c', 'v', 'b', 'n', 'm'],
    ],
    &[
        &['и', 'ц', 'у', 'к', 'е', 'н', 'г', 'ш', 'щ', 'з', 'х', 'ъ'],
        &['ф', 'ы', 'в', 'а', 'п', 'р', 'о', 'л', 'д', 'ж', 'э'],
        &['я', 'ч', 'с', 'м', 'и', 'т', 'ь', 'б', 'ю'],
    ],
];

/// Keys known to the layouts: Latin letters, Cyrillic а..я, digits.
const KEYS: usize = 26 + 32 + 10;

/// A key's number in [`NEAR`], or [`KEYS`] if it is on no layout.
#[inline]
const fn key(c: char) -> usize {
    match c {
        'a'..='z' => c as usize - 'a' as usize,
        'а'..='я' => 26 + c as usize - 'а' as usize,
        '0'..='9' => 58 + c as usize - '0' as usize,
        _ => KEYS,
    }
}

/// For each key, a bit per key next to it, in two words (a `u128` shift
/// is a libcall in wasm). Rows are staggered: a key touches two of the
/// row above (same column and the next) and two of the row below (the
/// previous column and the same).
static NEAR: [[u64; 2]; KEYS] = {
    let mut near = [[0u64; 2]; KEYS];
    let mut l = 0;
    while l < LAYOUTS.len() {
        let rows = LAYOUTS[l];
        let mut r = 0;
        while r < rows.len() {
            let mut c = 0;
            while c < rows[r].len() {
                let k = key(rows[r][c]);
                // Left and right; above: same column and the next; below:
                // the previous column and the same.
                let around: [(isize, isize); 6] =
                    [(0, -1), (0, 1), (-1, 0), (-1, 1), (1, -1), (1, 0)];
                let mut a = 0;
                while a < around.len() {
                    let (rr, cc) = (r as isize + around[a].0, c as isize + around[a].1);
                    if rr >= 0
                        && (rr as usize) < rows.len()
                        && cc >= 0
                        && (cc as usize) < rows[rr as usize].len()
                    {
                        let b = key(rows[rr as usize][cc as usize]);
                        near[k][b / 64] |= 1 << (b % 64);
                    }
                    a += 1;
                }
                c += 1;
            }
            r += 1;
        }
        l += 1;
    }
    near
};

/// Ranking cost of a one-edit typo that is no slip, in units of the
/// weight (ln of population or frequency): such a typo is taken for about
/// 55 times less likely than a slip. Measured with `quality.py` (top-5
/// from three letters, typo'd runs, two logs): 0 → 2 → 4 → 8 gave 67.2 →
/// 68.4 → 68.9 → 69.1% and 63.8 → 65.3 → 65.8 → 65.9%. More gains little,
/// and a misspelling that neither the layouts nor the sound-alike letters
/// explain would all but vanish from the list.
pub const UNLIKELY_TYPO_COST: f32 = 4.0;

/// Whether `hit` is a slip for `meant`: the same key, one next to it, or a
/// letter that sounds alike. True for a character no layout places.
#[inline]
pub fn near(meant: char, hit: char) -> bool {
    let (a, b) = (key(meant), key(hit));
    if a == KEYS || b == KEYS {
        return true;
    }
    a == b || NEAR[a][b / 64] >> (b % 64) & 1 == 1 || sound_alike(meant, hit)
}

/// Letters spelt for each other because they sound alike: Russian
/// unstressed vowels (`масква`, `пиреулок`) and consonants devoiced at a
/// word's end (`горот`), Latin c/k, s/z, i/y (`Moskow`).
fn sound_alike(a: char, b: char) -> bool {
    let pair = if a < b { (a, b) } else { (b, a) };
    matches!(
        pair,
        ('а', 'о')
            | ('е', 'и')
            | ('е', 'я')
            | ('и', 'ы')
            | ('е', 'э')
            | ('б', 'п')
            | ('в', 'ф')
            | ('г', 'к')
            | ('д', 'т')
            | ('ж', 'ш')
            | ('з', 'с')
            | ('c', 'k')
            | ('s', 'z')
            | ('i', 'y')
    )
}

/// Whether `typed` is `word` (with `prefix`, a beginning of it) with one
/// slip: a key next to the one meant or a letter that sounds alike, an
/// extra key next to its neighbours or a doubled one, two keys swapped, or
/// one left out.
///
/// False if no single edit explains it as a slip, which includes words
/// more than one edit away: call it for one-edit matches. Works on the
/// UTF-8 bytes and decodes only the characters around the first
/// difference (every single edit can be placed there).
pub fn is_slip(typed: &str, word: &[u8], prefix: bool) -> bool {
    let q = typed.as_bytes();
    let w = word;
    let aligned = |rest_q: &[u8], rest_w: &[u8]| {
        if prefix {
            rest_w.starts_with(rest_q)
        } else {
            rest_q == rest_w
        }
    };
    let mut i = q.iter().zip(w).take_while(|(a, b)| a == b).count();
    while i > 0 && is_continuation(q.get(i).or(w.get(i))) {
        i -= 1; // back to the first differing character
    }
    let (q_at, w_at) = (char_at(q, i), char_at(w, i));
    // A key left out: always a slip.
    if let Some((_, lw)) = w_at
        && aligned(&q[i..], &w[i + lw..])
    {
        return true;
    }
    let (Some((cq, lq)), Some((cw, lw))) = (q_at, w_at) else {
        // Typed past the word's end: an extra key at the end.
        return q_at.is_some_and(|(cq, lq)| {
            q.len() == i + lq && char_before(w, i).is_some_and(|p| near(p, cq))
        });
    };
    // Two keys swapped.
    if let (Some((cq2, lq2)), Some((cw2, lw2))) = (char_at(q, i + lq), char_at(w, i + lw))
        && cq == cw2
        && cq2 == cw
        && aligned(&q[i + lq + lq2..], &w[i + lw + lw2..])
    {
        return true;
    }
    // A key next to the one meant.
    if near(cw, cq) && aligned(&q[i + lq..], &w[i + lw..]) {
        return true;
    }
    // An extra key, next to (or the same as) the one before or after it.
    aligned(&q[i + lq..], &w[i..])
        && (near(cw, cq) || char_before(w, i).is_some_and(|p| near(p, cq)))
}

fn is_continuation(b: Option<&u8>) -> bool {
    b.is_some_and(|b| b & 0xc0 == 0x80)
}

/// The character that begins at byte `i` and its length in bytes (decoded
/// by hand: this runs for every typo'd candidate a scan checks).
#[inline(always)]
fn char_at(s: &[u8], i: usize) -> Option<(char, usize)> {
    let b0 = *s.get(i)? as u32;
    let more = |k: usize| s.get(i + k).map(|&b| b as u32 & 0x3f);
    let (c, len) = match b0 {
        0..0x80 => (b0, 1),
        0xc0..0xe0 => ((b0 & 0x1f) << 6 | more(1)?, 2),
        0xe0..0xf0 => ((b0 & 0x0f) << 12 | more(1)? << 6 | more(2)?, 3),
        _ => (
            (b0 & 0x07) << 18 | more(1)? << 12 | more(2)? << 6 | more(3)?,
            4,
        ),
    };
    Some((char::from_u32(c)?, len))
}

/// The character that ends at byte `i`.
fn char_before(s: &[u8], i: usize) -> Option<char> {
    let start = (i.saturating_sub(4)..i)
        .rev()
        .find(|&j| !is_continuation(s.get(j)))?;
    char_at(s, start).map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_follow_the_layouts() {
        assert!(near('o', 'p') && near('o', 'i') && near('o', 'k') && near('o', 'l'));
        assert!(near('g', 't') && near('g', 'y') && near('g', 'v') && near('g', 'b'));
        assert!(!near('o', 'q') && !near('a', 'p') && !near('g', 'u'));
        // Cyrillic: к (QWERTY's r) sits between у and е, above в and а.
        assert!(near('к', 'у') && near('к', 'е') && near('к', 'в') && near('к', 'а'));
        assert!(!near('к', 'п') && !near('к', 'я'));
        // й folds to и: its key touches ц and ф; и's own key м and т.
        assert!(near('и', 'ц') && near('и', 'ф') && near('и', 'м') && near('и', 'т'));
        // Digits touch digits; scripts do not touch each other.
        assert!(near('5', '4') && !near('5', '7') && !near('a', 'ф') && !near('1', 'q'));
        // Letters that sound alike.
        assert!(near('о', 'а') && near('а', 'о') && near('т', 'д') && near('k', 'c'));
        // What no layout places is never ruled out.
        assert!(near('ß', 'q') && near('-', 'a'));
    }

    #[test]
    fn slips_and_other_edits() {
        // Full words.
        assert!(is_slip("mpscow", b"moscow", false)); // next key
        assert!(!is_slip("mzscow", b"moscow", false)); // far key
        assert!(is_slip("mosow", b"moscow", false)); // left out
        assert!(is_slip("moscw", b"moscow", false));
        assert!(!is_slip("moscowp", b"moscow", false)); // p is far from w
        assert!(is_slip("moscowe", b"moscow", false)); // e is next to w
        assert!(is_slip("mocsow", b"moscow", false)); // swapped
        assert!(is_slip("mosdcow", b"moscow", false)); // extra key beside s
        assert!(!is_slip("mosycow", b"moscow", false)); // extra key far from s and c
        assert!(is_slip("mosscow", b"moscow", false)); // doubled
        assert!(is_slip("mmoscow", b"moscow", false)); // doubled first
        // Beginnings of words (the word being typed).
        assert!(is_slip("mpsc", b"moscow", true));
        assert!(!is_slip("mqsc", b"moscow", true));
        assert!(is_slip("msc", b"moscow", true)); // left out
        assert!(is_slip("omsc", b"moscow", true)); // swapped
        assert!(is_slip("mosx", b"moscow", true)); // x beside c
        assert!(!is_slip("mosp", b"moscow", true)); // p is beside neither s nor c
        // Cyrillic.
        assert!(is_slip("мрсква", "москва".as_bytes(), false)); // о -> р
        assert!(!is_slip("мфсква", "москва".as_bytes(), false)); // о -> ф
        assert!(is_slip("масква", "москва".as_bytes(), false)); // sounds alike
        assert!(is_slip("моска", "москва".as_bytes(), false));
        // Not one edit at all.
        assert!(!is_slip("mxxcow", b"moscow", false));
        assert!(!is_slip("мсавка", "москва".as_bytes(), true));
    }
}
