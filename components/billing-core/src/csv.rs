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

    #[test]
    fn records() {
        assert_eq!(record(&["1", "a,b", "=x"]), "1,\"a,b\",'=x\r\n");
        assert_eq!(record::<&str>(&[]), "\r\n");
    }
}
