//! `continue_session`: carries the conversation into a successor session that starts from the
//! agent's handoff, the user's message copied word for word, and exact excerpts. The call is a
//! message to the succession actor (see `crate::succession` and `crate::continuation`); it ends the
//! turn, and the successor answers.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::verb::{Availability, Continue, ContinueAsk, TurnEffect, Verb, VerbContext, VerbOutput};

/// The verb's name, as the model calls it.
pub const CONTINUE_SESSION: &str = "continue_session";

#[derive(Debug, Clone, Copy, Default)]
pub struct ContinueSession;

impl Verb for ContinueSession {
    fn name(&self) -> &'static str {
        CONTINUE_SESSION
    }

    fn description(&self) -> &'static str {
        "Carries this conversation into a fresh successor session, which answers the user's \
         newest message. Nothing is compacted: this transcript stays whole and readable with \
         read thread:<id>. Calling it ends your turn; you do not answer the message yourself.\n\
         \n\
         Continue when this transcript has stopped being the right working context:\n\
         - topic change: the user moved to a subject unrelated to what this session is about;\n\
         - phase change: a phase of the work finished and the next needs little of the detail;\n\
         - refocus: the user wants to concentrate on one thread of a sprawling conversation;\n\
         - context pressure: <context_usage> says the window is filling (from 70%, consider it \
           at the next boundary; from 85%, do it now unless the task is about to finish);\n\
         - user request: the user asks for a fresh session.\n\
         Do NOT continue: while side effects are unresolved (a verb whose outcome you have not \
         checked), while delegated children are still running, or for a plain follow-up that \
         this context serves well.\n\
         \n\
         The successor receives: a lineage block naming this thread, your handoff, your \
         sources, exact excerpts of the ranges you cite and of the most recent exchanges (within \
         a budget; what does not fit is listed as omitted, with how to read it), and then the \
         user's message copied word for word. It does not see anything else of this \
         transcript unless it reads it.\n\
         \n\
         Write the handoff for a colleague who has read nothing: purpose (what the work is \
         for), currentRequest (what the user just asked, in full), establishedFacts, decisions \
         (with their reasons), openQuestions, nextActions, cautions. Each is a string or a list \
         of strings; any other key you add is kept as a section of its own. Cite exact \
         material in sources rather than paraphrasing it: {\"type\": \"session_events\", \
         \"fromSeq\": 10, \"toSeq\": 14} (seqs as read thread:<id> shows them; \"thread\" \
         defaults to this one), {\"type\": \"session_event\", \"seq\": 3}, {\"type\": \
         \"memory\", \"path\": \"~/memory/notes.md\"} (must exist), or {\"type\": \"resource\", \
         \"uri\": \"https://…\"} (also hm:// and ipfs://). transfer.plan decides the checklist: \
         carry (copy it to the successor; the default while steps are unfinished), close (clear \
         it here), omit (leave it here).\n\
         \n\
         The title (what the successor session is about) and the description (its live status) \
         are yours to set, as with the status verb. A refused call (bad arguments, running \
         children, a session continued too often, or one that was just continued with nothing \
         new said) creates nothing and this session goes on; the result says why."
    }

    fn parameters(&self) -> Value {
        let text_or_list = json!({
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } }
            ]
        });
        json!({
            "type": "object",
            "properties": {
                "reason": {
                    "type": "string",
                    "description": "Why now, in a few words: topic change, phase change, refocus, context pressure or user request, with detail"
                },
                "title": { "type": "string", "description": "The successor's title: what it is about" },
                "description": { "type": "string", "description": "The successor's live status" },
                "handoff": {
                    "type": "object",
                    "description": "Prose for a colleague who has read nothing. Other keys are kept as sections of their own.",
                    "properties": {
                        "purpose": text_or_list,
                        "currentRequest": text_or_list,
                        "establishedFacts": text_or_list,
                        "decisions": text_or_list,
                        "openQuestions": text_or_list,
                        "nextActions": text_or_list,
                        "cautions": text_or_list
                    }
                },
                "sources": {
                    "type": "array",
                    "description": "Exact pointers: session_events / session_event ranges, memory paths, resource addresses",
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": { "type": "string", "enum": ["session_events", "session_event", "memory", "resource"] },
                            "thread": { "type": "string", "description": "thread:<session id>; default this thread" },
                            "fromSeq": { "type": "integer", "minimum": 1 },
                            "toSeq": { "type": "integer", "minimum": 1 },
                            "seq": { "type": "integer", "minimum": 1 },
                            "path": { "type": "string" },
                            "uri": { "type": "string" }
                        },
                        "required": ["type"]
                    }
                },
                "transfer": {
                    "type": "object",
                    "properties": {
                        "plan": { "type": "string", "enum": ["carry", "close", "omit"] }
                    }
                }
            },
            "required": ["reason", "title", "description", "handoff"]
        })
    }

    /// Not safe to repeat, as the spec has it for every verb but read, plan and status: a call
    /// cut off by a crash is not run again. When its successor had been created it is answered
    /// with that successor ([`Verb::reconcile`]: the edge of (session, call id)), else as
    /// interrupted.
    fn safe_to_repeat(&self) -> bool {
        false
    }

    /// The spec's replayed tool call: the same successor, found by (predecessor, call id); the
    /// succession actor answers as a replay (and queues the successor's run if a crash lost it).
    fn reconcile(
        &self,
        context: VerbContext,
        arguments: Value,
    ) -> BoxFuture<'static, Option<VerbOutput>> {
        Box::pin(async move {
            let edge = context
                .store
                .find_continuation(context.session_id, &context.tool_call_id)
                .await;
            match edge {
                Ok(Some(_)) => Some(ask_successions(context, arguments).await),
                Ok(None) => None,
                Err(error) => {
                    tracing::warn!(%error, "cannot look up a cut-off continue_session call");
                    None
                }
            }
        })
    }

    fn ends_turn(&self) -> bool {
        true
    }

    /// The successor answers: the run ends with the edge this call made.
    fn turn_effect(&self) -> TurnEffect {
        TurnEffect::Continues
    }

    fn availability(&self) -> Availability {
        Availability::NotInChildren
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(ask_successions(context, arguments))
    }
}

/// A call, as a message to the succession actor (which replays a call whose successor exists).
async fn ask_successions(context: VerbContext, arguments: Value) -> VerbOutput {
    let Some(successions) = context.successions.clone() else {
        return VerbOutput::error(
            "continue_session refused: continuing needs a running Seed runtime",
        );
    };
    match successions
        .send(Continue {
            context,
            arguments,
            ask: ContinueAsk::Create,
        })
        .await
    {
        Ok(output) => output,
        Err(error) => VerbOutput::error(format!(
            "continue_session failed: the succession actor is not running ({error})"
        )),
    }
}
