//! The supervisor: creates sessions on behalf of running turns. A continuation is a message
//! exchange — the continue_session verb asks the supervisor, which creates the successor, its
//! edge and its first events in one transaction, queues the successor's run after the commit,
//! has the run queue spawn the successor's actor, and answers with the successor.

use std::sync::Arc;

use actix::prelude::*;

use crate::env::RunEnv;
use crate::queue::{Activate, RunQueue};
use crate::verb::{VerbContext, VerbOutput};

pub struct Supervisor {
    env: Arc<RunEnv>,
    queue: Addr<RunQueue>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

impl Supervisor {
    pub fn new(env: Arc<RunEnv>, queue: Addr<RunQueue>) -> Supervisor {
        Supervisor { env, queue }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;
}

/// A continue_session call: continue the calling session into a successor.
#[derive(Message)]
#[rtype(result = "VerbOutput")]
pub struct Continue {
    pub context: VerbContext,
    pub arguments: serde_json::Value,
}

impl std::fmt::Debug for Continue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Continue")
            .field("session_id", &self.context.session_id)
            .field("tool_call_id", &self.context.tool_call_id)
            .finish_non_exhaustive()
    }
}

impl Handler<Continue> for Supervisor {
    type Result = ResponseFuture<VerbOutput>;

    fn handle(&mut self, message: Continue, _: &mut Context<Self>) -> Self::Result {
        let env = Arc::clone(&self.env);
        let queue = self.queue.clone();
        Box::pin(async move {
            let outcome =
                crate::continuation::continue_session(&env, message.context, message.arguments)
                    .await;
            if let Some(successor) = outcome.successor_to_start {
                // The successor's actor is spawned now, and its queued run claimed.
                queue.do_send(Activate {
                    session_id: successor,
                });
            }
            outcome.output
        })
    }
}
