//! Attachments end to end against a real `seed serve`: uploaded, listed, downloaded, carried
//! by a message to the model (the scripted model names what it received), gone with their
//! session; refused uploads and messages (413 over either limit, 400 naming the field, 404 for
//! another account) that write nothing; `seed chat`'s `/attach`. Their bytes are files in the
//! data dir on SQLite and rows of the database on PostgreSQL, where a node serves what another
//! took.

use crate::common;

use crate::common::{Server, new_session, row_counts};
use base64::Engine as _;
use seed_server::api::{
    AttachmentInfo, EventsResponse, ListAttachmentsResponse, MessageSessionResponse,
};
use seed_server::client::{Answer, Client};
use serde_json::json;

/// A 1×1 PNG.
fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        )
        .expect("base64")
}

async fn upload(
    client: &Client,
    session_id: uuid::Uuid,
    name: &str,
    content_type: &str,
    bytes: Vec<u8>,
) -> Answer {
    client
        .upload(
            &format!("/v1/sessions/{session_id}/attachments?name={name}"),
            content_type,
            bytes,
        )
        .await
        .expect("answer")
}

/// The files under the data dir's attachment folders (none on PostgreSQL, which keeps the bytes
/// in the database).
fn files_on_disk(data_dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for folder in std::fs::read_dir(data_dir.join("attachments"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for file in std::fs::read_dir(folder.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            found.push(file.file_name().to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}

#[actix_web::test]
async fn files_are_uploaded_listed_downloaded_seen_by_the_model_and_go_with_their_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await;

    let text = upload(
        &client,
        session.id,
        "notes.txt",
        "text/plain; charset=utf-8",
        b"hello from a file\nsecond line".to_vec(),
    )
    .await;
    assert_eq!(text.status, 201, "{:?}", text.value());
    let text: AttachmentInfo = text.json().expect("info");
    assert_eq!(
        (
            text.name.as_str(),
            text.media_type.as_str(),
            text.size_bytes
        ),
        ("notes.txt", "text/plain", 29)
    );
    // Sent as bytes of no known type, the image is stored as what its bytes are.
    let image: AttachmentInfo = upload(
        &client,
        session.id,
        "dot.png",
        "application/octet-stream",
        png(),
    )
    .await
    .json()
    .expect("info");
    assert_eq!(image.media_type, "image/png");

    let listed: ListAttachmentsResponse = client
        .get(&format!("/v1/sessions/{}/attachments", session.id))
        .await
        .expect("listed");
    let ids: Vec<&str> = listed.attachments.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, [text.id.as_str(), image.id.as_str()]);

    let downloaded = client
        .send_raw(
            "GET",
            &format!("/v1/sessions/{}/attachments/{}", session.id, image.id),
            Vec::new(),
            &client.signature_fields(
                "GET",
                &format!("/v1/sessions/{}/attachments/{}", session.id, image.id),
                b"",
            ),
        )
        .await
        .expect("answer");
    assert_eq!(downloaded.status, 200);
    assert_eq!(downloaded.body.as_ref(), png().as_slice());

    // The message carries both; the model reads the text inline and the image as an image.
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "look", "attachments": [text.id, image.id], "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded");
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{}/events?from_seq=1", session.id))
        .await
        .expect("events");
    assert_eq!(
        events.events[0].content["attachments"],
        json!([
            {"id": text.id, "name": "notes.txt", "media_type": "text/plain", "size_bytes": 29},
            {"id": image.id, "name": "dot.png", "media_type": "image/png", "size_bytes": 70},
        ])
    );
    let answer = events
        .events
        .iter()
        .rev()
        .find(|event| event.role.as_deref() == Some("assistant"))
        .expect("an answer");
    assert_eq!(
        answer.content["text"],
        "You said: look [attached: notes.txt \u{201c}hello from a file\u{201d}; dot.png (image/png, 70 bytes)]"
    );

    // Deleting the session deletes its attachments: rows and files.
    let deleted = client
        .request("DELETE", &format!("/v1/sessions/{}", session.id), None)
        .await
        .expect("answer");
    assert_eq!(deleted.status, 204, "{:?}", deleted.value());
    let counts = row_counts(&server.store()).await;
    assert!(counts.contains(&("attachments", 0)), "{counts:?}");
    assert!(counts.contains(&("attachment_contents", 0)), "{counts:?}");
    assert_eq!(files_on_disk(dir.path()), Vec::<String>::new());
    assert!(
        !dir.path()
            .join("attachments")
            .join(session.id.to_string())
            .exists()
    );
}

#[actix_web::test]
async fn refused_uploads_and_messages_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &[
            "--attachment-bytes-max",
            "100",
            "--account-attachments-bytes-max",
            "150",
        ],
    );
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await;
    let kept: AttachmentInfo = upload(&client, session.id, "a.txt", "text/plain", vec![b'a'; 90])
        .await
        .json()
        .expect("the first fits");
    let other = server.client_with(server.add_account());
    let before = row_counts(&store).await;

    let refusals = [
        (
            upload(
                &client,
                session.id,
                "big.txt",
                "text/plain",
                vec![b'b'; 101],
            )
            .await,
            413,
            None,
            "larger than the 100 bytes an attachment may have (attachment_bytes_max)",
        ),
        (
            upload(&client, session.id, "b.txt", "text/plain", vec![b'b'; 90]).await,
            413,
            None,
            "would pass their limit of 150 bytes (account_attachments_bytes_max)",
        ),
        (
            upload(&client, session.id, "dot.jpg", "image/jpeg", png()).await,
            400,
            Some("Content-Type"),
            "the bytes are image/png, not image/jpeg as Content-Type says",
        ),
        (
            upload(
                &client,
                session.id,
                "..%2Fescape",
                "text/plain",
                b"x".to_vec(),
            )
            .await,
            400,
            Some("name"),
            "no '/'",
        ),
        (
            client
                .upload(
                    &format!("/v1/sessions/{}/attachments", session.id),
                    "text/plain",
                    b"x".to_vec(),
                )
                .await
                .expect("answer"),
            400,
            Some("name"),
            "name",
        ),
        (
            client
                .request(
                    "POST",
                    &format!("/v1/sessions/{}/messages", session.id),
                    Some(&json!({"text": "see", "attachments": [kept.id, "no-such-file"]})),
                )
                .await
                .expect("answer"),
            400,
            Some("attachments[1]"),
            "\"no-such-file\" is no attachment of this session",
        ),
        (
            client
                .request(
                    "POST",
                    &format!("/v1/sessions/{}/messages", session.id),
                    Some(&json!({"text": "see", "attachments": [kept.id, kept.id]})),
                )
                .await
                .expect("answer"),
            400,
            Some("attachments[1]"),
            "named twice",
        ),
    ];
    for (answer, status, field, message) in refusals {
        let value = answer.value();
        assert_eq!(answer.status, status, "{value}");
        assert_eq!(value["field"].as_str(), field, "{value}");
        assert!(
            value["error"]
                .as_str()
                .is_some_and(|error| error.contains(message)),
            "{value}"
        );
    }

    // Another account sees neither the session nor its attachments.
    let theirs = upload(&other, session.id, "x.txt", "text/plain", b"x".to_vec()).await;
    assert_eq!(theirs.status, 404);
    for path in [
        format!("/v1/sessions/{}/attachments", session.id),
        format!("/v1/sessions/{}/attachments/{}", session.id, kept.id),
    ] {
        let answer = other.request("GET", &path, None).await.expect("answer");
        assert_eq!(answer.status, 404, "{path}: {:?}", answer.value());
    }
    let borrowed = other
        .request(
            "POST",
            &format!("/v1/sessions/{}/messages", session.id),
            Some(&json!({"text": "mine now", "attachments": [kept.id]})),
        )
        .await
        .expect("answer");
    assert_eq!(borrowed.status, 404);

    assert_eq!(row_counts(&store).await, before);
    // The kept file's bytes alone: its file on SQLite, its row (counted above) on PostgreSQL.
    let kept_files = if common::on_postgres() {
        Vec::new()
    } else {
        vec![kept.id]
    };
    assert_eq!(files_on_disk(dir.path()), kept_files);
}

