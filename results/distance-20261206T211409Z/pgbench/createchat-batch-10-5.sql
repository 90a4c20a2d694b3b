BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5f2fdf53d8be'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5f2fdf53d8be'::uuid), ('01a24d4c-5a7e-730d-9633-5f303b57bc44'::uuid), ('01a24d4c-5a7e-730d-9633-5f31da9a4140'::uuid), ('01a24d4c-5a7e-730d-9633-5f32525fb929'::uuid), ('01a24d4c-5a7e-730d-9633-5f33a065965b'::uuid), ('01a24d4c-5a7e-730d-9633-5f34062ce862'::uuid), ('01a24d4c-5a7e-730d-9633-5f35153e7328'::uuid), ('01a24d4c-5a7e-730d-9633-5f366b0fa24c'::uuid), ('01a24d4c-5a7e-730d-9633-5f37dc8e5db5'::uuid), ('01a24d4c-5a7e-730d-9633-5f3828dccc91'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
