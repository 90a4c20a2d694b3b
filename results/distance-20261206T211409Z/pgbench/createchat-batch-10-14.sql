BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7d-77da-86a5-0ef426e3fece'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7d-77da-86a5-0ef426e3fece'::uuid), ('01a24d4c-5a7d-77da-86a5-0ef5328c5654'::uuid), ('01a24d4c-5a7d-77da-86a5-0ef6fc5c1008'::uuid), ('01a24d4c-5a7d-77da-86a5-0ef777463a3c'::uuid), ('01a24d4c-5a7d-77da-86a5-0ef8fc45f103'::uuid), ('01a24d4c-5a7d-77da-86a5-0ef960894769'::uuid), ('01a24d4c-5a7d-77da-86a5-0efa012a4d1a'::uuid), ('01a24d4c-5a7d-77da-86a5-0efbd9a1fa1b'::uuid), ('01a24d4c-5a7d-77da-86a5-0efc0bf038eb'::uuid), ('01a24d4c-5a7d-77da-86a5-0efd05cd27e6'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
