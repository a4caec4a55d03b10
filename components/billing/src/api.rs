//! The JSON API's routes.

use crate::auth::{self, Session};
use crate::db::{Db, DbError, Val};
use crate::{Config, Req, Resp, json, now_ms};
use billing_core::dialect::Dialect;
use billing_core::query::{
    CLIENT_SELECT, ClientQuery, TARIFF_RANKS, first, parse_query, search_text,
};
use billing_core::validate::{self, MAX_NAME};
use billing_core::{ApiError, Param, csv, dates, page::Page, sign::Payment};
use http::Method;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Most rows of a CSV export.
const EXPORT_MAX: i64 = 100_000;
/// Rows read per statement of an export.
const EXPORT_CHUNK: i64 = 20_000;

fn method_not_allowed() -> ApiError {
    ApiError::new(405, None, "method not allowed here")
}

fn parse_id(s: &str, what: &str) -> Result<i64, ApiError> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ApiError::not_found(what)),
    }
}

/// Serves `/api/...`.
pub async fn serve(config: &Config, req: &Req) -> Result<Resp, ApiError> {
    let segs: Vec<&str> = req.path.trim_end_matches('/').split('/').skip(2).collect();
    let m = &req.method;
    // The seed endpoint answers 404 unless it has a token (before any
    // database work).
    if segs == ["seed"] {
        return crate::seed::serve(config, req).await;
    }
    let known = matches!(
        segs.as_slice(),
        ["login"]
            | ["logout"]
            | ["me"]
            | ["tariffs"]
            | ["tariffs", _]
            | ["dealers"]
            | ["dealers", _]
            | ["users"]
            | ["users", _]
            | ["clients"]
            | ["clients.csv"]
            | ["clients", _]
            | ["clients", _, "payments"]
            | ["clients", _, "reassign"]
            | ["payments"]
    );
    if !known {
        return Err(ApiError::new(404, None, "no such endpoint"));
    }
    if segs == ["login"] {
        return if m == Method::POST {
            auth::login(&Db::open(&config.db_url).await?, req).await
        } else {
            Err(method_not_allowed())
        };
    }
    // The schema is checked with the session (`auth::session`).
    let db = Db::connect(&config.db_url).await?;
    let s = auth::require(&db, req).await?;
    let get = m == Method::GET || m == Method::HEAD;
    match (segs.as_slice(), m.clone()) {
        (["logout"], Method::POST) => auth::logout(&db, &s).await,
        (["me"], _) if get => Ok(auth::me(&s)),
        (["tariffs"], _) if get => tariffs(&db).await,
        (["tariffs"], Method::POST) => {
            s.require_admin()?;
            tariff_create(&db, req).await
        }
        (["tariffs", id], Method::PATCH) => {
            s.require_admin()?;
            tariff_patch(&db, req, parse_id(id, "tariff")?).await
        }
        (["dealers"], _) if get => {
            s.require_admin()?;
            dealers(&db).await
        }
        (["dealers"], Method::POST) => {
            s.require_admin()?;
            dealer_create(&db, req).await
        }
        (["dealers", id], Method::PATCH) => {
            s.require_admin()?;
            dealer_patch(&db, req, parse_id(id, "dealer")?).await
        }
        (["users"], _) if get => {
            s.require_admin()?;
            users(&db).await
        }
        (["users"], Method::POST) => {
            s.require_admin()?;
            user_create(&db, req).await
        }
        (["users", id], Method::PATCH) => {
            s.require_admin()?;
            user_patch(&db, &s, req, parse_id(id, "user")?).await
        }
        (["clients"], _) if get => clients(&db, &s, req).await,
        (["clients"], Method::POST) => client_create(&db, &s, req).await,
        (["clients.csv"], _) if get => clients_csv(&db, &s, req).await,
        (["clients", id], _) if get => {
            let id = parse_id(id, "client")?;
            let row = client_row(&db, &s, id).await?;
            Ok(json(200, &row))
        }
        (["clients", id], Method::PATCH) => {
            client_patch(&db, &s, req, parse_id(id, "client")?).await
        }
        (["clients", id, "payments"], _) if get => {
            client_payments(&db, &s, req, config, parse_id(id, "client")?).await
        }
        (["clients", id, "reassign"], Method::POST) => {
            // Another dealer's client is not there (404) before the role
            // (403): a dealer cannot tell which ids exist.
            let id = parse_id(id, "client")?;
            client_row(&db, &s, id).await?;
            s.require_admin()?;
            reassign(&db, &s, req, id).await
        }
        (["payments"], _) if get => {
            s.require_admin()?;
            all_payments(&db, req, config).await
        }
        _ => Err(method_not_allowed()),
    }
}

