//! PostgreSQL values and Spin's `db-value` / `parameter-value`
//! (`spin:postgres@4.2.0`, the widest; older versions map onto it).

use crate::numeric::PgNumeric;
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

/// Column `i` of `row` as the guest sees it.
pub fn value(row: &Row, i: usize) -> Result<DbValue, Error> {
    let t = row.columns()[i].type_().clone();
    fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<Option<T>, Error> {
        row.try_get::<_, Option<T>>(i)
            .map_err(|e| Error::ValueConversionFailed(e.to_string()))
    }
    let v = match t {
        Type::BOOL => get::<bool>(row, i)?.map(DbValue::Boolean),
        Type::CHAR => get::<i8>(row, i)?.map(DbValue::Int8),
        Type::INT2 => get::<i16>(row, i)?.map(DbValue::Int16),
        Type::INT4 => get::<i32>(row, i)?.map(DbValue::Int32),
        Type::INT8 => get::<i64>(row, i)?.map(DbValue::Int64),
        Type::FLOAT4 => get::<f32>(row, i)?.map(DbValue::Floating32),
        Type::FLOAT8 => get::<f64>(row, i)?.map(DbValue::Floating64),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
            get::<String>(row, i)?.map(DbValue::Str)
        }
        Type::BYTEA => get::<Vec<u8>>(row, i)?.map(DbValue::Binary),
        Type::DATE => get::<NaiveDate>(row, i)?
            .map(|d| DbValue::Date((d.year(), d.month() as u8, d.day() as u8))),
        Type::TIME => get::<NaiveTime>(row, i)?.map(|t| {
            DbValue::Time((
                t.hour() as u8,
                t.minute() as u8,
                t.second() as u8,
                t.nanosecond(),
            ))
        }),
        Type::TIMESTAMP => get::<NaiveDateTime>(row, i)?.map(|dt| {
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
            get::<chrono::DateTime<chrono::Utc>>(row, i)?.map(|t| DbValue::Timestamp(t.timestamp()))
        }
        Type::UUID => get::<uuid::Uuid>(row, i)?.map(|u| DbValue::Uuid(u.to_string())),
        Type::JSONB | Type::JSON => get::<serde_json::Value>(row, i)?
            .map(|j| DbValue::Jsonb(serde_json::to_vec(&j).unwrap_or_default())),
        Type::NUMERIC => get::<PgNumeric>(row, i)?.map(|d| DbValue::Decimal(d.0)),
        Type::INT4_ARRAY => get::<Vec<Option<i32>>>(row, i)?.map(DbValue::ArrayInt32),
        Type::INT8_ARRAY => get::<Vec<Option<i64>>>(row, i)?.map(DbValue::ArrayInt64),
        Type::NUMERIC_ARRAY => get::<Vec<Option<PgNumeric>>>(row, i)?
            .map(|v| DbValue::ArrayDecimal(v.into_iter().map(|d| d.map(|d| d.0)).collect())),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => {
            get::<Vec<Option<String>>>(row, i)?.map(DbValue::ArrayStr)
        }
        Type::INTERVAL => get::<PgInterval>(row, i)?.map(|i| DbValue::Interval(i.0)),
        _ => get::<Raw>(row, i)?.map(|r| DbValue::Unsupported(r.0)),
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

/// A column of a type the guest has no name for: its bytes.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
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
