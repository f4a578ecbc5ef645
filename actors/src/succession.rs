//! The succession actor: creates successor sessions on behalf of running turns. A continuation
//! is a message exchange — the continue_session verb sends [`Continue`] to it, and it creates
//! the successor, its edge and its first events in one transaction, queues the successor's run
//! after the commit, has the run queue spawn the successor's actor ([`Activate`]), and answers
//! with the successor.

use std::sync::Arc;

use actix::prelude::*;
use tracing::Instrument as _;

use crate::env::RunEnv;
use crate::messages::Activate;
use crate::verb::{Continue, ContinueAsk, VerbOutput};

pub struct SuccessionActor {
    env: Arc<RunEnv>,
    /// The runs queue, which spawns a successor's actor.
    queue: Recipient<Activate>,
}

impl std::fmt::Debug for SuccessionActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuccessionActor").finish_non_exhaustive()
    }
}

impl SuccessionActor {
    pub fn new(env: Arc<RunEnv>, queue: Recipient<Activate>) -> SuccessionActor {
        SuccessionActor { env, queue }
    }
}

impl Actor for SuccessionActor {
    type Context = Context<Self>;
}

impl Handler<Continue> for SuccessionActor {
    type Result = ResponseFuture<VerbOutput>;

    fn handle(&mut self, message: Continue, _: &mut Context<Self>) -> Self::Result {
        let env = Arc::clone(&self.env);
        let queue = self.queue.clone();
        if message.ask == ContinueAsk::Preview {
            // A preview creates nothing: no successor to start.
            return Box::pin(async move {
                let asker = crate::continuation::preview::Asker {
                    account_id: message.context.account_id,
                    session_id: message.context.session_id,
                    run_id: Some(message.context.run_id),
                };
                crate::continuation::preview::preview_output(
                    crate::continuation::preview::preview(&env, asker, message.arguments).await,
                )
            });
        }
        // The continuation's span, under the tool call's (carried here in the call's
        // context): the successor and the projection's size are recorded on it.
        let span = tracing::info_span!(
            target: seed_durable::TRACE_TARGET,
            parent: None,
            "seed.continuation",
            otel.name = "seed.continuation",
            seed.session_id = %message.context.session_id,
            seed.continuation.successor_session_id = tracing::field::Empty,
            seed.continuation.projection_bytes = tracing::field::Empty,
        );
        let call_traceparent = message.context.call_span.as_ref();
        if let Some(traceparent) = call_traceparent.and_then(|span| span.traceparent()) {
            env.settings.traces.set_parent(&span, &traceparent);
        }
        Box::pin(async move {
            let outcome =
                crate::continuation::continue_session(&env, message.context, message.arguments)
                    .instrument(span.clone())
                    .await;
            if let Some(successor) = outcome.successor_to_start {
                span.record(
                    "seed.continuation.successor_session_id",
                    tracing::field::display(successor),
                );
                // The successor's actor is spawned now, and its queued run claimed.
                queue.do_send(Activate {
                    session_id: successor,
                });
            }
            outcome.output
        })
    }
}
