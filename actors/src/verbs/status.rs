//! The `status` verb: sets the session's description, and its title when one is given, as the
//! agent's (`TitleSource::Agent`, so the fallback namer stays out).

use std::sync::LazyLock;

use futures::future::BoxFuture;
use seed_events::limits::{SESSION_DESCRIPTION_CHARS_MAX, SESSION_TITLE_CHARS_MAX};
use seed_store::TitleSource;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::schema::parse_checked;
use crate::verb::{Verb, VerbContext, VerbOutput};

/// What the model reads of the verb, its limits stated from their constants.
static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Sets this session's status, shown to you every turn in <session_status> and to the \
         people following the session. description is the live status: what you are doing or \
         what stands, in a sentence or two (at most {SESSION_DESCRIPTION_CHARS_MAX} characters); \
         update it when that changes. title names what the whole session is about (at most \
         {SESSION_TITLE_CHARS_MAX} characters); give it only to name a session or to correct \
         its name, and leave it out to keep the current one — most calls change only the \
         description. A large change of topic calls for a continuation, not a new title. Never \
         call it just to restate the status you are shown. Returns \"status set\"."
    )
});

/// Sets the session's status. Safe to repeat: the same call sets the same status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Status;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    title: Option<String>,
    description: String,
}

impl Verb for Status {
    fn name(&self) -> &'static str {
        "status"
    }

    fn description(&self) -> &'static str {
        &DESCRIPTION
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": SESSION_TITLE_CHARS_MAX,
                    "description": "The session's new title; leave out to keep the current one"
                },
                "description": {
                    "type": "string",
                    "maxLength": SESSION_DESCRIPTION_CHARS_MAX,
                    "description": "The live status"
                }
            },
            "required": ["description"],
            "additionalProperties": false
        })
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<StatusArgs>(self.name(), &self.parameters(), arguments);
        Box::pin(async move {
            match parsed {
                Ok(args) => set_status(context, args).await,
                Err(error) => error,
            }
        })
    }
}

async fn set_status(context: VerbContext, args: StatusArgs) -> VerbOutput {
    let failed = |error: seed_store::Error| VerbOutput::error(format!("status failed: {error}"));
    let (title, source) = match args.title {
        Some(title) => (title, TitleSource::Agent),
        // Keep the title and who gave it: an untitled session stays the fallback namer's to name.
        None => match context.store.get_session(context.session_id).await {
            Ok(Some(session)) => (session.title, session.title_source),
            Ok(None) => return VerbOutput::error("session not found"),
            Err(error) => return failed(error),
        },
    };
    match context
        .store
        .set_session_status(
            context.session_id,
            title,
            args.description,
            source,
            context.now_ms,
        )
        .await
    {
        Ok(true) => VerbOutput::ok("status set"),
        Ok(false) => VerbOutput::error("session not found"),
        Err(error) => failed(error),
    }
}
