DROP TABLE outbox;
ALTER TABLE messages DROP COLUMN publish_mode;
ALTER TABLE chats DROP COLUMN publish_mode;
