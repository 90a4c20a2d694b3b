BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7c-723d-a20e-c78a087d5f50'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7c-723d-a20e-c78a087d5f50'::uuid), ('01a24d4c-5a7c-723d-a20e-c78b4b82ccbd'::uuid), ('01a24d4c-5a7c-723d-a20e-c78c76437939'::uuid), ('01a24d4c-5a7c-723d-a20e-c78dafd53af1'::uuid), ('01a24d4c-5a7c-723d-a20e-c78e8bce0e8b'::uuid), ('01a24d4c-5a7c-723d-a20e-c78f44daaf76'::uuid), ('01a24d4c-5a7c-723d-a20e-c790dd7659ec'::uuid), ('01a24d4c-5a7c-723d-a20e-c791005255ba'::uuid), ('01a24d4c-5a7c-723d-a20e-c792e44966c0'::uuid), ('01a24d4c-5a7c-723d-a20e-c793452bc9ea'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
