//! Text normalization shared by the index builder and the query path: both
//! sides must fold text the same way or nothing matches.
//!
//! Folding is lower case, canonical decomposition with the combining marks
//! dropped (so `ё` is `е`, `й` is `и`, `Rīga` is `riga`, `Reykjavík` is
//! `reykjavik`), plus the few letters that do not decompose (`þ` → `th`,
//! `ð` → `d`, `æ` → `ae`, `ø` → `o`, `ß` → `ss`, `ł` → `l`, `đ` → `d`,
//! `œ` → `oe`, `ı` → `i`). Tokens are runs of letters and digits; a hyphen
//! inside a word is kept when the caller asks (names: `петров-водкин`).
//!
//! ```
//! use hints_engine::text::tokens;
//! assert_eq!(tokens("г. Москва, ул. Хабаровская, д.12", false), ["г", "москва", "ул", "хабаровская", "д", "12"]);
//! assert_eq!(tokens("Ёлкин-Палкин", true), ["елкин-палкин"]);
//! assert_eq!(tokens("Brīvības iela 1", false), ["brivibas", "iela", "1"]);
//! ```

use unicode_normalization::char::{decompose_canonical, is_combining_mark};

/// Appends the folded form of `c` to `out`.
pub fn fold_char(c: char, out: &mut String) {
    for lower in c.to_lowercase() {
        match lower {
            'þ' => out.push_str("th"),
            'ð' | 'đ' => out.push('d'),
            'æ' => out.push_str("ae"),
            'ø' => out.push('o'),
            'ß' => out.push_str("ss"),
            'ł' => out.push('l'),
            'œ' => out.push_str("oe"),
            'ı' => out.push('i'),
            c if c.is_ascii() => out.push(c),
            c => decompose_canonical(c, |d| {
                if !is_combining_mark(d) {
                    out.push(d)
                }
            }),
        }
    }
}

/// The folded form of a whole string (separators kept as they are).
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        fold_char(c, &mut out);
    }
    out
}

/// Longest query word looked up, in characters: a word's Levenshtein
/// automaton grows with its length (a 4,000-character word took seconds),
/// and no place name or name part comes near it.
pub const MAX_TOKEN_CHARS: usize = 48;

/// `word` cut to [`MAX_TOKEN_CHARS`] characters.
pub fn capped(word: &str) -> String {
    word.chars().take(MAX_TOKEN_CHARS).collect()
}

/// The folded tokens of `s`: runs of letters and digits, with inner hyphens
/// kept if `keep_hyphen`.
pub fn tokens(s: &str, keep_hyphen: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() {
            fold_char(c, &mut cur);
        } else if keep_hyphen
            && c == '-'
            && !cur.is_empty()
            && chars.peek().is_some_and(|n| n.is_alphanumeric())
        {
            cur.push('-');
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether the text ends inside a word (the user is still typing it).
pub fn ends_in_word(s: &str) -> bool {
    s.chars().next_back().is_some_and(|c| c.is_alphanumeric())
}

/// `s` without its last character: `мос` → `мо`.
///
/// ```
/// assert_eq!(hints_engine::text::without_last_char("мос"), "мо");
/// assert_eq!(hints_engine::text::without_last_char(""), "");
/// ```
pub fn without_last_char(s: &str) -> &str {
    let mut chars = s.chars();
    chars.next_back();
    chars.as_str()
}

/// The prefixes of `word` at character boundaries, shortest first, up to
/// the whole word: `мос` → `м`, `мо`, `мос`.
///
/// ```
/// let p: Vec<&str> = hints_engine::text::prefixes("мос").collect();
/// assert_eq!(p, ["м", "мо", "мос"]);
/// ```
pub fn prefixes(word: &str) -> impl Iterator<Item = &str> {
    word.char_indices()
        .skip(1)
        .map(|(end, _)| end)
        .chain((!word.is_empty()).then_some(word.len()))
        .map(move |end| &word[..end])
}

/// Number of chars (not bytes) in a token.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// Address type words and their canonical abbreviation (the form the index
/// stores as a token). Queries may use any variant: `улица`, `ул` → `ул`.
/// Russian types also in Latin, spelt out ([`crate::translit`]: `ulitsa`;
/// not the short forms, which begin too many Latin names).
const TYPE_WORDS: &[(&str, &[&str])] = &[
    ("ул", &["ул", "улица", "ulitsa", "ulica"]),
    (
        "пр-кт",
        &["пр-кт", "пр-т", "пркт", "просп", "проспект", "prospekt"],
    ),
    ("пер", &["пер", "переулок", "pereulok"]),
    ("б-р", &["б-р", "бульв", "бульвар", "bulvar"]),
    ("ш", &["ш", "шоссе", "shosse"]),
    ("пл", &["пл", "площадь", "ploshchad"]),
    ("наб", &["наб", "набережная", "naberezhnaya"]),
    ("проезд", &["пр-д", "проезд", "proyezd", "proezd"]),
    ("туп", &["туп", "тупик"]),
    ("аллея", &["ал", "аллея"]),
    ("мкр", &["мкр", "мкрн", "микрорайон"]),
    ("г", &["г", "гор", "город"]),
    ("пос", &["п", "пос", "поселок"]),
    ("д", &["д", "дом"]),
    ("к", &["к", "корп", "корпус"]),
    ("стр", &["стр", "строение"]),
    ("st", &["st", "str", "street"]),
    ("ave", &["av", "ave", "avenue"]),
    ("rd", &["rd", "road"]),
    ("blvd", &["blvd", "boulevard"]),
    ("ln", &["ln", "lane"]),
    ("sq", &["sq", "square"]),
];

/// The canonical type abbreviation for a folded token, if it is a type word.
pub fn canonical_type(token: &str) -> Option<&'static str> {
    TYPE_WORDS
        .iter()
        .find(|(_, variants)| variants.contains(&token))
        .map(|(canon, _)| *canon)
}

/// Apostrophes and the letters that stand for them in transliterations
/// (`’` for a soft sign, `ʻ` for an okina, `‘` for an ayin).
pub fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '’' | '‘' | 'ʼ' | 'ʻ' | 'ʹ' | '`' | '´' | '′')
}

