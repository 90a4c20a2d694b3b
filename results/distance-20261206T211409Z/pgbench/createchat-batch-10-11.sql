BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7c-723d-a20e-c853d4f95576'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7c-723d-a20e-c853d4f95576'::uuid), ('01a24d4c-5a7c-723d-a20e-c854a4072f7d'::uuid), ('01a24d4c-5a7c-723d-a20e-c855a2e5e3ff'::uuid), ('01a24d4c-5a7c-723d-a20e-c8562b3a6c21'::uuid), ('01a24d4c-5a7c-723d-a20e-c857fb195e8f'::uuid), ('01a24d4c-5a7c-723d-a20e-c858b448ca25'::uuid), ('01a24d4c-5a7c-723d-a20e-c859d6bc4b1d'::uuid), ('01a24d4c-5a7c-723d-a20e-c85a1a7eab0f'::uuid), ('01a24d4c-5a7c-723d-a20e-c85b86146f18'::uuid), ('01a24d4c-5a7c-723d-a20e-c85c08882eed'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