// ---- clients ----

/// A client row as JSON (what [`ClientOut`] writes).
fn client_json(r: &[Val], admin: bool) -> Value {
    serde_json::to_value(ClientOut::of(r, admin)).expect("a client row serializes")
}

/// A client row as the API shows it, serialized straight from the row
/// read (a listing's page is 50 to 100 of them: no JSON tree is built);
/// the dealer for admins only.
#[derive(Serialize)]
struct ClientOut<'a> {
    contact_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dealer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dealer_id: Option<i64>,
    email: &'a str,
    id: i64,
    name: &'a str,
    note: &'a str,
    phone: &'a str,
    registered_at: i64,
    tariff: &'a str,
    tariff_id: i64,
    version: i64,
}

impl<'a> ClientOut<'a> {
    fn of(r: &'a [Val], admin: bool) -> Self {
        ClientOut {
            contact_name: r[4].str(),
            dealer: admin.then(|| r[2].str()),
            dealer_id: admin.then(|| r[1].int()),
            email: r[6].str(),
            id: r[0].int(),
            name: r[3].str(),
            note: r[7].str(),
            phone: r[5].str(),
            registered_at: r[10].int(),
            tariff: r[9].str(),
            tariff_id: r[8].int(),
            version: r[11].int(),
        }
    }
}

/// A page of a listing.
#[derive(Serialize)]
struct Listing<'a> {
    page: i64,
    per_page: i64,
    rows: Vec<ClientOut<'a>>,
    total: i64,
}

/// The client `id` as the session may see it, or 404 (another dealer's
/// client is "not there").
async fn client_row(db: &Db, s: &Session, id: i64) -> Result<Value, ApiError> {
    let mut params = vec![Param::Int(id)];
    let mut sql = format!("{CLIENT_SELECT} WHERE c.id = ?");
    if let Some(d) = s.scope() {
        sql.push_str(" AND c.dealer_id = ?");
        params.push(Param::Int(d));
    }
    match db.row(&sql, &params).await? {
        Some(r) => Ok(client_json(&r, s.admin)),
        None => Err(ApiError::not_found("client")),
    }
}

async fn clients(db: &Db, s: &Session, req: &Req) -> Result<Resp, ApiError> {
    let q = ClientQuery::parse(&parse_query(&req.query)?, s.admin)?;
    let t = db.listing_total(&q, s.scope()).await?;
    if let Some(ids) = &t.ids
        && let Some((sql, p, page)) = q.walk_ids(s.scope(), ids, t.rows)
    {
        // A walk that ran out of its budget answers fewer rows than the
        // page has: the ids are then looked up (so they are after a
        // failure, logged without the statement's thousands of ids).
        match db.rows(&sql, &p).await {
            Ok(rows) if rows.len() >= page => return Ok(listing(&q, s, &rows, t.total)),
            Ok(_) => {}
            Err(e) => eprintln!(
                "billing: walking a sort index failed: {}",
                e.0.chars().take(300).collect::<String>()
            ),
        }
    }
    let (sql, p) = if let Some(ids) = &t.ids {
        q.select_ids(s.scope(), ids)
    } else if db.dialect == Dialect::Mysql
        && q.matches_first_is_cheaper(t.total, t.rows)
        && let Some(plan) = q.select_matches_first(s.scope())
    {
        plan
    } else if q.sorts_by_tariff_first() && !q.counts_rows() {
        // (A search or dates leave few enough rows to sort as they are.)
        let ranks: Vec<(i64, i64)> = db
            .rows(TARIFF_RANKS, &[])
            .await?
            .iter()
            .map(|r| (r[0].int(), r[1].int()))
            .collect();
        q.select_by_tariff(s.scope(), &ranks)
            .unwrap_or_else(|| q.select(s.scope()))
    } else {
        q.select(s.scope())
    };
    let rows = db.rows(&sql, &p).await?;
    Ok(listing(&q, s, &rows, t.total))
}

