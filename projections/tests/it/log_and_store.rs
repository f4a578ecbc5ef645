//! The log and the store in step, end to end over an in-memory session: a crash between the
//! store's commit and the log's write at every point, a store restored from an older copy, and
//! the prompt-cache stability of requests across a 20-turn session.

use crate::common::{Session, user_text};
use seed_durable::TurnOutcome;
use seed_durable::context::has_orphans;
use seed_projections::store_to_log::log_store_disagreements;
use seed_providers::Message;

/// Every store entry the log shows is in the log exactly once.
fn assert_each_entry_once(session: &Session, context: &str) {
    let state = seed_durable::StoreState::fold(
        &session
            .fs
            .snapshot()
            .get(&seed_durable::FileName::Entries)
            .cloned()
            .unwrap_or_default(),
        &[],
        &[],
    )
    .expect("fold");
    assert_eq!(
        log_store_disagreements(&state.entries, &session.log),
        Vec::<String>::new(),
        "{context}"
    );
}

#[test]
fn a_crash_between_the_stores_commit_and_the_logs_write_loses_and_repeats_nothing() {
    // How many commits one turn makes, and how many entries it projects.
    let mut probe = Session::new();
    probe.turn("r0", "warm up");
    let commits_before = probe.fs.n_commits();
    probe.turn("r1", "look it up");
    let n_commits = probe.fs.n_commits() - commits_before;

    for crash_after in 0..=n_commits {
        for projected_before_crash in 0..=3 {
            let context = format!("crash after {crash_after}, {projected_before_crash} projected");
            let mut session = Session::new();
            session.turn("r0", "warm up");
            let own = session.say("look it up");
            // The store crashes after `crash_after` commits of the turn, and the log got only
            // the first entries' events before the process died.
            let fs = session.fs.clone();
            fs.crash_after(crash_after);
            let mut harness = session.open(fs.clone());
            let _ = session.turn_projecting(
                &mut harness,
                "r1",
                &[own],
                Vec::new(),
                projected_before_crash,
            );
            drop(harness);

            // Reopen on what survived, then let the same run finish its turn.
            session.fs = fs.revive();
            let mut harness = session.open(session.fs.clone());
            assert_each_entry_once(&session, &format!("{context}, reopened"));
            let outcome = session
                .turn_with(&mut harness, "r1", &[own], Vec::new())
                .expect("the same run finishes");
            assert!(
                matches!(outcome, TurnOutcome::Answered { .. }),
                "{context}: {outcome:?}"
            );
            assert_each_entry_once(&session, &format!("{context}, finished"));
        }
    }
}

#[test]
fn a_store_restored_from_an_older_copy_imports_the_newer_log_without_duplicates() {
    let mut session = Session::new();
    session.turn("r1", "first question");
    let older_copy = session.fs.revive();
    session.turn("r2", "second question");
    session.turn("r3", "third question");

    // The store comes back from the older copy; the log kept everything.
    session.fs = older_copy;
    let outcome = session.turn("r4", "fourth question");
    assert!(
        matches!(outcome, TurnOutcome::Answered { .. }),
        "{outcome:?}"
    );
    assert_each_entry_once(&session, "after the restore");

    // The last request saw every question exactly once, with a result behind each call.
    let requests = session.provider.requests();
    let last = requests.last().expect("requests");
    let questions: Vec<&str> = last
        .messages
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::User(user) => Some(user.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        questions,
        [
            "first question",
            "second question",
            "third question",
            "fourth question"
        ]
    );
    assert!(!has_orphans(&last.messages));
    // The answers of turns 2 and 3, lost with the store, came back from the log.
    let answers: Vec<String> = last
        .messages
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::Assistant(assistant) if !assistant.text().is_empty() => Some(assistant.text()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["answer 1", "answer 2", "answer 3"]);
}

/// The bytes a provider would be sent, in the order that caches: the system prompt and tools,
/// then each message. Returns the bytes and where the per-turn blocks begin.
fn request_bytes(request: &seed_providers::Request) -> (Vec<u8>, usize) {
    let mut bytes = serde_json::to_vec(&(&request.system_prompt, &request.tools)).expect("json");
    let blocks_at = request
        .messages
        .iter()
        .position(
            |message| matches!(message.as_ref(), Message::User(u) if u.text.starts_with("<current_time>")),
        )
        .expect("the blocks are in every request");
    let mut prefix_len = bytes.len();
    for (idx, message) in request.messages.iter().enumerate() {
        if idx == blocks_at {
            prefix_len = bytes.len();
        }
        bytes.extend(serde_json::to_vec(message).expect("json"));
    }
    (bytes, prefix_len)
}

#[test]
fn each_request_up_to_its_blocks_is_a_prefix_of_the_next_turns_request() {
    let mut session = Session::new();
    let mut first_requests = Vec::new();
    for turn_idx in 0..20 {
        let own = session.say(&format!("question {turn_idx}"));
        let mut harness = session.open(session.fs.clone());
        let blocks = vec![user_text(&format!(
            "<current_time>turn {turn_idx}</current_time>"
        ))];
        let n_before = session.provider.n_requests();
        session
            .turn_with(&mut harness, &format!("r{turn_idx}"), &[own], blocks)
            .expect("turn");
        first_requests.push(session.provider.requests()[n_before].clone());
    }
    insta::assert_json_snapshot!("first_request", first_requests[0]);
    for pair in first_requests.windows(2) {
        let (earlier, earlier_prefix) = request_bytes(&pair[0]);
        let (later, _) = request_bytes(&pair[1]);
        assert!(
            later.starts_with(&earlier[..earlier_prefix]),
            "a request's stable part is not a prefix of the next turn's:\n{}\n---\n{}",
            String::from_utf8_lossy(&earlier[..earlier_prefix]),
            String::from_utf8_lossy(&later)
        );
    }
    // Blocks were sent, and never stored.
    let stored = format!("{:?}", session.fs.snapshot());
    assert!(!stored.contains("current_time"));
    let entries_have_replays = session
        .fs
        .snapshot()
        .get(&seed_durable::FileName::Entries)
        .is_some_and(|lines| lines.iter().any(|line| line.contains("seed.replay")));
    assert!(
        !entries_have_replays,
        "plain turns append nothing but their input"
    );
}
