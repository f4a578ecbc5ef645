//! Everything a client sees, from any node: two `seed serve` nodes on one PostgreSQL database,
//! a subscriber on each, one turn. The subscriber on the node that did not run the turn hears
//! it as the one on the node that ran it does: each change with the seqs it made visible, the
//! tool calls, the text deltas in order (char offsets, over text that is not ASCII), and the
//! run's end.

use std::time::Duration;

use crate::common::{Server, new_session, open_store, responses_of, shared_database};
use seed_events::RunId;
use seed_server::api::{EventsResponse, MessageSessionResponse};
use seed_server::client::next_update;
use seed_server::ws::Update;
use serde_json::json;

/// How long hearing a whole turn may take before it is called a hang.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// What one subscriber heard of one session's turn, up to the run's end.
#[derive(Debug, Default, PartialEq)]
struct Heard {
    ranges: Vec<(i64, i64)>,
    tool_calls: Vec<(i64, String)>,
    deltas: Vec<(usize, String)>,
    status: String,
}

/// Reads `subscription` until the run `run_id` of `session_id` ends.
async fn hear_turn(
    mut subscription: actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
    session_id: uuid::Uuid,
    run_id: uuid::Uuid,
) -> Heard {
    let mut heard = Heard::default();
    loop {
        let update = tokio::time::timeout(HANG_GUARD, next_update(&mut subscription))
            .await
            .expect("the turn is heard of before the hang guard")
            .expect("the subscription stays open");
        match update {
            Update::SessionChange {
                session_id: id,
                from_seq: Some(from),
                to_seq: Some(to),
                ..
            } if id.0 == session_id => heard.ranges.push((from, to)),
            Update::ToolCall {
                session_id: id,
                seq,
                name,
                ..
            } if id.0 == session_id => heard.tool_calls.push((seq, name)),
            Update::TextDelta {
                session_id: id,
                offset_chars,
                text,
                ..
            } if id.0 == session_id => heard.deltas.push((offset_chars, text)),
            Update::RunFinished {
                run_id: id, status, ..
            } if id.0 == run_id => {
                heard.status = status;
                return heard;
            }
            _ => {}
        }
    }
}

#[actix_web::test]
async fn a_subscriber_on_one_node_hears_a_turn_that_runs_on_another() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let _database = shared_database(&[dir_a.path(), dir_b.path()]);
    let node_a = Server::start(dir_a.path(), &[]);
    let node_b = Server::start(dir_b.path(), &[]);
    assert_ne!(node_a.node_id, node_b.node_id);
    // One account, known to both: its key is in the shared database.
    let key = node_a.local_key();
    let client_a = node_a.client();
    let client_b = node_b.client_with(key);
    let on_a = client_a.subscribe().await.expect("subscribes on node A");
    let on_b = client_b.subscribe().await.expect("subscribes on node B");

    // Three steps, each response streamed slowly, the text not ASCII: the turn runs on the
    // node that claims it (node A, which took the message, as a rule).
    let session = new_session(&client_a).await;
    let sent: MessageSessionResponse = client_a
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "[steps 3] [slow 80] plan the trip — über Zürich ✓"}),
        )
        .await
        .expect("sent");
    let (heard_on_a, heard_on_b) = futures::join!(
        hear_turn(on_a, session.id, sent.run_id),
        hear_turn(on_b, session.id, sent.run_id),
    );

    let store = open_store(dir_a.path());
    let run = store
        .get_run(RunId::from_u128(sent.run_id.as_u128()))
        .await
        .expect("reads")
        .expect("the run");
    let (ran_on, heard_elsewhere) = if run.owner.as_deref() == Some(node_a.node_id.as_str()) {
        ("A", &heard_on_b)
    } else {
        assert_eq!(run.owner.as_deref(), Some(node_b.node_id.as_str()));
        ("B", &heard_on_a)
    };

    // The other node's subscriber heard the whole turn, in order.
    assert_eq!(heard_elsewhere.status, "succeeded", "ran on node {ran_on}");
    assert_eq!(
        responses_of(&heard_elsewhere.deltas),
        [
            "Step 1 of 3.",
            "Step 2 of 3.",
            "You said: plan the trip — über Zürich ✓"
        ],
        "ran on node {ran_on}"
    );
    let names: Vec<&str> = heard_elsewhere
        .tool_calls
        .iter()
        .map(|(_, name)| name.as_str())
        .collect();
    assert_eq!(names, ["status", "status"]);
    // The ranges made visible cover the log from the message on, without a gap, and each call
    // was heard of with the seq of its event.
    let log: EventsResponse = client_b
        .get(&format!(
            "/v1/sessions/{}/events?from_seq=1&to_seq={}",
            session.id,
            i64::MAX
        ))
        .await
        .expect("events from node B");
    let ranges = &heard_elsewhere.ranges;
    assert_eq!(ranges.first().map(|range| range.0), Some(sent.seq));
    for pair in ranges.windows(2) {
        assert_eq!(pair[1].0, pair[0].1 + 1, "{ranges:?}");
    }
    assert_eq!(
        ranges.last().map(|range| range.1),
        log.events.last().map(|event| event.seq)
    );
    for (seq, _) in &heard_elsewhere.tool_calls {
        let event = log
            .events
            .iter()
            .find(|event| event.seq == *seq)
            .expect("the call's event");
        assert_eq!(event.event_type, "tool_call");
    }
    // The same as the node that ran it told its own subscriber.
    assert_eq!(heard_on_a, heard_on_b);
}

