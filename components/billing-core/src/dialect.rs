//! Where SQLite and MariaDB differ, and nowhere else: column types in the
//! schema, table options, and the increment-or-insert of a counter. Every
//! other statement of the app is the same text on both (`?` parameters,
//! `LIKE ... ESCAPE '!'`, `LIMIT n OFFSET m`, `COUNT`, `UNION ALL` of
//! derived tables).

/// The database the app talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Spin's SQLite interface (the default database).
    Sqlite,
    /// Spin's MySQL interface (MariaDB).
    Mysql,
}

/// The schema, one list of statements per version; written once for both
/// databases with `{id}` (an auto-increment primary key), `{str N}` (a
/// string of at most N characters that can be indexed), `{bytes N}` (text
/// compared as its UTF-8 bytes, at most N of them, that can be indexed), `{text}` (a long
/// string) and `{opts}` (table options) filled in by [`Dialect::render`].
/// Times are unix milliseconds (BIGINT).
pub const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE IF NOT EXISTS tariffs (id {id}, name {str 200} NOT NULL, monthly_cents BIGINT NOT NULL, active INT NOT NULL DEFAULT 1){opts}",
        "CREATE TABLE IF NOT EXISTS dealers (id {id}, name {str 200} NOT NULL, created_at BIGINT NOT NULL){opts}",
        "CREATE TABLE IF NOT EXISTS users (id {id}, login {str 254} NOT NULL UNIQUE, password_hash {str 200} NOT NULL, role {str 16} NOT NULL, dealer_id BIGINT NULL REFERENCES dealers(id), created_at BIGINT NOT NULL, disabled INT NOT NULL DEFAULT 0){opts}",
        "CREATE TABLE IF NOT EXISTS clients (id {id}, dealer_id BIGINT NOT NULL REFERENCES dealers(id), name {str 200} NOT NULL, contact_name {str 200} NOT NULL, phone {str 32} NOT NULL, email {str 254} NOT NULL, note {text} NOT NULL, tariff_id BIGINT NOT NULL REFERENCES tariffs(id), registered_at BIGINT NOT NULL, version INT NOT NULL DEFAULT 1, updated_at BIGINT NOT NULL){opts}",
        "CREATE TABLE IF NOT EXISTS payments (id {id}, client_id BIGINT NOT NULL REFERENCES clients(id), amount_cents BIGINT NOT NULL, currency {str 3} NOT NULL, paid_at BIGINT NOT NULL, reference {str 64} NOT NULL, signature {str 64} NOT NULL){opts}",
        "CREATE TABLE IF NOT EXISTS sessions (id_hash {str 64} NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, csrf {str 64} NOT NULL, expires_at BIGINT NOT NULL){opts}",
        "CREATE TABLE IF NOT EXISTS login_failures (failure_key {str 300} NOT NULL, window_start BIGINT NOT NULL, count INT NOT NULL, PRIMARY KEY (failure_key, window_start)){opts}",
        "CREATE TABLE IF NOT EXISTS seed_parts (part INT NOT NULL PRIMARY KEY, done_at BIGINT NOT NULL){opts}",
        "CREATE INDEX IF NOT EXISTS clients_dealer_name ON clients (dealer_id, name)",
        "CREATE INDEX IF NOT EXISTS clients_dealer_contact ON clients (dealer_id, contact_name)",
        "CREATE INDEX IF NOT EXISTS clients_dealer_phone ON clients (dealer_id, phone)",
        "CREATE INDEX IF NOT EXISTS clients_dealer_email ON clients (dealer_id, email)",
        "CREATE INDEX IF NOT EXISTS clients_dealer_tariff ON clients (dealer_id, tariff_id)",
        "CREATE INDEX IF NOT EXISTS clients_dealer_registered ON clients (dealer_id, registered_at)",
        "CREATE INDEX IF NOT EXISTS clients_name ON clients (name)",
        "CREATE INDEX IF NOT EXISTS clients_registered ON clients (registered_at)",
        "CREATE INDEX IF NOT EXISTS payments_client_paid ON payments (client_id, paid_at)",
        "CREATE INDEX IF NOT EXISTS payments_paid ON payments (paid_at)",
        "CREATE INDEX IF NOT EXISTS sessions_expires ON sessions (expires_at)",
    ],
    &[
        // Version 2: the search text (`crate::query::search_text`: the four
        // searched fields, case-folded, one per line) kept by the app on every
        // write, read from an index beside the dealer instead of folding four
        // columns of every row per search. Existing rows are filled by the
        // app after these statements (`SEARCH_BACKFILL`).
        "ALTER TABLE clients ADD COLUMN search {bytes 2800} NOT NULL DEFAULT ''",
        "CREATE INDEX IF NOT EXISTS clients_dealer_search ON clients (dealer_id, search)",
        // Sorting by the tariff's name walks each tariff's clients in order.
        "CREATE INDEX IF NOT EXISTS clients_dealer_tariff_name ON clients (dealer_id, tariff_id, name)",
    ],
    &[
        // Version 3, MariaDB only: descending twins of the dealer's sort
        // indexes. A descending sort is `col DESC, c.id` (ties by id, up):
        // SQLite reads (dealer_id, col) backwards and sorts each run of
        // equal values; MariaDB sorts every row unless an index holds
        // that order.
        // (And the search text as bytes, for a database that took
        // version 2 when it was a VARCHAR: MariaDB's LIKE over utf8mb4
        // costs several times its LIKE over bytes, and the pattern's only
        // wildcards are its ends, so bytes match alike.)
        "{mysql} ALTER TABLE clients MODIFY search {bytes 2800} NOT NULL DEFAULT ''",
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_name_desc ON clients (dealer_id, name DESC)",
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_contact_desc ON clients (dealer_id, contact_name DESC)",
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_phone_desc ON clients (dealer_id, phone DESC)",
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_email_desc ON clients (dealer_id, email DESC)",
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_registered_desc ON clients (dealer_id, registered_at DESC)",
    ],
    &[
        // Version 4: how many clients each dealer has of each tariff,
        // changed in the same transaction as every insert, reassignment
        // and change of tariff (`Dialect::add_count`): a listing's total
        // without a search or dates is a sum of a few rows instead of a
        // count of every client of the dealer.
        "CREATE TABLE IF NOT EXISTS client_counts (dealer_id BIGINT NOT NULL, tariff_id BIGINT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (dealer_id, tariff_id)){opts}",
        "DELETE FROM client_counts",
        "INSERT INTO client_counts (dealer_id, tariff_id, n) SELECT dealer_id, tariff_id, COUNT(*) FROM clients GROUP BY dealer_id, tariff_id",
    ],
    &[
        // Version 5: the totals of listings that count rows (a search or
        // dates) remembered per dealer (`crate::counts`): a slot per
        // filter's hash, valid while the dealer's generation, bumped in
        // the transaction of every change to the dealer's clients
        // (`Dialect::bump_generation`), is the one it was counted at, and
        // for `counts::TTL_MS` at most (changes made outside the app).
        "CREATE TABLE IF NOT EXISTS client_generations (dealer_id BIGINT NOT NULL PRIMARY KEY, generation BIGINT NOT NULL){opts}",
        "CREATE TABLE IF NOT EXISTS count_cache (dealer_id BIGINT NOT NULL, slot INT NOT NULL, filter {bytes 1024} NOT NULL, generation BIGINT NOT NULL, total BIGINT NOT NULL, ids {text} NULL, made_at BIGINT NOT NULL, PRIMARY KEY (dealer_id, slot)){opts}",
        // SQLite: the dealer's sort indexes hold every filtered column, so
        // a searched or filtered page walks one index in order and reads
        // no row it does not show (`c.id` right after the sort column
        // keeps `ORDER BY col, c.id` the index's order). MariaDB cannot
        // (an index key is at most 3,072 bytes; the search text alone may
        // be 2,800).
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_name",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_contact",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_phone",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_email",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_registered",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_tariff",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_search",
        "{sqlite} DROP INDEX IF EXISTS clients_dealer_tariff_name",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_name_all ON clients (dealer_id, name, id, tariff_id, registered_at, search)",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_contact_all ON clients (dealer_id, contact_name, id, tariff_id, registered_at, search)",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_phone_all ON clients (dealer_id, phone, id, tariff_id, registered_at, search)",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_email_all ON clients (dealer_id, email, id, tariff_id, registered_at, search)",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_registered_all ON clients (dealer_id, registered_at, id, tariff_id, search)",
        "{sqlite} CREATE INDEX IF NOT EXISTS clients_dealer_tariff_all ON clients (dealer_id, tariff_id, name, id, registered_at, search)",
        // MariaDB: a tariff's searched total read from one index.
        "{mysql} CREATE INDEX IF NOT EXISTS clients_dealer_tariff_search ON clients (dealer_id, tariff_id, search)",
    ],
    &[
        // Version 6, MariaDB: the dealer's sort indexes (and their
        // descending twins) hold the tariff and the registration time
        // after the id, as SQLite's do (all but the search text, which
        // does not fit a key): a page of a tariff or of a month walks one
        // index in order and reads no row it does not show, where it
        // looked up every row it passed (a month sorted by name: ~1,500
        // lookups, 5 ms). One statement: the table is rebuilt once.
        "{mysql} ALTER TABLE clients \
         DROP INDEX IF EXISTS clients_dealer_name, ADD INDEX clients_dealer_name (dealer_id, name, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_name_desc, ADD INDEX clients_dealer_name_desc (dealer_id, name DESC, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_contact, ADD INDEX clients_dealer_contact (dealer_id, contact_name, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_contact_desc, ADD INDEX clients_dealer_contact_desc (dealer_id, contact_name DESC, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_phone, ADD INDEX clients_dealer_phone (dealer_id, phone, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_phone_desc, ADD INDEX clients_dealer_phone_desc (dealer_id, phone DESC, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_email, ADD INDEX clients_dealer_email (dealer_id, email, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_email_desc, ADD INDEX clients_dealer_email_desc (dealer_id, email DESC, id, tariff_id, registered_at), \
         DROP INDEX IF EXISTS clients_dealer_registered, ADD INDEX clients_dealer_registered (dealer_id, registered_at, id, tariff_id), \
         DROP INDEX IF EXISTS clients_dealer_registered_desc, ADD INDEX clients_dealer_registered_desc (dealer_id, registered_at DESC, id, tariff_id)",
    ],
];

