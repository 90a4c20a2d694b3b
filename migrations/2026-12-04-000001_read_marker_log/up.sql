-- READ_MARKER_MODE=log: every accepted move of a read marker is one INSERT
-- here, never an UPDATE of the member row, so moves take no row lock on
-- chat_members and leave no dead member-row version behind. A background
-- compaction folds the rows into chat_members.read_up_to (the newest per
-- member, forward only) and deletes them in the same statement; reads
-- take the newer of the member row's marker and the newest row here.
--
-- The key is the move itself: the same member moving to the same message
-- twice is one row. A member's rows are one index range, newest last, so
-- a read finds the newest with one backward index probe.
CREATE TABLE read_marker_log (
    chat_id  uuid  NOT NULL,
    user_id  uuid  NOT NULL,
    up_to    uuid  NOT NULL,
    CONSTRAINT read_marker_log_pkey PRIMARY KEY (chat_id, user_id, up_to)
);
