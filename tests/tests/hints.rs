//! The hints component on the real host with the real indexes (built by
//! `make hints-index` from the registry data): expected top results for
//! exact, prefix and typo'd addresses and names, abbreviations, ranking,
//! gender agreement, the DaData request shape, precise 400s, and that
//! instances share the embedded index instead of copying it.

use bytes::Bytes;
use edge_tests::{Edge, client, component, repo, request};
use serde_json::{Value, json};

fn start() -> Edge {
    let spin = format!(
        r#"spin_manifest_version = 2
[application]
name = "hints-test"

[[trigger.http]]
route = "/hints/..."
component = "hints"

[component.hints]
source = "{}"
"#,
        component("hints")
    );
    let edge = r#"app = "spin.toml"
[[tenant]]
name = "hints"
hosts = ["*"]
components = ["hints"]

[component.hints]
memory_bytes = 134217728
"#;
    Edge::start(&spin, edge)
}

async fn post(edge: &Edge, path: &str, body: &str) -> (u16, Value) {
    let (status, text) = request(
        &client(),
        "POST",
        &format!("{}{path}", edge.url),
        &[("content-type", "application/json")],
        Bytes::from(body.to_owned()),
    )
    .await;
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, v)
}

/// A request without a body.
async fn call(edge: &Edge, method: &str, path: &str) -> (u16, String) {
    request(
        &client(),
        method,
        &format!("{}{path}", edge.url),
        &[],
        Bytes::new(),
    )
    .await
}

