//! One connection per request, to Spin's SQLite (the default database) or,
//! when the `db_url` variable is set, to MariaDB through Spin's MySQL
//! interface. Both answer rows as [`Val`]s; the statements are the same
//! text on both (`billing_core::dialect` holds the few that differ).

use billing_core::Param;
use billing_core::counts::{self, CacheKey};
use billing_core::dialect::{Dialect, MIGRATIONS, SCHEMA_VERSION_TABLE, SEARCH_BACKFILL};
use billing_core::query::ClientQuery;
use billing_core::query::search_text;
use spin_sdk::{mysql, sqlite};

/// A value read from either database.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Val {
    /// As an integer (0 for NULL or text that is not one).
    pub fn int(&self) -> i64 {
        match self {
            Val::Int(i) => *i,
            Val::Real(f) => *f as i64,
            Val::Text(t) => t.parse().unwrap_or_default(),
            Val::Null => 0,
        }
    }

    /// As an integer, NULL as `None`.
    pub fn opt_int(&self) -> Option<i64> {
        match self {
            Val::Null => None,
            v => Some(v.int()),
        }
    }

    /// The text, borrowed ("" for anything but text).
    pub fn str(&self) -> &str {
        match self {
            Val::Text(t) => t,
            _ => "",
        }
    }

    /// As text ("" for NULL).
    pub fn text(&self) -> String {
        match self {
            Val::Text(t) => t.clone(),
            Val::Int(i) => i.to_string(),
            Val::Real(f) => f.to_string(),
            Val::Null => String::new(),
        }
    }
}

/// A listing's total, as [`Db::remembered_total`] finds it.
pub struct Total {
    /// The matching rows.
    pub total: i64,
    /// The dealer's clients.
    pub rows: i64,
    /// The matching ids, when they were few enough to keep.
    pub ids: Option<Vec<i64>>,
}

/// A database failure: the detail is logged, the client gets fixed words.
#[derive(Debug)]
pub struct DbError(pub String);

impl DbError {
    /// Whether a unique key refused the write (a row made at the same
    /// moment by another request): SQLite's and MariaDB's words for it.
    pub fn is_unique_violation(&self) -> bool {
        self.0.contains("UNIQUE constraint failed") || self.0.contains("Duplicate entry")
    }
}

impl From<DbError> for billing_core::ApiError {
    fn from(e: DbError) -> Self {
        eprintln!("billing: database error: {}", e.0);
        billing_core::ApiError::internal()
    }
}

enum Conn {
    Sqlite(sqlite::Connection),
    Mysql(mysql::Connection),
}

/// An open database.
pub struct Db {
    conn: Conn,
    /// Which one it is.
    pub dialect: Dialect,
}

fn sqlite_param(p: &Param) -> sqlite::Value {
    match p {
        Param::Int(i) => sqlite::Value::Integer(*i),
        Param::Text(t) => sqlite::Value::Text(t.clone()),
        Param::Null => sqlite::Value::Null,
    }
}

fn mysql_param(p: &Param) -> mysql::ParameterValue {
    match p {
        Param::Int(i) => mysql::ParameterValue::Int64(*i),
        Param::Text(t) => mysql::ParameterValue::Str(t.clone()),
        Param::Null => mysql::ParameterValue::DbNull,
    }
}

fn from_sqlite(v: &sqlite::Value) -> Val {
    match v {
        sqlite::Value::Integer(i) => Val::Int(*i),
        sqlite::Value::Real(f) => Val::Real(*f),
        sqlite::Value::Text(t) => Val::Text(t.clone()),
        sqlite::Value::Blob(b) => Val::Text(String::from_utf8_lossy(b).into_owned()),
        sqlite::Value::Null => Val::Null,
    }
}