/// A page of the clients listing `q`, its `rows` and the listing's `total`.
fn listing(q: &ClientQuery, s: &Session, rows: &[Vec<Val>], total: i64) -> Resp {
    crate::json_of(
        200,
        &Listing {
            page: q.page.page,
            per_page: q.page.per_page,
            rows: rows.iter().map(|r| ClientOut::of(r, s.admin)).collect(),
            total,
        },
    )
}

async fn clients_csv(db: &Db, s: &Session, req: &Req) -> Result<Resp, ApiError> {
    let q = ClientQuery::parse(&parse_query(&req.query)?, s.admin)?;
    // Whole or not at all: a file cut at the limit would look complete.
    let total = db.listing_total(&q, s.scope()).await?.total;
    if total > EXPORT_MAX {
        return Err(ApiError::new(
            413,
            None,
            format!(
                "the listing has {total} clients; an export holds at most {EXPORT_MAX}: narrow it (search, tariff, dates)"
            ),
        ));
    }
    let mut head = vec![
        "id",
        "name",
        "contact_name",
        "phone",
        "email",
        "note",
        "tariff_id",
        "tariff",
        "registered_at",
    ];
    if s.admin {
        head.extend(["dealer_id", "dealer"]);
    }
    let mut out = csv::record(&head);
    let mut offset = 0;
    while offset < EXPORT_MAX {
        let limit = EXPORT_CHUNK.min(EXPORT_MAX - offset);
        let (sql, p) = q.export_chunk(s.scope(), offset, limit);
        let rows = db.rows(&sql, &p).await?;
        for r in &rows {
            let mut cells = vec![
                r[0].text(),
                r[3].text(),
                r[4].text(),
                r[5].text(),
                r[6].text(),
                r[7].text(),
                r[8].text(),
                r[9].text(),
                dates::format_iso(r[10].int()),
            ];
            if s.admin {
                cells.push(r[1].text());
                cells.push(r[2].text());
            }
            out.push_str(&csv::record(&cells));
        }
        if (rows.len() as i64) < limit {
            break;
        }
        offset += limit;
    }
    Ok(http::Response::builder()
        .status(200)
        .header("content-type", "text/csv; charset=utf-8")
        .header(
            "content-disposition",
            "attachment; filename=\"clients.csv\"",
        )
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .body(spin_sdk::http::FullBody::new(bytes::Bytes::from(out)))
        .expect("a valid response"))
}

/// A string member, if present (`null` counts as absent); anything else is 400.
fn opt_str(body: &Map<String, Value>, name: &str) -> Result<Option<String>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::bad(name, "must be a string")),
    }
}

fn opt_int(body: &Map<String, Value>, name: &str) -> Result<Option<i64>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::bad(name, "must be a whole number")),
    }
}

fn check(field: &str, r: Result<(), String>) -> Result<(), ApiError> {
    r.map_err(|m| ApiError::bad(field, m))
}

/// The client fields both create and edit take, checked.
fn check_client_fields(body: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(v) = opt_str(body, "name")? {
        check("name", validate::name(&v, MAX_NAME))?;
    }
    if let Some(v) = opt_str(body, "contact_name")? {
        check("contact_name", validate::line(&v, MAX_NAME))?;
    }
    if let Some(v) = opt_str(body, "phone")? {
        check("phone", validate::phone(&v))?;
    }
    if let Some(v) = opt_str(body, "email")? {
        check("email", validate::email(&v))?;
    }
    if let Some(v) = opt_str(body, "note")? {
        check("note", validate::note(&v))?;
    }
    opt_int(body, "tariff_id")?;
    Ok(())
}

async fn check_tariff(db: &Db, id: i64) -> Result<(), ApiError> {
    match db
        .row("SELECT active FROM tariffs WHERE id = ?", &[Param::Int(id)])
        .await?
    {
        None => Err(ApiError::refused("tariff_id", format!("no tariff {id}"))),
        Some(r) if r[0].int() == 0 => Err(ApiError::refused(
            "tariff_id",
            format!("tariff {id} is not active"),
        )),
        Some(_) => Ok(()),
    }
}

async fn check_dealer(db: &Db, id: i64) -> Result<(), ApiError> {
    if db
        .row("SELECT id FROM dealers WHERE id = ?", &[Param::Int(id)])
        .await?
        .is_none()
    {
        return Err(ApiError::refused("dealer_id", format!("no dealer {id}")));
    }
    Ok(())
}