async fn address(edge: &Edge, query: &str) -> Vec<String> {
    let (status, v) = post(
        edge,
        "/hints/suggest/address",
        &json!({"query": query, "count": 5}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{query}: {v}");
    values(&v)
}

async fn fio(edge: &Edge, body: Value) -> Vec<(String, String)> {
    let (status, v) = post(edge, "/hints/suggest/fio", &body.to_string()).await;
    assert_eq!(status, 200, "{body}: {v}");
    v["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["value"].as_str().unwrap().to_owned(),
                s["data"]["gender"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn values(v: &Value) -> Vec<String> {
    v["suggestions"]
        .as_array()
        .unwrap_or_else(|| panic!("no suggestions: {v}"))
        .iter()
        .map(|s| s["value"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn addresses_exact_prefix_typo_and_abbreviations() {
    let edge = start();
    // Exact, prefix from the second letter on, and typos (one edit, a
    // transposition) all put Moscow first.
    for q in ["Москва", "мо", "моск", "мсоква", "масква", "moscow"] {
        assert_eq!(address(&edge, q).await[0], "г Москва", "query {q:?}");
    }
    assert_eq!(address(&edge, "санкт-петер").await[0], "г Санкт-Петербург");
    assert_eq!(
        address(&edge, "новосибирск").await[0],
        "Новосибирская область, г Новосибирск"
    );
    // Streets and houses, in any order, with type words in any form.
    let house = "г Москва, ул Хабаровская, д 12";
    for q in [
        "москва хабар 12",
        "г. Москва, улица Хабаровская, дом 12",
        "12 хабаровская москва",
        "москва хабаровскя 12",
        // In Latin, as the issue's stretch goal types it, and as BGN/PCGN
        // spells it (the street's alias), with a Latin type word.
        "12 habarovskaya moscow",
        "Moskva, ulitsa Khabarovskaya, 12",
        // The Russian words typed with the Latin keyboard layout on.
        "vjcrdf? [f,fhjdcrfz 12",
    ] {
        assert_eq!(address(&edge, q).await[0], house, "query {q:?}");
    }
    // Typing a house number completes it.
    let got = address(&edge, "москва хабаровская 1").await;
    assert_eq!(got[0], "г Москва, ул Хабаровская, д 1");
    assert!(
        got[1..]
            .iter()
            .all(|v| v.starts_with("г Москва, ул Хабаровская, д 1")),
        "{got:?}"
    );
    // Real addresses with their own scripts and diacritics.
    assert_eq!(
        address(&edge, "riga brivibas iela 31").await[0],
        "Latvia, Riga, Brīvības iela, 31"
    );
    assert!(address(&edge, "reykjavik laugaveg").await[0].contains("Laugavegur"));
    assert!(address(&edge, "несуществующийгород").await.is_empty());
}

#[tokio::test]
async fn addresses_rank_by_match_then_weight() {
    let edge = start();
    // A big city before small namesakes; exact words before typo matches.
    let got = address(&edge, "london").await;
    assert_eq!(got[0], "United Kingdom, England, London");
    let got = address(&edge, "пермь").await;
    assert_eq!(got[0], "Пермский край, г Пермь");
    // A typo'd token ranks below the same entry typed right.
    let (_, right) = post(
        &edge,
        "/hints/suggest/address",
        r#"{"query":"хабаровск","count":1}"#,
    )
    .await;
    let (_, typo) = post(
        &edge,
        "/hints/suggest/address",
        r#"{"query":"хабаровкс","count":1}"#,
    )
    .await;
    assert_eq!(values(&right), values(&typo));
    let score = |v: &Value| v["suggestions"][0]["value"].as_str().unwrap().to_owned();
    assert_eq!(score(&right), "Хабаровский край, г Хабаровск");
    // The DaData response shape, and DaData's URL layout.
    let (status, v) = post(
        &edge,
        "/hints/suggestions/api/4_1/rs/suggest/address",
        r#"{"query":"москва хабаровская 12","count":1}"#,
    )
    .await;
    assert_eq!(status, 200);
    let s = &v["suggestions"][0];
    assert_eq!(
        s["unrestricted_value"],
        "Россия, г Москва, ул Хабаровская, д 12"
    );
    let d = &s["data"];
    assert_eq!(
        (
            d["city"].as_str(),
            d["street"].as_str(),
            d["street_type"].as_str()
        ),
        (Some("Москва"), Some("Хабаровская"), Some("ул"))
    );
    assert_eq!(
        (
            d["house"].as_str(),
            d["house_type"].as_str(),
            d["country_iso_code"].as_str()
        ),
        (Some("12"), Some("д"), Some("RU"))
    );
    assert_eq!(d["geoname_id"], "524901");
    // GET for plain links.
    let (status, text) = call(
        &edge,
        "GET",
        "/hints/address?q=%D0%BC%D0%BE%D1%81%D0%BA&count=1",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(values(&serde_json::from_str(&text).unwrap()), ["г Москва"]);
    // The component writes its JSON by hand: fields in DaData's order.
    assert_fields_in_order(
        &text,
        &[
            r#"{"suggestions":[{"value":"г Москва","unrestricted_value":"#,
            r#","data":{"postal_code":"#,
            r#","country":"#,
            r#","country_iso_code":"RU","region":"#,
            r#","city_type":"г","city":"Москва","street_type":null,"street":null"#,
            r#","house_type":null,"house":null,"geo_lat":"#,
            r#","geo_lon":"#,
            r#","geoname_id":"524901","hint_id":"#,
            "}}]}",
        ],
    );
    let (status, text) = call(
        &edge,
        "GET",
        "/hints/fio?q=%D0%B8%D0%B2%D0%B0%D0%BD%D0%BE%D0%B2%D0%B0&count=1",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_fields_in_order(
        &text,
        &[
            r#"{"suggestions":[{"value":"#,
            r#","unrestricted_value":"#,
            r#","data":{"surname":"#,
            r#","name":"#,
            r#","patronymic":"#,
            r#","gender":"FEMALE","source":null,"qc":"0"}}]}"#,
        ],
    );
}

/// `text` holds `parts` in this order.
fn assert_fields_in_order(text: &str, parts: &[&str]) {
    let mut at = 0;
    for part in parts {
        let found = text[at..]
            .find(part)
            .unwrap_or_else(|| panic!("{part} after byte {at} of {text}"));
        at += found + part.len();
    }
    assert_eq!(at, text.len(), "{text}");
}

#[tokio::test]
async fn namesakes_are_told_apart_by_region() {
    let edge = start();
    // Two Pontiacs in one country: the region (from GeoNames' first-level
    // divisions) keeps both apart instead of one hiding the other.
    let got = address(&edge, "pontiac").await;
    assert_eq!(
        got[..2],
        [
            "United States, Michigan, Pontiac",
            "United States, Illinois, Pontiac"
        ],
        "{got:?}"
    );
    let (_, v) = post(
        &edge,
        "/hints/suggest/address",
        r#"{"query":"pontiac","count":1}"#,
    )
    .await;
    assert_eq!(v["suggestions"][0]["data"]["region"], "Michigan");
    // Russian places carry their region in Russian; the region is not
    // repeated when it is the city itself.
    assert_eq!(address(&edge, "москва").await[0], "г Москва");
}

/// DaData's bounds and locations, as suggestion widgets send them for a
/// city field, a street field in the chosen city and a house field.
#[tokio::test]
async fn addresses_restricted_to_kinds_and_locations() {
    let edge = start();
    let suggest = |body: Value| {
        let edge = &edge;
        async move {
            let (status, v) = post(edge, "/hints/suggest/address", &body.to_string()).await;
            assert_eq!(status, 200, "{body}: {v}");
            v["suggestions"].as_array().unwrap().clone()
        }
    };
    let city = json!({"value": "city"});
    let cities = suggest(json!({"query": "хабар", "from_bound": city, "to_bound": city})).await;
    assert_eq!(cities[0]["value"], "Хабаровский край, г Хабаровск");
    assert!(
        cities.iter().all(|s| s["data"]["street"].is_null()),
        "{cities:?}"
    );

    let street = json!({"value": "street"});
    let streets = suggest(json!({
        "query": "ле", "count": 10, "from_bound": street, "to_bound": street,
        "locations": [{"city": "Хабаровск"}],
    }))
    .await;
    assert!(!streets.is_empty());
    for s in &streets {
        assert_eq!(s["data"]["city"], "Хабаровск", "{s}");
        assert!(
            s["data"]["street"].as_str().is_some_and(|n| n
                .to_lowercase()
                .split([' ', '-'])
                .any(|w| w.starts_with("ле"))),
            "a word of the street begins with ле: {s}"
        );
        assert!(s["data"]["house"].is_null(), "{s}");
    }

    let houses = suggest(json!({
        "query": "1", "from_bound": {"value": "house"},
        "locations": [{"city": "Москва", "street": "Хабаровская"}],
    }))
    .await;
    assert_eq!(houses[0]["value"], "г Москва, ул Хабаровская, д 1");
    assert!(
        houses.iter().all(|s| s["data"]["street"] == "Хабаровская"),
        "{houses:?}"
    );

    // A country by its code, and DaData's `*` for any.
    let iceland =
        suggest(json!({"query": "reykj", "locations": [{"country_iso_code": "IS"}]})).await;
    assert!(!iceland.is_empty());
    assert!(
        iceland
            .iter()
            .all(|s| s["data"]["country_iso_code"] == "IS"),
        "{iceland:?}"
    );
    let anywhere =
        suggest(json!({"query": "москва", "count": 5, "locations": [{"country_iso_code": "*"}]}))
            .await;
    assert_eq!(
        anywhere
            .iter()
            .map(|s| s["value"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        address(&edge, "москва").await
    );

    // Any one of several locations.
    let either = suggest(json!({
        "query": "мира", "count": 20, "to_bound": street,
        "locations": [{"city": "Хабаровск"}, {"city": "Москва"}],
    }))
    .await;
    assert!(
        either
            .iter()
            .all(|s| s["data"]["city"] == "Хабаровск" || s["data"]["city"] == "Москва"),
        "{either:?}"
    );
    assert!(
        either.iter().any(|s| s["data"]["city"] == "Хабаровск"),
        "{either:?}"
    );
}

#[tokio::test]
async fn names_parts_typos_and_gender_agreement() {
    let edge = start();
    let first = |v: Vec<(String, String)>| v.into_iter().next().unwrap();
    assert_eq!(
        first(fio(&edge, json!({"query": "Иванов Иван Иванович"})).await),
        ("Иванов Иван Иванович".into(), "MALE".into())
    );
    assert_eq!(
        first(fio(&edge, json!({"query": "иванов иван иван"})).await).0,
        "Иванов Иван Иванович"
    );
    // Typed with the Latin keyboard layout on, and spelt in Latin.
    for q in ["Bdfyjd Bdfy Bdfyjdbx", "Ivanov Ivan Ivanovich"] {
        assert_eq!(
            first(fio(&edge, json!({ "query": q })).await).0,
            "Иванов Иван Иванович",
            "{q}"
        );
    }
    // Typos: a transposition and a dropped letter.
    assert_eq!(
        first(fio(&edge, json!({"query": "Ивнаов Иван"})).await).0,
        "Иванов Иван"
    );
    assert_eq!(
        first(fio(&edge, json!({"query": "Петрова Анна Сергевна"})).await).0,
        "Петрова Анна Сергеевна"
    );
    // Gender agreement: a female surname goes with female names only.
    // (Further down, typo corrections of the surname may bring the other
    // gender, each suggestion agreeing in itself.)
    let got = fio(&edge, json!({"query": "Петрова Ан", "count": 10})).await;
    assert!(got[..3].iter().all(|(_, g)| g == "FEMALE"), "{got:?}");
    assert!(
        got.iter()
            .filter(|(v, _)| v.starts_with("Петрова "))
            .all(|(_, g)| g == "FEMALE"),
        "{got:?}"
    );
    assert!(got.iter().any(|(v, _)| v == "Петрова Анна"), "{got:?}");
    let got = fio(&edge, json!({"query": "Петров Ан", "count": 10})).await;
    assert!(got[..2].iter().all(|(_, g)| g == "MALE"), "{got:?}");
    assert!(
        got.iter()
            .filter(|(v, _)| v.starts_with("Петров "))
            .all(|(_, g)| g == "MALE"),
        "{got:?}"
    );
    // The male surname typed before a female name becomes female.
    assert_eq!(
        first(fio(&edge, json!({"query": "Смирнов Ольга"})).await),
        ("Смирнова Ольга".into(), "FEMALE".into())
    );
    // Name, patronymic, surname order.
    assert_eq!(
        first(fio(&edge, json!({"query": "Анна Сергеевна Кузнец"})).await).0,
        "Анна Сергеевна Кузнецова"
    );
    // Restrictions by part and gender.
    let names = fio(
        &edge,
        json!({"query": "ал", "parts": ["NAME"], "count": 10}),
    )
    .await;
    assert!(names.iter().any(|(v, _)| v == "Александр"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|(v, _)| v.ends_with("вич") || v.ends_with("вна") || v == "Алексеев"),
        "{names:?}"
    );
    let female = fio(
        &edge,
        json!({"query": "ал", "parts": ["NAME"], "gender": "FEMALE", "count": 10}),
    )
    .await;
    assert!(
        !female.is_empty() && female.iter().all(|(_, g)| g == "FEMALE"),
        "{female:?}"
    );
    assert!(
        female.iter().any(|(v, _)| v == "Александра" || v == "Алла"),
        "{female:?}"
    );
}

#[tokio::test]
async fn malformed_requests_are_400_naming_the_field() {
    let edge = start();
    let long = "а".repeat(301);
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "/hints/suggest/address",
            r#"{"query":""}"#.into(),
            "query",
            "is empty",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":" \t "}"#.into(),
            "query",
            "is empty",
        ),
        (
            "/hints/suggest/address",
            json!({"query": long}).to_string(),
            "query",
            "at most 300",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","count":0}"#.into(),
            "count",
            "1..=20",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","from_bound":{"value":"planet"}}"#.into(),
            "from_bound",
            "\"planet\" is not a level (allowed: country, region, area, city, settlement, street, house)",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","from_bound":{"value":"street"},"to_bound":{"value":"city"}}"#
                .into(),
            "to_bound",
            "is broader than from_bound",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","from_bound":{"value":"region"},"to_bound":{"value":"region"}}"#
                .into(),
            "from_bound",
            "holds no entry of this index",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","locations":[{"kladr_id":"7700000000000"}]}"#.into(),
            "locations",
            "\"kladr_id\" is not a location field",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","locations":[{}]}"#.into(),
            "locations",
            "empty object",
        ),
        (
            "/hints/suggest/fio",
            r#"{"query":"иван","locations":[{"city":"Москва"}]}"#.into(),
            "locations",
            "address suggestions (suggest/address) only",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","count":21}"#.into(),
            "count",
            "1..=20",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","count":"5"}"#.into(),
            "count",
            "must be a number",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"москва","count":2.5}"#.into(),
            "count",
            "whole number",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":5}"#.into(),
            "query",
            "must be a string",
        ),
        (
            "/hints/suggest/address",
            r#"{"count":5}"#.into(),
            "query",
            "is missing",
        ),
        (
            "/hints/suggest/address",
            r#"["москва"]"#.into(),
            "body",
            "JSON object",
        ),
        (
            "/hints/suggest/address",
            "{not json".into(),
            "body",
            "not valid UTF-8 JSON",
        ),
        (
            "/hints/suggest/address",
            r#"{"query":"м","parts":["NAME"]}"#.into(),
            "parts",
            "name suggestions",
        ),
        (
            "/hints/suggest/fio",
            r#"{"query":"ив","parts":["NICKNAME"]}"#.into(),
            "parts",
            "SURNAME, NAME, PATRONYMIC",
        ),
        (
            "/hints/suggest/fio",
            r#"{"query":"ив","parts":[]}"#.into(),
            "parts",
            "is empty",
        ),
        (
            "/hints/suggest/fio",
            r#"{"query":"ив","parts":"NAME"}"#.into(),
            "parts",
            "array of strings",
        ),
        (
            "/hints/suggest/fio",
            r#"{"query":"ив","gender":"OTHER"}"#.into(),
            "gender",
            "MALE, FEMALE, UNKNOWN",
        ),
    ];
    for (path, body, field, says) in cases {
        let (status, v) = post(&edge, path, &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"]["field"], field, "{body}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg:?} lacks {says:?}");
    }
    // Invalid UTF-8 in the body and in the query string.
    let (status, text) = request(
        &client(),
        "POST",
        &format!("{}/hints/suggest/address", edge.url),
        &[],
        Bytes::from_static(b"{\"query\":\"\xff\xfe\"}"),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("\"field\":\"body\""), "{text}");
    for qs in ["q=%FF%FE", "q=%E0%A", "count=5", "q=moscow&count=x"] {
        let (status, text) = call(&edge, "GET", &format!("/hints/address?{qs}")).await;
        assert_eq!(status, 400, "{qs}: {text}");
        assert!(text.contains("\"field\""), "{qs}: {text}");
    }
    let (status, _) = call(&edge, "GET", "/hints/nowhere").await;
    assert_eq!(status, 404);
    let (status, _) = call(&edge, "PUT", "/hints/suggest/fio").await;
    assert_eq!(status, 405);
    // Nothing above took the host down.
    assert_eq!(address(&edge, "москва").await[0], "г Москва");
}

#[tokio::test]
async fn demo_page_and_cors() {
    let edge = start();
    let (status, page) = call(&edge, "GET", "/hints/").await;
    assert_eq!(status, 200);
    assert!(
        page.contains(r#"data-kind="address""#) && page.contains(r#"data-kind="fio""#),
        "{page}"
    );
    let (status, _) = call(&edge, "OPTIONS", "/hints/suggest/address").await;
    assert_eq!(status, 204);
}

/// Every request gets a fresh instance, yet the ~60 MB of embedded index
/// is mapped copy-on-write, not copied: 64 requests in flight grow the
/// host's private anonymous memory (where copies would live; the shared
/// image pages are file or shmem pages, counted once per mapping in VmRSS)
/// by far less than one copy per instance. What does grow is each
/// instance's own heap: about 0.9 MB for a query with a word long enough
/// for two typos (the Levenshtein automaton tables), so the bound is four
/// copies in all, where copying would take 64.
#[tokio::test]
async fn instances_share_the_embedded_index() {
    let edge = start();
    address(&edge, "москва").await; // compiled and warm
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", edge.pid())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with("RssAnon:"))
            .unwrap()
            .to_owned();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    let before = rss();
    let client = client();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (c, url) = (
            client.clone(),
            format!("{}/hints/suggest/address", edge.url),
        );
        tasks.push(tokio::spawn(async move {
            let body = json!({"query": format!("москва хабаровская {}", i % 30 + 1)}).to_string();
            request(&c, "POST", &url, &[], Bytes::from(body)).await
        }));
    }
    for t in tasks {
        let (status, text) = t.await.unwrap();
        assert_eq!(status, 200, "{text}");
    }
    let grown = rss().saturating_sub(before);
    let index = std::fs::metadata(component("hints")).unwrap().len();
    assert!(
        grown < 4 * index,
        "RssAnon grew {grown} bytes over 64 instances; the index is {index} bytes"
    );
}

/// The demo page in a real browser (Debian chromium driven by
/// playwright-core, both installed by scripts/setup.sh): suggestions while
/// typing, arrow keys, Enter, Escape, and a name in agreeing gender
/// (tests/browser/hints-demo.mjs).
#[test]
fn demo_page_in_a_browser() {
    let edge = start();
    // Not the compile-time manifest dir: another clone sharing
    // CARGO_TARGET_DIR may have built this binary (repo()).
    let dir = repo().join("tests/browser");
    let out = std::process::Command::new("node")
        .arg("hints-demo.mjs")
        .arg(format!("{}/hints/", edge.url))
        .current_dir(dir)
        .output()
        .expect("running node (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "browser test failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
