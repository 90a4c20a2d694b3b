BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7d-77da-86a5-11601cddf91d'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7d-77da-86a5-11601cddf91d'::uuid), ('01a24d4c-5a7d-77da-86a5-11610cc6cb13'::uuid), ('01a24d4c-5a7d-77da-86a5-11622793ab00'::uuid), ('01a24d4c-5a7d-77da-86a5-116322898c8f'::uuid), ('01a24d4c-5a7d-77da-86a5-1164a9120b40'::uuid), ('01a24d4c-5a7d-77da-86a5-1165c03e1312'::uuid), ('01a24d4c-5a7d-77da-86a5-1166bc11fda7'::uuid), ('01a24d4c-5a7d-77da-86a5-1167fafd416e'::uuid), ('01a24d4c-5a7d-77da-86a5-1168547f9b27'::uuid), ('01a24d4c-5a7d-77da-86a5-1169da240a67'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
