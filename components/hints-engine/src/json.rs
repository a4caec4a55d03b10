//! JSON text for answers, written straight into a byte buffer.
//!
//! An answer of five addresses is about 130 strings, most of them field
//! names, and `serde_json` runs every one through its escaping loop and
//! three writes: 35k wasm instructions an answer, 6% of a keystroke's cost
//! in the server. Here a field name is one copy of a literal and a value
//! is checked for bytes to escape before it is copied whole. The text is
//! byte for byte what `serde_json` writes for the same strings.
//!
//! ```
//! use hints_engine::json::Object;
//! let mut out = Vec::new();
//! let mut o = Object::new(&mut out);
//! o.str("city", "Moscow");
//! o.opt_str("street", None);
//! o.end();
//! assert_eq!(out, br#"{"city":"Moscow","street":null}"#);
//! ```

/// Appends `s` as a JSON string literal, quotes included.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The bytes JSON strings cannot hold as they are (as `serde_json` escapes:
/// not DEL, not non-ASCII).
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A JSON object being written: fields in the order given, closed by
/// [`Object::end`]. Field names are written as they are: they are the
/// caller's literals, never input.
pub struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    /// Starts field `name` and returns the buffer to write its value into.
    pub fn field(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    pub fn str(&mut self, name: &str, value: &str) {
        push_str(self.field(name), value);
    }

    /// The string, or `null`.
    pub fn opt_str(&mut self, name: &str, value: Option<&str>) {
        match value {
            Some(v) => self.str(name, v),
            None => self.field(name).extend_from_slice(b"null"),
        }
    }

    pub fn end(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(s: &str) -> String {
        let mut out = Vec::new();
        push_str(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut samples: Vec<String> = (0u8..=0x7f).map(|b| char::from(b).to_string()).collect();
        samples.extend(
            [
                "",
                "Москва, ул. Хабаровская",
                "a\"b\\c\nd\te\u{1}f\u{7f}",
                "São Tomé ‘quoted’ 東京 🎵",
                "\\\\\"\"",
                "trailing\u{1f}",
            ]
            .map(String::from),
        );
        for s in &samples {
            assert_eq!(literal(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn objects_hold_their_fields_in_order() {
        let mut out = Vec::new();
        let mut o = Object::new(&mut out);
        o.str("value", "a\"b");
        o.opt_str("house", None);
        o.opt_str("city", Some("Тверь"));
        let inner = o.field("data");
        let mut d = Object::new(inner);
        d.str("x", "1");
        d.end();
        o.end();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"value":"a\"b","house":null,"city":"Тверь","data":{"x":"1"}}"#
        );
    }
}