const EDITABLE: &[&str] = &["contact_name", "phone", "email", "note", "tariff_id"];

async fn client_patch(db: &Db, s: &Session, req: &Req, id: i64) -> Result<Resp, ApiError> {
    let body = req.json()?;
    for k in body.keys() {
        if k != "version" && !EDITABLE.contains(&k.as_str()) {
            return Err(ApiError::bad(
                k,
                format!(
                    "cannot be changed here; the fields are {}",
                    EDITABLE.join(", ")
                ),
            ));
        }
    }
    let version = opt_int(&body, "version")?
        .ok_or_else(|| ApiError::bad("version", "required: the version the change was made on"))?;
    check_client_fields(&body)?;
    let current = client_row(db, s, id).await?;
    if let Some(t) = opt_int(&body, "tariff_id")?
        && Some(t) != current["tariff_id"].as_i64()
    {
        check_tariff(db, t).await?;
    }
    let conflict = |current: Value| {
        ApiError::new(
            409,
            Some("version"),
            "the client changed meanwhile; here is the current row: apply your change to it and send its version",
        )
        .with("current", current)
    };
    if current["version"].as_i64() != Some(version) {
        return Err(conflict(current));
    }
    let mut sets = Vec::new();
    let mut params = Vec::new();
    for k in EDITABLE {
        match body.get(*k) {
            None => {}
            Some(Value::Null) if *k == "tariff_id" => {
                return Err(ApiError::bad("tariff_id", "must be a tariff's id"));
            }
            Some(Value::Null) => {
                sets.push(format!("{k} = ?"));
                params.push(Param::Text(String::new()));
            }
            Some(Value::String(v)) => {
                sets.push(format!("{k} = ?"));
                params.push(Param::Text(v.clone()));
            }
            Some(v) => {
                sets.push(format!("{k} = ?"));
                params.push(Param::Int(v.as_i64().unwrap_or_default()));
            }
        }
    }
    // The search text from the row as it will be (the name is not
    // editable here; the version check below makes sure the row the text
    // is made from is the row changed).
    let field = |k: &str| match body.get(k) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => String::new(),
        None => current[k].as_str().unwrap_or_default().to_string(),
    };
    sets.push("search = ?".into());
    params.push(Param::Text(search_text(
        current["name"].as_str().unwrap_or_default(),
        &field("contact_name"),
        &field("phone"),
        &field("email"),
    )));
    sets.push("version = version + 1".into());
    sets.push("updated_at = ?".into());
    params.push(Param::Int(now_ms()));
    params.push(Param::Int(id));
    params.push(Param::Int(version));
    let update = format!(
        "UPDATE clients SET {} WHERE id = ? AND version = ?",
        sets.join(", ")
    );
    let old_tariff = current["tariff_id"].as_i64().unwrap_or_default();
    let new_tariff = opt_int(&body, "tariff_id")?.unwrap_or(old_tariff);
    // A change to what a search or a tariff filter reads makes the
    // dealer's remembered totals stale.
    let filtered = ["contact_name", "phone", "email", "tariff_id"]
        .iter()
        .any(|k| body.contains_key(*k));
    let changed = if !filtered {
        db.exec(&update, &params).await?
    } else {
        // The counts move with the tariff, in the same transaction. The
        // version makes sure the row is still the dealer's read above.
        let dealer = current["dealer_id"]
            .as_i64()
            .or(s.scope())
            .unwrap_or_default();
        db.transaction(async || {
            let changed = db.exec(&update, &params).await?;
            if changed > 0 {
                if new_tariff != old_tariff {
                    db.add_count(dealer, old_tariff, -1).await?;
                    db.add_count(dealer, new_tariff, 1).await?;
                }
                db.bump_generation(dealer).await?;
            }
            Ok::<_, DbError>(changed)
        })
        .await?
    };
    let row = client_row(db, s, id).await?;
    if changed == 0 {
        return Err(conflict(row));
    }
    Ok(json(200, &row))
}

