-- Files of Spin apps' components (Spin's `files`), stored by content:
-- what each tenant uploaded, so a version names only its own tenant's.
CREATE TABLE app_files (
    tenant_id VARCHAR(40) NOT NULL,
    digest VARCHAR(71) NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, digest),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);
