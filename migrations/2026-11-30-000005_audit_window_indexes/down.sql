DROP INDEX messages_talk_created_at_idx;
DROP INDEX chats_created_at_idx;