async fn client_create(db: &Db, s: &Session, req: &Req) -> Result<Resp, ApiError> {
    let body = req.json()?;
    const FIELDS: &[&str] = &[
        "name",
        "contact_name",
        "phone",
        "email",
        "note",
        "tariff_id",
        "dealer_id",
    ];
    if let Some(k) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad(k, "unknown field"));
    }
    let name = opt_str(&body, "name")?.ok_or_else(|| ApiError::bad("name", "required"))?;
    check_client_fields(&body)?;
    let tariff =
        opt_int(&body, "tariff_id")?.ok_or_else(|| ApiError::bad("tariff_id", "required"))?;
    let dealer = match (s.scope(), opt_int(&body, "dealer_id")?) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad(
                "dealer_id",
                "dealers add clients of their own; leave dealer_id out",
            ));
        }
        (Some(d), None) => d,
        (None, Some(d)) => {
            check_dealer(db, d).await?;
            d
        }
        (None, None) => return Err(ApiError::bad("dealer_id", "required for admins")),
    };
    check_tariff(db, tariff).await?;
    let text = |k: &str| -> Result<Param, ApiError> {
        Ok(Param::Text(opt_str(&body, k)?.unwrap_or_default()))
    };
    let (contact, phone, email) = (
        opt_str(&body, "contact_name")?.unwrap_or_default(),
        opt_str(&body, "phone")?.unwrap_or_default(),
        opt_str(&body, "email")?.unwrap_or_default(),
    );
    let search = search_text(&name, &contact, &phone, &email);
    let now = now_ms();
    let note = text("note")?;
    let id = db
        .transaction(async || {
        let id = db.insert(
            "INSERT INTO clients (dealer_id, name, contact_name, phone, email, note, tariff_id, registered_at, version, updated_at, search) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            &[
                Param::Int(dealer),
                Param::Text(name),
                Param::Text(contact.clone()),
                Param::Text(phone.clone()),
                Param::Text(email.clone()),
                note,
                Param::Int(tariff),
                Param::Int(now),
                Param::Int(now),
                Param::Text(search),
            ],
        )
        .await?;
        db.add_count(dealer, tariff, 1).await?;
        db.bump_generation(dealer).await?;
        Ok::<_, ApiError>(id)
        })
        .await?;
    Ok(json(201, &client_row(db, s, id).await?))
}

async fn reassign(db: &Db, s: &Session, req: &Req, id: i64) -> Result<Resp, ApiError> {
    let body = req.json()?;
    let dealer =
        opt_int(&body, "dealer_id")?.ok_or_else(|| ApiError::bad("dealer_id", "required"))?;
    check_dealer(db, dealer).await?;
    db.transaction(async || {
        // The row's dealer and tariff as the transaction sees them, locked.
        let sql = format!(
            "SELECT dealer_id, tariff_id FROM clients WHERE id = ?{}",
            db.dialect.for_update()
        );
        let Some(r) = db.row(&sql, &[Param::Int(id)]).await? else {
            return Err(ApiError::not_found("client"));
        };
        db.exec(
            "UPDATE clients SET dealer_id = ?, version = version + 1, updated_at = ? WHERE id = ?",
            &[Param::Int(dealer), Param::Int(now_ms()), Param::Int(id)],
        )
        .await?;
        db.add_count(r[0].int(), r[1].int(), -1).await?;
        db.add_count(dealer, r[1].int(), 1).await?;
        db.bump_generation(r[0].int()).await?;
        db.bump_generation(dealer).await?;
        Ok(())
    })
    .await?;
    Ok(json(200, &client_row(db, s, id).await?))
}

// ---- payments ----

fn row_key(config: &Config) -> Result<&[u8], ApiError> {
    config.row_key.as_deref().map_err(|e| {
        eprintln!("billing: {e}");
        ApiError::new(500, None, "the app's row_key variable is not set right")
    })
}

fn payment_json(r: &[Val], key: &[u8], with_client: bool) -> Value {
    let p = Payment {
        id: r[0].int(),
        client_id: r[1].int(),
        amount_cents: r[2].int(),
        currency: r[3].text(),
        paid_at: r[4].int(),
        reference: r[5].text(),
    };
    let signature = r[6].text();
    let verified = p.verify(key, &signature);
    let mut v = json!({
        "id": p.id,
        "amount_cents": p.amount_cents,
        "currency": p.currency,
        "paid_at": p.paid_at,
        "reference": p.reference,
        "signature": signature,
        "verified": verified,
    });
    if with_client {
        v["client_id"] = json!(p.client_id);
    }
    v
}

const PAYMENT_COLUMNS: &str = "SELECT p.id, p.client_id, p.amount_cents, p.currency, p.paid_at, p.reference, p.signature FROM payments p";

