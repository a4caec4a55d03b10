//! Text typed on the wrong keyboard layout: `vjcrdf` is `москва` typed
//! with the Latin layout on, `кшпф` is `riga` typed with the Russian one.
//! Russian users switch layouts all day and forget to as often; a hint
//! field that answers nothing until the user notices is one they retype.
//!
//! The engines ask only when a query found nothing at all, so a query
//! that means something as typed is never reread (`vj` may still be the
//! beginning of a Latin name; `vjcr` is no word's).
//!
//! The layouts are the standard Russian ЙЦУКЕН and US QWERTY: the same
//! physical key in both. Keys that are letters in one layout and
//! punctuation in the other (`[` is `х`, `,` is `б`, `;` is `ж`) are
//! swapped too, so `[f,fhjdcr` is `хабаровск`; the Russian comma and
//! full stop (on the Latin `?` and `/` keys) become `,` and `.`.
//!
//! ```
//! use hints_engine::layout::swap;
//! assert_eq!(swap("vjcrdf [f,fhjdcrfz 12").as_deref(), Some("москва хабаровская 12"));
//! assert_eq!(swap("Кшпф").as_deref(), Some("Riga"));
//! assert_eq!(swap("12"), None);
//! ```

/// Physical keys: the Latin (US) character and the Russian one, lower
/// and upper case.
const KEYS: &[(char, char)] = &[
    ('q', 'й'),
    ('w', 'ц'),
    ('e', 'у'),
    ('r', 'к'),
    ('t', 'е'),
    ('y', 'н'),
    ('u', 'г'),
    ('i', 'ш'),
    ('o', 'щ'),
    ('p', 'з'),
    ('[', 'х'),
    (']', 'ъ'),
    ('a', 'ф'),
    ('s', 'ы'),
    ('d', 'в'),
    ('f', 'а'),
    ('g', 'п'),
    ('h', 'р'),
    ('j', 'о'),
    ('k', 'л'),
    ('l', 'д'),
    (';', 'ж'),
    ('\'', 'э'),
    ('z', 'я'),
    ('x', 'ч'),
    ('c', 'с'),
    ('v', 'м'),
    ('b', 'и'),
    ('n', 'т'),
    ('m', 'ь'),
    (',', 'б'),
    ('.', 'ю'),
    ('`', 'ё'),
    ('Q', 'Й'),
    ('W', 'Ц'),
    ('E', 'У'),
    ('R', 'К'),
    ('T', 'Е'),
    ('Y', 'Н'),
    ('U', 'Г'),
    ('I', 'Ш'),
    ('O', 'Щ'),
    ('P', 'З'),
    ('{', 'Х'),
    ('}', 'Ъ'),
    ('A', 'Ф'),
    ('S', 'Ы'),
    ('D', 'В'),
    ('F', 'А'),
    ('G', 'П'),
    ('H', 'Р'),
    ('J', 'О'),
    ('K', 'Л'),
    ('L', 'Д'),
    (':', 'Ж'),
    ('"', 'Э'),
    ('Z', 'Я'),
    ('X', 'Ч'),
    ('C', 'С'),
    ('V', 'М'),
    ('B', 'И'),
    ('N', 'Т'),
    ('M', 'Ь'),
    ('<', 'Б'),
    ('>', 'Ю'),
    ('~', 'Ё'),
];

/// `text` as the other layout would have typed it: Latin letters to
/// Russian if it has no Cyrillic letter, Russian to Latin if it has no
/// Latin letter; `None` if it has neither (digits only) or both (a
/// mixed query was typed on purpose).
pub fn swap(text: &str) -> Option<String> {
    let latin = text.chars().any(|c| c.is_ascii_alphabetic());
    let cyrillic = text
        .chars()
        .any(|c| matches!(c, 'а'..='я' | 'А'..='Я' | 'ё' | 'Ё'));
    match (latin, cyrillic) {
        (true, false) => Some(
            text.chars()
                .map(|c| match c {
                    '?' => ',',
                    '/' => '.',
                    c => KEYS.iter().find(|k| k.0 == c).map_or(c, |k| k.1),
                })
                .collect(),
        ),
        (false, true) => Some(
            text.chars()
                .map(|c| KEYS.iter().find(|k| k.1 == c).map_or(c, |k| k.0))
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_both_ways() {
        assert_eq!(swap("vjcrdf").as_deref(), Some("москва"));
        assert_eq!(
            swap("Vjcrdf? ek/ [f,fhjdcrfz").as_deref(),
            Some("Москва, ул. хабаровская")
        );
        assert_eq!(swap("bdfyjd bdfy").as_deref(), Some("иванов иван"));
        assert_eq!(swap("ыфт акфтсшысщ").as_deref(), Some("san francisco"));
        // Every key comes back as it was.
        let all: String = KEYS.iter().map(|k| k.0).collect();
        assert_eq!(swap(&swap(&all).unwrap()).as_deref(), Some(all.as_str()));
    }

    #[test]
    fn leaves_mixed_and_letterless_text() {
        assert_eq!(swap("москва moscow"), None);
        assert_eq!(swap("12-14"), None);
        assert_eq!(swap(""), None);
    }
}
