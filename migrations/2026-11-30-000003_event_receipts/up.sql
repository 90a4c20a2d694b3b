-- The receipt ledger: for every event the broker acknowledged, the
-- partition and offset of its delivery report. The audit compares them with
-- what the topic holds, so it can tell an event chatlab never got
-- acknowledged (chatlab's loss) from one the broker acknowledged and does
-- not serve (the broker's). One row per acknowledgement: an event the relay
-- published twice has two, and two events at one offset show the broker
-- giving that offset twice.
CREATE TABLE event_receipts (
    id            bigserial   PRIMARY KEY,
    event_id      uuid        NOT NULL,
    -- The chat (chat.created) or message (message.sent) the event announces.
    subject_id    uuid        NOT NULL,
    publish_mode  text        NOT NULL,
    topic         text        NOT NULL,
    "partition"   integer     NOT NULL,
    -- Below 0 when the broker acknowledged without naming an offset.
    "offset"      bigint      NOT NULL,
    -- The event's own timestamp: the audit's window applies to it as it
    -- does to rows and records.
    occurred_at   timestamptz NOT NULL,
    -- When the ledger wrote the receipt (within its flush period of the ack).
    recorded_at   timestamptz NOT NULL DEFAULT now()
);

-- The audit reads a topic's receipts by window.
CREATE INDEX event_receipts_window_idx ON event_receipts (topic, occurred_at);
-- Retention deletes by age.
CREATE INDEX event_receipts_recorded_at_idx ON event_receipts (recorded_at);
