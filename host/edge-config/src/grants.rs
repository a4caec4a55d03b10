//! Which manifest key grants which of Spin's capability interfaces: one
//! table for the host (what it logs when it links a component) and the
//! control plane (what it notes when a version is made).

/// What grants an interface family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantKey {
    /// `key_value_stores` names some store.
    KeyValueStores,
    /// `sqlite_databases` names some database.
    SqliteDatabases,
    /// `allowed_outbound_hosts` may reach one of these schemes.
    Outbound(&'static [&'static str]),
}

/// One family of interfaces and its grant.
#[derive(Debug)]
pub struct InterfaceGrant {
    /// Interface name prefixes.
    pub prefixes: &'static [&'static str],
    /// What grants them.
    pub key: GrantKey,
    /// How to grant them, for the host's log.
    pub how: &'static str,
    /// What a manifest entry without the grant lacks, for version notes.
    pub lacks: &'static str,
}

impl InterfaceGrant {
    /// The grant of `interface`, if a manifest key grants it.
    pub fn of(interface: &str) -> Option<&'static InterfaceGrant> {
        INTERFACE_GRANTS
            .iter()
            .find(|g| g.prefixes.iter().any(|p| interface.starts_with(p)))
    }
}

/// Spin's capability interfaces by the manifest key that grants them.
pub const INTERFACE_GRANTS: &[InterfaceGrant] = &[
    InterfaceGrant {
        prefixes: &[
            "wasi:keyvalue/",
            "fermyon:spin/key-value",
            "spin:key-value/",
        ],
        key: GrantKey::KeyValueStores,
        how: "list the stores it opens in `key_value_stores`",
        lacks: "names no key_value_stores (add the store labels it opens)",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/sqlite", "spin:sqlite/"],
        key: GrantKey::SqliteDatabases,
        how: "list the databases it opens in `sqlite_databases`",
        lacks: "names no sqlite_databases (add the database labels it opens)",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/redis", "spin:redis/"],
        key: GrantKey::Outbound(&["redis"]),
        how: "allow the servers it connects to in `allowed_outbound_hosts` (\"redis://host:port\")",
        lacks: "allows no redis:// host in allowed_outbound_hosts",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/mqtt", "spin:mqtt/"],
        key: GrantKey::Outbound(&["mqtt"]),
        how: "allow the brokers it connects to in `allowed_outbound_hosts` (\"mqtt://host:port\")",
        lacks: "allows no mqtt:// host in allowed_outbound_hosts",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/postgres", "spin:postgres/"],
        key: GrantKey::Outbound(&["postgres"]),
        how: "allow the servers it connects to in `allowed_outbound_hosts` (\"postgres://host:port\")",
        lacks: "allows no postgres:// host in allowed_outbound_hosts",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/mysql", "spin:mysql/"],
        key: GrantKey::Outbound(&["mysql"]),
        how: "allow the servers it connects to in `allowed_outbound_hosts` (\"mysql://host:port\")",
        lacks: "allows no mysql:// host in allowed_outbound_hosts",
    },
    InterfaceGrant {
        prefixes: &["fermyon:spin/rdbms-types"],
        key: GrantKey::Outbound(&["postgres", "mysql"]),
        how: "allow the servers it connects to in `allowed_outbound_hosts` (\"postgres://host:port\" or \"mysql://host:port\")",
        lacks: "allows no postgres:// or mysql:// host in allowed_outbound_hosts",
    },
];
