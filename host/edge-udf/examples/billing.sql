-- Example billing schema: every row is signed by a trigger on insert and
-- update, so a change made behind the application's back (or with the
-- triggers dropped) shows up in a verification query.
--
--   edge udf install --no-process --socket /run/mysqld/mysqld.sock
-- (the signing functions only: MariaDB cannot restrict who calls a UDF, so
-- a database that needs no programs should not have the process ones)
--   mariadb billing < billing.sql
-- with `hs256 billing <base64 secret>` in the server's EDGE_UDF_KEY_FILE.

CREATE TABLE IF NOT EXISTS billing_rows (
  id        BIGINT PRIMARY KEY,
  dealer    VARCHAR(64) NOT NULL,
  amount    DECIMAL(12, 2) NOT NULL,
  note      TEXT NULL,
  billed_at DATETIME NOT NULL,
  sig       CHAR(64) NOT NULL
);

DELIMITER //
CREATE OR REPLACE TRIGGER billing_rows_sign_insert BEFORE INSERT ON billing_rows
FOR EACH ROW
BEGIN
  SET NEW.sig = edge_sign_row('billing', NEW.id, NEW.dealer, NEW.amount, NEW.note, NEW.billed_at);
END//
CREATE OR REPLACE TRIGGER billing_rows_sign_update BEFORE UPDATE ON billing_rows
FOR EACH ROW
BEGIN
  SET NEW.sig = edge_sign_row('billing', NEW.id, NEW.dealer, NEW.amount, NEW.note, NEW.billed_at);
END//
DELIMITER ;

-- Rows whose signature does not match their contents:
CREATE OR REPLACE VIEW billing_rows_tampered AS
  SELECT id FROM billing_rows
  WHERE NOT edge_verify_row('billing', sig, id, dealer, amount, note, billed_at);
