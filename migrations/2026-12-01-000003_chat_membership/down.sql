DELETE FROM messages WHERE kind = 'membership';
ALTER TABLE messages DROP CONSTRAINT messages_kind_check;
ALTER TABLE messages ADD CONSTRAINT messages_kind_check CHECK (kind IN ('system', 'talk'));
ALTER TABLE chats DROP COLUMN owner_id;
