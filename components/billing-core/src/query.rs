//! The clients listing's query: parameters from the URL, checked, and the
//! SQL they mean. Sort columns come only from [`SORT_COLUMNS`] (the
//! request's words select an entry, they are never copied into the SQL);
//! every value is a bound parameter.

use crate::{ApiError, Param, dates, page::Page};

/// The listing's sortable columns: the API's name and its SQL expression.
pub const SORT_COLUMNS: &[(&str, &str)] = &[
    ("name", "c.name"),
    ("contact_name", "c.contact_name"),
    ("phone", "c.phone"),
    ("email", "c.email"),
    ("tariff", "t.name"),
    ("registered_at", "c.registered_at"),
    ("id", "c.id"),
];

/// The client row's columns, in the order [`crate::query`]'s callers read them.
pub const CLIENT_COLUMNS: &str = "SELECT c.id, c.dealer_id, d.name, c.name, c.contact_name, c.phone, c.email, c.note, c.tariff_id, t.name, c.registered_at, c.version, c.updated_at";

/// The client row's dealer and tariff.
const CLIENT_JOINS: &str =
    "JOIN dealers d ON d.id = c.dealer_id JOIN tariffs t ON t.id = c.tariff_id";

/// The client rows: [`CLIENT_COLUMNS`] from clients with their dealer and tariff.
pub const CLIENT_SELECT: &str = "SELECT c.id, c.dealer_id, d.name, c.name, c.contact_name, c.phone, c.email, c.note, c.tariff_id, t.name, c.registered_at, c.version, c.updated_at FROM clients c JOIN dealers d ON d.id = c.dealer_id JOIN tariffs t ON t.id = c.tariff_id";

/// A page's rows: `ids` (a `SELECT` of the page's ids, in order, at most a
/// page of them) read from `clients` and joined with their dealer and
/// tariff, kept where `w` holds (empty: `ids` checked the filter), in
/// `order`.
fn rows_of(ids: &str, w: &str, order: &str) -> String {
    format!(
        "{CLIENT_COLUMNS} FROM ({ids}) p JOIN clients c ON c.id = p.id {CLIENT_JOINS}{w}{order}"
    )
}

/// Each tariff's id and the dense rank of its name in the database's own
/// order (equal names, equal ranks), for [`ClientQuery::select_by_tariff`].
pub const TARIFF_RANKS: &str = "SELECT t.id, (SELECT COUNT(DISTINCT t2.name) FROM tariffs t2 WHERE t2.name < t.name) FROM tariffs t";

/// The most tariff names [`ClientQuery::select_by_tariff`] makes a
/// group of; past it the rows are sorted by the joined name.
pub const MAX_TARIFF_GROUPS: usize = 100;

/// The longest search string.
pub const MAX_SEARCH: usize = 200;

/// How many index entries a walk of a sort index may pass per remembered
/// id ([`ClientQuery::walk_ids`]): about what looking one id up costs on
/// MariaDB (measured on a dealer's 20,000: an entry walked 0.26 µs, an id
/// looked up 3-5 µs).
pub const WALK_PER_LOOKUP: i64 = 16;

/// Decodes `application/x-www-form-urlencoded` text (a URL's query): pairs
/// in order, `+` as a space, `%XX` escapes; text that is not UTF-8 once
/// decoded is refused, naming its parameter.
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(k).ok_or_else(|| {
            ApiError::malformed("a query parameter's name is not valid UTF-8 once decoded")
        })?;
        let value = decode(v).ok_or_else(|| ApiError::bad(&key, "not valid UTF-8 once decoded"))?;
        out.push((key, value));
    }
    Ok(out)
}

/// Decodes one component of a query (`+` is a space); `None` if the bytes
/// are not UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// The first value of a parameter.
pub fn first<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Case-folds text for the search: each character that lower-cases to one
/// character becomes that one (so the length in characters is kept, and
/// the folded fields fit their column); others stay as they are. Rows
/// and the search text are folded alike, in the app, so both databases
/// match alike.
pub fn fold(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut l = c.to_lowercase();
            match (l.next(), l.next()) {
                (Some(one), None) => one,
                _ => c,
            }
        })
        .collect()
}