fn from_mysql(v: &mysql::DbValue) -> Val {
    use mysql::DbValue as D;
    match v {
        D::Boolean(b) => Val::Int(*b as i64),
        D::Int8(i) => Val::Int(*i as i64),
        D::Int16(i) => Val::Int(*i as i64),
        D::Int32(i) => Val::Int(*i as i64),
        D::Int64(i) => Val::Int(*i),
        D::Uint8(i) => Val::Int(*i as i64),
        D::Uint16(i) => Val::Int(*i as i64),
        D::Uint32(i) => Val::Int(*i as i64),
        D::Uint64(i) => Val::Int(*i as i64),
        D::Floating32(f) => Val::Real(*f as f64),
        D::Floating64(f) => Val::Real(*f),
        D::Str(s) => Val::Text(s.clone()),
        D::Binary(b) => Val::Text(String::from_utf8_lossy(b).into_owned()),
        D::DbNull | D::Unsupported => Val::Null,
    }
}

impl Db {
    /// Opens the database `db_url` names (`mysql://...`), or SQLite's
    /// default one when it is empty, and brings its schema up to date.
    pub async fn open(db_url: &str) -> Result<Db, DbError> {
        let db = Self::connect(db_url).await?;
        db.migrate().await?;
        Ok(db)
    }

    /// Opens the database without looking at its schema: the caller's
    /// first statement does (`auth::session` reads the schema's version
    /// with the session, and migrates when it is behind).
    pub async fn connect(db_url: &str) -> Result<Db, DbError> {
        let db = if db_url.is_empty() {
            let c = sqlite::Connection::open_default()
                .await
                .map_err(|e| DbError(format!("open sqlite: {e:?}")))?;
            Db {
                conn: Conn::Sqlite(c),
                dialect: Dialect::Sqlite,
            }
        } else {
            let c = mysql::Connection::open(db_url)
                .await
                .map_err(|e| DbError(format!("open mysql: {e}")))?;
            Db {
                conn: Conn::Mysql(c),
                dialect: Dialect::Mysql,
            }
        };
        Ok(db)
    }

    /// Brings the schema up to date (nothing when it is).
    pub async fn migrate(&self) -> Result<(), DbError> {
        if self.schema_version().await? >= MIGRATIONS.len() as i64 {
            return Ok(());
        }
        // Behind: one request migrates, others wait for it (SQLite: the
        // write lock; MariaDB, whose DDL commits by itself: a named lock),
        // then find the version again.
        match self.dialect {
            Dialect::Sqlite => self.begin().await?,
            Dialect::Mysql => {
                let got = self
                    .scalar("SELECT GET_LOCK('billing_migrate', 60)", &[])
                    .await?;
                if got != 1 {
                    return Err(DbError("the schema migration lock was not granted".into()));
                }
            }
        }
        let r = self.migrate_locked().await;
        match (self.dialect, &r) {
            (Dialect::Sqlite, Ok(())) => self.commit().await?,
            (Dialect::Sqlite, Err(_)) => self.rollback().await,
            (Dialect::Mysql, _) => {
                self.exec("SELECT RELEASE_LOCK('billing_migrate')", &[])
                    .await
                    .map(drop)?;
            }
        }
        r
    }

    /// The schema's version (0 for an empty database).
    async fn schema_version(&self) -> Result<i64, DbError> {
        match self
            .rows("SELECT MAX(version) FROM schema_version", &[])
            .await
        {
            Ok(r) => Ok(r.first().and_then(|r| r[0].opt_int()).unwrap_or(0)),
            Err(_) => {
                self.exec(SCHEMA_VERSION_TABLE, &[]).await?;
                Ok(0)
            }
        }
    }

    async fn migrate_locked(&self) -> Result<(), DbError> {
        let current = self.schema_version().await?;
        for (i, statements) in MIGRATIONS.iter().enumerate() {
            let version = i as i64 + 1;
            if version <= current {
                continue;
            }
            for s in statements.iter() {
                let s = self.dialect.render(s);
                if !s.is_empty() {
                    self.exec(&s, &[]).await?;
                }
            }
            if version as usize == SEARCH_BACKFILL {
                self.backfill_search().await?;
            }
            self.exec(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                &[Param::Int(version), Param::Int(crate::now_ms())],
            )
            .await?;
        }
        Ok(())
    }

