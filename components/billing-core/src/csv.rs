//! CSV for spreadsheets: RFC 4180 quoting, and cells a spreadsheet would
//! read as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage
//! return) prefixed with `'` so they stay text (CSV injection).

/// One cell.
pub fn cell(value: &str) -> String {
    let guarded;
    let v = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        guarded = format!("'{value}");
        guarded.as_str()
    } else {
        value
    };
    if v.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// One record, CRLF-terminated.
pub fn record<S: AsRef<str>>(cells: &[S]) -> String {
    let mut out = cells
        .iter()
        .map(|c| cell(c.as_ref()))
        .collect::<Vec<_>>()
        .join(",");
    out.push_str("\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell(""), "");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("two\nlines"), "\"two\nlines\"");
        assert_eq!(cell("cr\rhere"), "\"cr\rhere\"");
        assert_eq!(cell("Zoë — ünïcode"), "Zoë — ünïcode");
    }

    #[test]
    fn injection() {
        assert_eq!(cell("=1+2"), "'=1+2");
        assert_eq!(cell("+7 495"), "'+7 495");
        assert_eq!(cell("-2"), "'-2");
        assert_eq!(cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(cell("\tx"), "'\tx");
        assert_eq!(cell("\rx"), "\"'\rx\"");
        assert_eq!(
            cell("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        assert_eq!(cell("a=b"), "a=b");
    }

    /// An RFC 4180 reader for the round trip.
    fn parse(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut cell = String::new();
        let mut chars = text.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => cell.push(c),
                (false, '"') if cell.is_empty() => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut cell)),
                (false, '\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                    row.push(std::mem::take(&mut cell));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => cell.push(c),
            }
        }
        rows
    }

    #[test]
    fn round_trips_through_a_reader() {
        let alphabet: Vec<char> = "a,\"\r\n=+-@\t' é".chars().collect();
        let mut r = crate::seed::Rng::new(11);
        for _ in 0..2000 {
            let cells: Vec<String> = (0..1 + r.below(4))
                .map(|_| (0..r.below(7)).map(|_| *r.pick(&alphabet)).collect())
                .collect();
            let back = parse(&record(&cells));
            assert_eq!(back.len(), 1, "{cells:?}");
            for (got, want) in back[0].iter().zip(&cells) {
                // Formula starts come back behind a quote, the rest as written.
                let expected = if want.starts_with(['=', '+', '-', '@', '\t', '\r']) {
                    format!("'{want}")
                } else {
                    want.clone()
                };
                assert_eq!(got, &expected, "{cells:?}");
                assert!(!got.starts_with(['=', '+', '-', '@', '\t', '\r']));
            }
        }
    }

    #[test]
    fn records() {
        assert_eq!(record(&["1", "a,b", "=x"]), "1,\"a,b\",'=x\r\n");
        assert_eq!(record::<&str>(&[]), "\r\n");
    }
}
