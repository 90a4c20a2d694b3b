-- Idempotency keys: a write sent with `Idempotency-Key` claims its
-- (user, key) row in the write's own transaction, so a crash cannot keep
-- one without the other. A retry finds the row and gets the stored
-- response instead of a second write. `fingerprint` is the SHA-256 of the
-- request (operation, path, canonical body): the same key with another
-- request is refused. Rows older than the retention (24 h by default) are
-- swept, and a claim may take over an expired row. An import, which commits
-- chunk by chunk, claims one row per chunk (`<key> chunk <n>`, a space no
-- client key holds) in each chunk's transaction, and the whole job's row when
-- it has finished.
CREATE TABLE idempotency_keys (
    user_id      uuid        NOT NULL,
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 300),
    fingerprint  bytea       NOT NULL,
    status       smallint    NOT NULL CHECK (status BETWEEN 200 AND 299),
    response     text        NOT NULL,
    created_at   timestamptz NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, key)
);

-- The retention sweep: DELETE ... WHERE created_at < cutoff.
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);
