//! `preview_continuation`: what continue_session would create from the same arguments — the
//! projection's size against the budget, each source's fit, what would be omitted, the
//! successor's first request against the window, the ranges worth citing — with nothing
//! created. Safe to repeat: it only reads. The call is a message to the succession actor,
//! which holds what the measure needs (the system prompt, the verbs, the model's window); see
//! `crate::continuation::preview`.

use futures::future::BoxFuture;
use serde_json::Value;

use super::continue_session::ContinueSession;
use crate::verb::{Availability, Continue, ContinueAsk, Verb, VerbContext, VerbOutput};

/// The verb's name, as the model calls it.
pub const PREVIEW_CONTINUATION: &str = "preview_continuation";

#[derive(Debug, Clone, Copy, Default)]
pub struct PreviewContinuation;

impl Verb for PreviewContinuation {
    fn name(&self) -> &'static str {
        PREVIEW_CONTINUATION
    }

    fn description(&self) -> &'static str {
        "Shows what continue_session would create from the same arguments, and creates \
         nothing: the projection's size in bytes and estimated tokens against its budget, each \
         source with its size and whether it fits (whole, cut, omitted, or listed to read on \
         demand), the ranges that would be omitted with their sizes, the successor's first \
         request as a share of the model's context window, and the ranges of this session \
         worth citing, each with why. It refuses exactly what continue_session would refuse, \
         with the same reason. Use it to choose the sources before continuing; it does not end \
         your turn. The result is JSON."
    }

    /// Continue_session's own schema, the same arguments, closed at the top level (a key
    /// continue_session does not read is a mistake worth naming).
    fn parameters(&self) -> Value {
        let mut schema = ContinueSession.parameters();
        schema["additionalProperties"] = Value::Bool(false);
        schema
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn availability(&self) -> Availability {
        Availability::NotInChildren
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(async move {
            let Some(successions) = context.successions.clone() else {
                return VerbOutput::error(
                    "preview_continuation refused: it needs a running Seed runtime",
                );
            };
            match successions
                .send(Continue {
                    context,
                    arguments,
                    ask: ContinueAsk::Preview,
                })
                .await
            {
                Ok(output) => output,
                Err(error) => VerbOutput::error(format!(
                    "preview_continuation failed: the succession actor is not running ({error})"
                )),
            }
        })
    }
}
