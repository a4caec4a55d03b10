//! Address and person-name suggestions while a user types (a
//! `wasi:http/proxy` component over the `hints-engine` library).
//!
//! The indexes are embedded in the component's data segment
//! (`include_bytes!`): every instance maps the same copy-on-write pages
//! (Wasmtime's memory images), so a fresh per-request instance neither
//! copies nor parses them; opening one reads its section directory only.
//!
//! | request | answer |
//! |---|---|
//! | `POST …/suggest/address` `{"query", "count"?, "from_bound"?, "to_bound"?, "locations"?}` | DaData-shaped `{"suggestions": [{"value", "unrestricted_value", "data"}]}` |
//! | `POST …/suggest/fio` `{"query", "count"?, "parts"?, "gender"?}` | the same for names |
//! | `GET /address?q=…&count=…` | the address answer, for plain links and load tests |
//! | `GET /fio?q=…&count=…&parts=NAME,SURNAME&gender=FEMALE` | the name answer |
//! | `GET /` | a demo page with both fields |
//!
//! `…` is any prefix, so a front-end suggestion widget configured with
//! DaData's `…/suggestions/api/4_1/rs/` base can point here. Bad input is a
//! 400 `{"error": {"field", "message"}}` naming the field and what is
//! allowed: an empty or whitespace query, one over 300 characters or not
//! UTF-8, `count` outside 1..=20, an unknown part or gender, a bound or
//! location this index cannot honour.
//!
//! As DaData's, an address request may say which kinds of entry it wants,
//! `"from_bound": {"value": "city"}, "to_bound": {"value": "city"}` (the
//! levels country, region, area, city, settlement, street, house; this
//! index suggests cities and settlements, streets and houses), and where,
//! `"locations": [{"city": "Хабаровск"}]` (any one of the objects; each of
//! `country_iso_code`, `country`, `region`, `city` or `settlement`,
//! `street` it gives must equal the entry's, as the answers' `data`
//! spells them, case aside).

use guest_http::{path_info, read_body, respond};
use hints_engine::address::AddressIndex;
use hints_engine::json;
use hints_engine::names::{Gender, NameIndex, Part};
use hints_engine::restrict::{Kinds, Location, Restrict};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

static ADDRESS_IDX: &[u8] = include_bytes!(env!("HINTS_ADDRESS_IDX"));
static NAMES_IDX: &[u8] = include_bytes!(env!("HINTS_NAMES_IDX"));
static DEMO_PAGE: &str = include_str!("demo.html");

const MAX_QUERY_CHARS: usize = 300;
const MAX_COUNT: usize = 20;
const DEFAULT_COUNT: usize = 10;
const MAX_BODY: usize = 16 * 1024;

struct Hints;

/// A refused request: the field at fault and why.
struct BadRequest {
    field: &'static str,
    message: String,
}

fn bad(field: &'static str, message: impl Into<String>) -> BadRequest {
    BadRequest {
        field,
        message: message.into(),
    }
}

/// A validated request.
struct Query {
    text: String,
    count: usize,
    parts: Option<Vec<Part>>,
    gender: Option<Gender>,
    /// Addresses only: bounds and locations.
    restrict: Restrict,
}

#[derive(Clone, Copy)]
enum Kind {
    Address,
    Fio,
}