/// What a search looks through, stored with each client (`clients.search`):
/// the four searched fields folded, one per line. None of them may hold a
/// line break (they are single-line fields), so a search text without one
/// is found in it exactly when it is found in one of the fields.
pub fn search_text(name: &str, contact_name: &str, phone: &str, email: &str) -> String {
    [name, contact_name, phone, email]
        .iter()
        .map(|f| fold(f))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Escapes `LIKE`'s metacharacters with `!` (the statement says `ESCAPE
/// '!'`, which both SQLite and MariaDB read alike) and wraps the text in
/// `%` for a substring match. The text is folded ([`fold`]) and so is the
/// column, so SQLite's ASCII case-insensitive LIKE and MariaDB's binary
/// one find the same rows.
pub fn like_substring(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('%');
    for c in s.chars() {
        if matches!(c, '!' | '%' | '_') {
            out.push('!');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// A parsed `GET /api/clients` (and `.csv`) query.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientQuery {
    /// The page.
    pub page: Page,
    /// Sort keys: an index into [`SORT_COLUMNS`] and whether descending.
    pub sort: Vec<(usize, bool)>,
    /// The search text, if any.
    pub q: Option<String>,
    /// A tariff id.
    pub tariff: Option<i64>,
    /// Registered on or after this day (unix ms of its start).
    pub from_ms: Option<i64>,
    /// Registered on or before this day (unix ms of the next day's start, exclusive).
    pub until_ms: Option<i64>,
    /// A dealer id (admins only; a dealer's own id is forced elsewhere).
    pub dealer: Option<i64>,
}

fn allowed_columns() -> String {
    SORT_COLUMNS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses a sort list: `name,-registered_at`.
pub fn parse_sort(s: &str) -> Result<Vec<(usize, bool)>, ApiError> {
    let mut out: Vec<(usize, bool)> = Vec::new();
    for word in s.split(',') {
        let (name, desc) = match word.strip_prefix('-') {
            Some(n) => (n, true),
            None => (word, false),
        };
        let Some(i) = SORT_COLUMNS.iter().position(|(n, _)| *n == name) else {
            return Err(ApiError::bad(
                "sort",
                format!(
                    "sort by a comma-separated list of {} (prefix - for descending)",
                    allowed_columns()
                ),
            ));
        };
        if out.iter().any(|(j, _)| *j == i) {
            return Err(ApiError::bad("sort", format!("{name} is named twice")));
        }
        out.push((i, desc));
    }
    Ok(out)
}

fn id_param(params: &[(String, String)], name: &str) -> Result<Option<i64>, ApiError> {
    match first(params, name) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(ApiError::bad(
                name,
                "must be a positive whole number (an id)",
            )),
        },
    }
}

fn date_param(params: &[(String, String)], name: &str) -> Result<Option<i64>, ApiError> {
    match first(params, name) {
        None | Some("") => Ok(None),
        Some(v) => dates::parse_date(v)
            .map(Some)
            .ok_or_else(|| ApiError::bad(name, "must be a date as YYYY-MM-DD")),
    }
}

impl ClientQuery {
    /// From the query's parameters; `dealer` is read for admins only.
    pub fn parse(params: &[(String, String)], admin: bool) -> Result<Self, ApiError> {
        let page = Page::parse(first(params, "page"), first(params, "per_page"))?;
        let sort = match first(params, "sort") {
            None | Some("") => vec![(0, false)],
            Some(s) => parse_sort(s)?,
        };
        let q = match first(params, "q").map(str::trim) {
            None | Some("") => None,
            Some(q) if q.chars().count() > MAX_SEARCH => {
                return Err(ApiError::bad(
                    "q",
                    format!("at most {MAX_SEARCH} characters"),
                ));
            }
            Some(q) => Some(q.to_string()),
        };
        let from = date_param(params, "registered_from")?;
        let to = date_param(params, "registered_to")?;
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            return Err(ApiError::bad(
                "registered_to",
                "must not be before registered_from",
            ));
        }
        Ok(Self {
            page,
            sort,
            q,
            tariff: id_param(params, "tariff")?,
            from_ms: from.map(|d| d * dates::DAY_MS),
            until_ms: to.map(|d| (d + 1) * dates::DAY_MS),
            dealer: if admin {
                id_param(params, "dealer")?
            } else {
                None
            },
        })
    }

    /// `WHERE ...` (or empty) and its parameters. `scope` is the dealer
    /// every row must belong to (a dealer's session): it is applied
    /// whatever the query says.
    pub fn where_clause(&self, scope: Option<i64>) -> (String, Vec<Param>) {
        let mut conds: Vec<&str> = Vec::new();
        let mut params = Vec::new();
        if let Some(d) = scope.or(self.dealer) {
            conds.push("c.dealer_id = ?");
            params.push(Param::Int(d));
        }
        if let Some(t) = self.tariff {
            conds.push("c.tariff_id = ?");
            params.push(Param::Int(t));
        }
        if let Some(f) = self.from_ms {
            conds.push("c.registered_at >= ?");
            params.push(Param::Int(f));
        }
        if let Some(u) = self.until_ms {
            conds.push("c.registered_at < ?");
            params.push(Param::Int(u));
        }
        if let Some(q) = &self.q {
            let q = fold(q);
            if q.contains(['\n', '\r']) {
                // No single-line field holds a line break.
                conds.push("1 = 0");
            } else {
                // A substring of the folded text (its LIKE metacharacters
                // escaped; LIKE scans faster than INSTR on both), read from
                // (dealer_id, search).
                conds.push("c.search LIKE ? ESCAPE '!'");
                params.push(Param::Text(like_substring(&q)));
            }
        }
        if conds.is_empty() {
            (String::new(), params)
        } else {
            (format!(" WHERE {}", conds.join(" AND ")), params)
        }
    }

    /// ` ORDER BY ...`: the chosen columns, then `c.id` to make pages stable.
    pub fn order_by(&self) -> String {
        let mut parts: Vec<String> = self
            .sort
            .iter()
            .map(|(i, desc)| format!("{}{}", SORT_COLUMNS[*i].1, if *desc { " DESC" } else { "" }))
            .collect();
        if !self.sort.iter().any(|(i, _)| SORT_COLUMNS[*i].0 == "id") {
            parts.push("c.id".into());
        }
        format!(" ORDER BY {}", parts.join(", "))
    }

    /// ` LIMIT per_page OFFSET offset`: the page.
    fn page_limit(&self) -> String {
        format!(
            " LIMIT {} OFFSET {}",
            self.page.per_page,
            self.page.offset()
        )
    }

    /// The join a sort by the tariff's name needs (else nothing).
    fn tariff_join(&self) -> &'static str {
        if self
            .sort
            .iter()
            .any(|(i, _)| SORT_COLUMNS[*i].0 == "tariff")
        {
            " JOIN tariffs t ON t.id = c.tariff_id"
        } else {
            ""
        }
    }

    /// The page's rows: statement and parameters. The page's ids are found
    /// first from `clients` alone (its indexes answer the filter, the order
    /// and the offset without reading the rows skipped), then only those
    /// rows are read and joined with their dealer and tariff.
    pub fn select(&self, scope: Option<i64>) -> (String, Vec<Param>) {
        let (w, p) = self.where_clause(scope);
        let tariff = self.tariff_join();
        let order = self.order_by();
        let page = self.page_limit();
        (
            rows_of(
                &format!("SELECT c.id FROM clients c{tariff}{w}{order}{page}"),
                "",
                &order,
            ),
            p,
        )
    }

    /// Whether, on MariaDB, a searched page is better found from its
    /// matches ([`Self::select_matches_first`]) than by walking the sort
    /// column's index: `total` rows match of the dealer's `rows`. Walking
    /// looks up each row passed for its search text (MariaDB's sort
    /// indexes cannot hold it: an index key is at most 3,072 bytes), and
    /// how many it passes depends on where the matches lie in the sort
    /// order: searched names sorted by name lie together, maybe at the far
    /// end (a full walk, every row looked up). From the matches, the
    /// dealer's (dealer_id, search) index is scanned (an entry costs a
    /// small part of a lookup) and only the matches are looked up and
    /// sorted: bounded, and the better way while they are at most an
    /// eighth of the dealer's rows.
    pub fn matches_first_is_cheaper(&self, total: i64, rows: i64) -> bool {
        self.q.is_some() && rows > 0 && total.saturating_mul(8) <= rows
    }

    /// The page's rows, for a search on MariaDB, found from the matches:
    /// the dealer's (dealer_id, search) index read first (forced: the
    /// optimizer would walk the sort index), then only the matching rows
    /// looked up, filtered and sorted. The same rows in the same order as
    /// [`Self::select`]. `None` without a search or a dealer.
    pub fn select_matches_first(&self, scope: Option<i64>) -> Option<(String, Vec<Param>)> {
        let dealer = scope.or(self.dealer)?;
        let q = fold(self.q.as_deref()?);
        if q.contains(['\n', '\r']) {
            return None;
        }
        let (w, p) = self.where_clause(scope);
        let tariff = self.tariff_join();
        let order = self.order_by();
        let mut params = vec![Param::Int(dealer), Param::Text(like_substring(&q))];
        params.extend(p);
        let page = self.page_limit();
        Some((
            rows_of(
                &format!(
                    "SELECT STRAIGHT_JOIN c.id FROM (SELECT s.id FROM clients s FORCE INDEX (clients_dealer_search) WHERE s.dealer_id = ? AND s.search LIKE ? ESCAPE '!') m JOIN clients c ON c.id = m.id{tariff}{w}{order}{page}"
                ),
                "",
                &order,
            ),
            params,
        ))
    }

    /// Every matching id, in no order: one read of the index that answers
    /// the filter (the dealer's search index, with the tariff when one is
    /// asked), for [`Self::select_ids`].
    pub fn matching_ids(&self, scope: Option<i64>) -> (String, Vec<Param>) {
        let (w, p) = self.where_clause(scope);
        (format!("SELECT c.id FROM clients c{w}"), p)
    }

    /// The page's rows among `ids` (what [`Self::matching_ids`] gave, at
    /// most `counts::MAX_IDS`, of the dealer's `rows`), in the same order
    /// as [`Self::select`], on MariaDB, by walking the dealer's index of
    /// the sort column (ascending or its descending twin) in order and
    /// keeping each entry whose id is one of `ids`: no row is read but the
    /// page's. With the statement comes how many rows the page has: a
    /// walk's budget is [`WALK_PER_LOOKUP`] examined rows per id (about
    /// what looking each id up costs; `LIMIT ... ROWS EXAMINED`), so when
    /// the matches lie further along the order than that (a name searched
    /// and sorted by name, at the far end) it stops early, answers fewer
    /// rows, and the page is read by [`Self::select_ids`] instead. `None`
    /// when the walk is not expected to pay, the ids spread evenly in the
    /// order (few ids, or a page far along), or there is no such index
    /// (a sort by several columns, the tariff or the id).
    pub fn walk_ids(
        &self,
        scope: Option<i64>,
        ids: &[i64],
        rows: i64,
    ) -> Option<(String, Vec<Param>, usize)> {
        let index = self.sort_index()?;
        let dealer = scope.or(self.dealer)?;
        let k = ids.len() as i64;
        let budget = WALK_PER_LOOKUP.saturating_mul(k);
        let needed = self.page.offset().saturating_add(self.page.per_page);
        // Entries passed to reach the page's last row, with the matches
        // spread evenly: rows * needed / k.
        if k == 0 || rows.saturating_mul(needed) > budget.saturating_mul(k) {
            return None;
        }
        let (w, p) = self.where_clause(scope);
        let order = self.order_by();
        let list = crate::counts::ids_text(ids);
        let mut params = vec![Param::Int(dealer)];
        params.extend(p);
        // What the page's join reads besides the walk: each row, its
        // dealer and tariff, the derived table (written and read).
        let examined = budget.saturating_add(self.page.per_page.saturating_mul(8));
        let page = self.page_limit();
        let walk = format!(
            "SELECT c.id FROM clients c FORCE INDEX ({index}) WHERE c.dealer_id = ? AND c.id IN ({list}){order}{page}"
        );
        Some((
            format!(
                "{} LIMIT {} ROWS EXAMINED {examined}",
                rows_of(&walk, &w, &order),
                self.page.per_page
            ),
            params,
            (k - self.page.offset()).clamp(0, self.page.per_page) as usize,
        ))
    }

    /// The page's rows among `ids` (see [`Self::walk_ids`]), each looked
    /// up and the matches sorted. The page's rows are checked against the
    /// filter again (a row changed outside the app since).
    pub fn select_ids(&self, scope: Option<i64>, ids: &[i64]) -> (String, Vec<Param>) {
        let (w, p) = self.where_clause(scope);
        let order = self.order_by();
        let tariff = self.tariff_join();
        // The ids as a table (a JSON array of integers written out: no
        // quoting to get wrong), joined in that order: MariaDB turns a
        // long `IN (...)` list into a table of its own, slower.
        let (list, page) = (crate::counts::ids_text(ids), self.page_limit());
        (
            rows_of(
                &format!(
                    "SELECT c.id FROM JSON_TABLE('[{list}]', '$[*]' COLUMNS (id BIGINT PATH '$')) m STRAIGHT_JOIN clients c ON c.id = m.id{tariff}{order}{page}"
                ),
                &w,
                &order,
            ),
            p,
        )
    }

    /// MariaDB's index of the dealer's clients in this listing's order,
    /// when it is one column's (then the id, as every index ends): the
    /// schema's `clients_dealer_*` and their descending twins.
    fn sort_index(&self) -> Option<&'static str> {
        let [(i, desc)] = self.sort[..] else {
            return None;
        };
        let name = match (SORT_COLUMNS[i].0, desc) {
            ("name", false) => "clients_dealer_name",
            ("name", true) => "clients_dealer_name_desc",
            ("contact_name", false) => "clients_dealer_contact",
            ("contact_name", true) => "clients_dealer_contact_desc",
            ("phone", false) => "clients_dealer_phone",
            ("phone", true) => "clients_dealer_phone_desc",
            ("email", false) => "clients_dealer_email",
            ("email", true) => "clients_dealer_email_desc",
            ("registered_at", false) => "clients_dealer_registered",
            ("registered_at", true) => "clients_dealer_registered_desc",
            _ => return None,
        };
        Some(name)
    }

    /// Whether the first sort key is the tariff('s name): [`Self::select`]
    /// then wants the tariffs ranked ([`TARIFF_RANKS`]).
    pub fn sorts_by_tariff_first(&self) -> bool {
        self.sort
            .first()
            .is_some_and(|(i, _)| SORT_COLUMNS[*i].0 == "tariff")
    }

    /// The page's rows when the first sort key is the tariff's name: the
    /// tariffs' `ranks` (id and the dense rank of its name, from
    /// [`TARIFF_RANKS`]) make one group per name, each group's rows come in
    /// the other keys' order from an index of (dealer_id, tariff_id, ...)
    /// (at most offset + per_page of each), and the groups follow one
    /// another in the tariff name's order, instead of sorting every
    /// matching row by a joined column. The same rows in the same order as
    /// [`Self::select`]. `None` past [`MAX_TARIFF_GROUPS`] names: a
    /// statement of that many parts is refused (SQLite allows 500 in a
    /// compound select) or costs more than the plain sort.
    pub fn select_by_tariff(
        &self,
        scope: Option<i64>,
        ranks: &[(i64, i64)],
    ) -> Option<(String, Vec<Param>)> {
        let (w, p) = self.where_clause(scope);
        let (first_desc, rest) = match self.sort.split_first() {
            Some(((_, d), rest)) => (*d, rest),
            None => (false, &[][..]),
        };
        let mut groups: Vec<(i64, Vec<i64>)> = Vec::new();
        for (id, rank) in ranks {
            match groups.iter_mut().find(|(r, _)| r == rank) {
                Some((_, ids)) => ids.push(*id),
                None => groups.push((*rank, vec![*id])),
            }
        }
        if groups.len() > MAX_TARIFF_GROUPS {
            return None;
        }
        groups.sort_by_key(|(r, _)| *r);
        if first_desc {
            groups.reverse();
        }
        let keys: Vec<(String, bool)> = rest
            .iter()
            .map(|(i, d)| (SORT_COLUMNS[*i].1.to_string(), *d))
            .chain(
                (!rest.iter().any(|(i, _)| SORT_COLUMNS[*i].0 == "id"))
                    .then(|| ("c.id".to_string(), false)),
            )
            .collect();
        let dir = |d: bool| if d { " DESC" } else { "" };
        let inner_order = keys
            .iter()
            .map(|(k, d)| format!("{k}{}", dir(*d)))
            .collect::<Vec<_>>()
            .join(", ");
        let picked = keys
            .iter()
            .enumerate()
            .map(|(n, (k, _))| format!(", {k} AS k{n}"))
            .collect::<String>();
        let outer_order = keys
            .iter()
            .enumerate()
            .map(|(n, (_, d))| format!(", k{n}{}", dir(*d)))
            .collect::<String>();
        let enough = self.page.offset() + self.page.per_page;
        let mut params = Vec::new();
        let parts: Vec<String> = groups
            .iter()
            .enumerate()
            .map(|(g, (_, ids))| {
                params.extend(p.iter().cloned());
                let ids = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
                let cond = if w.is_empty() { " WHERE" } else { " AND" };
                format!(
                    "SELECT * FROM (SELECT c.id AS id, {g} AS g{picked} FROM clients c{w}{cond} c.tariff_id IN ({ids}) ORDER BY {inner_order} LIMIT {enough}) g{g}"
                )
            })
            .collect();
        if parts.is_empty() {
            // No tariffs: no row joins one.
            return Some((format!("{CLIENT_SELECT} WHERE 1 = 0"), Vec::new()));
        }
        let ids = format!(
            "SELECT id FROM ({}) u ORDER BY g{outer_order}{}",
            parts.join(" UNION ALL "),
            self.page_limit()
        );
        Some((rows_of(&ids, "", &self.order_by()), params))
    }

    /// Whether the total is a count of the rows (a search or dates), not
    /// a sum of `client_counts`.
    pub fn counts_rows(&self) -> bool {
        self.q.is_some() || self.from_ms.is_some() || self.until_ms.is_some()
    }

    /// The count of every matching row: without a search or dates, the
    /// sum of the dealers' counts per tariff (`client_counts`), else a
    /// count of the rows.
    pub fn count(&self, scope: Option<i64>) -> (String, Vec<Param>) {
        if !self.counts_rows() {
            let mut conds = Vec::new();
            let mut params = Vec::new();
            if let Some(d) = scope.or(self.dealer) {
                conds.push("dealer_id = ?");
                params.push(Param::Int(d));
            }
            if let Some(t) = self.tariff {
                conds.push("tariff_id = ?");
                params.push(Param::Int(t));
            }
            let w = if conds.is_empty() {
                String::new()
            } else {
                format!(" WHERE {}", conds.join(" AND "))
            };
            return (
                format!("SELECT COALESCE(SUM(n), 0) FROM client_counts{w}"),
                params,
            );
        }
        let (w, p) = self.where_clause(scope);
        (format!("SELECT COUNT(*) FROM clients c{w}"), p)
    }

    /// A chunk of the CSV export: `limit` rows after `offset`.
    pub fn export_chunk(
        &self,
        scope: Option<i64>,
        offset: i64,
        limit: i64,
    ) -> (String, Vec<Param>) {
        let (w, p) = self.where_clause(scope);
        (
            format!(
                "{CLIENT_SELECT}{w}{} LIMIT {limit} OFFSET {offset}",
                self.order_by()
            ),
            p,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str, admin: bool) -> Result<ClientQuery, ApiError> {
        ClientQuery::parse(&parse_query(s)?, admin)
    }

    #[test]
    fn decoding() {
        assert_eq!(
            parse_query("a=1&b=x+y&c=%25%27%20OR&d&=e&f=%zz%4").unwrap(),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), "%' OR".into()),
                ("d".into(), "".into()),
                ("".into(), "e".into()),
                ("f".into(), "%zz%4".into()),
            ]
        );
        assert_eq!(decode("%D0%AF%e2%82%ac").unwrap(), "Я€");
        assert_eq!(decode("%"), Some("%".into()));
        assert_eq!(decode("%4"), Some("%4".into()));
        assert_eq!(decode("%41"), Some("A".into()));
        assert!(decode("%FF").is_none());
        assert_eq!(
            parse_query("q=%FF").unwrap_err().field.as_deref(),
            Some("q")
        );
    }

    #[test]
    fn matches_first_for_a_search_of_few_rows() {
        let c = q("q=Anna&tariff=2&sort=-phone&page=2", false).unwrap();
        assert!(c.matches_first_is_cheaper(100, 30_000));
        assert!(c.matches_first_is_cheaper(3_750, 30_000));
        assert!(!c.matches_first_is_cheaper(3_751, 30_000));
        assert!(!c.matches_first_is_cheaper(0, 0));
        assert!(
            !q("tariff=2", false)
                .unwrap()
                .matches_first_is_cheaper(1, 30_000)
        );
        let (sql, p) = c.select_matches_first(Some(7)).unwrap();
        assert!(sql.contains("FROM (SELECT s.id FROM clients s FORCE INDEX (clients_dealer_search) WHERE s.dealer_id = ? AND s.search LIKE ? ESCAPE '!') m JOIN clients c ON c.id = m.id WHERE c.dealer_id = ? AND c.tariff_id = ? AND c.search LIKE ? ESCAPE '!' ORDER BY c.phone DESC, c.id LIMIT 50 OFFSET 50"), "{sql}");
        assert_eq!(
            p,
            vec![
                Param::Int(7),
                Param::Text("%anna%".into()),
                Param::Int(7),
                Param::Int(2),
                Param::Text("%anna%".into()),
            ]
        );
        // An admin's listing of every dealer, or no search: not this way.
        assert!(
            q("q=anna", true)
                .unwrap()
                .select_matches_first(None)
                .is_none()
        );
        assert!(
            q("q=anna&dealer=3", true)
                .unwrap()
                .select_matches_first(None)
                .is_some()
        );
        assert!(
            q("tariff=1", false)
                .unwrap()
                .select_matches_first(Some(1))
                .is_none()
        );
    }

    #[test]
    fn pages_of_remembered_ids() {
        let c = q("q=anna&sort=tariff&page=3&per_page=10", false).unwrap();
        let (sql, p) = c.matching_ids(Some(2));
        assert_eq!(
            sql,
            "SELECT c.id FROM clients c WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!'"
        );
        assert_eq!(p.len(), 2);
        let (sql, p) = c.select_ids(Some(2), &[5, 9, 12]);
        assert!(sql.contains("FROM (SELECT c.id FROM JSON_TABLE('[5,9,12]', '$[*]' COLUMNS (id BIGINT PATH '$')) m STRAIGHT_JOIN clients c ON c.id = m.id JOIN tariffs t ON t.id = c.tariff_id ORDER BY t.name, c.id LIMIT 10 OFFSET 20) p JOIN clients c ON c.id = p.id JOIN dealers d ON d.id = c.dealer_id JOIN tariffs t ON t.id = c.tariff_id WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!' ORDER BY t.name, c.id"), "{sql}");
        assert_eq!(p.len(), 2);
        assert!(c.select_ids(Some(2), &[]).0.contains("JSON_TABLE('[]'"));
        // A sort by the tariff has no index to walk.
        assert!(c.walk_ids(Some(2), &[5, 9, 12], 3).is_none());
        // One column: its index walked, the ids kept, while the walk is
        // expected to reach the page within 16 entries per id: rows *
        // (offset + per_page) <= 16 * ids^2.
        let ids: Vec<i64> = (1..=100).collect();
        let c = q("q=anna&sort=-email&per_page=10&page=3", false).unwrap();
        let (sql, p, page) = c.walk_ids(Some(2), &ids, 5333).unwrap();
        assert!(sql.contains("FROM (SELECT c.id FROM clients c FORCE INDEX (clients_dealer_email_desc) WHERE c.dealer_id = ? AND c.id IN (1,2,3,"), "{sql}");
        assert!(sql.ends_with(",100) ORDER BY c.email DESC, c.id LIMIT 10 OFFSET 20) p JOIN clients c ON c.id = p.id JOIN dealers d ON d.id = c.dealer_id JOIN tariffs t ON t.id = c.tariff_id WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!' ORDER BY c.email DESC, c.id LIMIT 10 ROWS EXAMINED 1680"), "{sql}");
        assert_eq!(
            p,
            vec![Param::Int(2), Param::Int(2), Param::Text("%anna%".into())]
        );
        assert_eq!(page, 10);
        assert!(c.walk_ids(Some(2), &ids, 5334).is_none());
        // The last page has what is left; past it, nothing.
        let c = q("q=anna&sort=name&per_page=30&page=4", false).unwrap();
        assert_eq!(c.walk_ids(Some(2), &ids, 100).unwrap().2, 10);
        let c = q("q=anna&sort=name&per_page=30&page=5", false).unwrap();
        assert_eq!(c.walk_ids(Some(2), &ids, 100).unwrap().2, 0);
        assert!(c.walk_ids(Some(2), &[], 100).is_none());
        // No dealer (an admin's listing of every dealer): no walk.
        assert!(
            q("q=anna&sort=name", true)
                .unwrap()
                .walk_ids(None, &ids, 100)
                .is_none()
        );
        // Every sortable column but the tariff's and the id has one.
        for (col, _) in SORT_COLUMNS {
            for dir in ["", "-"] {
                let c = q(&format!("q=a&sort={dir}{col}"), false).unwrap();
                assert_eq!(
                    c.sort_index().is_some(),
                    !matches!(*col, "tariff" | "id"),
                    "{dir}{col}"
                );
            }
        }
        assert!(
            q("q=a&sort=name,phone", false)
                .unwrap()
                .sort_index()
                .is_none()
        );
    }

    #[test]
    fn sort_is_whitelisted() {
        let c = q("sort=-registered_at,name", false).unwrap();
        assert_eq!(c.order_by(), " ORDER BY c.registered_at DESC, c.name, c.id");
        assert_eq!(
            q("sort=tariff,-id", false).unwrap().order_by(),
            " ORDER BY t.name, c.id DESC"
        );
        assert_eq!(q("", false).unwrap().order_by(), " ORDER BY c.name, c.id");
        for bad in [
            "sort=name;DROP TABLE clients",
            "sort=name%3BDROP%20TABLE%20clients",
            "sort=c.name",
            "sort=dealer_id",
            "sort=name,name",
            "sort=name,",
            "sort=--name",
            "sort=NAME",
            "sort=password_hash",
        ] {
            let e = q(bad, false).unwrap_err();
            assert_eq!((e.status, e.field.as_deref()), (400, Some("sort")), "{bad}");
        }
        let e = q("sort=x", false).unwrap_err();
        assert!(
            e.message
                .contains("name, contact_name, phone, email, tariff, registered_at, id")
        );
    }

    #[test]
    fn search_is_bound_and_folded() {
        let c = q("q=%25'+OR+1%3D1+--", false).unwrap();
        let (sql, params) = c.where_clause(Some(3));
        assert!(!sql.contains("OR 1=1"));
        assert_eq!(sql, " WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!'");
        assert_eq!(
            params,
            vec![Param::Int(3), Param::Text("%!%' or 1=1 --%".into())]
        );
        assert_eq!(like_substring("50%_off!"), "%50!%!_off!!%");
        assert_eq!(q("q=++", false).unwrap().q, None);
        assert!(q(&format!("q={}", "x".repeat(201)), false).is_err());
        // A line break is in no single-line field.
        let (sql, params) = q("q=a%0Ab", false).unwrap().where_clause(Some(3));
        assert_eq!(sql, " WHERE c.dealer_id = ? AND 1 = 0");
        assert_eq!(params, vec![Param::Int(3)]);
        assert_eq!(fold("Café ZOË İx ẞ"), "café zoë İx ß");
        assert_eq!(
            search_text("Acme", "Ann", "+1 (2)", "A@B.test"),
            "acme\nann\n+1 (2)\na@b.test"
        );
    }

    /// SQL's LIKE with `ESCAPE '!'`, as both databases read it on folded
    /// text: `%` any run, `_` one character, `!x` the character x.
    fn like(pattern: &str, text: &str) -> bool {
        fn go(p: &[char], t: &[char]) -> bool {
            match p.first() {
                None => t.is_empty(),
                Some('%') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
                Some('_') => !t.is_empty() && go(&p[1..], &t[1..]),
                Some('!') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
                Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..]),
            }
        }
        let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
        go(&p, &t)
    }

    #[test]
    fn the_search_pattern_matches_exactly_the_substring() {
        let alphabet: Vec<char> = "ab%_!'\\ é".chars().collect();
        let mut r = crate::seed::Rng::new(7);
        let mut word = |n: u64| -> String {
            let len = r.below(n);
            (0..len).map(|_| *r.pick(&alphabet)).collect()
        };
        for _ in 0..3000 {
            let (q, text) = (word(4), word(9));
            assert_eq!(
                like(&like_substring(&q), &text),
                text.contains(&q),
                "q={q:?} text={text:?}"
            );
        }
    }

    #[test]
    fn the_search_text_holds_the_query_exactly_when_a_field_does() {
        let alphabet: Vec<char> = "aAb%_!'\\ éÉİ".chars().collect();
        let mut r = crate::seed::Rng::new(7);
        let mut word = |n: u64| -> String {
            let len = r.below(n);
            (0..len).map(|_| *r.pick(&alphabet)).collect()
        };
        for _ in 0..3000 {
            let q = word(4);
            let fields = [word(7), word(7), word(7), word(7)];
            let text = search_text(&fields[0], &fields[1], &fields[2], &fields[3]);
            assert_eq!(
                text.contains(&fold(&q)),
                fields.iter().any(|f| fold(f).contains(&fold(&q))),
                "q={q:?} fields={fields:?}"
            );
            for f in &fields {
                assert_eq!(fold(f).chars().count(), f.chars().count());
            }
        }
    }

    #[test]
    fn dealer_scope_wins() {
        // A dealer's `dealer` parameter is ignored; the scope applies.
        let c = q("dealer=2", false).unwrap();
        assert_eq!(c.dealer, None);
        let (sql, params) = c.where_clause(Some(5));
        assert_eq!(
            (sql.as_str(), params),
            (" WHERE c.dealer_id = ?", vec![Param::Int(5)])
        );
        // An admin's filter applies; without one, no condition.
        let c = q("dealer=2", true).unwrap();
        assert_eq!(c.where_clause(None).1, vec![Param::Int(2)]);
        assert_eq!(q("", true).unwrap().where_clause(None).0, "");
        // The scope wins over an admin-shaped filter too.
        assert_eq!(c.where_clause(Some(7)).1, vec![Param::Int(7)]);
    }

    #[test]
    fn filters() {
        let c = q(
            "tariff=2&registered_from=2024-01-01&registered_to=2024-01-31",
            false,
        )
        .unwrap();
        let (sql, params) = c.where_clause(Some(1));
        assert_eq!(
            sql,
            " WHERE c.dealer_id = ? AND c.tariff_id = ? AND c.registered_at >= ? AND c.registered_at < ?"
        );
        let day = dates::days_from_civil(2024, 1, 1) * dates::DAY_MS;
        assert_eq!(
            params,
            vec![
                Param::Int(1),
                Param::Int(2),
                Param::Int(day),
                Param::Int(day + 31 * dates::DAY_MS)
            ]
        );
        for (bad, field) in [
            ("tariff=x", "tariff"),
            ("tariff=0", "tariff"),
            ("registered_from=2024-02-30", "registered_from"),
            ("registered_to=yesterday", "registered_to"),
            (
                "registered_from=2024-02-02&registered_to=2024-02-01",
                "registered_to",
            ),
            ("per_page=500", "per_page"),
            ("dealer=-1", "dealer"),
        ] {
            assert_eq!(
                q(bad, true).unwrap_err().field.as_deref(),
                Some(field),
                "{bad}"
            );
        }
    }

    #[test]
    fn statements() {
        let c = q("page=3&per_page=20&sort=-name", true).unwrap();
        let (sql, _) = c.select(None);
        assert_eq!(
            sql,
            format!(
                "{CLIENT_COLUMNS} FROM (SELECT c.id FROM clients c ORDER BY c.name DESC, c.id LIMIT 20 OFFSET 40) p JOIN clients c ON c.id = p.id {CLIENT_JOINS} ORDER BY c.name DESC, c.id"
            )
        );
        assert_eq!(
            CLIENT_SELECT,
            format!("{CLIENT_COLUMNS} FROM clients c {CLIENT_JOINS}")
        );
        // Sorted by tariff first: a group per tariff name, in its order.
        let t = q("page=2&per_page=10&sort=-tariff,name&q=x", false).unwrap();
        assert!(t.sorts_by_tariff_first());
        let (sql, p) = t
            .select_by_tariff(Some(4), &[(1, 1), (2, 0), (3, 1)])
            .unwrap();
        let inner = |g: usize, ids: &str| {
            format!(
                "SELECT * FROM (SELECT c.id AS id, {g} AS g, c.name AS k0, c.id AS k1 FROM clients c WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!' AND c.tariff_id IN ({ids}) ORDER BY c.name, c.id LIMIT 20) g{g}"
            )
        };
        assert_eq!(
            sql,
            format!(
                "{CLIENT_COLUMNS} FROM (SELECT id FROM ({} UNION ALL {}) u ORDER BY g, k0, k1 LIMIT 10 OFFSET 10) p JOIN clients c ON c.id = p.id {CLIENT_JOINS} ORDER BY t.name DESC, c.name, c.id",
                inner(0, "1, 3"),
                inner(1, "2")
            )
        );
        assert_eq!(p.len(), 4);
        // Past the cap, no statement of that many parts.
        let many: Vec<(i64, i64)> = (0..=MAX_TARIFF_GROUPS as i64).map(|i| (i, i)).collect();
        assert!(t.select_by_tariff(Some(4), &many).is_none());
        let same: Vec<(i64, i64)> = (0..1000).map(|i| (i, 0)).collect();
        assert!(t.select_by_tariff(Some(4), &same).is_some());
        assert!(
            !q("sort=name,tariff", false)
                .unwrap()
                .sorts_by_tariff_first()
        );
        let (sql, p) = c.count(Some(4));
        assert_eq!(
            sql,
            "SELECT COALESCE(SUM(n), 0) FROM client_counts WHERE dealer_id = ?"
        );
        assert_eq!(p, vec![Param::Int(4)]);
        let (sql, p) = q("tariff=2", true).unwrap().count(None);
        assert_eq!(
            sql,
            "SELECT COALESCE(SUM(n), 0) FROM client_counts WHERE tariff_id = ?"
        );
        assert_eq!(p, vec![Param::Int(2)]);
        let (sql, _) = q("q=x", true).unwrap().count(Some(4));
        assert_eq!(
            sql,
            "SELECT COUNT(*) FROM clients c WHERE c.dealer_id = ? AND c.search LIKE ? ESCAPE '!'"
        );
        assert!(
            c.export_chunk(None, 5000, 5000)
                .0
                .ends_with("LIMIT 5000 OFFSET 5000")
        );
    }
}
