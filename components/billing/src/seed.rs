//! `POST /api/seed` {part: N}: inserts part N of the deterministic demo
//! data (`billing_core::seed`), in one transaction, once (a part already
//! inserted is skipped). Authorised by `authorization: Bearer
//! <seed_token>`; without a `seed_token` the endpoint is not there (404).
//! The answer says how many parts there are: `scripts/billing-seed.sh`
//! sends part 0, then the rest in order.

use crate::db::{Db, DbError};
use crate::{Config, Req, Resp, auth, json, now_ms};
use billing_core::query::search_text;
use billing_core::seed::{DEALERS, Plan, START_MS, TARIFFS, users};
use billing_core::{ApiError, Param, ct_eq};
use serde_json::json;

/// Rows per INSERT statement.
const BATCH: usize = 500;

pub async fn serve(config: &Config, req: &Req) -> Result<Resp, ApiError> {
    if config.seed_token.is_empty() {
        return Err(ApiError::new(404, None, "no such endpoint"));
    }
    if req.method != http::Method::POST {
        return Err(ApiError::new(405, None, "method not allowed here"));
    }
    let given = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or("");
    if !ct_eq(given, &config.seed_token) {
        return Err(ApiError::new(
            401,
            None,
            "seeding needs the seed token as a bearer token",
        ));
    }
    let body = req.json()?;
    let plan = Plan::scaled(config.seed_scale);
    let part = body
        .get("part")
        .and_then(|p| p.as_i64())
        .filter(|p| (0..plan.parts()).contains(p))
        .ok_or_else(|| {
            ApiError::bad(
                "part",
                format!("a part number from 0 to {}", plan.parts() - 1),
            )
        })?;
    let key = config
        .row_key
        .as_deref()
        .map_err(|e| ApiError::new(500, None, e.clone()))?;
    if part == 0 && config.demo_password.is_empty() {
        return Err(ApiError::refused(
            "demo_password",
            "set the demo_password variable to seed users",
        ));
    }
    let db = Db::open(&config.db_url).await?;
    let answer = |skipped: bool, clients: usize, payments: usize| {
        json(
            200,
            &json!({"part": part, "parts": plan.parts(), "skipped": skipped, "clients": clients, "payments": payments}),
        )
    };
    if db
        .row(
            "SELECT part FROM seed_parts WHERE part = ?",
            &[Param::Int(part)],
        )
        .await?
        .is_some()
    {
        return Ok(answer(true, 0, 0));
    }
    // Hash before the transaction: the passwords take the longest.
    let hashes: Vec<String> = if part == 0 {
        users()
            .iter()
            .map(|_| auth::hash_password(&config.demo_password))
            .collect()
    } else {
        Vec::new()
    };
    let (c, p) = db
        .transaction(async || insert_part(&db, &plan, part, key, &hashes).await)
        .await?;
    Ok(answer(false, c, p))
}

async fn insert_part(
    db: &Db,
    plan: &Plan,
    part: i64,
    key: &[u8],
    hashes: &[String],
) -> Result<(usize, usize), DbError> {
    let now = now_ms();
    // Every seeded row comes from the generator (dealers and users are
    // "created" when the demo's registrations start); only the part's
    // record has the time it was inserted, and the passwords their salts.
    db.exec(
        "INSERT INTO seed_parts (part, done_at) VALUES (?, ?)",
        &[Param::Int(part), Param::Int(now)],
    )
    .await?;
    if part == 0 {
        let rows = TARIFFS
            .iter()
            .enumerate()
            .map(|(i, (name, cents, active))| {
                vec![
                    Param::Int(i as i64 + 1),
                    Param::Text(name.to_string()),
                    Param::Int(*cents),
                    Param::Int(*active as i64),
                ]
            })
            .collect();
        insert_rows(
            db,
            "tariffs",
            &["id", "name", "monthly_cents", "active"],
            rows,
        )
        .await?;
        let rows = DEALERS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                vec![
                    Param::Int(i as i64 + 1),
                    Param::Text(name.to_string()),
                    Param::Int(START_MS),
                ]
            })
            .collect();
        insert_rows(db, "dealers", &["id", "name", "created_at"], rows).await?;
        let rows = users()
            .into_iter()
            .zip(hashes)
            .map(|((login, role, dealer), hash)| {
                vec![
                    Param::Text(login),
                    Param::Text(hash.clone()),
                    Param::Text(role.to_string()),
                    dealer.map_or(Param::Null, Param::Int),
                    Param::Int(START_MS),
                    Param::Int(0),
                ]
            })
            .collect();
        insert_rows(
            db,
            "users",
            &[
                "login",
                "password_hash",
                "role",
                "dealer_id",
                "created_at",
                "disabled",
            ],
            rows,
        )
        .await?;
        return Ok((0, 0));
    }
    let clients: Vec<_> = plan.client_ids(part).map(|id| plan.client(id)).collect();
    let mut payments = Vec::new();
    for c in &clients {
        for p in plan.payments(c) {
            let sig = p.sign(key);
            payments.push(vec![
                Param::Int(p.id),
                Param::Int(p.client_id),
                Param::Int(p.amount_cents),
                Param::Text(p.currency),
                Param::Int(p.paid_at),
                Param::Text(p.reference),
                Param::Text(sig),
            ]);
        }
    }
    let (nc, np) = (clients.len(), payments.len());
    let mut counts: std::collections::BTreeMap<(i64, i64), i64> = Default::default();
    for c in &clients {
        *counts.entry((c.dealer_id, c.tariff_id)).or_default() += 1;
    }
    let rows = clients
        .into_iter()
        .map(|c| {
            let search = search_text(&c.name, &c.contact_name, &c.phone, &c.email);
            vec![
                Param::Int(c.id),
                Param::Int(c.dealer_id),
                Param::Text(c.name),
                Param::Text(c.contact_name),
                Param::Text(c.phone),
                Param::Text(c.email),
                Param::Text(c.note),
                Param::Int(c.tariff_id),
                Param::Int(c.registered_at),
                Param::Int(1),
                Param::Int(c.registered_at),
                Param::Text(search),
            ]
        })
        .collect();
    insert_rows(
        db,
        "clients",
        &[
            "id",
            "dealer_id",
            "name",
            "contact_name",
            "phone",
            "email",
            "note",
            "tariff_id",
            "registered_at",
            "version",
            "updated_at",
            "search",
        ],
        rows,
    )
    .await?;
    for ((dealer, tariff), n) in &counts {
        db.add_count(*dealer, *tariff, *n).await?;
    }
    // (The keys are in dealer order.)
    let mut dealers: Vec<i64> = counts.keys().map(|(d, _)| *d).collect();
    dealers.dedup();
    for dealer in dealers {
        db.bump_generation(dealer).await?;
    }
    insert_rows(
        db,
        "payments",
        &[
            "id",
            "client_id",
            "amount_cents",
            "currency",
            "paid_at",
            "reference",
            "signature",
        ],
        payments,
    )
    .await?;
    Ok((nc, np))
}

/// Multi-row INSERTs of at most [`BATCH`] rows each.
async fn insert_rows(
    db: &Db,
    table: &str,
    columns: &[&str],
    rows: Vec<Vec<Param>>,
) -> Result<(), DbError> {
    let one = format!("({})", vec!["?"; columns.len()].join(", "));
    for chunk in rows.chunks(BATCH) {
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES {}",
            columns.join(", "),
            vec![one.as_str(); chunk.len()].join(", ")
        );
        let params: Vec<Param> = chunk.iter().flatten().cloned().collect();
        db.exec(&sql, &params).await?;
    }
    Ok(())
}
