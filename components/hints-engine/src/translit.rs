//! Latin spellings of Cyrillic names, so that `12 habarovskaya moscow`
//! finds ул Хабаровская in Москва: visitors, foreign keyboards and
//! Latin-only forms type Russian addresses the way road signs and
//! passports spell them.
//!
//! The system is BGN/PCGN's for Russian, the one GeoNames spells Russian
//! places in (Khabarovsk, Krasnyy, Vtoroy), without its diacritics and
//! apostrophes: `х` → `kh`, `ц` → `ts`, `щ` → `shch`, `ы` and `й` → `y`,
//! `е` → `ye` at the start of a word and after a vowel or a sign, `ь` and
//! `ъ` dropped. Of the 5,264 Russian places in the data, 88% come out as
//! GeoNames spells them and 98% within one edit (`ё`, which GeoNames
//! spells `yo`, is `e` here, as Russians mostly write it). Other
//! spellings of the same name (`habarovskaya`, `sovetskaja`,
//! `pervomaiskaya`) are one or two edits from it, which the engine's typo
//! tolerance already accepts; indexing every system would multiply the
//! words for little.
//!
//! ```
//! use hints_engine::translit::romanize;
//! assert_eq!(romanize("Хабаровская").as_deref(), Some("Khabarovskaya"));
//! assert_eq!(romanize("1-я Ямская").as_deref(), Some("1-ya Yamskaya"));
//! assert_eq!(romanize("Riga"), None);
//! ```

/// The BGN/PCGN spelling of `text`, or `None` if it has no Cyrillic
/// letter (Latin names are their own spelling). Other characters are kept.
pub fn romanize(text: &str) -> Option<String> {
    if !text.chars().any(is_cyrillic) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut previous: Option<char> = None;
    for c in text.chars() {
        let lower = c.to_lowercase().next().unwrap_or(c);
        let latin = match lower {
            // `е`, `ё` are `ye` where they begin a syllable: Yelets, Podyezdnoy.
            'е' | 'ё' if previous.is_none_or(begins_syllable_after) => Some("ye"),
            _ => letter(lower),
        };
        match latin {
            None => out.push(c), // not Cyrillic: digits, spaces, hyphens, Latin
            Some(latin) if c != lower => {
                // Capitalized as the source is: Х → Kh, not KH.
                let mut chars = latin.chars();
                if let Some(first) = chars.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(chars.as_str());
                }
            }
            Some(latin) => out.push_str(latin),
        }
        previous = Some(lower);
    }
    Some(out)
}

