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

/// Column `i` of `row` as the guest sees it, if its text fits in `room`
/// bytes of the result's budget (a value whose text is far larger than its
/// bytes, a numeric, is refused before it is made; the caller charges what
/// the value takes).
pub fn value(row: &Row, i: usize, room: usize) -> Result<DbValue, Error> {
    let t = row.columns()[i].type_();
    let raw = row
        .try_get::<_, Binary>(i)
        .map_err(|e| Error::ValueConversionFailed(e.to_string()))?;
    if text_bound(t, raw.0)? > room {
        return Err(crate::too_large());
    }
    decode(t, raw.0).map_err(|e| match e {
        Error::ValueConversionFailed(why) => {
            Error::ValueConversionFailed(format!("column {i} ({t}): {why}"))
        }
        e => e,
    })
}

/// The most bytes the text of a numeric value of type `t` (or of all the
/// elements of a numeric array) takes; 0 for every other type, whose
/// values take about what they took on the wire.
fn text_bound(t: &Type, raw: Option<&[u8]>) -> Result<usize, Error> {
    use fallible_iterator::FallibleIterator;
    let Some(raw) = raw else { return Ok(0) };
    match *t {
        Type::NUMERIC => Ok(numeric::text_bound(raw)),
        Type::NUMERIC_ARRAY => {
            let malformed = |e: Box<dyn std::error::Error + Sync + Send>| {
                Error::ValueConversionFailed(e.to_string())
            };
            let array = postgres_protocol::types::array_from_sql(raw).map_err(malformed)?;
            array
                .values()
                .fold(0usize, |sum, element| {
                    Ok(sum.saturating_add(element.map_or(0, numeric::text_bound)))
                })
                .map_err(malformed)
        }
        _ => Ok(0),
    }
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
        Type::JSONB | Type::JSON => get::<serde_json::Value>(t, raw)?
            .map(|j| DbValue::Jsonb(serde_json::to_vec(&j).unwrap_or_default())),
        Type::NUMERIC => get::<PgNumeric>(t, raw)?.map(|d| DbValue::Decimal(d.0)),
        Type::INT4_ARRAY => get::<Vec<Option<i32>>>(t, raw)?.map(DbValue::ArrayInt32),
        Type::INT8_ARRAY => get::<Vec<Option<i64>>>(t, raw)?.map(DbValue::ArrayInt64),
        Type::NUMERIC_ARRAY => get::<Vec<Option<PgNumeric>>>(t, raw)?
            .map(|v| DbValue::ArrayDecimal(v.into_iter().map(|d| d.map(|d| d.0)).collect())),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => {
            get::<Vec<Option<String>>>(t, raw)?.map(DbValue::ArrayStr)
        }
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
    fn a_numeric_arrays_text_is_bounded_before_it_is_made() {
        // 1e131071: ten bytes on the wire, 131,072 digits of text.
        let huge = numeric(32767, 0, 0, &[1]);
        assert_eq!(text_bound(&Type::NUMERIC, Some(&huge)).unwrap(), 131_073);
        let many = array(Type::NUMERIC.oid(), &vec![huge; 1000], &[]);
        assert_eq!(
            text_bound(&Type::NUMERIC_ARRAY, Some(&many)).unwrap(),
            131_073_000
        );
        assert_eq!(text_bound(&Type::NUMERIC_ARRAY, None).unwrap(), 0);
        assert_eq!(text_bound(&Type::TEXT, Some(b"abc")).unwrap(), 0);
        assert!(text_bound(&Type::NUMERIC_ARRAY, Some(b"\0\0")).is_err());
    }

    #[test]
    fn null_is_null_for_every_type() {
        for t in types() {
            assert!(matches!(decode(&t, None), Ok(DbValue::DbNull)), "{t}");
        }
    }
}