async fn client_payments(
    db: &Db,
    s: &Session,
    req: &Req,
    config: &Config,
    id: i64,
) -> Result<Resp, ApiError> {
    let params = parse_query(&req.query)?;
    let page = Page::parse(first(&params, "page"), first(&params, "per_page"))?;
    client_row(db, s, id).await?;
    let key = row_key(config)?;
    let total = db
        .scalar(
            "SELECT COUNT(*) FROM payments p WHERE p.client_id = ?",
            &[Param::Int(id)],
        )
        .await?;
    let rows: Vec<Value> = db
        .rows(
            &format!(
                "{PAYMENT_COLUMNS} WHERE p.client_id = ? ORDER BY p.paid_at DESC, p.id DESC LIMIT {} OFFSET {}",
                page.per_page,
                page.offset()
            ),
            &[Param::Int(id)],
        )
        .await?
        .iter()
        .map(|r| payment_json(r, key, false))
        .collect();
    Ok(json(
        200,
        &json!({"total": total, "page": page.page, "per_page": page.per_page, "rows": rows}),
    ))
}

async fn all_payments(db: &Db, req: &Req, config: &Config) -> Result<Resp, ApiError> {
    let params = parse_query(&req.query)?;
    let page = Page::parse(first(&params, "page"), first(&params, "per_page"))?;
    let mut conds = Vec::new();
    let mut p = Vec::new();
    if let Some(c) = first(&params, "client").filter(|c| !c.is_empty()) {
        let c = c
            .parse::<i64>()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| ApiError::bad("client", "must be a client's id"))?;
        conds.push("p.client_id = ?");
        p.push(Param::Int(c));
    }
    for (name, op, add) in [("from", ">=", 0), ("to", "<", 1)] {
        if let Some(d) = first(&params, name).filter(|d| !d.is_empty()) {
            let day = dates::parse_date(d)
                .ok_or_else(|| ApiError::bad(name, "must be a date as YYYY-MM-DD"))?;
            conds.push(if op == ">=" {
                "p.paid_at >= ?"
            } else {
                "p.paid_at < ?"
            });
            p.push(Param::Int((day + add) * dates::DAY_MS));
        }
    }
    let w = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let key = row_key(config)?;
    let total = db
        .scalar(&format!("SELECT COUNT(*) FROM payments p{w}"), &p)
        .await?;
    let rows: Vec<Value> = db
        .rows(
            &format!(
                "{PAYMENT_COLUMNS}{w} ORDER BY p.paid_at DESC, p.id DESC LIMIT {} OFFSET {}",
                page.per_page,
                page.offset()
            ),
            &p,
        )
        .await?
        .iter()
        .map(|r| payment_json(r, key, true))
        .collect();
    Ok(json(
        200,
        &json!({"total": total, "page": page.page, "per_page": page.per_page, "rows": rows}),
    ))
}

// ---- tariffs, dealers, users ----

fn tariff_json(r: &[Val]) -> Value {
    json!({"id": r[0].int(), "name": r[1].text(), "monthly_cents": r[2].int(), "active": r[3].int() != 0})
}

/// Every row of `sql` (no parameters) as `{"rows": [...]}`.
async fn all_rows(db: &Db, sql: &str, row: fn(&[Val]) -> Value) -> Result<Resp, ApiError> {
    let rows: Vec<Value> = db.rows(sql, &[]).await?.iter().map(|r| row(r)).collect();
    Ok(json(200, &json!({"rows": rows})))
}

async fn tariffs(db: &Db) -> Result<Resp, ApiError> {
    all_rows(
        db,
        "SELECT id, name, monthly_cents, active FROM tariffs ORDER BY id",
        tariff_json,
    )
    .await
}

async fn tariff_by_id(db: &Db, id: i64) -> Result<Value, ApiError> {
    db.row(
        "SELECT id, name, monthly_cents, active FROM tariffs WHERE id = ?",
        &[Param::Int(id)],
    )
    .await?
    .map(|r| tariff_json(&r))
    .ok_or_else(|| ApiError::not_found("tariff"))
}

fn opt_bool(body: &Map<String, Value>, name: &str) -> Result<Option<bool>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ApiError::bad(name, "must be true or false")),
    }
}

