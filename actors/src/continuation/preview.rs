//! A continuation's preview, the shell: what continue_session would create from the same
//! arguments, with nothing created. The preview_continuation verb (through the succession
//! actor) and `POST /v1/sessions/{id}/continuation/preview` (through
//! `Runtime::preview_continuation`, `crate::by_person`) both come here.
//!
//! It checks the arguments and the session exactly as continue_session does (`prepare`),
//! reads the same rows (`gather`) and compiles the same projection; then it reads, by index
//! and bounded, what sizes the omitted ranges and what the recommended ranges come from, and
//! hands all of it to the pure [`seed_projections::continuation::preview`]. It only reads.

use seed_events::{AccountId, RunId, SessionId};
use seed_projections::continuation::SESSION_CONTINUATION_PROMPT;
use seed_projections::continuation::preview::{PREVIEW_OMITTED_EVENTS_MAX, Preview, PreviewInput};
use seed_projections::continuation::recommend::{
    RECOMMEND_EVENTS_MAX, RecommendInput, recommend_ranges,
};
use seed_providers::ToolSpec;
use serde_json::Value;

use super::{Failure, Prepared, gather, prepare};
use crate::env::RunEnv;
use crate::verb::{Availability, VerbOutput};

/// What a preview came to.
#[derive(Debug)]
pub enum PreviewOutcome {
    Previewed(Box<Preview>),
    /// continue_session would refuse these arguments; nothing was read past the refusal.
    Refused(PreviewRefusal),
}

/// Why continue_session would refuse, as it says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviewRefusal {
    /// An argument is wrong: `field` names it (`title`, `sources[2].fromSeq`).
    #[error("{message}")]
    Invalid { field: String, message: String },
    /// The session cannot continue now (a delegated child, children still running, too many
    /// successors, nothing new said since the last continuation).
    #[error("{0}")]
    Refused(String),
}

/// Who asks for a preview.
#[derive(Debug, Clone, Copy)]
pub struct Asker {
    pub account_id: AccountId,
    pub session_id: SessionId,
    /// The calling run, for the verb; `None` for a person.
    pub run_id: Option<RunId>,
}

/// The preview of continuing `asker.session_id` with `arguments`. `Err` only when the store
/// fails.
pub async fn preview(
    env: &RunEnv,
    asker: Asker,
    arguments: Value,
) -> Result<PreviewOutcome, seed_store::Error> {
    let store = &env.store;
    let prepared = prepare(
        store,
        asker.account_id,
        asker.session_id,
        asker.run_id,
        arguments,
    )
    .await;
    let Prepared {
        input,
        predecessor,
        initiating,
        plan,
    } = match prepared {
        Ok(prepared) => prepared,
        Err(Failure::Store(error)) => return Err(error),
        Err(Failure::Invalid { field, message }) => {
            return Ok(PreviewOutcome::Refused(PreviewRefusal::Invalid {
                field,
                message,
            }));
        }
        Err(Failure::Refused(why)) => {
            return Ok(PreviewOutcome::Refused(PreviewRefusal::Refused(why)));
        }
    };
    let gathered = gather(store, &predecessor, &initiating, &input).await?;
    let projection = gathered.compile(&input, &initiating, plan);

    // The omitted ranges of this thread, read to size them, at most
    // PREVIEW_OMITTED_EVENTS_MAX events in all (the recent tail and the recalled ranges are
    // read already).
    let mut events = gathered.recent.clone();
    events.extend(
        gathered
            .recalled
            .iter()
            .flat_map(|recalled| recalled.events.iter().cloned()),
    );
    let mut room = PREVIEW_OMITTED_EVENTS_MAX;
    for range in projection
        .manifest
        .omitted
        .iter()
        .filter(|range| range.thread == predecessor.id)
    {
        if room == 0 {
            break;
        }
        let read = store
            .read_events(range.thread, range.from_seq, range.to_seq, room)
            .await?;
        room = room.saturating_sub(read.len());
        events.extend(read);
    }

    // The recommended ranges, from the session's newest events, as the advisor reads them.
    let last_seq = gathered.predecessor_last_seq;
    let newest = store
        .read_events(
            predecessor.id,
            (last_seq - RECOMMEND_EVENTS_MAX as i64 + 1).max(1),
            last_seq,
            RECOMMEND_EVENTS_MAX,
        )
        .await?;
    let recommended = recommend_ranges(&RecommendInput {
        events: &newest,
        plan: predecessor.plan.as_ref(),
    });

    let message_text = initiating.body().text().unwrap_or_default().to_owned();
    let preview = seed_projections::continuation::preview::preview(&PreviewInput {
        projection: &projection,
        cited: &gathered.cited,
        events: &events,
        message_text: &message_text,
        fixed_tokens: successor_fixed_tokens(env),
        window_tokens: env
            .settings
            .context_window(&env.settings.session_model(&predecessor)),
        recommended: &recommended,
    });
    Ok(PreviewOutcome::Previewed(Box::new(preview)))
}

/// What a successor's first request sends besides its messages, in tokens: the system prompt
/// of a session that may continue and the verbs a top-level run is offered, estimated from
/// their size as a first turn's are.
fn successor_fixed_tokens(env: &RunEnv) -> u64 {
    let system_prompt = format!(
        "{}\n\n{SESSION_CONTINUATION_PROMPT}",
        env.settings.system_prompt
    );
    let tools: Vec<ToolSpec> = env
        .verbs
        .describe()
        .into_iter()
        .filter(|verb| verb.availability != Availability::TypedChildrenOnly)
        .map(|verb| ToolSpec {
            name: verb.name,
            description: verb.description,
            parameters: verb.parameters,
        })
        .collect();
    seed_providers::estimate::prompt_tokens(&system_prompt, &tools, [])
}

/// The verb's answer: the preview as JSON the model reads, or continue_session's refusal.
pub(crate) fn preview_output(outcome: Result<PreviewOutcome, seed_store::Error>) -> VerbOutput {
    match outcome {
        Ok(PreviewOutcome::Previewed(preview)) => match serde_json::to_string(&preview) {
            Ok(json) => VerbOutput::ok(json),
            Err(error) => VerbOutput::error(format!("preview_continuation failed: {error}")),
        },
        Ok(PreviewOutcome::Refused(refusal)) => VerbOutput::error(format!(
            "preview_continuation: continue_session would be refused: {refusal}. Nothing was \
             created."
        )),
        Err(error) => VerbOutput::error(format!(
            "preview_continuation failed: {error}. Nothing was created."
        )),
    }
}
