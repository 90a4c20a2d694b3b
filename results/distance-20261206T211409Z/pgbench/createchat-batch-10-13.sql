BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7d-77da-86a5-0fa423a94e94'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7d-77da-86a5-0fa423a94e94'::uuid), ('01a24d4c-5a7d-77da-86a5-0fa519ae6226'::uuid), ('01a24d4c-5a7d-77da-86a5-0fa6e21df26c'::uuid), ('01a24d4c-5a7d-77da-86a5-0fa75abfe5dc'::uuid), ('01a24d4c-5a7d-77da-86a5-0fa87a014d0a'::uuid), ('01a24d4c-5a7d-77da-86a5-0fa9335455b9'::uuid), ('01a24d4c-5a7d-77da-86a5-0faaa9f0f1b3'::uuid), ('01a24d4c-5a7d-77da-86a5-0fab67d60974'::uuid), ('01a24d4c-5a7d-77da-86a5-0face92d61ea'::uuid), ('01a24d4c-5a7d-77da-86a5-0fad88e3df81'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