/// Lease timings where a node's own renewal (when it also looks for runs) comes too late to
/// matter: a run the other node queued starts here only if the other node's notice wakes it.
const RARE_RENEWALS: [&str; 4] = ["--node-renew-ms", "30000", "--node-expire-ms", "60000"];

#[actix_web::test]
async fn a_run_queued_on_a_full_node_starts_at_once_on_a_free_one() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let _database = shared_database(&[dir_a.path(), dir_b.path()]);
    let mut args_a = vec!["--interactive-runs-max", "1", "--account-runs-max", "4"];
    args_a.extend(RARE_RENEWALS);
    let mut args_b = vec!["--account-runs-max", "4"];
    args_b.extend(RARE_RENEWALS);
    let node_a = Server::start(dir_a.path(), &args_a);
    let node_b = Server::start(dir_b.path(), &args_b);
    let client = node_a.client();
    let store = open_store(dir_a.path());
    let run_of = |sent: &MessageSessionResponse| RunId::from_u128(sent.run_id.as_u128());

    // Node A's one slot is taken by a long, slow turn.
    let long = new_session(&client).await;
    let words = (0..100)
        .map(|idx| format!("w{idx}"))
        .collect::<Vec<_>>()
        .join(" ");
    let first: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", long.id),
            &json!({ "text": format!("[slow 150] {words}") }),
        )
        .await
        .expect("sent");
    let started = std::time::Instant::now();
    loop {
        let run = store.get_run(run_of(&first)).await.expect("reads");
        if run.as_ref().is_some_and(|run| run.owner.is_some()) {
            break;
        }
        assert!(started.elapsed() < HANG_GUARD, "the long turn starts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A second session's message, sent to node A, which has no room: node B, told of it,
    // takes it and answers while node A's long turn still streams.
    let short = new_session(&client).await;
    let second: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", short.id),
            &json!({ "text": "a short one" }),
        )
        .await
        .expect("sent");
    let ended = loop {
        let run = store
            .get_run(run_of(&second))
            .await
            .expect("reads")
            .expect("the run");
        if run.status.is_terminal() {
            break run;
        }
        assert!(started.elapsed() < HANG_GUARD, "the short turn ends");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(ended.status, seed_events::RunStatus::Succeeded);
    assert_eq!(ended.owner.as_deref(), Some(node_b.node_id.as_str()));
    let long_run = store
        .get_run(run_of(&first))
        .await
        .expect("reads")
        .expect("the run");
    assert_eq!(
        long_run.status,
        seed_events::RunStatus::Running,
        "the short turn ended on node B while node A's long one still ran"
    );
    assert_eq!(long_run.owner.as_deref(), Some(node_a.node_id.as_str()));
}
