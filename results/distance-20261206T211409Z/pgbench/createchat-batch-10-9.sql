BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5fda985b7165'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5fda985b7165'::uuid), ('01a24d4c-5a7e-730d-9633-5fdb3531a68b'::uuid), ('01a24d4c-5a7e-730d-9633-5fdc6840e1c8'::uuid), ('01a24d4c-5a7e-730d-9633-5fdde4b69ef4'::uuid), ('01a24d4c-5a7e-730d-9633-5fdef7759316'::uuid), ('01a24d4c-5a7e-730d-9633-5fdf5b66de0d'::uuid), ('01a24d4c-5a7e-730d-9633-5fe0c71c7b35'::uuid), ('01a24d4c-5a7e-730d-9633-5fe15c8af6b2'::uuid), ('01a24d4c-5a7e-730d-9633-5fe28292a6d7'::uuid), ('01a24d4c-5a7e-730d-9633-5fe3c0bc65ca'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
