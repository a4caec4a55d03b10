-- Sites proxied through the rewriter, and their rule sets: versioned and
-- immutable like app versions, one of them deployed at a time.

CREATE TABLE sites (
    id VARCHAR(40) NOT NULL PRIMARY KEY,
    tenant_id VARCHAR(40) NOT NULL,
    name VARCHAR(63) NOT NULL,
    settings TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);

-- A host belongs to one site.
CREATE TABLE site_hosts (
    host VARCHAR(255) NOT NULL PRIMARY KEY,
    site_id VARCHAR(40) NOT NULL,
    FOREIGN KEY (site_id) REFERENCES sites (id) ON DELETE CASCADE
);

CREATE TABLE rule_sets (
    site_id VARCHAR(40) NOT NULL,
    number BIGINT NOT NULL,
    rules TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(40),
    PRIMARY KEY (site_id, number),
    FOREIGN KEY (site_id) REFERENCES sites (id) ON DELETE CASCADE
);

-- Append-only: a site applies the rule set of its highest seq.
CREATE TABLE site_deployments (
    site_id VARCHAR(40) NOT NULL,
    seq BIGINT NOT NULL,
    rules_version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(40),
    PRIMARY KEY (site_id, seq),
    FOREIGN KEY (site_id) REFERENCES sites (id) ON DELETE CASCADE
);
