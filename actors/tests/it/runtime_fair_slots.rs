//! Slots shared fairly between accounts: one account's slow runs, more than the slots, do not
//! keep another account's run waiting until they have all started. An account holds at most
//! its share of runs in flight, and when a slot frees up the account with the fewest runs in
//! flight has its run claimed first.
//!
//! The model records which message each turn answers as the turn asks it (the order of starts)
//! and then waits for a permit the test hands out, so a turn is slow exactly as long as the
//! test says, and the assertions are on the order of starts, not on time.

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::{AccountId, RunId, RunStatus, SessionId};
use seed_providers::{Provider, Request, ScriptedProvider, ScriptedStep, StreamEvent};
use seed_store::NewSession;

use crate::common::{Fixture, input_of, session, within};

/// Account A's messages, one per session: more than the slots.
const N_A_MESSAGES: u128 = 6;

fn account_b() -> AccountId {
    AccountId::from_u128(0xb)
}

fn b_session() -> SessionId {
    SessionId::from_u128(0xb0)
}

/// Answers every turn at once, but only once a permit arrives; tells the test which message
/// each turn answers when the turn asks.
struct Slow {
    answers: ScriptedProvider,
    started: mpsc::UnboundedSender<String>,
    permits: Arc<futures::lock::Mutex<mpsc::UnboundedReceiver<()>>>,
}

impl Provider for Slow {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let input = input_of(&request).unwrap_or_default().to_owned();
        let _ = self.started.unbounded_send(input);
        let answer = self.answers.stream(request);
        let permits = Arc::clone(&self.permits);
        futures::stream::once(async move {
            // A permit per turn; once the permits close, every turn goes through.
            let _ = permits.lock().await.next().await;
            answer
        })
        .flatten()
        .boxed()
    }
}

/// A runtime over a fixture with account A's sessions and account B's one, whose model
/// waits for the permits the returned sender hands out, and the starts it reports.
struct Setup {
    fixture: Fixture,
    runtime: Runtime,
    started: mpsc::UnboundedReceiver<String>,
    permits: mpsc::UnboundedSender<()>,
}

async fn setup(settings: RuntimeSettings) -> anyhow::Result<Setup> {
    let fixture = Fixture::new(N_A_MESSAGES).await?;
    fixture
        .store
        .create_account(account_b(), vec![2], 0)
        .await?;
    fixture
        .store
        .create_session(NewSession::new(b_session(), account_b(), 0))
        .await?;
    let (started_sender, started) = mpsc::unbounded();
    let (permits, permits_receiver) = mpsc::unbounded();
    let provider = Slow {
        answers: ScriptedProvider::from_fn(|_, _| {
            ScriptedStep::Respond(seed_providers::text_response("done"))
        }),
        started: started_sender,
        permits: Arc::new(futures::lock::Mutex::new(permits_receiver)),
    };
    let runtime = fixture.start_with(provider, settings, "boot-a").await?;
    Ok(Setup {
        fixture,
        runtime,
        started,
        permits,
    })
}

impl Setup {
    /// Account A's messages, then B's; returns B's run.
    async fn send_a_then_b(&self) -> anyhow::Result<RunId> {
        for idx in 0..N_A_MESSAGES {
            self.runtime
                .send_message(session(idx), &format!("a{idx}"))
                .await?;
        }
        let (_, b_run) = self.runtime.send_message(b_session(), "b").await?;
        Ok(b_run)
    }

    /// The next `n` turns to start, by the message each answers, sorted: runs claimed
    /// together start side by side, in either order.
    async fn next_starts(&mut self, n: usize) -> Vec<String> {
        let mut starts = Vec::new();
        for _ in 0..n {
            let start = within("the next start", self.started.next()).await;
            starts.push(start.expect("the model is still running"));
        }
        starts.sort();
        starts
    }

    /// How many of account A's runs are running and how many wait.
    async fn a_runs(&self) -> anyhow::Result<(usize, usize)> {
        let (mut n_running, mut n_queued) = (0, 0);
        for idx in 0..N_A_MESSAGES {
            for run in self.fixture.store.list_session_runs(session(idx)).await? {
                match run.status {
                    RunStatus::Running => n_running += 1,
                    RunStatus::Queued => n_queued += 1,
                    _ => {}
                }
            }
        }
        Ok((n_running, n_queued))
    }
}

#[actix::test]
async fn an_account_holds_at_most_its_share_and_another_accounts_run_starts_beside_it()
-> anyhow::Result<()> {
    // Four slots, two of them A's share at most.
    let mut setup = setup(RuntimeSettings {
        interactive_runs_max: 4,
        account_runs_max: 2,
        ..RuntimeSettings::default()
    })
    .await?;
    let b_run = setup.send_a_then_b().await?;
    // A's first two start; B's starts beside them, though no turn of A's has ended.
    assert_eq!(setup.next_starts(3).await, ["a0", "a1", "b"]);
    assert_eq!(
        setup.a_runs().await?,
        (2, 4),
        "A holds its share, the rest wait"
    );
    // Every turn may end now; A's others start two at a time after B's.
    setup.permits.close_channel();
    let b_run = within("B's run", setup.runtime.wait_for_run(b_run)).await?;
    assert_eq!(b_run.status, RunStatus::Succeeded, "{b_run:?}");
    assert_eq!(setup.next_starts(4).await, ["a2", "a3", "a4", "a5"]);
    Ok(())
}

#[actix::test]
async fn a_freed_slot_goes_to_the_account_with_the_fewest_runs_in_flight() -> anyhow::Result<()> {
    // Two slots, and a share as large: A's runs alone could fill them, and do.
    let mut setup = setup(RuntimeSettings {
        interactive_runs_max: 2,
        account_runs_max: 2,
        ..RuntimeSettings::default()
    })
    .await?;
    let b_run = setup.send_a_then_b().await?;
    assert_eq!(setup.next_starts(2).await, ["a0", "a1"]);
    assert_eq!(setup.a_runs().await?, (2, 4));
    // One of A's turns ends: the slot goes to B, which has none in flight, before A's next.
    setup.permits.unbounded_send(())?;
    assert_eq!(setup.next_starts(1).await, ["b"]);
    assert_eq!(setup.a_runs().await?, (1, 4), "A's queue has not drained");
    // Then A's others, as slots free up.
    setup.permits.close_channel();
    assert_eq!(setup.next_starts(4).await, ["a2", "a3", "a4", "a5"]);
    let b_run = within("B's run", setup.runtime.wait_for_run(b_run)).await?;
    assert_eq!(b_run.status, RunStatus::Succeeded, "{b_run:?}");
    Ok(())
}
