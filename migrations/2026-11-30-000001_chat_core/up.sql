-- chatlab's core tables. Ids are UUIDv7 made by the application, so a
-- multi-row INSERT needs no RETURNING round trip to learn them, and id order
-- is creation order.

CREATE TABLE users (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    created_at  timestamptz NOT NULL
);

CREATE TABLE chats (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    creator_id  uuid        NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL
);

CREATE TABLE chat_members (
    chat_id     uuid        NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    user_id     uuid        NOT NULL REFERENCES users (id),
    joined_at   timestamptz NOT NULL,
    CONSTRAINT chat_members_pkey PRIMARY KEY (chat_id, user_id)
);

-- "Which chats is this user in?" and the foreign key's delete check.
CREATE INDEX chat_members_user_id_idx ON chat_members (user_id);

CREATE TABLE messages (
    id          uuid        PRIMARY KEY,
    chat_id     uuid        NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    -- NULL for system messages ("room created").
    sender_id   uuid        REFERENCES users (id),
    kind        text        NOT NULL CHECK (kind IN ('system', 'talk')),
    body        text        NOT NULL CHECK (char_length(body) BETWEEN 1 AND 4000),
    created_at  timestamptz NOT NULL,
    CONSTRAINT messages_sender_matches_kind
        CHECK ((kind = 'system') = (sender_id IS NULL))
);

-- Newest-first keyset pages per chat: WHERE chat_id = $1 AND id < $2 ORDER BY id DESC.
CREATE INDEX messages_chat_id_id_idx ON messages (chat_id, id DESC);
