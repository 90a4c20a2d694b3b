use chatlab_domain::{
    ChatId, Entity, InsertStrategy, MessageKind, PageRequest, PublishMode, RepositoryError,
};

use crate::support::Writes;
use crate::support::{command, fixture, message, seed_users};

#[tokio::test]
async fn members_can_post_and_others_cannot() {
    let f = fixture().await;
    let users = seed_users(&f.store, 3).await;
    let chat = f
        .store
        .create_chat(
            command("room", users[0], &users[1..2]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let sent = f
        .store
        .send_message(message(chat.id, users[1], "hello"), PublishMode::Off)
        .await
        .unwrap();
    assert_eq!(sent.kind, MessageKind::Talk);
    assert_eq!(sent.sender_id, Some(users[1]));

    // A non-member is told the chat does not exist: the same answer as
    // for no chat at all, so a chat's existence cannot be probed.
    let outsider = f
        .store
        .send_message(message(chat.id, users[2], "let me in"), PublishMode::Off)
        .await
        .unwrap_err();
    assert!(
        matches!(
            outsider,
            RepositoryError::NotFound { entity: Entity::Chat, id } if id == chat.id.as_uuid()
        ),
        "{outsider:?}"
    );

    let nowhere = ChatId::generate();
    let missing = f
        .store
        .send_message(message(nowhere, users[0], "anyone?"), PublishMode::Off)
        .await
        .unwrap_err();
    assert!(matches!(
        missing,
        RepositoryError::NotFound { entity: Entity::Chat, id } if id == nowhere.as_uuid()
    ));

    let page = f
        .store
        .list_messages(chat.id, users[1], PageRequest::new(None, Some(10)).unwrap())
        .await
        .unwrap();
    let bodies: Vec<&str> = page.items.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["hello", "room created"],
        "the outsider wrote nothing"
    );

    // Nor may the outsider read.
    let unseen = f
        .store
        .list_messages(chat.id, users[2], PageRequest::new(None, Some(10)).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(
            unseen,
            RepositoryError::NotFound {
                entity: Entity::Chat,
                ..
            }
        ),
        "{unseen:?}"
    );
}

#[tokio::test]
async fn message_pages_are_newest_first_and_end_with_no_cursor() {
    let f = fixture().await;
    let users = seed_users(&f.store, 1).await;
    let chat = f
        .store
        .create_chat(
            command("room", users[0], &[]),
            InsertStrategy::Unnest,
            PublishMode::Off,
        )
        .await
        .unwrap();
    for i in 0..7 {
        f.store
            .send_message(
                message(chat.id, users[0], &format!("m{i}")),
                PublishMode::Off,
            )
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = f
            .store
            .list_messages(
                chat.id,
                users[0],
                PageRequest::new(cursor, Some(3)).unwrap(),
            )
            .await
            .unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|m| m.body.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen,
        ["m6", "m5", "m4", "m3", "m2", "m1", "m0", "room created"]
    );

    // A page that ends exactly at the last row says there is no next page.
    let exact = f
        .store
        .list_messages(chat.id, users[0], PageRequest::new(None, Some(8)).unwrap())
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 8);
    assert_eq!(exact.next_cursor, None);

    let unknown = f
        .store
        .list_messages(
            ChatId::generate(),
            users[0],
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(unknown, RepositoryError::NotFound { .. }));
}

#[tokio::test]
async fn member_pages_cover_every_member_once() {
    let f = fixture().await;
    let mut users = seed_users(&f.store, 11).await;
    let outsider = users.pop().unwrap();
    let chat = f
        .store
        .create_chat(
            command("room", users[0], &users[1..]),
            InsertStrategy::PerRow,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = f
            .store
            .list_members(
                chat.id,
                users[3],
                PageRequest::new(cursor, Some(4)).unwrap(),
            )
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|m| m.user_id));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let mut expected = users.clone();
    expected.sort();
    assert_eq!(seen, expected);

    // Past the end: an empty page, not an error (for a member).
    let last = *expected.last().unwrap();
    let past = f
        .store
        .list_members(
            chat.id,
            users[3],
            PageRequest::new(Some(last), Some(4)).unwrap(),
        )
        .await
        .unwrap();
    assert!(past.items.is_empty() && past.next_cursor.is_none());

    // Any member reads the chat; for anyone else it does not exist.
    let got = f.store.get_chat(chat.id, users[3]).await.unwrap();
    assert_eq!(got.member_count, 10);
    assert_eq!(got.creator_id, users[0]);
    assert!(matches!(
        f.store.get_chat(ChatId::generate(), users[0]).await,
        Err(RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        })
    ));
    assert!(matches!(
        f.store.get_chat(chat.id, outsider).await,
        Err(RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        })
    ));
    assert!(matches!(
        f.store
            .list_members(chat.id, outsider, PageRequest::new(None, Some(4)).unwrap())
            .await,
        Err(RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        })
    ));
}
