//! PostgreSQL values and Spin's `db-value` / `parameter-value`
//! (`spin:postgres@4.2.0`, the widest; older versions map onto it).

use crate::numeric::{self, PgNumeric};
use crate::wit::v4::{DbDataType, DbValue, Error, Interval, ParameterValue, QueryError};
use bytes::BytesMut;
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use rust_decimal::Decimal;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

/// A parameter, typed for the server.
pub type Param = Box<dyn ToSql + Sync + Send>;

fn bad(what: &str, value: impl std::fmt::Display) -> Error {
    Error::BadParameter(format!("{value} is not a valid {what}"))
}

/// A guest's parameter as a PostgreSQL value.
pub fn param(p: ParameterValue) -> Result<Param, Error> {
    Ok(match p {
        ParameterValue::Boolean(v) => Box::new(v),
        ParameterValue::Int8(v) => Box::new(v),
        ParameterValue::Int16(v) => Box::new(v),
        ParameterValue::Int32(v) => Box::new(v),
        ParameterValue::Int64(v) => Box::new(v),
        ParameterValue::Floating32(v) => Box::new(v),
        ParameterValue::Floating64(v) => Box::new(v),
        ParameterValue::Str(v) => Box::new(v),
        ParameterValue::Binary(v) => Box::new(v),
        ParameterValue::Date((y, m, d)) => Box::new(
            NaiveDate::from_ymd_opt(y, m.into(), d.into())
                .ok_or_else(|| bad("date", format!("{y}-{m}-{d}")))?,
        ),
        ParameterValue::Time((h, m, s, ns)) => Box::new(
            NaiveTime::from_hms_nano_opt(h.into(), m.into(), s.into(), ns)
                .ok_or_else(|| bad("time", format!("{h}:{m}:{s}.{ns}")))?,
        ),
        ParameterValue::Datetime((y, mo, d, h, mi, s, ns)) => {
            let date = NaiveDate::from_ymd_opt(y, mo.into(), d.into())
                .ok_or_else(|| bad("date", format!("{y}-{mo}-{d}")))?;
            let time = NaiveTime::from_hms_nano_opt(h.into(), mi.into(), s.into(), ns)
                .ok_or_else(|| bad("time", format!("{h}:{mi}:{s}.{ns}")))?;
            Box::new(NaiveDateTime::new(date, time))
        }
        ParameterValue::Timestamp(secs) => Box::new(
            chrono::DateTime::from_timestamp(secs, 0).ok_or_else(|| bad("timestamp", secs))?,
        ),
        ParameterValue::Uuid(v) => {
            Box::new(uuid::Uuid::parse_str(&v).map_err(|_| bad("UUID", &v))?)
        }
        ParameterValue::Jsonb(v) => Box::new(
            serde_json::from_slice::<serde_json::Value>(&v)
                .map_err(|e| Error::BadParameter(format!("not JSON: {e}")))?,
        ),
        ParameterValue::Decimal(v) => Box::new(decimal(&v)?),
        ParameterValue::ArrayInt32(v) => Box::new(v),
        ParameterValue::ArrayInt64(v) => Box::new(v),
        ParameterValue::ArrayDecimal(v) => Box::new(
            v.iter()
                .map(|d| d.as_deref().map(decimal).transpose())
                .collect::<Result<Vec<Option<Decimal>>, _>>()?,
        ),
        ParameterValue::ArrayStr(v) => Box::new(v),
        ParameterValue::Interval(i) => Box::new(PgInterval(i)),
        ParameterValue::DbNull => Box::new(Null),
        ParameterValue::RangeInt32(_)
        | ParameterValue::RangeInt64(_)
        | ParameterValue::RangeDecimal(_) => {
            return Err(Error::BadParameter(
                "range parameters are not supported on edge yet".into(),
            ));
        }
    })
}

/// Host memory a parameter takes while its statement runs: itself, what
/// it owns, and for JSON the parsed value too, taken as four times its
/// text (objects of short keys and values parse to three to five times
/// theirs; `[0,0,...]`, two bytes an element, to sixteen).
pub fn held_bytes(p: &ParameterValue) -> usize {
    let strings = |v: &[Option<String>]| {
        v.iter()
            .map(|s| std::mem::size_of::<Option<String>>() + s.as_ref().map_or(0, String::len))
            .sum::<usize>()
    };
    std::mem::size_of::<ParameterValue>()
        + match p {
            ParameterValue::Str(v) | ParameterValue::Uuid(v) | ParameterValue::Decimal(v) => {
                v.len()
            }
            ParameterValue::Binary(v) => v.len(),
            ParameterValue::Jsonb(v) => v.len().saturating_mul(5),
            ParameterValue::ArrayInt32(v) => v.len() * 8,
            ParameterValue::ArrayInt64(v) => v.len() * 16,
            ParameterValue::ArrayDecimal(v) | ParameterValue::ArrayStr(v) => strings(v),
            _ => 0,
        }
}