impl wasi::exports::http::incoming_handler::Guest for Hints {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path_and_query = request.path_with_query().unwrap_or_default();
        let (raw_path, query_string) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query.as_str(), ""));
        let path = path_info(&request).unwrap_or_else(|| raw_path.to_owned());
        let method = request.method();
        let kind = if path.ends_with("/suggest/address") || path == "/address" {
            Some(Kind::Address)
        } else if path.ends_with("/suggest/fio") || path == "/fio" {
            Some(Kind::Fio)
        } else {
            None
        };
        let result = match (&method, kind) {
            (Method::Options, _) => return respond(out, 204, &cors(&[]), b""),
            (Method::Get, None) if path == "/" || path.is_empty() => {
                let headers = [
                    ("content-type", "text/html; charset=utf-8"),
                    ("cache-control", "max-age=60"),
                ];
                return respond(out, 200, &headers, DEMO_PAGE.as_bytes());
            }
            (Method::Get, Some(kind)) => from_query_string(query_string, kind).map(|q| (kind, q)),
            (Method::Post, Some(kind)) => read_body(request, MAX_BODY)
                .map_err(|e| bad("body", e))
                .and_then(|body| from_json(&body, kind))
                .map(|q| (kind, q)),
            (_, Some(_)) => {
                return answer(
                    out,
                    405,
                    &json!({"error": {"field": "method", "message": format!("{method:?} is not allowed: POST …/suggest/address, POST …/suggest/fio, GET /address, GET /fio")}}),
                );
            }
            (_, None) => {
                return answer(
                    out,
                    404,
                    &json!({"error": {"field": "path", "message": format!("no endpoint {path:?}: POST …/suggest/address, POST …/suggest/fio, GET /address?q=, GET /fio?q=, GET / (demo)")}}),
                );
            }
        };
        match result {
            Ok((Kind::Address, q)) => answer_json(out, 200, &suggest_address(&q)),
            Ok((Kind::Fio, q)) => answer_json(out, 200, &suggest_fio(&q)),
            Err(e) => answer(
                out,
                400,
                &json!({"error": {"field": e.field, "message": e.message}}),
            ),
        }
    }
}

wasi::http::proxy::export!(Hints);

fn cors(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("access-control-allow-origin", "*"),
        ("access-control-allow-methods", "GET, POST, OPTIONS"),
        (
            "access-control-allow-headers",
            "content-type, authorization, x-secret",
        ),
        ("access-control-max-age", "86400"),
    ];
    h.extend_from_slice(extra);
    h
}

fn answer(out: ResponseOutparam, status: u16, body: &impl Serialize) {
    answer_json(out, status, &serde_json::to_vec(body).unwrap_or_default());
}

fn answer_json(out: ResponseOutparam, status: u16, body: &[u8]) {
    respond(
        out,
        status,
        &cors(&[("content-type", "application/json")]),
        body,
    );
}

/// The address index, opened once per instance (a warm instance answers
/// many keystrokes; opening reads only the section directory).
fn address_index() -> Option<&'static AddressIndex<'static>> {
    static INDEX: OnceLock<Option<AddressIndex<'static>>> = OnceLock::new();
    INDEX
        .get_or_init(|| {
            AddressIndex::open(ADDRESS_IDX)
                .inspect_err(|e| eprintln!("hints: address index unusable: {e}"))
                .ok()
        })
        .as_ref()
}

/// The name index, opened once per instance.
fn names_index() -> Option<&'static NameIndex<'static>> {
    static INDEX: OnceLock<Option<NameIndex<'static>>> = OnceLock::new();
    INDEX
        .get_or_init(|| {
            NameIndex::open(NAMES_IDX)
                .inspect_err(|e| eprintln!("hints: name index unusable: {e}"))
                .ok()
        })
        .as_ref()
}

/// A DaData-shaped answer, `{"suggestions": [{"value",
/// "unrestricted_value", "data": {...}}]}`, one object per item written by
/// `write`. By hand rather than through `serde_json`, which ran each of an
/// answer's ~130 strings (most of them field names) through its escaping
/// loop: 6% of a keystroke's instructions in the server
/// (`hints_engine::json`).
fn suggestions<T>(items: &[T], mut write: impl FnMut(&T, &mut json::Object)) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 * items.len() + 32);
    out.extend_from_slice(b"{\"suggestions\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut o = json::Object::new(&mut out);
        write(item, &mut o);
        o.end();
    }
    out.extend_from_slice(b"]}");
    out
}

