-- The event audit reads the chats and talk messages of a time window; without
-- these indexes each audit scans both tables whole, however small its window.
CREATE INDEX chats_created_at_idx ON chats (created_at);
CREATE INDEX messages_talk_created_at_idx ON messages (created_at) WHERE kind = 'talk';
