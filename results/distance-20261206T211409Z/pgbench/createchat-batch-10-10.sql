BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7d-77da-86a5-134b1b5854e4'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7d-77da-86a5-134b1b5854e4'::uuid), ('01a24d4c-5a7d-77da-86a5-134cc7d1af74'::uuid), ('01a24d4c-5a7d-77da-86a5-134d5d3fed2f'::uuid), ('01a24d4c-5a7d-77da-86a5-134ec2828408'::uuid), ('01a24d4c-5a7d-77da-86a5-134f0b2cd3b5'::uuid), ('01a24d4c-5a7d-77da-86a5-1350a5e1a2e3'::uuid), ('01a24d4c-5a7d-77da-86a5-1351444f9381'::uuid), ('01a24d4c-5a7d-77da-86a5-13525dbdc727'::uuid), ('01a24d4c-5a7d-77da-86a5-1353d16e99b7'::uuid), ('01a24d4c-5a7d-77da-86a5-13549aa37e47'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