    /// Fills `clients.search` for the rows made before it existed.
    async fn backfill_search(&self) -> Result<(), DbError> {
        let mut after = 0;
        loop {
            let rows = self
                .rows(
                    "SELECT id, name, contact_name, phone, email FROM clients WHERE id > ? ORDER BY id LIMIT 500",
                    &[Param::Int(after)],
                )
                .await?;
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = last[0].int();
            let mut cases = String::new();
            let mut params = Vec::with_capacity(rows.len() * 3);
            for r in &rows {
                cases.push_str(" WHEN ? THEN ?");
                params.push(Param::Int(r[0].int()));
                params.push(Param::Text(search_text(
                    &r[1].text(),
                    &r[2].text(),
                    &r[3].text(),
                    &r[4].text(),
                )));
            }
            let ids = vec!["?"; rows.len()].join(", ");
            params.extend(rows.iter().map(|r| Param::Int(r[0].int())));
            self.exec(
                &format!("UPDATE clients SET search = CASE id{cases} END WHERE id IN ({ids})"),
                &params,
            )
            .await?;
        }
    }

    /// Rows of a statement.
    pub async fn rows(&self, sql: &str, params: &[Param]) -> Result<Vec<Vec<Val>>, DbError> {
        match &self.conn {
            Conn::Sqlite(c) => {
                let r = c
                    .execute(sql, params.iter().map(sqlite_param))
                    .await
                    .map_err(|e| DbError(format!("{e:?} in {sql}")))?;
                let rows = r
                    .collect()
                    .await
                    .map_err(|e| DbError(format!("{e:?} in {sql}")))?;
                Ok(rows
                    .iter()
                    .map(|row| row.values.iter().map(from_sqlite).collect())
                    .collect())
            }
            Conn::Mysql(c) => {
                let params: Vec<_> = params.iter().map(mysql_param).collect();
                let r = c
                    .query(sql, params)
                    .await
                    .map_err(|e| DbError(format!("{e} in {sql}")))?;
                let width = r.columns().len();
                let rows = r
                    .collect()
                    .await
                    .map_err(|e| DbError(format!("{e} in {sql}")))?;
                Ok(rows
                    .iter()
                    .map(|row| (0..width).map(|i| from_mysql(&row[i])).collect())
                    .collect())
            }
        }
    }

    /// One row, if any.
    pub async fn row(&self, sql: &str, params: &[Param]) -> Result<Option<Vec<Val>>, DbError> {
        Ok(self.rows(sql, params).await?.into_iter().next())
    }

    /// The first column of the first row as an integer (a count).
    pub async fn scalar(&self, sql: &str, params: &[Param]) -> Result<i64, DbError> {
        Ok(self
            .row(sql, params)
            .await?
            .and_then(|r| r.first().map(Val::int))
            .unwrap_or(0))
    }

    /// Runs a statement without rows; answers the rows it changed.
    pub async fn exec(&self, sql: &str, params: &[Param]) -> Result<u64, DbError> {
        match &self.conn {
            Conn::Sqlite(c) => {
                let r = c
                    .execute(sql, params.iter().map(sqlite_param))
                    .await
                    .map_err(|e| DbError(format!("{e:?} in {sql}")))?;
                r.collect()
                    .await
                    .map_err(|e| DbError(format!("{e:?} in {sql}")))?;
                Ok(c.changes().await)
            }
            Conn::Mysql(c) => {
                let p: Vec<_> = params.iter().map(mysql_param).collect();
                c.execute(sql, p)
                    .await
                    .map_err(|e| DbError(format!("{e} in {sql}")))?;
                Ok(self.scalar(Dialect::ROW_COUNT, &[]).await?.max(0) as u64)
            }
        }
    }

    /// Runs an INSERT; answers the new row's id.
    pub async fn insert(&self, sql: &str, params: &[Param]) -> Result<i64, DbError> {
        self.exec(sql, params).await?;
        match &self.conn {
            Conn::Sqlite(c) => Ok(c.last_insert_rowid().await),
            Conn::Mysql(_) => self.scalar(Dialect::LAST_INSERT_ID, &[]).await,
        }
    }

