BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5dc8ede29a3c'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5dc8ede29a3c'::uuid), ('01a24d4c-5a7e-730d-9633-5dc9332685a7'::uuid), ('01a24d4c-5a7e-730d-9633-5dca893f2c63'::uuid), ('01a24d4c-5a7e-730d-9633-5dcb4c06908b'::uuid), ('01a24d4c-5a7e-730d-9633-5dccc6225f1b'::uuid), ('01a24d4c-5a7e-730d-9633-5dcdf2a89a31'::uuid), ('01a24d4c-5a7e-730d-9633-5dce1c667217'::uuid), ('01a24d4c-5a7e-730d-9633-5dcf15c72349'::uuid), ('01a24d4c-5a7e-730d-9633-5dd0bd4a9b00'::uuid), ('01a24d4c-5a7e-730d-9633-5dd18a131f63'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
