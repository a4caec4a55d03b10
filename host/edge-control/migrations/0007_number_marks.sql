-- The highest number a table of numbered rows (an app's versions, a
-- site's rule sets) gave an owner, written when rows are deleted to make
-- room at the quota: a number is never given twice, so "version 7" in an
-- audit entry or a rollback is always the same one.
CREATE TABLE number_marks (
    tbl VARCHAR(40) NOT NULL,
    owner VARCHAR(40) NOT NULL,
    last BIGINT NOT NULL,
    PRIMARY KEY (tbl, owner)
);
