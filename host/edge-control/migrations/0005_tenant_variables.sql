-- Variable values for every app of a tenant (an app's own value wins).
CREATE TABLE tenant_variables (
    tenant_id VARCHAR(40) NOT NULL,
    name VARCHAR(63) NOT NULL,
    value TEXT NOT NULL,
    secret BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);
