BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5f07ba31264d'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5f07ba31264d'::uuid), ('01a24d4c-5a7e-730d-9633-5f08a23d09ae'::uuid), ('01a24d4c-5a7e-730d-9633-5f09138c7ad3'::uuid), ('01a24d4c-5a7e-730d-9633-5f0a738aa176'::uuid), ('01a24d4c-5a7e-730d-9633-5f0b539dadff'::uuid), ('01a24d4c-5a7e-730d-9633-5f0c4b58f469'::uuid), ('01a24d4c-5a7e-730d-9633-5f0d7c0949e0'::uuid), ('01a24d4c-5a7e-730d-9633-5f0e86b6f6f9'::uuid), ('01a24d4c-5a7e-730d-9633-5f0f0f4be082'::uuid), ('01a24d4c-5a7e-730d-9633-5f1060b21071'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
