DROP TABLE inbox;
ALTER TABLE chat_members DROP COLUMN read_up_to;
