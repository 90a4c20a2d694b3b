-- Rows the relay set aside for good (their payload cannot be read), with the
-- error in last_error: they no longer hold up their chat's later rows nor
-- throttle the relay, and stay here for an operator to look at.
ALTER TABLE outbox ADD COLUMN dead_at timestamptz;

-- The relay's scan: pending rows that are not set aside.
DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE published_at IS NULL AND dead_at IS NULL;
