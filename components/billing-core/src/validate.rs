//! Field checks: each answers the reason a value is refused, for a 400
//! naming the field (`ApiError::bad(field, reason)`).

/// Longest client name, contact name, dealer or tariff name (characters).
pub const MAX_NAME: usize = 200;
/// Longest note (characters).
pub const MAX_NOTE: usize = 2000;
/// Longest e-mail address (characters).
pub const MAX_EMAIL: usize = 254;
/// Shortest password.
pub const MIN_PASSWORD: usize = 12;
/// Longest password (argon2 takes any length; this bounds the work).
pub const MAX_PASSWORD: usize = 1024;

fn has_control(s: &str, allow_newlines: bool) -> bool {
    s.chars().any(|c| {
        (c.is_control() || is_invisible_format(c))
            && !(allow_newlines && matches!(c, '\n' | '\r' | '\t'))
    })
}

/// Characters that change how the text around them is shown without being
/// seen: bidirectional overrides and isolates (a name that reads backwards
/// in the tables and the CSV), zero-width spaces and joiners, the line and
/// paragraph separators, the byte order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// A required single-line name of 1..=`max` characters.
pub fn name(s: &str, max: usize) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("must not be empty".into());
    }
    line(s, max)
}

/// An optional single-line text of at most `max` characters.
pub fn line(s: &str, max: usize) -> Result<(), String> {
    let n = s.chars().count();
    if n > max {
        return Err(format!("at most {max} characters (this has {n})"));
    }
    if has_control(s, false) {
        return Err("must not contain control or invisible formatting characters".into());
    }
    Ok(())
}

/// A note: at most [`MAX_NOTE`] characters, line breaks and tabs allowed.
pub fn note(s: &str) -> Result<(), String> {
    let n = s.chars().count();
    if n > MAX_NOTE {
        return Err(format!("at most {MAX_NOTE} characters (this has {n})"));
    }
    if has_control(s, true) {
        return Err(
            "must not contain control or invisible formatting characters other than line breaks and tabs"
                .into(),
        );
    }
    Ok(())
}

/// A phone number: empty, or 5..=32 of digits, spaces and `+ ( ) -`, with
/// at least one digit.
pub fn phone(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    let n = s.chars().count();
    if !(5..=32).contains(&n) {
        return Err(format!("5 to 32 characters (this has {n})"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_digit() || matches!(c, ' ' | '+' | '(' | ')' | '-')))
    {
        return Err(format!(
            "only digits, spaces and + ( ) - are allowed, not {c:?}"
        ));
    }
    if !s.chars().any(|c| c.is_ascii_digit()) {
        return Err("must contain digits".into());
    }
    Ok(())
}

/// An e-mail address: empty, or `local@domain` with a dotted domain, no
/// spaces or control characters, at most [`MAX_EMAIL`] characters.
pub fn email(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    let shape = || "must look like name@example.com".to_string();
    if s.chars().count() > MAX_EMAIL {
        return Err(format!("at most {MAX_EMAIL} characters"));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let Some((local, domain)) = s.rsplit_once('@') else {
        return Err(shape());
    };
    if local.is_empty()
        || local.len() > 64
        || local.starts_with('.')
        || local.ends_with('.')
        || local.contains("..")
        || local.contains(['@', '<', '>', '(', ')', '[', ']', '\\', ',', ';', ':', '"'])
    {
        return Err(shape());
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2
        || labels.iter().any(|l| {
            l.is_empty()
                || l.starts_with('-')
                || l.ends_with('-')
                || !l.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
    {
        return Err(shape());
    }
    Ok(())
}

/// A login: 3..=254 characters of letters, digits and `. _ - + @`.
pub fn login(s: &str) -> Result<(), String> {
    let n = s.chars().count();
    if !(3..=254).contains(&n) {
        return Err(format!("3 to 254 characters (this has {n})"));
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '@'))
    {
        return Err("only letters, digits and . _ - + @".into());
    }
    Ok(())
}

/// A new password: at least [`MIN_PASSWORD`] characters.
pub fn password(s: &str) -> Result<(), String> {
    let n = s.chars().count();
    if n < MIN_PASSWORD {
        return Err(format!("at least {MIN_PASSWORD} characters"));
    }
    if s.len() > MAX_PASSWORD {
        return Err(format!("at most {MAX_PASSWORD} bytes"));
    }
    Ok(())
}

/// A currency: three upper-case letters.
pub fn currency(s: &str) -> Result<(), String> {
    if s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err("three upper-case letters (ISO 4217)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        for ok in [
            "",
            "a@b.co",
            "first.last+tag@sub.example.org",
            "ü@bücher.de",
        ] {
            assert_eq!(email(ok), Ok(()), "{ok}");
        }
        for bad in [
            "a",
            "a@b",
            "@b.co",
            "a@.co",
            "a@b..co",
            "a b@c.de",
            "a@b.c\n",
            "a@-b.co",
            "a@b_c.co",
            "<script>@x.y",
        ] {
            assert!(email(bad).is_err(), "{bad}");
        }
        assert!(email(&format!("{}@b.co", "a".repeat(65))).is_err());
    }

    #[test]
    fn invisible_formatting_is_refused() {
        for bad in [
            "\u{202E}abc",
            "a\u{200B}b",
            "a\u{2028}b",
            "\u{FEFF}x",
            "a\u{2066}b",
        ] {
            assert!(name(bad, MAX_NAME).is_err(), "{bad:?}");
            assert!(note(bad).is_err(), "{bad:?}");
        }
        // Letters of any script stay.
        assert_eq!(name("Ölçer ООО 株式会社 شركة", MAX_NAME), Ok(()));
    }

    #[test]
    fn phones() {
        for ok in ["", "+7 (495) 123-45-67", "12345", "1".repeat(32).as_str()] {
            assert_eq!(phone(ok), Ok(()), "{ok}");
        }
        for bad in [
            "1234",
            "1".repeat(33).as_str(),
            "+7 495 x",
            "-----",
            "12345\n",
            "１２３４５",
        ] {
            assert!(phone(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lengths_count_characters() {
        assert_eq!(line(&"я".repeat(200), MAX_NAME), Ok(()));
        assert!(line(&"я".repeat(201), MAX_NAME).is_err());
        assert!(name("  ", MAX_NAME).is_err());
        assert!(name("a\u{0}b", MAX_NAME).is_err());
        assert_eq!(note(&"x".repeat(2000)), Ok(()));
        assert!(note(&"x".repeat(2001)).is_err());
        assert_eq!(note("line one\nline two\ttab"), Ok(()));
        assert!(note("bell\u{7}").is_err());
        assert_eq!(line("<img src=x onerror=alert(1)>", MAX_NAME), Ok(()));
    }

    #[test]
    fn logins_passwords_currencies() {
        assert_eq!(login("dealer1@billing.test"), Ok(()));
        assert!(login("a b").is_err());
        assert!(login("ab").is_err());
        assert!(password("short").is_err());
        assert_eq!(password("twelve chars"), Ok(()));
        assert_eq!(currency("EUR"), Ok(()));
        assert!(currency("eur").is_err());
        assert!(currency("EURO").is_err());
    }
}