/// [`address_tokens`] of `s` with the apostrophes inside words dropped, so
/// that the words they join are one: `Vasil’yevo` is `vasilyevo`, as people
/// type it, for keyboards have no `’`. ([`tokens`] splits at them, as
/// at any other mark.)
///
/// ```
/// use hints_engine::text::joined_tokens;
/// assert_eq!(joined_tokens("Vasil’yevo, L'Anse, ‘Aiea"), ["vasilyevo", "lanse", "aiea"]);
/// ```
pub fn joined_tokens(s: &str) -> Vec<String> {
    let mut joined = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    let mut after_word = false;
    while let Some(c) = chars.next() {
        let inside = after_word && chars.peek().is_some_and(|n| n.is_alphanumeric());
        if !(is_apostrophe(c) && inside) {
            joined.push(c);
            after_word = c.is_alphanumeric();
        }
    }
    address_tokens(&joined)
}

/// Address tokens: hyphenated type words (`пр-кт`) stay whole, other
/// hyphenated words split (`1-я` → `1`, `я`).
pub fn address_tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for t in tokens(s, true) {
        if !t.contains('-') || canonical_type(&t).is_some() {
            out.push(t);
        } else {
            out.extend(t.split('-').filter(|p| !p.is_empty()).map(str::to_owned));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_diacritics_and_cyrillic_variants() {
        assert_eq!(fold("Ёжик Йошкар-Ола"), "ежик иошкар-ола");
        assert_eq!(fold("Þórshöfn Straße Øresund"), "thorshofn strasse oresund");
        assert_eq!(fold("ĶEGUMS"), "kegums");
    }

    #[test]
    fn tokenizes_addresses() {
        assert_eq!(
            address_tokens("Москва, пр-кт Мира, 1-я линия"),
            ["москва", "пр-кт", "мира", "1", "я", "линия"]
        );
        assert_eq!(tokens("  ", false), Vec::<String>::new());
        assert_eq!(tokens("a--b -c", true), ["a", "b", "c"]);
    }

    #[test]
    fn type_words() {
        assert_eq!(canonical_type("улица"), Some("ул"));
        assert_eq!(canonical_type("проспект"), Some("пр-кт"));
        assert_eq!(canonical_type("street"), Some("st"));
        assert_eq!(canonical_type("хабаровская"), None);
    }

    #[test]
    fn word_end() {
        assert!(ends_in_word("моск"));
        assert!(!ends_in_word("москва "));
        assert!(!ends_in_word("москва,"));
        assert!(!ends_in_word(""));
    }
}