fn decimal(s: &str) -> Result<Decimal, Error> {
    s.parse::<Decimal>()
        .or_else(|_| Decimal::from_scientific(s))
        .map_err(|_| bad("decimal", s))
}

/// The guest's name for a column type.
pub fn data_type(t: &Type) -> DbDataType {
    match *t {
        Type::BOOL => DbDataType::Boolean,
        Type::CHAR => DbDataType::Int8,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => DbDataType::Str,
        Type::BYTEA => DbDataType::Binary,
        Type::DATE => DbDataType::Date,
        Type::TIME => DbDataType::Time,
        Type::TIMESTAMP => DbDataType::Datetime,
        Type::TIMESTAMPTZ => DbDataType::Timestamp,
        Type::UUID => DbDataType::Uuid,
        Type::JSONB | Type::JSON => DbDataType::Jsonb,
        Type::NUMERIC => DbDataType::Decimal,
        Type::INT4_ARRAY => DbDataType::ArrayInt32,
        Type::INT8_ARRAY => DbDataType::ArrayInt64,
        Type::NUMERIC_ARRAY => DbDataType::ArrayDecimal,
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => DbDataType::ArrayStr,
        Type::INTERVAL => DbDataType::Interval,
        ref other => DbDataType::Other(other.name().to_string()),
    }
}

/// Column `i` of `row` as the guest sees it, if it fits in `room` bytes
/// of the result's budget: what a value takes is bounded from its bytes
/// before it is made (a numeric's text can be 16,000 times its bytes, an
/// array's NULL element 6 times), and the caller charges what it took.
pub fn value(row: &Row, i: usize, room: usize) -> Result<DbValue, Error> {
    let t = row.columns()[i].type_();
    let raw = row
        .try_get::<_, Binary>(i)
        .map_err(|e| Error::ValueConversionFailed(e.to_string()))?;
    if held_bound(t, raw.0)? > room {
        return Err(crate::too_large());
    }
    decode(t, raw.0).map_err(|e| match e {
        Error::ValueConversionFailed(why) => {
            Error::ValueConversionFailed(format!("column {i} ({t}): {why}"))
        }
        e => e,
    })
}

/// The most host memory the value of type `t` in `raw` takes once
/// decoded, as `crate::size` counts it, for the types whose values can
/// take more than their bytes: numerics (text) and arrays (an element of
/// 4 bytes on the wire is an `Option` of 8 to 24); 0 for the others,
/// which take about what they took on the wire.
fn held_bound(t: &Type, raw: Option<&[u8]>) -> Result<usize, Error> {
    use fallible_iterator::FallibleIterator;
    let Some(raw) = raw else { return Ok(0) };
    let (slot, element): (usize, fn(&[u8]) -> usize) = match *t {
        Type::NUMERIC => return Ok(numeric::text_bound(raw)),
        Type::NUMERIC_ARRAY => (24, numeric::text_bound),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => (24, <[u8]>::len),
        Type::INT4_ARRAY => (8, |_| 0),
        Type::INT8_ARRAY => (16, |_| 0),
        _ => return Ok(0),
    };
    postgres_protocol::types::array_from_sql(raw)
        .map_err(malformed)?
        .values()
        .fold(0usize, |sum, value| {
            Ok(sum.saturating_add(slot + value.map_or(0, element)))
        })
        .map_err(malformed)
}

fn malformed(e: Box<dyn std::error::Error + Sync + Send>) -> Error {
    Error::ValueConversionFailed(e.to_string())
}

