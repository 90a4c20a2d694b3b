-- Unread state: read markers on the member rows, and the per-recipient
-- rows that MESSAGE_FANOUT=inbox writes.

-- The newest message the member has read (a message of the chat); NULL
-- before their first read. Only ever moves forward (ids are UUIDv7, so id
-- order is creation order).
ALTER TABLE chat_members ADD COLUMN read_up_to uuid;

-- One row per talk message per member but its sender, written in the
-- message's transaction when the send fans out on write. A member added
-- later has rows only for what was sent after they joined; a removed
-- member's rows are deleted in the removal's transaction. A send locks the
-- chat row (FOR SHARE) before it reads the members, so a membership change
-- and a fan-out never interleave.
--
-- No foreign keys: a key to chat_members would lock each recipient's member
-- row (KEY SHARE, a WAL record per row, and a MultiXact wherever two sends
-- lock the same member) and probe its index, a cost per recipient that the
-- lock on the chat row makes needless; a key to messages would cost a probe
-- per row and an index to delete by, and no endpoint deletes a message or a
-- chat.
CREATE TABLE inbox (
    user_id     uuid     NOT NULL,
    chat_id     uuid     NOT NULL,
    message_id  uuid     NOT NULL,
    read        boolean  NOT NULL DEFAULT false,
    -- The message's body names the user (`@<user id>`).
    mentioned   boolean  NOT NULL DEFAULT false,
    -- (user, chat) first: a member's rows of one chat are one range, which
    -- a removal's delete and the read flags' update both use.
    CONSTRAINT inbox_pkey PRIMARY KEY (user_id, chat_id, message_id)
);

-- Unread counts read only the unread rows.
CREATE INDEX inbox_unread_idx ON inbox (user_id, chat_id) WHERE NOT read;
