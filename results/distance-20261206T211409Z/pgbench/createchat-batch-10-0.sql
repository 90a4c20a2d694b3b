BEGIN;
INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES (gen_random_uuid(), 'pgbench', '01a24d4c-5a7e-730d-9633-5e6f99789ece'::uuid, now(), 'off') RETURNING id AS chat_id \gset
INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT (:chat_id)::uuid, v.user_id, now() FROM (VALUES ('01a24d4c-5a7e-730d-9633-5e6f99789ece'::uuid), ('01a24d4c-5a7e-730d-9633-5e7059946784'::uuid), ('01a24d4c-5a7e-730d-9633-5e7161a7192b'::uuid), ('01a24d4c-5a7e-730d-9633-5e72f2821298'::uuid), ('01a24d4c-5a7e-730d-9633-5e738feb64d8'::uuid), ('01a24d4c-5a7e-730d-9633-5e74ccbf20d3'::uuid), ('01a24d4c-5a7e-730d-9633-5e753e4f9c81'::uuid), ('01a24d4c-5a7e-730d-9633-5e7693ef75e5'::uuid), ('01a24d4c-5a7e-730d-9633-5e779b91184d'::uuid), ('01a24d4c-5a7e-730d-9633-5e78e1a43e4c'::uuid)) AS v(user_id);
INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) VALUES (gen_random_uuid(), (:chat_id)::uuid, NULL, 'system', 'room created', now(), 'off');
COMMIT;
