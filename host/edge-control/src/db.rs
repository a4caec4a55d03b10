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
            // A version's spec lists its components' files: MariaDB's TEXT
            // (64 KiB) is too small for it (SQLite's TEXT has no such
            // limit, and the migrations are the same for both).
            let narrow: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'versions' AND COLUMN_NAME = 'spec' AND DATA_TYPE = 'text'",
            )
            .fetch_one(&pool)
            .await
            .map_err(|source| OpenError::Sql {
                url: shown.clone(),
                source,
            })?;
            if narrow > 0 {
                sqlx::query("ALTER TABLE versions MODIFY spec MEDIUMTEXT NOT NULL")
                    .execute(&pool)
                    .await
                    .map_err(|source| OpenError::Sql { url: shown, source })?;
            }
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