/// The schema version whose statements are followed by filling
/// `clients.search` for the rows already there.
pub const SEARCH_BACKFILL: usize = 2;

/// The schema version table (made before anything else).
pub const SCHEMA_VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_version (version INT NOT NULL, applied_at BIGINT NOT NULL)";

impl Dialect {
    /// A statement of [`MIGRATIONS`] for this database (empty: none here;
    /// `{mysql} ...` is a statement for MariaDB only, `{sqlite} ...` for
    /// SQLite only).
    pub fn render(self, template: &str) -> String {
        let template = match (
            self,
            template.strip_prefix("{mysql} "),
            template.strip_prefix("{sqlite} "),
        ) {
            (Dialect::Sqlite, Some(_), _) | (Dialect::Mysql, _, Some(_)) => return String::new(),
            (Dialect::Mysql, Some(t), _) | (Dialect::Sqlite, _, Some(t)) => t,
            (_, None, None) => template,
        };
        let mut out = String::with_capacity(template.len() + 64);
        let mut rest = template;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let end = start + rest[start..].find('}').expect("a closed placeholder");
            let word = &rest[start + 1..end];
            match (self, word.split_once(' ')) {
                (Dialect::Sqlite, _) if word == "id" => {
                    out.push_str("INTEGER PRIMARY KEY AUTOINCREMENT")
                }
                (Dialect::Mysql, _) if word == "id" => {
                    out.push_str("BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY")
                }
                (Dialect::Sqlite, Some(("str", _))) => out.push_str("TEXT"),
                (Dialect::Sqlite, Some(("bytes", _))) => out.push_str("TEXT"),
                (Dialect::Mysql, Some(("bytes", n))) => out.push_str(&format!("VARBINARY({n})")),
                (Dialect::Mysql, Some(("str", n))) => out.push_str(&format!("VARCHAR({n})")),
                (Dialect::Sqlite, _) if word == "text" => out.push_str("TEXT"),
                (Dialect::Mysql, _) if word == "text" => out.push_str("TEXT"),
                (Dialect::Sqlite, _) if word == "opts" => {}
                (Dialect::Mysql, _) if word == "opts" => {
                    out.push_str(" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
                }
                _ => panic!("unknown placeholder {{{word}}}"),
            }
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// Adds one to a login-failure counter, making it at 1 if absent
    /// (parameters: key, window start).
    pub fn count_failure(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "INSERT INTO login_failures (failure_key, window_start, count) VALUES (?, ?, 1) ON CONFLICT (failure_key, window_start) DO UPDATE SET count = count + 1"
            }
            Dialect::Mysql => {
                "INSERT INTO login_failures (failure_key, window_start, count) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE count = count + 1"
            }
        }
    }

