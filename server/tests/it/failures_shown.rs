//! What a person sees when a turn fails, and how `seed chat` and `seed show` read, against a
//! real `seed serve` with the scripted model.

use crate::common;

use crate::common::Server;
use seed_server::api::{EventsResponse, ListSessionsResponse};

#[actix_web::test]
async fn a_failed_turn_says_why_in_chat_in_show_in_the_log_and_in_the_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("serve.log");
    let server = Server::start_logging_to(dir.path(), &[], &log_path);
    let out = common::seed_cli(dir.path(), &["chat"], "do it [steps 3]\nplease [fail]\n");

    // In the log's order: each step's text, its call, its result; no empty line for a
    // response that only called; the failure with its reason.
    let lines: Vec<&str> = out
        .lines()
        .map(|line| line.trim_start_matches("> "))
        .collect();
    let at = |wanted: &str| {
        lines
            .iter()
            .position(|line| line.contains(wanted))
            .unwrap_or_else(|| panic!("no {wanted:?} in: {out}"))
    };
    let order = [
        at("Step 1 of 3."),
        at(r#"tool call: status({"description":"step 1 of 3"})"#),
        lines
            .iter()
            .position(|line| line.contains("tool result: status set"))
            .expect("a result"),
        at("Step 2 of 3."),
        at("You said: do it"),
        at("(the turn failed: "),
    ];
    assert!(
        order.windows(2).all(|pair| pair[0] < pair[1]),
        "{order:?}: {out}"
    );
    assert!(!out.contains("agent:"), "{out}");
    let failure = lines[at("(the turn failed: ")];
    assert!(
        failure.contains("the scripted model fails this message"),
        "{out}"
    );
    assert_eq!(out.matches("(the turn failed").count(), 1, "{out}");

    // `seed show`: the failed-run line after the message it did not answer.
    let sessions: ListSessionsResponse = server.client().get("/v1/sessions").await.expect("list");
    let session = sessions.sessions[0].id;
    let shown = common::seed_cli(dir.path(), &["show", &session.to_string()], "");
    let message = shown.find("user: please [fail]").expect("the message");
    let failed = shown.find("(the turn failed: ").expect("the failure");
    assert!(message < failed, "{shown}");
    assert!(!shown.contains("agent: \n"), "{shown}");

    // The events: the notice, naming the run and its reason.
    let events: EventsResponse = server
        .client()
        .get(&format!("/v1/sessions/{session}/events"))
        .await
        .expect("events");
    let notice = events.events.last().expect("events");
    assert_eq!(notice.event_type, "notice");
    let run_id = notice.run_id.expect("the run");
    let reason = notice.meta["reason"].as_str().expect("a reason");
    assert!(reason.contains("the scripted model fails this message"));

    // The service's log: one line for the failed run, with its session, run and reason.
    drop(server);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    let failed_lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("a run failed"))
        .collect();
    assert_eq!(failed_lines.len(), 1, "{log}");
    let line = failed_lines[0];
    assert!(line.contains(&session.to_string()), "{line}");
    assert!(line.contains(&run_id.to_string()), "{line}");
    assert!(
        line.contains("the scripted model fails this message"),
        "{line}"
    );
}

#[actix_web::test]
async fn usage_the_model_server_does_not_send_is_estimated_and_marked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let out = common::seed_cli(
        dir.path(),
        &["chat"],
        "hello [no usage]\nagain [usage 50%]\n",
    );
    // The meter after the first answer is an estimate; after the second, the server's count.
    let meters: Vec<&str> = out
        .lines()
        .filter(|line| line.contains("[context "))
        .collect();
    assert_eq!(meters.len(), 2, "{out}");
    assert!(meters[0].contains("[context ~"), "{out}");
    assert!(meters[0].contains(", estimated"), "{out}");
    assert!(!meters[1].contains("estimated"), "{out}");
    assert!(meters[1].contains("[context 100000 / 200000"), "{out}");

    let sessions: ListSessionsResponse = server.client().get("/v1/sessions").await.expect("list");
    let session = sessions.sessions[0].id;
    let events: EventsResponse = server
        .client()
        .get(&format!("/v1/sessions/{session}/events"))
        .await
        .expect("events");
    let answers: Vec<&serde_json::Value> = events
        .events
        .iter()
        .filter(|event| event.role.as_deref() == Some("assistant"))
        .map(|event| &event.meta["usage"])
        .collect();
    assert_eq!(answers[0]["estimated"], true, "{answers:?}");
    // The system prompt and the verbs' schemas alone are more than a thousand tokens.
    let estimate = answers[0]["input"].as_u64().expect("input");
    assert!(estimate > 1_000, "{answers:?}");
    assert!(answers[1].get("estimated").is_none(), "{answers:?}");
}