fn only(body: &Map<String, Value>, fields: &[&str]) -> Result<(), ApiError> {
    match body.keys().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad(
            k,
            format!("unknown field; the fields are {}", fields.join(", ")),
        )),
        None => Ok(()),
    }
}

fn cents(body: &Map<String, Value>) -> Result<Option<i64>, ApiError> {
    let c = opt_int(body, "monthly_cents")?;
    if c.is_some_and(|c| !(0..=100_000_000).contains(&c)) {
        return Err(ApiError::bad("monthly_cents", "from 0 to 100000000"));
    }
    Ok(c)
}

async fn tariff_create(db: &Db, req: &Req) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["name", "monthly_cents", "active"])?;
    let name = opt_str(&body, "name")?.ok_or_else(|| ApiError::bad("name", "required"))?;
    check("name", validate::name(&name, MAX_NAME))?;
    let c = cents(&body)?.ok_or_else(|| ApiError::bad("monthly_cents", "required"))?;
    let active = opt_bool(&body, "active")?.unwrap_or(true);
    let id = db
        .insert(
            "INSERT INTO tariffs (name, monthly_cents, active) VALUES (?, ?, ?)",
            &[Param::Text(name), Param::Int(c), Param::Int(active as i64)],
        )
        .await?;
    Ok(json(201, &tariff_by_id(db, id).await?))
}

async fn tariff_patch(db: &Db, req: &Req, id: i64) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["name", "monthly_cents", "active"])?;
    tariff_by_id(db, id).await?;
    let mut sets = Vec::new();
    let mut p = Vec::new();
    if let Some(n) = opt_str(&body, "name")? {
        check("name", validate::name(&n, MAX_NAME))?;
        sets.push("name = ?");
        p.push(Param::Text(n));
    }
    if let Some(c) = cents(&body)? {
        sets.push("monthly_cents = ?");
        p.push(Param::Int(c));
    }
    if let Some(a) = opt_bool(&body, "active")? {
        sets.push("active = ?");
        p.push(Param::Int(a as i64));
    }
    if !sets.is_empty() {
        p.push(Param::Int(id));
        db.exec(
            &format!("UPDATE tariffs SET {} WHERE id = ?", sets.join(", ")),
            &p,
        )
        .await?;
    }
    Ok(json(200, &tariff_by_id(db, id).await?))
}

fn dealer_json(r: &[Val]) -> Value {
    json!({"id": r[0].int(), "name": r[1].text(), "created_at": r[2].int()})
}

async fn dealers(db: &Db) -> Result<Resp, ApiError> {
    all_rows(
        db,
        "SELECT id, name, created_at FROM dealers ORDER BY id",
        dealer_json,
    )
    .await
}

async fn dealer_by_id(db: &Db, id: i64) -> Result<Value, ApiError> {
    db.row(
        "SELECT id, name, created_at FROM dealers WHERE id = ?",
        &[Param::Int(id)],
    )
    .await?
    .map(|r| dealer_json(&r))
    .ok_or_else(|| ApiError::not_found("dealer"))
}

async fn dealer_create(db: &Db, req: &Req) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["name"])?;
    let name = opt_str(&body, "name")?.ok_or_else(|| ApiError::bad("name", "required"))?;
    check("name", validate::name(&name, MAX_NAME))?;
    let id = db
        .insert(
            "INSERT INTO dealers (name, created_at) VALUES (?, ?)",
            &[Param::Text(name), Param::Int(now_ms())],
        )
        .await?;
    Ok(json(201, &dealer_by_id(db, id).await?))
}

async fn dealer_patch(db: &Db, req: &Req, id: i64) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["name"])?;
    let name = opt_str(&body, "name")?.ok_or_else(|| ApiError::bad("name", "required"))?;
    check("name", validate::name(&name, MAX_NAME))?;
    dealer_by_id(db, id).await?;
    db.exec(
        "UPDATE dealers SET name = ? WHERE id = ?",
        &[Param::Text(name), Param::Int(id)],
    )
    .await?;
    Ok(json(200, &dealer_by_id(db, id).await?))
}

/// A login as the API shows it (never its password hash).
const USER: &str = "SELECT u.id, u.login, u.role, u.dealer_id, d.name, u.created_at, u.disabled FROM users u LEFT JOIN dealers d ON d.id = u.dealer_id";

