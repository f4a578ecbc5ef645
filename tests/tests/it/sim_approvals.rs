//! Approvals in the simulation: its model calls a destructive tool (`mcp_delete`), whose calls
//! wait for a person's approval; its users approve, edit or deny them, and answer everything
//! before a process ends. Over seeds with crashes, the decisions happen and every invariant
//! holds; and the invariants of approvals, "a denied call never ran", "an approved call ran at
//! most once" and "an approved call ran unless its run ended first", do catch a database that
//! breaks them.

use std::collections::HashMap;

use seed_events::{AccountId, Queue, RunId, RunStatus, SessionId};
use seed_sim::{self as sim, SimConfig};
use seed_store::{ApprovalDecision, Config, NewApproval, NewRun, NewSession, Store};

#[test]
fn the_simulation_decides_approvals_and_keeps_their_invariants() -> anyhow::Result<()> {
    let mut n_decided = 0;
    for seed in 0..40 {
        let report = sim::run(&SimConfig {
            seed,
            crash_rate: 0.08,
            ..SimConfig::default()
        })?;
        assert!(
            report.violations.is_empty(),
            "seed {seed} (replay with SIM_SEED={seed}): {:#?}",
            report.violations
        );
        n_decided += report.approvals_decided;
    }
    assert!(n_decided > 0, "no call waited for approval");
    Ok(())
}

/// One call's approval, decided as `decision`, that ran `ran` times, its run ended as
/// `run_status`: the violations of the quiet database.
fn violations_of(
    decision: ApprovalDecision,
    ran: usize,
    run_status: RunStatus,
) -> anyhow::Result<Vec<String>> {
    let dir = tempfile::tempdir()?;
    let account = AccountId::from_u128(0xa);
    let session = SessionId::from_u128(0x5);
    actix::System::new().block_on(async move {
        let store = Store::open(Config::new(dir.path().join("seed.db")))?;
        store.create_account(account, vec![1], 0).await?;
        store
            .create_session(NewSession::new(session, account, 0))
            .await?;
        let approval = NewApproval {
            session_id: session,
            run_id: RunId::from_u128(0x7),
            tool_call_id: "c1".to_owned(),
            verb: "mcp_delete".to_owned(),
            arguments: serde_json::json!({ "item": "old" }),
            deadline_at_ms: None,
        };
        let run = NewRun {
            id: RunId::from_u128(0x7),
            session_id: session,
            queue: Queue::Interactive,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: false,
            created_at_ms: 0,
        };
        store.enqueue_run(run).await?;
        store.park_on_approval(approval, 1).await?;
        store.decide_approval(session, "c1", decision, 2).await?;
        store
            .finish_run(RunId::from_u128(0x7), run_status, None, 3)
            .await?;
        let launches = HashMap::from([((session, "c1".to_owned()), ran)]);
        let mut violations = Vec::new();
        sim::invariants::check_quiet_database(&store, account, &launches, &mut violations).await?;
        Ok(violations)
    })
}

#[test]
fn the_approval_invariants_catch_a_denied_call_that_ran_and_an_approved_one_run_twice_or_never()
-> anyhow::Result<()> {
    let deny = || ApprovalDecision::Deny {
        reason: "no".to_owned(),
    };
    let approve = || ApprovalDecision::Approve {
        arguments: serde_json::json!({ "item": "old" }),
    };
    let names = |violations: &[String], text: &str| violations.iter().any(|v| v.contains(text));
    let done = RunStatus::Succeeded;
    let denied_ran = violations_of(deny(), 1, done)?;
    assert!(
        names(&denied_ran, "was denied, yet it ran 1 times"),
        "{denied_ran:#?}"
    );
    let approved_twice = violations_of(approve(), 2, done)?;
    assert!(
        names(&approved_twice, "was approved once, yet it ran 2 times"),
        "{approved_twice:#?}"
    );
    let approved_never = violations_of(approve(), 0, done)?;
    assert!(
        names(&approved_never, "was approved, yet it never ran"),
        "{approved_never:#?}"
    );
    let canceled = RunStatus::Canceled;
    for (decision, ran, run_status) in [
        (deny(), 0, done),
        (approve(), 1, done),
        (approve(), 0, canceled),
    ] {
        let violations = violations_of(decision.clone(), ran, run_status)?;
        assert!(
            !names(&violations, "call c1"),
            "{decision:?} {ran} {run_status:?}: {violations:#?}"
        );
    }
    Ok(())
}
