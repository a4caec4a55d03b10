//! PostgreSQL's `numeric` as the text PostgreSQL itself prints for it,
//! read from the binary form. Spin hands a guest a decimal as a string;
//! going through rust_decimal (as Spin does) held it to 28 digits of scale
//! and a range of about 7.9e28, and its decoder panicked from 1e32 on
//! (`from_i128_with_scale`): an honest `SELECT 1e32::numeric` ended the
//! request's task. Here every value is exact, NaN and the infinities are
//! written as PostgreSQL writes them, and a malformed value (the server is
//! the tenant's to choose) is an error.

use std::fmt::Write;
use tokio_postgres::types::{FromSql, Type};

/// A `numeric`, as PostgreSQL's `numeric_out` writes it.
#[derive(Debug, PartialEq)]
pub struct PgNumeric(pub String);

impl<'a> FromSql<'a> for PgNumeric {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        text(raw).map(PgNumeric).map_err(Into::into)
    }

    fn accepts(t: &Type) -> bool {
        *t == Type::NUMERIC
    }
}

/// The largest display scale PostgreSQL keeps (`NUMERIC_DSCALE_MASK`).
const MAX_DSCALE: usize = 0x3fff;

/// The most bytes [`text`] writes for the numeric in `raw`, from its
/// header alone (0 for one too short to have a header). Eight bytes on the
/// wire can stand for 147 KB of text (1e131071): a result's budget is
/// charged this before any text is made.
pub fn text_bound(raw: &[u8]) -> usize {
    let Some(header) = raw.get(..8) else {
        return 0;
    };
    let weight = i32::from(i16::from_be_bytes([header[2], header[3]]));
    let scale = usize::from(u16::from_be_bytes([header[6], header[7]]));
    // A sign, the integer digits (four per base-10,000 digit, one at
    // least), and a point with the fraction.
    let integer = 4 * usize::try_from(weight + 1).unwrap_or(0).max(1);
    "-Infinity"
        .len()
        .max(1 + integer + if scale > 0 { 1 + scale } else { 0 })
}

