BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7d-77da-86a5-141040d72c35'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7d-77da-86a5-141040d72c35'::uuid), ('01a24d4c-5a7d-77da-86a5-1411d5eaf99f'::uuid), ('01a24d4c-5a7d-77da-86a5-141254f68bca'::uuid), ('01a24d4c-5a7d-77da-86a5-14135dc373bc'::uuid), ('01a24d4c-5a7d-77da-86a5-1414f305d083'::uuid), ('01a24d4c-5a7d-77da-86a5-141543f72919'::uuid), ('01a24d4c-5a7d-77da-86a5-141616c73444'::uuid), ('01a24d4c-5a7d-77da-86a5-1417f2aafa9d'::uuid), ('01a24d4c-5a7d-77da-86a5-1418d87b1d0d'::uuid), ('01a24d4c-5a7d-77da-86a5-141992e365ef'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