/// Address suggestions with DaData's `data` fields (those this index has,
/// `null` for the others).
fn suggest_address(q: &Query) -> Vec<u8> {
    let Some(ix) = address_index() else {
        return suggestions::<()>(&[], |_, _| {});
    };
    let found = ix.suggest_restricted(&q.text, q.count, &q.restrict);
    suggestions(&found, |s, o| {
        let a = ix.address(s);
        o.str("value", &a.value());
        o.str("unrestricted_value", &a.unrestricted_value());
        let russian = a.country_iso_code == Some("RU");
        let (lat, lon) = a
            .geo
            .map(|(la, lo)| (la.to_string(), lo.to_string()))
            .unzip();
        let mut d = json::Object::new(o.field("data"));
        d.opt_str("postal_code", a.postal_code);
        d.opt_str("country", a.country);
        d.opt_str("country_iso_code", a.country_iso_code);
        d.opt_str("region", a.region);
        d.opt_str("city_type", a.city_type);
        d.str("city", a.city);
        d.opt_str("street_type", a.street_type);
        d.opt_str("street", a.street);
        d.opt_str("house_type", a.house.and(russian.then_some("д")));
        d.opt_str("house", a.house);
        d.opt_str("geo_lat", lat.as_deref());
        d.opt_str("geo_lon", lon.as_deref());
        d.opt_str("geoname_id", a.geoname_id());
        d.str("hint_id", &a.hint_id());
        d.end();
    })
}

/// Name suggestions with DaData's `data` fields.
fn suggest_fio(q: &Query) -> Vec<u8> {
    let Some(ix) = names_index() else {
        return suggestions::<()>(&[], |_, _| {});
    };
    let found = ix.suggest(&q.text, q.count, q.parts.as_deref(), q.gender);
    suggestions(&found, |f, o| {
        let value = f.value();
        o.str("value", &value);
        o.str("unrestricted_value", &value);
        let mut d = json::Object::new(o.field("data"));
        d.opt_str("surname", f.surname);
        d.opt_str("name", f.name);
        d.opt_str("patronymic", f.patronymic);
        d.str("gender", gender_name(f.gender));
        d.opt_str("source", None);
        d.str("qc", "0");
        d.end();
    })
}

fn gender_name(g: Gender) -> &'static str {
    match g {
        Gender::Male => "MALE",
        Gender::Female => "FEMALE",
        Gender::Unknown => "UNKNOWN",
    }
}

/// `q`, `count`, `parts` (comma-separated) and `gender` from a query string.
fn from_query_string(qs: &str, kind: Kind) -> Result<Query, BadRequest> {
    let (mut text, mut count, mut parts, mut gender) = (None, None, None, None);
    for pair in qs.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let field: &'static str = match k {
            "q" | "query" => "q",
            "count" => "count",
            "parts" => "parts",
            "gender" => "gender",
            _ => continue,
        };
        let v = percent_decode(v)
            .ok_or_else(|| bad(field, "is not valid UTF-8 after percent-decoding"))?;
        match field {
            "q" => text = Some(v),
            "count" => {
                count = Some(v.trim().parse::<i64>().map_err(|_| {
                    bad(
                        "count",
                        format!("{v:?} is not a whole number (allowed: 1..={MAX_COUNT})"),
                    )
                })?)
            }
            "parts" => {
                parts = Some(
                    v.split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                )
            }
            _ => gender = Some(v),
        }
    }
    let text = text.ok_or_else(|| bad("q", "is missing: give the text typed so far as ?q="))?;
    validate(text, count, parts, gender, kind, "q")
}

/// The DaData request body.
fn from_json(body: &[u8], kind: Kind) -> Result<Query, BadRequest> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| bad("body", format!("is not valid UTF-8 JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(bad(
            "body",
            "must be a JSON object like {\"query\": \"моск\", \"count\": 5}",
        ));
    };
    let text = match obj.get("query") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(bad(
                "query",
                format!("must be a string, not {}", type_name(other)),
            ));
        }
        None => return Err(bad("query", "is missing")),
    };
    let count = match obj.get("count") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_i64().ok_or_else(|| {
            bad(
                "count",
                format!("{n} is not a whole number (allowed: 1..={MAX_COUNT})"),
            )
        })?),
        Some(other) => {
            return Err(bad(
                "count",
                format!("must be a number, not {}", type_name(other)),
            ));
        }
    };
    let parts = string_list(&obj, "parts")?;
    let gender = match obj.get("gender") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(bad(
                "gender",
                format!("must be a string, not {}", type_name(other)),
            ));
        }
    };
    let restrict = restriction(&obj, kind)?;
    validate(text, count, parts, gender, kind, "query").map(|q| Query { restrict, ..q })
}