/// Two nodes over one PostgreSQL database (whatever engine the other tests run on), with no
/// disk in common: a file uploaded through one is downloaded through the other, and a message
/// sent through the other carries it to the model, whichever node runs the turn.
#[actix_web::test]
async fn a_file_uploaded_through_one_node_is_downloaded_and_seen_through_another() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let _database = common::shared_database(&[dir_a.path(), dir_b.path()]);
    let node_args = ["--node-renew-ms", "100"];
    let node_a = Server::start(dir_a.path(), &node_args);
    let node_b = Server::start(dir_b.path(), &node_args);
    let client_a = node_a.client();
    // One account, reached on either node.
    let client_b = node_b.client_with(node_a.local_key());
    let session = new_session(&client_a).await;
    let text: AttachmentInfo = upload(
        &client_a,
        session.id,
        "notes.txt",
        "text/plain",
        b"hello from node a".to_vec(),
    )
    .await
    .json()
    .expect("info");

    let path = format!("/v1/sessions/{}/attachments/{}", session.id, text.id);
    let downloaded = client_b
        .send_raw(
            "GET",
            &path,
            Vec::new(),
            &client_b.signature_fields("GET", &path, b""),
        )
        .await
        .expect("answer");
    assert_eq!(downloaded.status, 200, "{:?}", downloaded.value());
    assert_eq!(downloaded.body.as_ref(), b"hello from node a");

    let sent: MessageSessionResponse = client_b
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "look", "attachments": [text.id], "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded");
    let events: EventsResponse = client_b
        .get(&format!("/v1/sessions/{}/events?from_seq=1", session.id))
        .await
        .expect("events");
    let answer = events
        .events
        .iter()
        .rev()
        .find(|event| event.role.as_deref() == Some("assistant"))
        .expect("an answer");
    assert_eq!(
        answer.content["text"],
        "You said: look [attached: notes.txt \u{201c}hello from node a\u{201d}]"
    );
    for dir in [&dir_a, &dir_b] {
        assert_eq!(files_on_disk(dir.path()), Vec::<String>::new());
    }
}

#[actix_web::test]
async fn the_command_line_attaches_a_file_to_the_next_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _server = Server::start(dir.path(), &[]);
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "# Rooms\nthree of them\n").expect("written");
    let out = common::seed_cli(
        dir.path(),
        &["chat"],
        &format!(
            "/attach {}\n/attach {}\nwhat is in it?\nand now?\n",
            notes.display(),
            dir.path().join("missing.txt").display()
        ),
    );
    assert!(
        out.contains("attached notes.md (22 bytes, text/plain): the next message carries it"),
        "{out}"
    );
    assert!(out.contains("(not attached: cannot read "), "{out}");
    assert!(
        out.contains("You said: what is in it? [attached: notes.md \u{201c}# Rooms\u{201d}]"),
        "{out}"
    );
    // Only the next message carries it.
    assert!(out.contains("You said: and now?\n"), "{out}");
}
