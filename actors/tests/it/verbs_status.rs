//! The `status` verb, called directly over a real SQLite file: title and description set as
//! the agent's, the title kept when none is given, invalid calls refused with nothing changed.

use crate::common;

use crate::common::{Fixture, session};
use seed_actors::verbs::status::Status;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_events::limits::{SESSION_DESCRIPTION_CHARS_MAX, SESSION_TITLE_CHARS_MAX};
use seed_store::{SessionRow, Store, TitleSource};
use serde_json::{Value, json};

const NOW_MS: i64 = common::VERB_NOW_MS;

fn context(store: &Store) -> VerbContext {
    common::verb_context(store, session(0))
}

async fn status(store: &Store, arguments: Value) -> VerbOutput {
    Status.call(context(store), arguments).await
}

async fn row(store: &Store) -> anyhow::Result<SessionRow> {
    store
        .get_session(session(0))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no session"))
}

fn shown(row: &SessionRow) -> (&str, &str, TitleSource) {
    (&row.title, &row.description, row.title_source)
}

#[actix::test]
async fn status_sets_title_and_description_as_the_agent() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let output = status(
        store,
        json!({"title": "Trip to Lisbon", "description": "Comparing flights"}),
    )
    .await;
    assert_eq!(output, VerbOutput::ok("status set"));
    let row = row(store).await?;
    assert_eq!(
        shown(&row),
        ("Trip to Lisbon", "Comparing flights", TitleSource::Agent)
    );
    assert_eq!(row.updated_at_ms, NOW_MS);

    // Without a title, the title stays; an optional null counts as absent.
    let output = status(
        store,
        json!({"title": null, "description": "Booked; hotel next"}),
    )
    .await;
    assert_eq!(output, VerbOutput::ok("status set"));
    let row = self::row(store).await?;
    assert_eq!(
        shown(&row),
        ("Trip to Lisbon", "Booked; hotel next", TitleSource::Agent)
    );
    assert!(Status.safe_to_repeat());
    Ok(())
}

#[actix::test]
async fn a_description_alone_keeps_who_named_the_session() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;

    // Untitled: it stays untitled, so the fallback namer may still name it.
    let output = status(store, json!({"description": "Reading the brief"})).await;
    assert_eq!(output, VerbOutput::ok("status set"));
    assert_eq!(
        shown(&row(store).await?),
        ("", "Reading the brief", TitleSource::None)
    );
    assert!(
        store
            .name_session_if_untitled(session(0), "Brief".to_owned(), NOW_MS + 1)
            .await?
    );

    // Named by the user: the user's title stays the user's.
    store
        .set_session_status(
            session(0),
            "Ana's trip".to_owned(),
            String::new(),
            TitleSource::User,
            2,
        )
        .await?;
    status(store, json!({"description": "Flights found"})).await;
    assert_eq!(
        shown(&row(store).await?),
        ("Ana's trip", "Flights found", TitleSource::User)
    );
    Ok(())
}

#[actix::test]
async fn limits_are_characters_and_invalid_calls_change_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let title = "ü".repeat(SESSION_TITLE_CHARS_MAX);
    let description = "d".repeat(SESSION_DESCRIPTION_CHARS_MAX);
    let output = status(store, json!({"title": title, "description": description})).await;
    assert_eq!(output, VerbOutput::ok("status set"));
    let before = row(store).await?;
    assert_eq!(shown(&before), (&*title, &*description, TitleSource::Agent));

    let title_too_long = format!(
        "invalid arguments for status: title: at most {SESSION_TITLE_CHARS_MAX} characters, got {}",
        SESSION_TITLE_CHARS_MAX + 1
    );
    let description_too_long = format!(
        "invalid arguments for status: description: at most {SESSION_DESCRIPTION_CHARS_MAX} \
         characters, got {}",
        SESSION_DESCRIPTION_CHARS_MAX + 1
    );
    let cases = [
        (
            json!({"title": "New"}),
            "invalid arguments for status: description: required",
        ),
        (
            json!({"title": "t".repeat(SESSION_TITLE_CHARS_MAX + 1), "description": "x"}),
            title_too_long.as_str(),
        ),
        (
            json!({"description": "d".repeat(SESSION_DESCRIPTION_CHARS_MAX + 1)}),
            description_too_long.as_str(),
        ),
        (
            json!({"title": "", "description": "x"}),
            "invalid arguments for status: title: must not be empty",
        ),
        (
            json!({"title": 3, "description": "x"}),
            "invalid arguments for status: title: expected a string, got an integer",
        ),
        (
            json!({"description": ["x"]}),
            "invalid arguments for status: description: expected a string, got an array",
        ),
        (
            json!({"description": "x", "summary": "y"}),
            "invalid arguments for status: summary: unknown field (expected description, title)",
        ),
    ];
    for (arguments, message) in cases {
        let output = status(store, arguments.clone()).await;
        assert_eq!(output, VerbOutput::error(message), "{arguments}");
    }
    assert_eq!(row(store).await?, before);
    Ok(())
}

#[actix::test]
async fn a_missing_session_is_an_error() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    store.delete_session(session(0), 1).await?;
    let output = status(store, json!({"description": "x"})).await;
    assert_eq!(output, VerbOutput::error("session not found"));
    let output = status(store, json!({"title": "t", "description": "x"})).await;
    assert_eq!(output, VerbOutput::error("session not found"));
    Ok(())
}