/// The text of the binary `numeric` in `raw`: a header of four 16-bit
/// fields (digit count, weight of the first digit in powers of 10,000,
/// sign, display scale) and the base-10,000 digits. At most 131,072
/// integer and 16,383 fractional digits, whatever the server sends.
fn text(raw: &[u8]) -> Result<String, &'static str> {
    let field = |at: usize| {
        raw.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or("a numeric value is cut short")
    };
    let count = usize::from(field(0)?);
    let weight = i32::from(field(2)? as i16);
    let sign = field(4)?;
    let scale = usize::from(field(6)?);
    match sign {
        0x0000 | 0x4000 => {}
        0xc000 => return Ok("NaN".into()),
        0xd000 => return Ok("Infinity".into()),
        0xf000 => return Ok("-Infinity".into()),
        _ => return Err("a numeric value has an unknown sign"),
    }
    if raw.len() != 8 + 2 * count {
        return Err("a numeric value's length does not match its digit count");
    }
    if scale > MAX_DSCALE {
        return Err("a numeric value's scale is past PostgreSQL's 16383");
    }
    let digits = (0..count)
        .map(|i| field(8 + 2 * i))
        .collect::<Result<Vec<u16>, _>>()?;
    if digits.iter().any(|&d| d > 9999) {
        return Err("a numeric value has a base-10000 digit past 9999");
    }
    // The digit of weight `weight - i`; zero outside those sent.
    let digit = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .copied()
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    // (Writing to a String cannot fail.)
    let integer_start = out.len();
    for i in 0..=weight {
        let _ = write!(out, "{:04}", digit(i));
    }
    // Without leading zeros (PostgreSQL's first digit is never 0, but the
    // server is not bound to that), and "0" for none.
    let zeros = out[integer_start..]
        .bytes()
        .take_while(|&b| b == b'0')
        .count();
    out.replace_range(integer_start..integer_start + zeros, "");
    if out.len() == integer_start {
        out.push('0');
    }
    if scale > 0 {
        out.push('.');
        let start = out.len();
        let mut i = weight + 1;
        while out.len() - start < scale {
            let _ = write!(out, "{:04}", digit(i));
            i += 1;
        }
        out.truncate(start + scale);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_tests::fuzz::Dice;
    use rust_decimal::Decimal;

    fn binary(count: u16, weight: i16, sign: u16, scale: u16, digits: &[u16]) -> Vec<u8> {
        let mut raw = Vec::new();
        for f in [count, weight as u16, sign, scale] {
            raw.extend_from_slice(&f.to_be_bytes());
        }
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        raw
    }

    #[test]
    fn values_as_postgresql_prints_them() {
        // (What PostgreSQL 15 sends for each; `SELECT x::numeric`.)
        for (raw, shown) in [
            (binary(0, 0, 0, 0, &[]), "0"),
            (binary(0, 0, 0, 2, &[]), "0.00"),
            (
                binary(1, 8, 0, 0, &[1]),
                "100000000000000000000000000000000",
            ),
            (binary(2, 0, 0x4000, 2, &[1, 5000]), "-1.50"),
            (
                binary(1, -9, 0x4000, 36, &[1234]),
                "-0.000000000000000000000000000000001234",
            ),
            (binary(3, 1, 0, 5, &[12, 3456, 7800]), "123456.78000"),
            (binary(1, -1, 0, 4, &[9999]), "0.9999"),
            (binary(1, -1, 0, 2, &[9900]), "0.99"),
            (binary(0, 0, 0xc000, 0, &[]), "NaN"),
            (binary(0, 0, 0xd000, 0, &[]), "Infinity"),
            (binary(0, 0, 0xf000, 0, &[]), "-Infinity"),
        ] {
            assert_eq!(text(&raw).as_deref(), Ok(shown));
        }
    }

    #[test]
    fn the_same_text_as_rust_decimal_within_its_range() {
        // Values whose digits and scale rust_decimal holds exactly (28
        // digits of scale, < 7.9e28).
        let mut dice = Dice(0x2545_f491_4f6c_dd1d);
        let mut next = || dice.next();
        for _ in 0..20_000 {
            let weight = (next() % 9) as i16 - 2;
            let count = (next() % 6) as usize;
            let digits: Vec<u16> = (0..count).map(|_| (next() % 10_000) as u16).collect();
            // Only the digits within the scale are sent, as PostgreSQL does.
            let lowest = i32::from(weight) - count as i32 + 1;
            let scale = ((-lowest).max(0) as u16) * 4 + (next() % 3) as u16;
            if scale > 28 {
                continue;
            }
            let sign = if next() % 2 == 0 { 0 } else { 0x4000 };
            let raw = binary(count as u16, weight, sign, scale, &digits);
            let ours = text(&raw).unwrap();
            if ours
                .trim_start_matches('-')
                .chars()
                .filter(char::is_ascii_digit)
                .count()
                > 28
            {
                continue;
            }
            let theirs = Decimal::from_sql(&Type::NUMERIC, &raw).unwrap().to_string();
            assert_eq!(ours, theirs, "{raw:02x?}");
        }
    }

    #[test]
    fn a_malformed_value_is_an_error() {
        for raw in [
            vec![],
            vec![0, 1, 0],
            binary(2, 0, 0, 0, &[1]),
            binary(1, 0, 0, 0, &[1, 2]),
            binary(1, 0, 0x1234, 0, &[1]),
            binary(1, 0, 0, 0, &[10_000]),
            binary(0, 0, 0, 0x4000, &[]),
        ] {
            assert!(text(&raw).is_err(), "{raw:02x?}");
        }
    }

    #[test]
    fn any_bytes_are_a_value_or_an_error_of_bounded_size() {
        let mut dice = Dice(88_172_645_463_325_252);
        let mut next = || dice.next();
        for _ in 0..200_000 {
            let len = (next() % 24) as usize;
            let mut raw: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len >= 8 && next() % 2 == 0 {
                // A header that matches its length, to reach the digits.
                let count = ((len - 8) / 2) as u16;
                raw[0..2].copy_from_slice(&count.to_be_bytes());
                raw.truncate(8 + 2 * count as usize);
                raw[4] &= 0x40;
                raw[5] = 0;
            }
            if let Ok(shown) = text(&raw) {
                assert!(shown.len() <= text_bound(&raw), "{raw:02x?}");
                assert!(shown.len() <= 1 + 4 * 32_768 + 1 + MAX_DSCALE, "{raw:02x?}");
            }
        }
    }
}