    /// Adds `n` to `dealer`'s count of clients of `tariff` (in the
    /// transaction of the change that makes it so).
    pub async fn add_count(&self, dealer: i64, tariff: i64, n: i64) -> Result<(), DbError> {
        self.exec(
            self.dialect.add_count(),
            &[Param::Int(dealer), Param::Int(tariff), Param::Int(n)],
        )
        .await
        .map(drop)
    }

    /// Makes every total remembered for `dealer` stale (in the
    /// transaction of the change to the dealer's clients).
    pub async fn bump_generation(&self, dealer: i64) -> Result<(), DbError> {
        self.exec(self.dialect.bump_generation(), &[Param::Int(dealer)])
            .await
            .map(drop)
    }

    /// The total of the listing `q` for a session scoped to `scope`:
    /// remembered ([`Self::remembered_total`]) where `counts::key` keeps
    /// it, else counted (a sum of `client_counts`, or every dealer's rows).
    pub async fn listing_total(
        &self,
        q: &ClientQuery,
        scope: Option<i64>,
    ) -> Result<Total, DbError> {
        if let Some(key) = counts::key(q, scope) {
            return self.remembered_total(&key, q, scope).await;
        }
        let (sql, p) = q.count(scope);
        Ok(Total {
            total: self.scalar(&sql, &p).await?,
            rows: 0,
            ids: None,
        })
    }

    /// The total of the listing `q` (for a session scoped to `scope`),
    /// from where `key` remembers it if that is still valid, else counted
    /// and remembered there (a failure to remember is logged, not
    /// answered: the total is right either way). The generation is read
    /// before the count, so a change committed in between leaves a stale
    /// entry, never a wrong one.
    async fn remembered_total(
        &self,
        key: &CacheKey,
        q: &ClientQuery,
        scope: Option<i64>,
    ) -> Result<Total, DbError> {
        let now = crate::now_ms();
        let found = self
            .row(counts::LOOKUP, &counts::lookup_params(key, now))
            .await?
            .unwrap_or_default();
        let (generation, rows) = (
            found.first().map(Val::int).unwrap_or(0),
            found.get(2).map(Val::int).unwrap_or(0),
        );
        if let Some(total) = found.get(1).and_then(Val::opt_int) {
            let ids = match found.get(3) {
                Some(Val::Text(t)) => counts::parse_ids(t),
                _ => None,
            };
            return Ok(Total { total, rows, ids });
        }
        let (total, ids) = if self.dialect == Dialect::Mysql && q.q.is_some() {
            // A search on MariaDB: its matches, if few, read once for the
            // total and for every page of it.
            let (sql, p) = q.matching_ids(scope);
            let sql = format!("{sql} LIMIT {}", counts::MAX_IDS + 1);
            let ids: Vec<i64> = self
                .rows(&sql, &p)
                .await?
                .iter()
                .map(|r| r[0].int())
                .collect();
            if ids.len() > counts::MAX_IDS {
                let (sql, p) = q.count(scope);
                (self.scalar(&sql, &p).await?, None)
            } else {
                (ids.len() as i64, Some(ids))
            }
        } else {
            let (sql, p) = q.count(scope);
            (self.scalar(&sql, &p).await?, None)
        };
        let store = counts::store_params(key, generation, total, ids.as_deref(), now);
        if let Err(e) = self.exec(self.dialect.store_count(), &store).await {
            eprintln!("billing: a total was not remembered: {}", e.0);
        }
        Ok(Total { total, rows, ids })
    }

    /// Runs `f` in a transaction: committed if it answers Ok, else rolled back.
    pub async fn transaction<T, E: From<DbError>>(
        &self,
        f: impl AsyncFnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.begin().await?;
        match f().await {
            Ok(v) => {
                self.commit().await?;
                Ok(v)
            }
            Err(e) => {
                self.rollback().await;
                Err(e)
            }
        }
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<(), DbError> {
        self.exec(self.dialect.begin(), &[]).await.map(drop)
    }

    /// Commits it.
    pub async fn commit(&self) -> Result<(), DbError> {
        self.exec("COMMIT", &[]).await.map(drop)
    }

    /// Rolls it back (errors ignored: the connection ends with the request).
    pub async fn rollback(&self) {
        let _ = self.exec("ROLLBACK", &[]).await;
    }
}
