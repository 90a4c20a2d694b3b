BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5d3a4016635e'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5d3a4016635e'::uuid), ('01a24d4c-5a7e-730d-9633-5d3b2512594d'::uuid), ('01a24d4c-5a7e-730d-9633-5d3c4171611a'::uuid), ('01a24d4c-5a7e-730d-9633-5d3dc6fc1734'::uuid), ('01a24d4c-5a7e-730d-9633-5d3e3c170d4f'::uuid), ('01a24d4c-5a7e-730d-9633-5d3f94af7a8b'::uuid), ('01a24d4c-5a7e-730d-9633-5d408bf96c61'::uuid), ('01a24d4c-5a7e-730d-9633-5d4119167c43'::uuid), ('01a24d4c-5a7e-730d-9633-5d42e5183c96'::uuid), ('01a24d4c-5a7e-730d-9633-5d431111bb4b'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
