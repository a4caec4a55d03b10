use crate::client::InnerClient;
use crate::codec::FrontendMessage;
use crate::connection::RequestMessages;
use crate::error::SqlState;
use crate::types::{Field, Kind, Oid, Type};
use crate::{Column, Error, Statement};
use crate::{query, slice_iter};
use bytes::Bytes;
use fallible_iterator::FallibleIterator;
use futures_util::TryStreamExt;
use log::debug;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const TYPEINFO_QUERY: &str = "\
SELECT t.typname, t.typtype, t.typelem, r.rngsubtype, t.typbasetype, n.nspname, t.typrelid
FROM pg_catalog.pg_type t
LEFT OUTER JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
INNER JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid
WHERE t.oid = $1
";

// Range types weren't added until Postgres 9.2, so pg_range may not exist
const TYPEINFO_FALLBACK_QUERY: &str = "\
SELECT t.typname, t.typtype, t.typelem, NULL::OID, t.typbasetype, n.nspname, t.typrelid
FROM pg_catalog.pg_type t
INNER JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid
WHERE t.oid = $1
";

const TYPEINFO_ENUM_QUERY: &str = "\
SELECT enumlabel
FROM pg_catalog.pg_enum
WHERE enumtypid = $1
ORDER BY enumsortorder
";

// Postgres 9.0 didn't have enumsortorder
const TYPEINFO_ENUM_FALLBACK_QUERY: &str = "\
SELECT enumlabel
FROM pg_catalog.pg_enum
WHERE enumtypid = $1
ORDER BY oid
";

const TYPEINFO_COMPOSITE_QUERY: &str = "\
SELECT attname, atttypid
FROM pg_catalog.pg_attribute
WHERE attrelid = $1
AND NOT attisdropped
AND attnum > 0
ORDER BY attnum
";

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

// edge: what a server says of its types is held to bounds. Looked up one
// inside another (an array of a domain of a composite...), the lookups'
// futures nest: types nested without end overflowed the thread's stack;
// and every type looked up is kept (in the cache, or in the type holding
// it) for the connection's life.

/// How deep a type's lookups may nest: PostgreSQL's own nest a few deep.
const MAX_TYPE_DEPTH: usize = 32;

/// Types one connection may look up over its life.
const MAX_TYPES_LOOKED_UP: usize = 10_000;

/// Bytes of names (of types, schemas, enum labels, composite fields) one
/// connection may keep of its lookups over its life, each counted with
/// its `String`.
const MAX_TYPE_NAME_BYTES: usize = 4 << 20;

/// A composite type's fields: PostgreSQL's `MaxTupleAttributeNumber`.
const MAX_COMPOSITE_FIELDS: usize = 1664;

/// Counts `lookups` of types keeping `names` against the bounds.
fn charge(client: &InnerClient, lookups: usize, names: &[&str]) -> Result<(), Error> {
    let bytes = names
        .iter()
        .map(|name| name.len() + size_of::<String>())
        .sum();
    let (looked_up, kept) = client.count_type_lookup(lookups, bytes);
    if looked_up > MAX_TYPES_LOOKED_UP {
        return Err(Error::refused(format!(
            "the server described more than {MAX_TYPES_LOOKED_UP} types on one connection"
        )));
    }
    if kept > MAX_TYPE_NAME_BYTES {
        return Err(Error::refused(format!(
            "the server's type names took more than {MAX_TYPE_NAME_BYTES} bytes on one connection"
        )));
    }
    Ok(())
}

pub async fn prepare(
    client: &Arc<InnerClient>,
    query: &str,
    types: &[Type],
) -> Result<Statement, Error> {
    prepare_described(client, query, types, false).await
}

