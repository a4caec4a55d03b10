//! The database: SQLite in the data directory by default, MariaDB (or
//! MySQL) in production, behind sqlx's `Any` driver so that every query is
//! written once. The migrations in `migrations/` use only what both read
//! the same way; [`Db::open`] runs them.

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};
use std::str::FromStr;
use std::time::Duration;

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL names no database sqlx can reach.
    #[error(
        "database URL {url:?}: {reason} (allowed: sqlite://PATH, mysql://USER@HOST/DB or mysql://USER@localhost/DB?socket=PATH)"
    )]
    Url {
        /// The URL, with any password removed.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Connecting or migrating failed.
    #[error("database {url}: {source}")]
    Sql {
        /// The URL, with any password removed.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("database {url}: migrating: {source}")]
    Migrate {
        /// The URL, with any password removed.
        url: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

/// A connection pool with the schema in place.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

/// Which database is behind the pool: only where their SQL differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite.
    Sqlite,
    /// MariaDB or MySQL.
    Mysql,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

impl Db {
    /// Opens `url` (`sqlite://PATH` is created when missing) and brings its
    /// schema up to date.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        sqlx::any::install_default_drivers();
        let shown = redact(url);
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
            Backend::Mysql
        } else {
            return Err(OpenError::Url {
                url: shown,
                reason: "unknown scheme".into(),
            });
        };
        let url = match backend {
            // Created when missing; WAL lets the API read while a deploy writes.
            Backend::Sqlite if !url.contains('?') => format!("{url}?mode=rwc"),
            Backend::Mysql => url.replacen("mariadb:", "mysql:", 1),
            _ => url.to_string(),
        };
        let options = AnyConnectOptions::from_str(&url).map_err(|e| OpenError::Url {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
        if backend == Backend::Mysql {
            // On a connection of its own, closed before the pool opens
            // any: a MariaDB connection keeps the database's character set
            // as it was when it chose the database, so a table made on one
            // opened before the change would still be latin1 (seen: a
            // migration on such a connection, then "Incorrect string
            // value" for a rule set in Japanese).
            let once = AnyPoolOptions::new()
                .max_connections(1)
                .connect_with(options.clone())
                .await
                .map_err(|source| OpenError::Sql {
                    url: shown.clone(),
                    source,
                })?;
            let prepared = prepare_mariadb(&once).await;
            once.close().await;
            prepared.map_err(|source| OpenError::Sql {
                url: shown.clone(),
                source,
            })?;
        }
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                // One writer at a time either way; a few readers beside it.
                Backend::Sqlite => 4,
                Backend::Mysql => 8,
            })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        conn.execute("PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL")
                            .await?;
                    } else {
                        conn.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'")
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(|source| OpenError::Sql {
                url: shown.clone(),
                source,
            })?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| OpenError::Migrate {
                url: shown.clone(),
                source,
            })?;
        if backend == Backend::Mysql {
            widen_mariadb(&pool)
                .await
                .map_err(|source| OpenError::Sql { url: shown, source })?;
        }
        Ok(Self { pool, backend })
    }

    /// The pool, for queries.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }
}

/// Columns that hold documents as large as the API takes (a version's
/// spec and its files, a rule set of up to 1,000 rules, a 64 KiB variable
/// value, site settings, an audit entry's detail): MariaDB's TEXT holds 64
/// KiB (SQLite's TEXT has no such limit, and the migrations are the same
/// for both).
const LARGE_COLUMNS: &[(&str, &str)] = &[
    ("versions", "spec"),
    ("rule_sets", "rules"),
    ("app_variables", "value"),
    ("tenant_variables", "value"),
    ("sites", "settings"),
    ("audit", "detail"),
    ("artifacts", "imports"),
];

/// Makes a MariaDB schema hold what the API takes, before the migrations
/// run: a database whose character set is not utf8mb4 (a server whose
/// default is latin1) gets utf8mb4, compared byte for byte as on SQLite,
/// for the tables still to be made; tables made before in another
/// character set are named in the log (their keys tie them together, so
/// they are converted by hand, with the node stopped).
async fn prepare_mariadb(pool: &AnyPool) -> Result<(), sqlx::Error> {
    let charset: String = sqlx::query_scalar(
        "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = DATABASE()",
    )
    .fetch_one(pool)
    .await?;
    if charset != "utf8mb4" {
        sqlx::query("ALTER DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            .execute(pool)
            .await?;
    }
    let narrow: Vec<String> = sqlx::query_scalar(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' AND TABLE_COLLATION NOT LIKE 'utf8mb4%' AND TABLE_NAME <> '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await?;
    if !narrow.is_empty() {
        tracing::warn!(
            tables = %narrow.join(", "),
            "control plane tables not in utf8mb4: text outside their character set is refused (convert them: ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4, foreign keys dropped and made again)"
        );
    }
    Ok(())
}

/// Makes [`LARGE_COLUMNS`] MEDIUMTEXT (16 MiB) on MariaDB, after the
/// migrations; each once (the schema says whether it is due).
async fn widen_mariadb(pool: &AnyPool) -> Result<(), sqlx::Error> {
    for (table, column) in LARGE_COLUMNS {
        let narrow: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ? AND DATA_TYPE = 'text'",
        )
        .bind(*table)
        .bind(*column)
        .fetch_one(pool)
        .await?;
        if narrow > 0 {
            sqlx::query(&format!(
                "ALTER TABLE `{table}` MODIFY `{column}` MEDIUMTEXT NOT NULL"
            ))
            .execute(pool)
            .await?;
        }
    }
    Ok(())
}

/// `url` without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((auth, host)) if auth.contains(':') => {
            let user = auth.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_string(),
    }
}

/// Milliseconds since the epoch, as the schema stores times.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redact("mysql://edge:s3cret@db.internal/edge"),
            "mysql://edge:***@db.internal/edge"
        );
        assert_eq!(
            redact("sqlite:///var/edge/control.db"),
            "sqlite:///var/edge/control.db"
        );
    }
}