/// The elements of a one-dimensional array of `T`s. (postgres-types'
/// `Vec<T>` reserves room for as many elements as the header claims
/// before reading any: 2^31 of them from a lying server would abort the
/// process.)
fn elements<'a, T: FromSql<'a>>(t: &Type, raw: &'a [u8]) -> Result<Vec<Option<T>>, Error> {
    use fallible_iterator::FallibleIterator;
    let tokio_postgres::types::Kind::Array(member) = t.kind() else {
        return Err(Error::ValueConversionFailed(format!(
            "{t} is not an array type"
        )));
    };
    let array = postgres_protocol::types::array_from_sql(raw).map_err(malformed)?;
    if array.dimensions().count().map_err(malformed)? > 1 {
        return Err(Error::ValueConversionFailed(
            "arrays of more than one dimension are not supported".into(),
        ));
    }
    // Counted first (the count is the elements there are, not the
    // header's claim), so the vector takes no more than it needs.
    let mut all = Vec::with_capacity(array.values().count().map_err(malformed)?);
    let mut values = array.values();
    while let Some(value) = values.next().map_err(malformed)? {
        all.push(Option::<T>::from_sql_nullable(member, value).map_err(malformed)?);
    }
    Ok(all)
}

/// A json or jsonb value as compact JSON text, written as it is read:
/// parsed into a tree first (serde_json's `Value`, as Spin does),
/// `[0,0,…]` would take 34 times its text in host memory before the
/// result's budget is charged. Keys stay in the server's order (Spin's
/// tree sorts them; a `json` value's repeated key stays repeated) and
/// numbers are as serde_json reads them.
fn json(t: &Type, raw: &[u8]) -> Result<Vec<u8>, Error> {
    let text = match (t, raw.split_first()) {
        (&Type::JSONB, Some((1, text))) => text,
        (&Type::JSONB, _) => {
            return Err(Error::ValueConversionFailed(
                "a jsonb value of an unknown format version".into(),
            ));
        }
        _ => raw,
    };
    let mut out = Vec::with_capacity(text.len());
    let mut from = serde_json::Deserializer::from_slice(text);
    serde_transcode::transcode(&mut from, &mut serde_json::Serializer::new(&mut out))
        .and_then(|()| from.end())
        .map_err(|e| Error::ValueConversionFailed(format!("not JSON: {e}")))?;
    Ok(out)
}

/// A value of type `t` from its binary form (`None` for NULL): what the
/// server sent, so any bytes must end in a value or an error.
fn decode(t: &Type, raw: Option<&[u8]>) -> Result<DbValue, Error> {
    fn get<'a, T: FromSql<'a>>(t: &Type, raw: Option<&'a [u8]>) -> Result<Option<T>, Error> {
        Option::<T>::from_sql_nullable(t, raw)
            .map_err(|e| Error::ValueConversionFailed(e.to_string()))
    }
    let v = match *t {
        Type::BOOL => get::<bool>(t, raw)?.map(DbValue::Boolean),
        Type::CHAR => get::<i8>(t, raw)?.map(DbValue::Int8),
        Type::INT2 => get::<i16>(t, raw)?.map(DbValue::Int16),
        Type::INT4 => get::<i32>(t, raw)?.map(DbValue::Int32),
        Type::INT8 => get::<i64>(t, raw)?.map(DbValue::Int64),
        Type::FLOAT4 => get::<f32>(t, raw)?.map(DbValue::Floating32),
        Type::FLOAT8 => get::<f64>(t, raw)?.map(DbValue::Floating64),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
            get::<String>(t, raw)?.map(DbValue::Str)
        }
        Type::BYTEA => get::<Vec<u8>>(t, raw)?.map(DbValue::Binary),
        Type::DATE => get::<NaiveDate>(t, raw)?
            .map(|d| DbValue::Date((d.year(), d.month() as u8, d.day() as u8))),
        Type::TIME => get::<NaiveTime>(t, raw)?.map(|t| {
            DbValue::Time((
                t.hour() as u8,
                t.minute() as u8,
                t.second() as u8,
                t.nanosecond(),
            ))
        }),
        Type::TIMESTAMP => get::<NaiveDateTime>(t, raw)?.map(|dt| {
            DbValue::Datetime((
                dt.year(),
                dt.month() as u8,
                dt.day() as u8,
                dt.hour() as u8,
                dt.minute() as u8,
                dt.second() as u8,
                dt.nanosecond(),
            ))
        }),
        Type::TIMESTAMPTZ => {
            get::<chrono::DateTime<chrono::Utc>>(t, raw)?.map(|t| DbValue::Timestamp(t.timestamp()))
        }
        Type::UUID => get::<uuid::Uuid>(t, raw)?.map(|u| DbValue::Uuid(u.to_string())),
        Type::JSONB | Type::JSON => raw.map(|r| json(t, r)).transpose()?.map(DbValue::Jsonb),
        Type::NUMERIC => get::<PgNumeric>(t, raw)?.map(|d| DbValue::Decimal(d.0)),
        Type::INT4_ARRAY => raw
            .map(|r| elements(t, r))
            .transpose()?
            .map(DbValue::ArrayInt32),
        Type::INT8_ARRAY => raw
            .map(|r| elements(t, r))
            .transpose()?
            .map(DbValue::ArrayInt64),
        Type::NUMERIC_ARRAY => raw
            .map(|r| elements::<PgNumeric>(t, r))
            .transpose()?
            .map(|v| DbValue::ArrayDecimal(v.into_iter().map(|d| d.map(|d| d.0)).collect())),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => raw
            .map(|r| elements(t, r))
            .transpose()?
            .map(DbValue::ArrayStr),
        Type::INTERVAL => get::<PgInterval>(t, raw)?.map(|i| DbValue::Interval(i.0)),
        _ => raw.map(|r| DbValue::Unsupported(r.to_vec())),
    };
    Ok(v.unwrap_or(DbValue::DbNull))
}