    /// Adds to a dealer's count of clients of a tariff, making it if absent
    /// (parameters: dealer, tariff, the number to add).
    pub fn add_count(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "INSERT INTO client_counts (dealer_id, tariff_id, n) VALUES (?, ?, ?) ON CONFLICT (dealer_id, tariff_id) DO UPDATE SET n = n + excluded.n"
            }
            Dialect::Mysql => {
                "INSERT INTO client_counts (dealer_id, tariff_id, n) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
            }
        }
    }

    /// Bumps a dealer's generation (parameter: the dealer), making it if
    /// absent: every total remembered for the dealer is then stale.
    pub fn bump_generation(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "INSERT INTO client_generations (dealer_id, generation) VALUES (?, 1) ON CONFLICT (dealer_id) DO UPDATE SET generation = generation + 1"
            }
            Dialect::Mysql => {
                "INSERT INTO client_generations (dealer_id, generation) VALUES (?, 1) ON DUPLICATE KEY UPDATE generation = generation + 1"
            }
        }
    }

    /// Remembers a total in its slot, replacing what was there
    /// (parameters: dealer, slot, filter, generation, total, ids, now).
    pub fn store_count(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "INSERT INTO count_cache (dealer_id, slot, filter, generation, total, ids, made_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dealer_id, slot) DO UPDATE SET filter = excluded.filter, generation = excluded.generation, total = excluded.total, ids = excluded.ids, made_at = excluded.made_at"
            }
            Dialect::Mysql => {
                "INSERT INTO count_cache (dealer_id, slot, filter, generation, total, ids, made_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE filter = VALUES(filter), generation = VALUES(generation), total = VALUES(total), ids = VALUES(ids), made_at = VALUES(made_at)"
            }
        }
    }

    /// What a SELECT in a transaction ends with to lock the rows it reads
    /// until the end (SQLite's `BEGIN IMMEDIATE` holds the write lock).
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Mysql => " FOR UPDATE",
        }
    }

    /// Starts a transaction (SQLite takes the write lock at once, so two
    /// writers wait for each other instead of failing at commit).
    pub fn begin(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Mysql => "START TRANSACTION",
        }
    }

    /// The statement the id of the row just inserted is read with, on
    /// MariaDB (SQLite's interface answers it directly).
    pub const LAST_INSERT_ID: &'static str = "SELECT LAST_INSERT_ID()";
    /// Rows changed by the last statement, on MariaDB.
    pub const ROW_COUNT: &'static str = "SELECT ROW_COUNT()";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both() {
        let t = MIGRATIONS[0][0];
        assert_eq!(
            Dialect::Sqlite.render(t),
            "CREATE TABLE IF NOT EXISTS tariffs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, monthly_cents BIGINT NOT NULL, active INT NOT NULL DEFAULT 1)"
        );
        assert_eq!(
            Dialect::Mysql.render(t),
            "CREATE TABLE IF NOT EXISTS tariffs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(200) NOT NULL, monthly_cents BIGINT NOT NULL, active INT NOT NULL DEFAULT 1) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
        );
        for d in [Dialect::Sqlite, Dialect::Mysql] {
            for s in MIGRATIONS.iter().flat_map(|m| m.iter()) {
                let r = d.render(s);
                assert!(!r.contains('{') && !r.contains('}'), "{r}");
            }
        }
        let t = MIGRATIONS[2][1];
        assert_eq!(Dialect::Sqlite.render(t), "");
        assert!(Dialect::Mysql.render(t).starts_with("CREATE INDEX"));
    }

    #[test]
    fn every_sortable_column_has_a_dealer_index() {
        for d in [Dialect::Sqlite, Dialect::Mysql] {
            let all = MIGRATIONS
                .concat()
                .iter()
                .map(|s| d.render(s))
                .collect::<Vec<_>>()
                .join("\n");
            for col in [
                "name",
                "contact_name",
                "phone",
                "email",
                "tariff_id",
                "registered_at",
            ] {
                assert!(
                    all.contains(&format!("ON clients (dealer_id, {col})"))
                        || all.contains(&format!("ON clients (dealer_id, {col}, ")),
                    "{d:?} {col}"
                );
            }
        }
    }
}
