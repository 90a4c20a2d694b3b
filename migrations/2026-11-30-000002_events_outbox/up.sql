-- Events: the publish mode each write was made with (the audit reconciles
-- the topic with the rows per mode), and the transactional outbox.

ALTER TABLE chats ADD COLUMN publish_mode text NOT NULL DEFAULT 'off';
ALTER TABLE messages ADD COLUMN publish_mode text NOT NULL DEFAULT 'off';

CREATE TABLE outbox (
    -- Assigned at INSERT, before COMMIT: a lower id can commit after a
    -- higher one, so the relay tracks publication per row (published_at),
    -- never "the last id I published".
    id            bigserial   PRIMARY KEY,
    event_id      uuid        NOT NULL UNIQUE,
    chat_id       uuid        NOT NULL,
    -- Two relays never publish the same chat's events at once: they take
    -- pg_try_advisory_xact_lock(2, lock_key) on the rows they claim.
    lock_key      integer     NOT NULL,
    event_type    text        NOT NULL,
    payload       text        NOT NULL,
    created_at    timestamptz NOT NULL,
    published_at  timestamptz,
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text
);

-- What the relay scans: pending rows in id order.
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE published_at IS NULL;
-- Retention: published rows by age.
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