/// A server error as Spin's `query-failed`.
pub fn query_error(e: tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => Error::QueryFailed(QueryError::DbError(crate::wit::v4::DbError {
            as_text: e.to_string(),
            severity: db.severity().to_string(),
            code: db.code().code().to_string(),
            message: db.message().to_string(),
            detail: db.detail().map(str::to_string),
            extras: Vec::new(),
        })),
        None => Error::QueryFailed(QueryError::Text(e.to_string())),
    }
}

/// SQL NULL for a parameter of any type.
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(
        &self,
        _: &Type,
        _: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(IsNull::Yes)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A column's binary form as the server sent it (`None` for NULL).
struct Binary<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Binary<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Binary(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Binary(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// PostgreSQL's `interval` (binary form: microseconds, days, months).
#[derive(Debug)]
struct PgInterval(Interval);

impl<'a> FromSql<'a> for PgInterval {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        if raw.len() != 16 {
            return Err("an interval is 16 bytes".into());
        }
        let micros = i64::from_be_bytes(raw[0..8].try_into()?);
        let days = i32::from_be_bytes(raw[8..12].try_into()?);
        let months = i32::from_be_bytes(raw[12..16].try_into()?);
        Ok(PgInterval(Interval {
            micros,
            days,
            months,
        }))
    }

    fn accepts(t: &Type) -> bool {
        *t == Type::INTERVAL
    }
}

impl ToSql for PgInterval {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0.micros.to_be_bytes());
        out.extend_from_slice(&self.0.days.to_be_bytes());
        out.extend_from_slice(&self.0.months.to_be_bytes());
        Ok(IsNull::No)
    }

    fn accepts(t: &Type) -> bool {
        *t == Type::INTERVAL
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every type `decode` reads itself, and two it hands over as bytes.
    fn types() -> Vec<Type> {
        vec![
            Type::BOOL,
            Type::CHAR,
            Type::INT2,
            Type::INT4,
            Type::INT8,
            Type::FLOAT4,
            Type::FLOAT8,
            Type::TEXT,
            Type::BYTEA,
            Type::DATE,
            Type::TIME,
            Type::TIMESTAMP,
            Type::TIMESTAMPTZ,
            Type::UUID,
            Type::JSONB,
            Type::JSON,
            Type::NUMERIC,
            Type::INT4_ARRAY,
            Type::INT8_ARRAY,
            Type::NUMERIC_ARRAY,
            Type::TEXT_ARRAY,
            Type::INTERVAL,
            Type::POINT,
            Type::INT2_ARRAY,
        ]
    }

    /// A one-dimensional array's binary form around random elements:
    /// header (dimensions, has-nulls, element type), the dimension
    /// (length, lower bound), then each element (length, bytes).
    fn array(element: u32, elements: &[Vec<u8>], nulls: &[bool]) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&1i32.to_be_bytes());
        raw.extend_from_slice(&i32::from(nulls.contains(&true)).to_be_bytes());
        raw.extend_from_slice(&element.to_be_bytes());
        raw.extend_from_slice(&(elements.len() as i32).to_be_bytes());
        raw.extend_from_slice(&1i32.to_be_bytes());
        for (e, &null) in elements
            .iter()
            .zip(nulls.iter().chain(std::iter::repeat(&false)))
        {
            if null {
                raw.extend_from_slice(&(-1i32).to_be_bytes());
            } else {
                raw.extend_from_slice(&(e.len() as i32).to_be_bytes());
                raw.extend_from_slice(e);
            }
        }
        raw
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// What a server sends for a column is its own to choose: any bytes,
        /// for any type, end in a value or an error (rust_decimal's numeric
        /// decoder once panicked on them, ending the request's task).
        #[test]
        fn any_bytes_are_a_value_or_an_error(
            kind in 0..24usize,
            raw in prop::collection::vec(any::<u8>(), 0..48),
        ) {
            let _ = decode(&types()[kind], Some(&raw));
        }

        /// The same for arrays whose header is right, so the elements are
        /// read: numeric, int4, int8 and text elements of any bytes.
        #[test]
        fn arrays_of_any_elements_are_a_value_or_an_error(
            which in 0..4usize,
            elements in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..5),
            nulls in prop::collection::vec(any::<bool>(), 0..5),
        ) {
            let (t, element) = [
                (Type::NUMERIC_ARRAY, Type::NUMERIC.oid()),
                (Type::INT4_ARRAY, Type::INT4.oid()),
                (Type::INT8_ARRAY, Type::INT8.oid()),
                (Type::TEXT_ARRAY, Type::TEXT.oid()),
            ][which].clone();
            let _ = decode(&t, Some(&array(element, &elements, &nulls)));
        }
    }

    /// A numeric's binary form: digit count, weight, sign, scale, digits.
    fn numeric(weight: i16, sign: u16, scale: u16, digits: &[u16]) -> Vec<u8> {
        let mut raw = Vec::new();
        for f in [digits.len() as u16, weight as u16, sign, scale] {
            raw.extend_from_slice(&f.to_be_bytes());
        }
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        raw
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Numerics with a well-formed header around any digits, weights
        /// near and past what 28 digits hold, any scale: alone and as an
        /// array's elements (1e32 panicked rust_decimal's decoder).
        #[test]
        fn numerics_of_any_size_are_a_value_or_an_error(
            weight in prop_oneof![-12i16..12, 6i16..40, any::<i16>()],
            sign in prop_oneof![Just(0u16), Just(0x4000), Just(0xc000), Just(0xd000), any::<u16>()],
            scale in prop_oneof![0u16..40, any::<u16>()],
            digits in prop::collection::vec(prop_oneof![0u16..10_000, any::<u16>()], 0..8),
        ) {
            let raw = numeric(weight, sign, scale, &digits);
            let _ = decode(&Type::NUMERIC, Some(&raw));
            let _ = decode(&Type::NUMERIC_ARRAY, Some(&array(Type::NUMERIC.oid(), &[raw], &[])));
        }
    }

    #[test]
    fn what_a_value_holds_is_bounded_before_it_is_made() {
        // 1e131071: ten bytes on the wire, 131,072 digits of text.
        let huge = numeric(32767, 0, 0, &[1]);
        assert_eq!(held_bound(&Type::NUMERIC, Some(&huge)).unwrap(), 131_073);
        let many = array(Type::NUMERIC.oid(), &vec![huge; 1000], &[]);
        assert_eq!(
            held_bound(&Type::NUMERIC_ARRAY, Some(&many)).unwrap(),
            131_073_000 + 24 * 1000
        );
        // A million NULLs: 4 bytes each on the wire, 24 as elements.
        let nulls = array(
            Type::TEXT.oid(),
            &vec![Vec::new(); 1_000_000],
            &[true; 1_000_000],
        );
        assert_eq!(
            held_bound(&Type::TEXT_ARRAY, Some(&nulls)).unwrap(),
            24_000_000
        );
        let ints = array(Type::INT8.oid(), &vec![vec![0; 8]; 10], &[]);
        assert_eq!(held_bound(&Type::INT8_ARRAY, Some(&ints)).unwrap(), 160);
        assert_eq!(held_bound(&Type::NUMERIC_ARRAY, None).unwrap(), 0);
        assert_eq!(held_bound(&Type::TEXT, Some(b"abc")).unwrap(), 0);
        assert!(held_bound(&Type::NUMERIC_ARRAY, Some(b"\0\0")).is_err());
        assert!(held_bound(&Type::TEXT_ARRAY, Some(b"\0\0")).is_err());
    }

    /// An array's header says how many elements follow; a server may lie
    /// (postgres-types reserved room for all it claimed: 2^31 text
    /// elements, 48 GiB, aborted the process).
    #[test]
    fn an_arrays_claimed_length_reserves_nothing() {
        for (t, element) in [
            (Type::NUMERIC_ARRAY, Type::NUMERIC.oid()),
            (Type::INT4_ARRAY, Type::INT4.oid()),
            (Type::INT8_ARRAY, Type::INT8.oid()),
            (Type::TEXT_ARRAY, Type::TEXT.oid()),
        ] {
            let mut lying = array(element, &[b"1".to_vec()], &[]);
            lying[12..16].copy_from_slice(&i32::MAX.to_be_bytes());
            assert!(decode(&t, Some(&lying)).is_err(), "{t}");
        }
    }

    /// Arbitrary JSON, as a tree whose numbers serde_json reads back the
    /// same (integers, and floats of few digits).
    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1_000_000i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 64.0)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn jsonb(text: &[u8]) -> Vec<u8> {
        [&[1u8][..], text].concat()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// json and jsonb come out as the same JSON, compact, whatever
        /// white space the server put in.
        #[test]
        fn json_comes_out_as_the_same_json(value in any_json()) {
            let pretty = serde_json::to_vec_pretty(&value).unwrap();
            for (t, raw) in [(Type::JSON, pretty.clone()), (Type::JSONB, jsonb(&pretty))] {
                let Ok(DbValue::Jsonb(out)) = decode(&t, Some(&raw)) else {
                    panic!("{t}: not a value");
                };
                prop_assert_eq!(&out, &serde_json::to_vec(&value).unwrap());
            }
        }
    }

    #[test]
    fn json_that_is_not_json_is_an_error() {
        for bad in [&b""[..], b"[1,", b"{} {}", b"nul", b"[1]x", b"\"\\q\""] {
            assert!(decode(&Type::JSON, Some(bad)).is_err(), "{bad:?}");
            assert!(decode(&Type::JSONB, Some(&jsonb(bad))).is_err(), "{bad:?}");
        }
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(decode(&Type::JSON, Some(deep.as_bytes())).is_err());
        assert!(decode(&Type::JSONB, Some(b"\x02{}")).is_err());
        assert!(decode(&Type::JSONB, Some(b"")).is_err());
    }

    /// Counts the bytes this thread holds, and the most it held.
    mod held {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local! {
            static NOW: Cell<isize> = const { Cell::new(0) };
            static PEAK: Cell<isize> = const { Cell::new(0) };
        }

        fn add(bytes: isize) {
            let _ = NOW.try_with(|now| {
                now.set(now.get() + bytes);
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now.get())));
            });
        }

        struct Counting;

        // SAFETY: System's allocator, with a count beside it.
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                add(layout.size() as isize);
                unsafe { System.alloc(layout) }
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                add(-(layout.size() as isize));
                unsafe { System.dealloc(ptr, layout) }
            }
            unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
                add(new as isize - layout.size() as isize);
                unsafe { System.realloc(ptr, layout, new) }
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;

        /// `f`'s result and the most bytes held while it ran, above what
        /// was held before.
        pub fn most<T>(f: impl FnOnce() -> T) -> (T, usize) {
            let start = NOW.with(Cell::get);
            PEAK.with(|peak| peak.set(start));
            let out = f();
            (out, (PEAK.with(Cell::get) - start) as usize)
        }
    }

    /// A JSON value is not held as a tree: `[0,0,…]` of 4 MB took 143 MB
    /// as serde_json's `Value`.
    #[test]
    fn json_takes_about_its_text_in_memory() {
        let text = format!("[{}0]", "0,".repeat(2 << 20));
        for (t, raw) in [
            (Type::JSON, text.clone().into_bytes()),
            (Type::JSONB, jsonb(text.as_bytes())),
        ] {
            let (out, most) = held::most(|| decode(&t, Some(&raw)));
            assert!(
                matches!(out, Ok(DbValue::Jsonb(ref j)) if j.len() == text.len()),
                "{t}"
            );
            assert!(
                most <= 2 * text.len(),
                "{t}: {most} bytes held for {}",
                text.len()
            );
        }
    }

    #[test]
    fn null_is_null_for_every_type() {
        for t in types() {
            assert!(matches!(decode(&t, None), Ok(DbValue::DbNull)), "{t}");
        }
    }
}
