ALTER TABLE outbox DROP COLUMN trace_parent;
