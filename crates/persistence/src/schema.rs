//! Diesel's view of the tables in `migrations/`, in `diesel print-schema`'s
//! layout (regenerate with `diesel print-schema` after changing a migration).
// @generated automatically by Diesel CLI.

diesel::table! {
    chat_members (chat_id, user_id) {
        chat_id -> Uuid,
        user_id -> Uuid,
        joined_at -> Timestamptz,
        read_up_to -> Nullable<Uuid>,
    }
}

diesel::table! {
    chats (id) {
        id -> Uuid,
        name -> Text,
        creator_id -> Uuid,
        created_at -> Timestamptz,
        publish_mode -> Text,
        owner_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    event_receipts (id) {
        id -> Int8,
        event_id -> Uuid,
        subject_id -> Uuid,
        publish_mode -> Text,
        topic -> Text,
        partition -> Int4,
        offset -> Int8,
        occurred_at -> Timestamptz,
        recorded_at -> Timestamptz,
    }
}

diesel::table! {
    idempotency_keys (user_id, key) {
        user_id -> Uuid,
        key -> Text,
        fingerprint -> Bytea,
        status -> Int2,
        response -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    inbox (user_id, chat_id, message_id) {
        user_id -> Uuid,
        chat_id -> Uuid,
        message_id -> Uuid,
        read -> Bool,
        mentioned -> Bool,
    }
}

diesel::table! {
    live_tickets (ticket_hash) {
        ticket_hash -> Bytea,
        user_id -> Uuid,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    messages (id) {
        id -> Uuid,
        chat_id -> Uuid,
        sender_id -> Nullable<Uuid>,
        kind -> Text,
        body -> Text,
        created_at -> Timestamptz,
        publish_mode -> Text,
    }
}

diesel::table! {
    outbox (id) {
        id -> Int8,
        event_id -> Uuid,
        chat_id -> Uuid,
        lock_key -> Int4,
        event_type -> Text,
        payload -> Text,
        created_at -> Timestamptz,
        published_at -> Nullable<Timestamptz>,
        attempts -> Int4,
        last_error -> Nullable<Text>,
        dead_at -> Nullable<Timestamptz>,
        trace_parent -> Nullable<Text>,
    }
}

diesel::table! {
    read_marker_log (chat_id, user_id, up_to) {
        chat_id -> Uuid,
        user_id -> Uuid,
        up_to -> Uuid,
    }
}

diesel::table! {
    users (id) {
        id -> Uuid,
        name -> Text,
        created_at -> Timestamptz,
    }
}

diesel::joinable!(chat_members -> chats (chat_id));
diesel::joinable!(chat_members -> users (user_id));
diesel::joinable!(live_tickets -> users (user_id));
diesel::joinable!(messages -> chats (chat_id));
diesel::joinable!(messages -> users (sender_id));

diesel::allow_tables_to_appear_in_same_query!(
    chat_members,
    chats,
    event_receipts,
    idempotency_keys,
    inbox,
    live_tickets,
    messages,
    outbox,
    read_marker_log,
    users,
);
