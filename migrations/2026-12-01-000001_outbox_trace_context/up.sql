-- The W3C traceparent of the request that wrote an outbox row, so that the
-- relay's publish span can link back to it and the record carries the
-- request's trace to its consumers. NULL when tracing was off.
ALTER TABLE outbox ADD COLUMN trace_parent text;
