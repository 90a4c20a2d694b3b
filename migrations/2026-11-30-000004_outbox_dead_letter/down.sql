DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE published_at IS NULL;
ALTER TABLE outbox DROP COLUMN dead_at;
