-- Browser sessions of users who logged in with a password (the web
-- console). The cookie carries the secret; only its SHA-256 is stored.
CREATE TABLE sessions (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    principal_id VARCHAR(40) NOT NULL,
    csrf_token VARCHAR(64) NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    FOREIGN KEY (principal_id) REFERENCES principals (id) ON DELETE CASCADE
);

-- A user's login name, unique across the node.
CREATE TABLE user_logins (
    login VARCHAR(255) NOT NULL PRIMARY KEY,
    principal_id VARCHAR(40) NOT NULL,
    FOREIGN KEY (principal_id) REFERENCES principals (id) ON DELETE CASCADE
);
