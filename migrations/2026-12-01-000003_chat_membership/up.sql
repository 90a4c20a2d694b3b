-- Membership changes after creation. The creator owns a chat until they
-- hand it over: owner_id is NULL until then (so createChat's INSERT, the
-- measured write, is unchanged), and the owner is
-- COALESCE(owner_id, creator_id).
ALTER TABLE chats ADD COLUMN owner_id uuid REFERENCES users (id);

-- Each change (members added, one removed or leaving, the ownership handed
-- over) writes a 'membership' message into the timeline; its sender made
-- the change, and its event names the message as its subject.
ALTER TABLE messages DROP CONSTRAINT messages_kind_check;
ALTER TABLE messages ADD CONSTRAINT messages_kind_check
    CHECK (kind IN ('system', 'talk', 'membership'));