fn user_json(r: &[Val]) -> Value {
    json!({
        "id": r[0].int(),
        "login": r[1].text(),
        "role": r[2].text(),
        "dealer_id": r[3].opt_int(),
        "dealer": r[3].opt_int().map(|_| r[4].text()),
        "created_at": r[5].int(),
        "disabled": r[6].int() != 0,
    })
}

async fn users(db: &Db) -> Result<Resp, ApiError> {
    all_rows(db, &format!("{USER} ORDER BY u.id"), user_json).await
}

async fn user_by_id(db: &Db, id: i64) -> Result<Value, ApiError> {
    db.row(&format!("{USER} WHERE u.id = ?"), &[Param::Int(id)])
        .await?
        .map(|r| user_json(&r))
        .ok_or_else(|| ApiError::not_found("user"))
}

/// Disables or enables a login, or sets its password. Either ends the
/// login's sessions: a disabled dealer is out at once, and a password
/// set because the old one leaked leaves no session made with it.
async fn user_patch(db: &Db, s: &Session, req: &Req, id: i64) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["disabled", "password"])?;
    let user = user_by_id(db, id).await?;
    let disabled = opt_bool(&body, "disabled")?;
    let password = opt_str(&body, "password")?;
    if let Some(pw) = &password {
        check("password", validate::password(pw))?;
    }
    // The admin's own login stays: the last admin could lock everyone out.
    if disabled == Some(true) && user["login"] == s.login.as_str() {
        return Err(ApiError::new(
            409,
            Some("disabled"),
            "you cannot disable your own login",
        ));
    }
    let mut sets = Vec::new();
    let mut p = Vec::new();
    if let Some(d) = disabled {
        sets.push("disabled = ?");
        p.push(Param::Int(d as i64));
    }
    if let Some(pw) = &password {
        sets.push("password_hash = ?");
        p.push(Param::Text(auth::hash_password(pw)));
    }
    if !sets.is_empty() {
        p.push(Param::Int(id));
        db.exec(
            &format!("UPDATE users SET {} WHERE id = ?", sets.join(", ")),
            &p,
        )
        .await?;
    }
    if disabled == Some(true) || password.is_some() {
        db.exec("DELETE FROM sessions WHERE user_id = ?", &[Param::Int(id)])
            .await?;
    }
    Ok(json(200, &user_by_id(db, id).await?))
}

async fn user_create(db: &Db, req: &Req) -> Result<Resp, ApiError> {
    let body = req.json()?;
    only(&body, &["login", "password", "role", "dealer_id"])?;
    let login = opt_str(&body, "login")?.ok_or_else(|| ApiError::bad("login", "required"))?;
    check("login", validate::login(&login))?;
    let pw = opt_str(&body, "password")?.ok_or_else(|| ApiError::bad("password", "required"))?;
    check("password", validate::password(&pw))?;
    let role = opt_str(&body, "role")?
        .ok_or_else(|| ApiError::bad("role", "required: admin or dealer"))?;
    let dealer = opt_int(&body, "dealer_id")?;
    match (role.as_str(), dealer) {
        ("admin", None) => {}
        ("admin", Some(_)) => return Err(ApiError::bad("dealer_id", "admins belong to no dealer")),
        ("dealer", Some(d)) => check_dealer(db, d).await?,
        ("dealer", None) => return Err(ApiError::bad("dealer_id", "required for a dealer")),
        _ => return Err(ApiError::bad("role", "admin or dealer")),
    }
    if db
        .row(
            "SELECT id FROM users WHERE login = ?",
            &[Param::Text(login.clone())],
        )
        .await?
        .is_some()
    {
        return Err(ApiError::new(409, Some("login"), "that login is taken"));
    }
    let hash = auth::hash_password(&pw);
    let id = db
        .insert(
            "INSERT INTO users (login, password_hash, role, dealer_id, created_at, disabled) VALUES (?, ?, ?, ?, ?, 0)",
            &[
                Param::Text(login.clone()),
                Param::Text(hash),
                Param::Text(role.clone()),
                dealer.map_or(Param::Null, Param::Int),
                Param::Int(now_ms()),
            ],
        )
        .await
        .map_err(|e| {
            // Taken by a request made at the same moment (after the check).
            if e.is_unique_violation() {
                ApiError::new(409, Some("login"), "that login is taken")
            } else {
                e.into()
            }
        })?;
    Ok(json(
        201,
        &json!({"id": id, "login": login, "role": role, "dealer_id": dealer}),
    ))
}