/// Prepares `query`; with `catalog`, one of the client's own lookups in
/// the server's catalog, whose parameters and columns must be of builtin
/// types (edge: a server describing them with types to look up made each
/// lookup prepare its statement again, without end).
async fn prepare_described(
    client: &Arc<InnerClient>,
    query: &str,
    types: &[Type],
    catalog: bool,
) -> Result<Statement, Error> {
    let type_of = |oid: Oid| async move {
        match (catalog, Type::from_oid(oid)) {
            (_, Some(type_)) => Ok(type_),
            (false, None) => get_type(client, oid).await,
            (true, None) => Err(Error::refused(format!(
                "the server described its catalog with a type it did not name ({oid})"
            ))),
        }
    };
    let name = format!("s{}", NEXT_ID.fetch_add(1, Ordering::SeqCst));
    let buf = encode(client, &name, query, types)?;
    let mut responses = client.send(RequestMessages::Single(FrontendMessage::Raw(buf)))?;

    match responses.next().await? {
        Message::ParseComplete => {}
        _ => return Err(Error::unexpected_message()),
    }

    let parameter_description = match responses.next().await? {
        Message::ParameterDescription(body) => body,
        _ => return Err(Error::unexpected_message()),
    };

    let row_description = match responses.next().await? {
        Message::RowDescription(body) => Some(body),
        Message::NoData => None,
        _ => return Err(Error::unexpected_message()),
    };

    let mut parameters = vec![];
    let mut it = parameter_description.parameters();
    while let Some(oid) = it.next().map_err(Error::parse)? {
        let type_ = type_of(oid).await?;
        parameters.push(type_);
    }

    let mut columns = vec![];
    if let Some(row_description) = row_description {
        let mut it = row_description.fields();
        while let Some(field) = it.next().map_err(Error::parse)? {
            let type_ = type_of(field.type_oid()).await?;
            let column = Column {
                name: field.name().to_string(),
                table_oid: Some(field.table_oid()).filter(|n| *n != 0),
                column_id: Some(field.column_id()).filter(|n| *n != 0),
                type_modifier: field.type_modifier(),
                r#type: type_,
            };
            columns.push(column);
        }
    }

    Ok(Statement::new(client, name, parameters, columns))
}

/// Prepares one of the client's lookups in the server's catalog.
fn prepare_rec<'a>(
    client: &'a Arc<InnerClient>,
    query: &'a str,
    types: &'a [Type],
) -> Pin<Box<dyn Future<Output = Result<Statement, Error>> + 'a + Send>> {
    Box::pin(prepare_described(client, query, types, true))
}

fn encode(client: &InnerClient, name: &str, query: &str, types: &[Type]) -> Result<Bytes, Error> {
    if types.is_empty() {
        debug!("preparing query {name}: {query}");
    } else {
        debug!("preparing query {name} with types {types:?}: {query}");
    }

    client.with_buf(|buf| {
        frontend::parse(name, query, types.iter().map(Type::oid), buf).map_err(Error::encode)?;
        frontend::describe(b'S', name, buf).map_err(Error::encode)?;
        frontend::sync(buf);
        Ok(buf.split().freeze())
    })
}

pub(crate) async fn get_type(client: &Arc<InnerClient>, oid: Oid) -> Result<Type, Error> {
    get_type_at(client, oid, 0).await
}

/// Type `oid`, looked up `depth` lookups deep.
async fn get_type_at(client: &Arc<InnerClient>, oid: Oid, depth: usize) -> Result<Type, Error> {
    if let Some(type_) = Type::from_oid(oid) {
        return Ok(type_);
    }

    if let Some(type_) = client.type_(oid) {
        return Ok(type_);
    }

    if depth >= MAX_TYPE_DEPTH {
        return Err(Error::refused(format!(
            "the server's types nest more than {MAX_TYPE_DEPTH} deep"
        )));
    }

    let stmt = typeinfo_statement(client).await?;

    let mut rows = pin!(query::query(client, stmt, slice_iter(&[&oid])).await?);

    let row = match rows.try_next().await? {
        Some(row) => row,
        None => return Err(Error::unexpected_message()),
    };

    let name: String = row.try_get(0)?;
    let type_: i8 = row.try_get(1)?;
    let elem_oid: Oid = row.try_get(2)?;
    let rngsubtype: Option<Oid> = row.try_get(3)?;
    let basetype: Oid = row.try_get(4)?;
    let schema: String = row.try_get(5)?;
    let relid: Oid = row.try_get(6)?;
    charge(client, 1, &[&name, &schema])?;

    let kind = if type_ == b'e' as i8 {
        let variants = get_enum_variants(client, oid).await?;
        Kind::Enum(variants)
    } else if type_ == b'p' as i8 {
        Kind::Pseudo
    } else if basetype != 0 {
        let type_ = get_type_rec(client, basetype, depth + 1).await?;
        Kind::Domain(type_)
    } else if elem_oid != 0 {
        let type_ = get_type_rec(client, elem_oid, depth + 1).await?;
        Kind::Array(type_)
    } else if relid != 0 {
        let fields = get_composite_fields(client, relid, depth).await?;
        Kind::Composite(fields)
    } else if let Some(rngsubtype) = rngsubtype {
        let type_ = get_type_rec(client, rngsubtype, depth + 1).await?;
        Kind::Range(type_)
    } else {
        Kind::Simple
    };

    let type_ = Type::new(name, oid, kind, schema);
    client.set_type(oid, &type_);

    Ok(type_)
}

