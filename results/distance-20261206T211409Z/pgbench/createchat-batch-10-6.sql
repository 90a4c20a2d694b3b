BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7c-723d-a20e-c8e5b308af01'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7c-723d-a20e-c8e5b308af01'::uuid), ('01a24d4c-5a7c-723d-a20e-c8e6db85a4d5'::uuid), ('01a24d4c-5a7c-723d-a20e-c8e7dedccf8f'::uuid), ('01a24d4c-5a7c-723d-a20e-c8e8416d83c1'::uuid), ('01a24d4c-5a7c-723d-a20e-c8e990094ec0'::uuid), ('01a24d4c-5a7c-723d-a20e-c8ea75595a3e'::uuid), ('01a24d4c-5a7c-723d-a20e-c8eb01cb5071'::uuid), ('01a24d4c-5a7c-723d-a20e-c8ec74f6dd40'::uuid), ('01a24d4c-5a7c-723d-a20e-c8edbef90ad6'::uuid), ('01a24d4c-5a7c-723d-a20e-c8ee0fec4d7d'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