/// DaData's levels, broadest first.
const LEVELS: [&str; 7] = [
    "country",
    "region",
    "area",
    "city",
    "settlement",
    "street",
    "house",
];

/// Bounds and locations of an address request (`from_bound`, `to_bound`,
/// `locations`); refused for names.
fn restriction(obj: &Map<String, Value>, kind: Kind) -> Result<Restrict, BadRequest> {
    let given = |f: &str| obj.get(f).is_some_and(|v| !v.is_null());
    if matches!(kind, Kind::Fio) {
        for field in ["from_bound", "to_bound", "locations"] {
            if given(field) {
                return Err(bad(
                    field,
                    "applies to address suggestions (suggest/address) only",
                ));
            }
        }
        return Ok(Restrict::default());
    }
    let from = bound(obj, "from_bound")?;
    let to = bound(obj, "to_bound")?;
    let kinds = if from.is_none() && to.is_none() {
        None
    } else {
        let (from, to) = (from.unwrap_or(0), to.unwrap_or(LEVELS.len() - 1));
        if from > to {
            return Err(bad(
                "to_bound",
                format!(
                    "{:?} is broader than from_bound {:?}: the levels go {}",
                    LEVELS[to],
                    LEVELS[from],
                    LEVELS.join(", ")
                ),
            ));
        }
        let has = |level: &str| (from..=to).any(|i| LEVELS[i] == level);
        let kinds = Kinds {
            places: has("city") || has("settlement"),
            streets: has("street"),
            houses: has("house"),
        };
        if !(kinds.places || kinds.streets || kinds.houses) {
            return Err(bad(
                "from_bound",
                format!(
                    "{:?} to {:?} holds no entry of this index: it suggests cities and settlements, streets and houses",
                    LEVELS[from], LEVELS[to]
                ),
            ));
        }
        Some(kinds)
    };
    let locations = match obj.get("locations") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_LOCATIONS => {
            items.iter().map(location).collect::<Result<Vec<_>, _>>()?
        }
        Some(Value::Array(items)) => {
            return Err(bad(
                "locations",
                format!(
                    "has {} objects; at most {MAX_LOCATIONS} are allowed",
                    items.len()
                ),
            ));
        }
        Some(other) => {
            return Err(bad(
                "locations",
                format!("must be an array of objects, not {}", type_name(other)),
            ));
        }
    };
    Ok(Restrict::new(kinds, locations))
}

const MAX_LOCATIONS: usize = 20;

/// A bound's level (an index into [`LEVELS`]), from `{"value": "city"}`.
fn bound(obj: &Map<String, Value>, field: &'static str) -> Result<Option<usize>, BadRequest> {
    let value = match obj.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(b)) => b.get("value"),
        Some(other) => {
            return Err(bad(
                field,
                format!(
                    "must be an object like {{\"value\": \"city\"}}, not {}",
                    type_name(other)
                ),
            ));
        }
    };
    let allowed = || format!("(allowed: {})", LEVELS.join(", "));
    match value {
        Some(Value::String(level)) => LEVELS
            .iter()
            .position(|l| l.eq_ignore_ascii_case(level.trim()))
            .map(Some)
            .ok_or_else(|| bad(field, format!("{level:?} is not a level {}", allowed()))),
        _ => Err(bad(
            field,
            format!("needs a \"value\" string {}", allowed()),
        )),
    }
}