fn get_type_rec<'a>(
    client: &'a Arc<InnerClient>,
    oid: Oid,
    depth: usize,
) -> Pin<Box<dyn Future<Output = Result<Type, Error>> + Send + 'a>> {
    Box::pin(get_type_at(client, oid, depth))
}

async fn typeinfo_statement(client: &Arc<InnerClient>) -> Result<Statement, Error> {
    if let Some(stmt) = client.typeinfo() {
        return Ok(stmt);
    }

    let stmt = match prepare_rec(client, TYPEINFO_QUERY, &[]).await {
        Ok(stmt) => stmt,
        Err(ref e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
            prepare_rec(client, TYPEINFO_FALLBACK_QUERY, &[]).await?
        }
        Err(e) => return Err(e),
    };

    client.set_typeinfo(&stmt);
    Ok(stmt)
}

async fn get_enum_variants(client: &Arc<InnerClient>, oid: Oid) -> Result<Vec<String>, Error> {
    let stmt = typeinfo_enum_statement(client).await?;

    let mut rows = pin!(query::query(client, stmt, slice_iter(&[&oid])).await?);
    let mut variants = Vec::new();
    while let Some(row) = rows.try_next().await? {
        let variant: String = row.try_get(0)?;
        charge(client, 0, &[&variant])?;
        variants.push(variant);
    }
    Ok(variants)
}

async fn typeinfo_enum_statement(client: &Arc<InnerClient>) -> Result<Statement, Error> {
    if let Some(stmt) = client.typeinfo_enum() {
        return Ok(stmt);
    }

    let stmt = match prepare_rec(client, TYPEINFO_ENUM_QUERY, &[]).await {
        Ok(stmt) => stmt,
        Err(ref e) if e.code() == Some(&SqlState::UNDEFINED_COLUMN) => {
            prepare_rec(client, TYPEINFO_ENUM_FALLBACK_QUERY, &[]).await?
        }
        Err(e) => return Err(e),
    };

    client.set_typeinfo_enum(&stmt);
    Ok(stmt)
}

async fn get_composite_fields(
    client: &Arc<InnerClient>,
    oid: Oid,
    depth: usize,
) -> Result<Vec<Field>, Error> {
    let stmt = typeinfo_composite_statement(client).await?;

    let mut rows = pin!(query::query(client, stmt, slice_iter(&[&oid])).await?);
    let mut named = Vec::new();
    while let Some(row) = rows.try_next().await? {
        if named.len() == MAX_COMPOSITE_FIELDS {
            return Err(Error::refused(format!(
                "the server described a composite type of more than {MAX_COMPOSITE_FIELDS} fields"
            )));
        }
        let name: String = row.try_get(0)?;
        let oid: Oid = row.try_get(1)?;
        charge(client, 0, &[&name])?;
        named.push((name, oid));
    }

    let mut fields = vec![];
    for (name, oid) in named {
        let type_ = get_type_rec(client, oid, depth + 1).await?;
        fields.push(Field::new(name, type_));
    }

    Ok(fields)
}

async fn typeinfo_composite_statement(client: &Arc<InnerClient>) -> Result<Statement, Error> {
    if let Some(stmt) = client.typeinfo_composite() {
        return Ok(stmt);
    }

    let stmt = prepare_rec(client, TYPEINFO_COMPOSITE_QUERY, &[]).await?;

    client.set_typeinfo_composite(&stmt);
    Ok(stmt)
}
