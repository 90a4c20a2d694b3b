BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7c-723d-a20e-c505edf136a3'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7c-723d-a20e-c505edf136a3'::uuid), ('01a24d4c-5a7c-723d-a20e-c50696d56b95'::uuid), ('01a24d4c-5a7c-723d-a20e-c50757bc0f92'::uuid), ('01a24d4c-5a7c-723d-a20e-c50829792076'::uuid), ('01a24d4c-5a7c-723d-a20e-c5091ce6cedf'::uuid), ('01a24d4c-5a7c-723d-a20e-c50af004ae18'::uuid), ('01a24d4c-5a7c-723d-a20e-c50b8ed90d90'::uuid), ('01a24d4c-5a7c-723d-a20e-c50c56f976eb'::uuid), ('01a24d4c-5a7c-723d-a20e-c50de0b0a026'::uuid), ('01a24d4c-5a7c-723d-a20e-c50ed8abb642'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