/// One object of `locations`.
fn location(item: &Value) -> Result<Location, BadRequest> {
    let Value::Object(fields) = item else {
        return Err(bad(
            "locations",
            format!(
                "must hold objects like {{\"city\": \"Москва\"}}, not {}",
                type_name(item)
            ),
        ));
    };
    if fields.is_empty() {
        return Err(bad(
            "locations",
            "holds an empty object: it would match everything",
        ));
    }
    let mut l = Location::default();
    for (key, value) in fields {
        let Value::String(text) = value else {
            return Err(bad(
                "locations",
                format!("{key:?} must be a string, not {}", type_name(value)),
            ));
        };
        let slot = match key.as_str() {
            "country_iso_code" => &mut l.country_iso_code,
            "country" => &mut l.country,
            "region" => &mut l.region,
            "city" | "settlement" if l.city.is_some() => {
                return Err(bad(
                    "locations",
                    "give city or settlement, not both: this index does not tell them apart",
                ));
            }
            "city" | "settlement" => &mut l.city,
            "street" => &mut l.street,
            _ => {
                return Err(bad(
                    "locations",
                    format!(
                        "{key:?} is not a location field this index has (allowed: country_iso_code, country, region, city, settlement, street)"
                    ),
                ));
            }
        };
        *slot = Some(text.clone());
    }
    Ok(l)
}

fn string_list(
    obj: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<Vec<String>>, BadRequest> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(bad(
                    field,
                    format!("must hold strings, not {}", type_name(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(bad(
            field,
            format!("must be an array of strings, not {}", type_name(other)),
        )),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn validate(
    text: String,
    count: Option<i64>,
    parts: Option<Vec<String>>,
    gender: Option<String>,
    kind: Kind,
    text_field: &'static str,
) -> Result<Query, BadRequest> {
    if text.trim().is_empty() {
        return Err(bad(
            text_field,
            "is empty: type at least one letter or digit",
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(bad(
            text_field,
            format!("is {chars} characters long; at most {MAX_QUERY_CHARS} are allowed"),
        ));
    }
    let count = match count {
        None => DEFAULT_COUNT,
        Some(n) if (1..=MAX_COUNT as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(bad(
                "count",
                format!("{n} is out of range (allowed: 1..={MAX_COUNT})"),
            ));
        }
    };
    if matches!(kind, Kind::Address) {
        if parts.is_some() {
            return Err(bad(
                "parts",
                "applies to name suggestions (suggest/fio) only",
            ));
        }
        if gender.is_some() {
            return Err(bad(
                "gender",
                "applies to name suggestions (suggest/fio) only",
            ));
        }
    }
    let parts = parts
        .map(|list| {
            list.iter()
                .map(|p| match p.trim().to_ascii_uppercase().as_str() {
                    "SURNAME" => Ok(Part::Surname),
                    "NAME" => Ok(Part::Name),
                    "PATRONYMIC" => Ok(Part::Patronymic),
                    _ => Err(bad(
                        "parts",
                        format!("{p:?} is not a part (allowed: SURNAME, NAME, PATRONYMIC)"),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    if parts.as_ref().is_some_and(|p| p.is_empty()) {
        return Err(bad(
            "parts",
            "is empty: give SURNAME, NAME and/or PATRONYMIC, or leave it out",
        ));
    }
    let gender = match gender.as_deref().map(|g| g.trim().to_ascii_uppercase()) {
        None => None,
        Some(g) if g == "MALE" => Some(Gender::Male),
        Some(g) if g == "FEMALE" => Some(Gender::Female),
        Some(g) if g == "UNKNOWN" => None,
        Some(g) => {
            return Err(bad(
                "gender",
                format!("{g:?} is not a gender (allowed: MALE, FEMALE, UNKNOWN)"),
            ));
        }
    };
    Ok(Query {
        text,
        count,
        parts,
        gender,
        restrict: Restrict::default(),
    })
}

/// Decodes `%XX` and `+`; `None` if the result is not UTF-8 or an escape
/// is malformed.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}