/// A Latin spelling read back into Cyrillic, for a name typed in Latin
/// (`Ivanov Ivan`, as passports and booking forms spell it): `None` if
/// the text has a Cyrillic letter or no Latin one.
///
/// Spellings are many and the way back is not unique (`e` is `е` or `э`,
/// `y` is `ы`, `й` or part of `я`), so this takes the likeliest reading
/// and leaves the rest to typo tolerance: BGN/PCGN's digraphs and their
/// common variants (`ya`/`ja`/`ia` → `я`, `sch` → `щ`, `ts`/`tz` → `ц`),
/// `y` after a vowel → `й`, a name's final `y` after a consonant → `ий`
/// (Dmitry, Yury, Vasily), `'` → `ь`.
///
/// ```
/// use hints_engine::translit::cyrillic;
/// assert_eq!(cyrillic("Ivanov Dmitry Sergeyevich").as_deref(), Some("иванов дмитрий сергеевич"));
/// assert_eq!(cyrillic("Yuliya Shchukina").as_deref(), Some("юлия щукина"));
/// assert_eq!(cyrillic("Иванов"), None);
/// ```
pub fn cyrillic(text: &str) -> Option<String> {
    if text.chars().any(is_cyrillic) || !text.chars().any(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let lower: Vec<char> = text.to_lowercase().chars().collect();
    let mut out = String::with_capacity(lower.len() * 2);
    let mut i = 0;
    while i < lower.len() {
        let rest = &lower[i..];
        let starts = |s: &str| rest.iter().copied().take(s.len()).eq(s.chars());
        let letter = |k: usize| lower.get(k).is_some_and(|c| c.is_alphabetic());
        let after_vowel = i > 0 && "aeiouy".contains(lower[i - 1]);
        // Digraphs are ASCII: their length in bytes is in characters.
        let (cyr, len) = match DIGRAPHS.iter().find(|(l, _)| starts(l)) {
            Some(&(latin, cyr)) => (Some(cyr), latin.len()),
            None => {
                let cyr = match rest[0] {
                    // Yuriy / Yury: a final y after a consonant is -ий.
                    'y' if !letter(i + 1) && i > 0 && letter(i - 1) && !after_vowel => Some("ий"),
                    'y' if after_vowel => Some("й"),
                    'y' => Some("ы"),
                    // c before e, i, y is ц (Tsvetkov as Cvetkov), else к.
                    'c' if rest.get(1).is_some_and(|n| "eiy".contains(*n)) => Some("ц"),
                    '\'' | '’' | 'ʼ' => Some("ь"),
                    c => LATIN.iter().find(|(l, _)| *l == c).map(|(_, cyr)| *cyr),
                };
                (cyr, 1)
            }
        };
        match cyr {
            Some(cyr) => out.push_str(cyr),
            None => out.push(rest[0]), // not a Latin letter: digits, spaces
        }
        i += len;
    }
    Some(out)
}

/// Latin letter groups read as one Cyrillic letter, longest first.
const DIGRAPHS: &[(&str, &str)] = &[
    ("shch", "щ"),
    ("sch", "щ"),
    ("zh", "ж"),
    ("kh", "х"),
    ("ts", "ц"),
    ("tz", "ц"),
    ("ch", "ч"),
    ("sh", "ш"),
    ("yu", "ю"),
    ("ju", "ю"),
    ("iu", "ю"),
    ("ya", "я"),
    ("ja", "я"),
    ("ia", "я"),
    ("yo", "ё"),
    ("jo", "ё"),
    ("ye", "е"),
    ("je", "е"),
];

/// The other Latin letters.
const LATIN: &[(char, &str)] = &[
    ('a', "а"),
    ('b', "б"),
    ('c', "к"),
    ('d', "д"),
    ('e', "е"),
    ('f', "ф"),
    ('g', "г"),
    ('h', "х"),
    ('i', "и"),
    ('j', "й"),
    ('k', "к"),
    ('l', "л"),
    ('m', "м"),
    ('n', "н"),
    ('o', "о"),
    ('p', "п"),
    ('q', "к"),
    ('r', "р"),
    ('s', "с"),
    ('t', "т"),
    ('u', "у"),
    ('v', "в"),
    ('w', "в"),
    ('x', "кс"),
    ('z', "з"),
];

fn is_cyrillic(c: char) -> bool {
    matches!(c, '\u{0400}'..='\u{04FF}')
}

/// After this character an `е` is pronounced (and spelt) `ye`: a word
/// break, a vowel, or a hard or soft sign.
fn begins_syllable_after(c: char) -> bool {
    !c.is_alphabetic()
        || matches!(
            c,
            'а' | 'е' | 'ё' | 'и' | 'о' | 'у' | 'ы' | 'э' | 'ю' | 'я' | 'ь' | 'ъ' | 'й'
        )
}

/// One lower-case Cyrillic letter in Latin (the signs as ""), or `None`
/// for anything else. Ukrainian and Belarusian letters are spelt as
/// their own romanizations do, since their places appear in the data too.
fn letter(c: char) -> Option<&'static str> {
    Some(match c {
        'а' => "a",
        'б' => "b",
        'в' => "v",
        'г' => "g",
        'д' => "d",
        'е' | 'ё' | 'э' => "e",
        'ж' => "zh",
        'з' => "z",
        'и' | 'і' => "i",
        'й' | 'ы' => "y",
        'к' => "k",
        'л' => "l",
        'м' => "m",
        'н' => "n",
        'о' => "o",
        'п' => "p",
        'р' => "r",
        'с' => "s",
        'т' => "t",
        'у' | 'ў' => "u",
        'ф' => "f",
        'х' => "kh",
        'ц' => "ts",
        'ч' => "ch",
        'ш' => "sh",
        'щ' => "shch",
        'ъ' | 'ь' => "",
        'ю' => "yu",
        'я' => "ya",
        'є' => "ye",
        'ї' => "yi",
        'ґ' => "g",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        romanize(s).unwrap()
    }

    #[test]
    fn spells_as_geonames_does() {
        // GeoNames' own spellings of these places.
        assert_eq!(r("Хабаровск"), "Khabarovsk");
        assert_eq!(r("Хабаровск Второй"), "Khabarovsk Vtoroy");
        assert_eq!(r("Красный Яр"), "Krasnyy Yar");
        assert_eq!(r("Елец"), "Yelets");
        assert_eq!(r("Ульяновск"), "Ulyanovsk");
        assert_eq!(r("Щёлково"), "Shchelkovo");
        assert_eq!(r("Подъездной"), "Podyezdnoy");
        assert_eq!(r("Чебоксары"), "Cheboksary");
        assert_eq!(r("Жуковский"), "Zhukovskiy");
    }

    #[test]
    fn reads_latin_names_back() {
        let c = |s: &str| cyrillic(s).unwrap();
        assert_eq!(c("Aleksandr Pushkin"), "александр пушкин");
        assert_eq!(c("Natalia"), "наталя"); // one edit from наталья
        assert_eq!(c("Tolstoy"), "толстой");
        assert_eq!(c("Krasnyy"), "красный");
        assert_eq!(c("Tsvetkova Yevgeniya"), "цветкова евгения");
        assert_eq!(c("Vasily Zhukov"), "василий жуков");
        assert_eq!(c("Olga Khodorkovskaya"), "олга ходорковская");
        assert_eq!(c("Ol'ga"), "ольга");
        assert_eq!(cyrillic("12"), None);
    }

    #[test]
    fn keeps_what_is_not_cyrillic() {
        assert_eq!(r("1-я Парковая"), "1-ya Parkovaya");
        assert_eq!(r("пр-кт Мира, 12А"), "pr-kt Mira, 12A");
        assert_eq!(romanize("Brīvības"), None);
        assert_eq!(romanize(""), None);
    }
}
