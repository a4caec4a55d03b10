-- Values of app variables set through the API. A secret's value is never
-- returned by the API.
CREATE TABLE app_variables (
    app_id VARCHAR(40) NOT NULL,
    name VARCHAR(63) NOT NULL,
    value TEXT NOT NULL,
    secret BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, name),
    FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE
);

-- Programs a tenant's components may run through the sidecar: granted by
-- an operator, each within the node's [sidecar] allow list.
CREATE TABLE tenant_programs (
    tenant_id VARCHAR(40) NOT NULL,
    program VARCHAR(255) NOT NULL,
    PRIMARY KEY (tenant_id, program),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);
