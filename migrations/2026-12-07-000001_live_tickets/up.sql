-- Single-use tickets that open a live stream where a browser cannot send
-- `Authorization` (`GET /v1/events?ticket=`, `GET /v1/ws?ticket=`). Only
-- the ticket's SHA-256 is kept, so a row read out of the database opens
-- nothing. Redeeming deletes the row: a ticket opens one stream, once, on
-- whichever instance it is presented to. A user's tickets go with the user.
CREATE TABLE live_tickets (
    ticket_hash  bytea        NOT NULL,
    user_id      uuid         NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at   timestamptz  NOT NULL,
    CONSTRAINT live_tickets_pkey PRIMARY KEY (ticket_hash)
);

-- Expired tickets nobody redeemed are deleted as new ones are issued.
CREATE INDEX live_tickets_expires_at ON live_tickets (expires_at);
CREATE INDEX live_tickets_user_id ON live_tickets (user_id);
