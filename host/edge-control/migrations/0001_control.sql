-- The control plane's state. One file for SQLite and MariaDB: only types
-- and syntax both read the same way (VARCHAR keys, BIGINT times in
-- milliseconds since the epoch, TEXT for JSON documents, ids made by the
-- application, no AUTOINCREMENT).

CREATE TABLE tenants (
    id VARCHAR(40) NOT NULL PRIMARY KEY,
    name VARCHAR(63) NOT NULL UNIQUE,
    quota TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- A host belongs to one tenant: the primary key says so.
CREATE TABLE tenant_hosts (
    host VARCHAR(255) NOT NULL PRIMARY KEY,
    tenant_id VARCHAR(40) NOT NULL,
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);

-- Who may call the API: API tokens now, console users later. A tenant
-- principal acts on its tenant's objects only; an operator on all.
CREATE TABLE principals (
    id VARCHAR(40) NOT NULL PRIMARY KEY,
    kind VARCHAR(16) NOT NULL,
    role VARCHAR(16) NOT NULL,
    tenant_id VARCHAR(40),
    name VARCHAR(255) NOT NULL,
    secret_hash VARCHAR(255) NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(40),
    expires_at BIGINT,
    revoked_at BIGINT,
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);

CREATE TABLE apps (
    id VARCHAR(40) NOT NULL PRIMARY KEY,
    tenant_id VARCHAR(40) NOT NULL,
    name VARCHAR(63) NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);

-- Components a tenant uploaded, by content digest ("sha256:HEX"). The
-- bytes live once in the artifact store, whoever uploaded them.
CREATE TABLE artifacts (
    tenant_id VARCHAR(40) NOT NULL,
    digest VARCHAR(71) NOT NULL,
    size BIGINT NOT NULL,
    imports TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, digest),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);

-- Immutable: a version's spec (components with digests and grants,
-- routes, variables) never changes once written.
CREATE TABLE versions (
    app_id VARCHAR(40) NOT NULL,
    number BIGINT NOT NULL,
    spec TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(40),
    PRIMARY KEY (app_id, number),
    FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE
);

-- Append-only: an app serves its deployment with the highest seq.
CREATE TABLE deployments (
    app_id VARCHAR(40) NOT NULL,
    seq BIGINT NOT NULL,
    spec TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(40),
    PRIMARY KEY (app_id, seq),
    FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE
);

-- Append-only: who did what, when, from where, and how it ended. No
-- foreign keys: the record outlives what it names.
CREATE TABLE audit (
    id VARCHAR(40) NOT NULL PRIMARY KEY,
    at BIGINT NOT NULL,
    principal_id VARCHAR(40),
    tenant_id VARCHAR(40),
    action VARCHAR(63) NOT NULL,
    target VARCHAR(255) NOT NULL,
    outcome VARCHAR(16) NOT NULL,
    detail TEXT NOT NULL,
    remote VARCHAR(64) NOT NULL
);
CREATE INDEX audit_tenant ON audit (tenant_id, at);
