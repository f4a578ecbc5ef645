//! The import rules, read like data: a log (and what the importing run is) written as text, a
//! small store, and the plan the import makes, rendered as text.
//!
//! A log is one event a line, `<seq> <kind> <text>`, where kind is `user`, `assistant`,
//! `notice`, `action`, `call <id> <name>` or `result <id> <name> <text>`; after it, `[entry N]`
//! for an event the store wrote (from entry N), `[own]` for a message of the importing run,
//! `[waiting]` for one of a run still waiting its turn and `[left out]` for one the mark passed
//! over. A line `--- mark` follows the events imported so far (without one, the mark is 0).
//! Event ids are seq + 100; a plan shows them as the seq. An assistant message in a plan shows
//! its stop reason, and its model, usage and error only when they are not a replayed message's.

mod notation;

use seed_durable::record::TurnState;
use seed_projections::attachments::{AttachedContent, AttachedFile};
use seed_projections::import::{AttachedFiles, NO_FILES, answered_already, delegated_in_turn};
use seed_providers::text_response;
use serde_json::json;

pub(crate) use notation::{Given, given, store};
use notation::{after_their_turn, assert_reads, check, plan, try_check, with_turn};

/// Each case (a blank line between two): `## <the rule>`, `store <a fixture of store()>`, the
/// log, `=>` and the plan.
pub(crate) const CASES: &str = r#"
## append makes the run's newest message the input
store answered
1 user hi
--- mark
2 assistant hello [entry 2]
3 user and then? [own]
=>
Append
input "and then?"
sync mark 3, left out [], input event 3

## a message sent while the answer streamed follows that answer (the store holds the answer)
store answered
1 user hi
--- mark
2 user wait [own]
3 assistant hello [entry 2]
=>
Append
input "wait"
sync mark 3, left out [], input event 2

## append replays text Seed wrote, notices (framed, never taken for a person's words),
## actions and the run's older messages before the input, its newest
store answered
1 user hi
2 assistant hello [entry 2]
--- mark
3 assistant I was about to say
4 notice the plan has open steps
5 action [status] title set to Trip
6 user first [own]
7 user second [own]
=>
Append
replay assistant[Stop] "I was about to say"
replay user "<notice>the plan has open steps</notice>"
replay user "[status] title set to Trip"
replay user "first"
input "second"
sync mark 7, left out [], input event 7

## a message after the run's own is left out...
store answered
1 user hi
2 assistant hello [entry 2]
--- mark
3 user mine [own]
4 user next one [waiting]
=>
Append
input "mine"
sync mark 4, left out [4], input event 3

## ...and imported by its own run, from the left-out list
store answered
1 user hi
2 assistant hello [entry 2]
3 user mine
4 user next one [own] [left out]
--- mark
=>
Append
input "next one"
sync mark 4, left out [], input event 4

## a child's result edits its placeholder, and the input is a background update (the parked
## run's own message was read long ago; another run's message waits for it)
store parked
1 user research it [own]
2 assistant [entry 2]
3 call d1 delegate [entry 2]
--- mark
4 user unrelated [waiting]
5 result d1 delegate the answer is 42
=>
Edit
edit 3 result d1 delegate "the answer is 42"
input "<background_work_update>"
sync mark 5, left out [4], input event none

## a parked run's message is not waiting its turn: whoever imports next takes it in
store parked
1 user research it
2 assistant [entry 2]
3 call d1 delegate [entry 2]
--- mark
4 user also consider this
5 result d1 delegate done
=>
Edit
replay user "also consider this"
edit 3 result d1 delegate "done"
input "<background_work_update>"
sync mark 5, left out [], input event none

## a result the runtime wrote for a call a restart cut off rebuilds the context
store cut off
1 user send it
2 assistant sending [entry 2]
3 call m1 memory [entry 2]
--- mark
4 result m1 memory interrupted by a service restart
5 user did it work? [own]
=>
Rebuild
reset
replay user "send it"
replay assistant[ToolUse] "sending", call m1 memory {}
replay result m1 memory "interrupted by a service restart"
input "did it work?"
sync mark 5, left out [], input event 5

## a late result whose placeholder left the context rebuilds it
store parked, reset
1 user research it
2 assistant [entry 2]
3 call d1 delegate [entry 2]
--- mark
4 result d1 delegate finally
=>
Rebuild
reset
replay user "research it"
replay assistant[ToolUse] call d1 delegate {}
replay result d1 delegate "finally"
input "<background_work_update>"
sync mark 4, left out [], input event none

## a session with no store rebuilds from the whole log
store empty
1 user hi
2 assistant hello [entry 2]
3 user again [own]
=>
Rebuild
reset
replay user "hi"
replay assistant[Stop] "hello"
input "again"
sync mark 3, left out [], input event 3

## a brand-new session: only its first message, which is the input
store empty
1 user hi [own]
=>
Rebuild
reset
input "hi"
sync mark 1, left out [], input event 1

## a rebuild leaves out what belongs to runs still waiting
store empty
1 user mine [own]
2 user theirs [waiting]
=>
Rebuild
reset
input "mine"
sync mark 2, left out [2], input event 1

## a rebuild replays the calls of one response with no text (no message event), projected
## from one entry, as one assistant message, and the next such response's as another
store empty
1 user hi
2 call c1 status [entry 2]
3 call c2 plan [entry 2]
4 result c1 status ok [entry 3]
5 result c2 plan ok [entry 4]
6 call c3 read [entry 5]
7 result c3 read text [entry 6]
8 assistant done [entry 7]
9 user again [own]
=>
Rebuild
reset
replay user "hi"
replay assistant[ToolUse] call c1 status {}, call c2 plan {}
replay result c1 status "ok"
replay result c2 plan "ok"
replay assistant[ToolUse] call c3 read {}
replay result c3 read "text"
replay assistant[Stop] "done"
input "again"
sync mark 9, left out [], input event 9
"#;

#[test]
fn the_import_plans_from_a_table_of_logs() {
    let mut failures = Vec::new();
    for case in CASES.trim().split("\n\n") {
        let (rule, rest) = case.split_once("\nstore ").expect("a rule and a store");
        let (fixture, rest) = rest.split_once('\n').expect("a log");
        if let Err(failure) = try_check(&store(fixture), rest) {
            failures.push(format!("{rule}\n{failure}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_turn_delegated_when_it_answered_a_call_with_a_placeholder() {
    // (the store's turn: request id and input entry; the request id asked about; delegated)
    let table = [
        (
            Some(("r-old", 1)),
            "r-old",
            true,
            "the turn that placed the placeholder",
        ),
        (
            Some(("r-new", 1)),
            "r-new",
            false,
            "a later pass, though the store has it",
        ),
        (Some(("r-old", 1)), "r-new", false, "asked under another id"),
        (
            Some(("r-old", 3)),
            "r-old",
            false,
            "a placeholder before its input",
        ),
        (None, "r-old", false, "no turn, no delegation"),
    ];
    for (turn, asked, delegated, case) in table {
        let state = match turn {
            Some((id, input)) => with_turn(store("parked"), id, input, TurnState::Ended),
            None => store("parked"),
        };
        assert_eq!(delegated_in_turn(&state, asked), delegated, "{case}");
    }
}

#[test]
fn a_parked_run_whose_childs_result_another_turn_answered_returns_that_answer() {
    // The parent parked on its child. A message came while it waited; the child's result
    // arrived before that message's run imported, so that run took the result in (an edit of
    // the placeholder) with its message, and answered.
    let parked = store("parked");
    let theirs = check(
        &parked,
        r#"
        1 user research it
        2 assistant [entry 2]
        3 call d1 delegate [entry 2]
        --- mark
        4 user anything new? [own]
        5 result d1 delegate the answer is 42
        =>
        Edit
        edit 3 result d1 delegate "the answer is 42"
        input "anything new?"
        sync mark 5, left out [], input event 4"#,
    );
    let answered = after_their_turn(&parked, &theirs, "it is 42", TurnState::Answered);

    // The parent's later pass finds nothing to take in and no message of its own: it returns
    // the answer the other turn gave, without asking the model.
    let later_pass = check(
        &answered,
        r#"
        1 user research it [own]
        2 assistant [entry 2]
        3 call d1 delegate [entry 2]
        4 user anything new?
        5 result d1 delegate the answer is 42
        --- mark
        6 assistant it is 42 [entry 6]
        =>
        Append
        input "<background_work_update>"
        sync mark 6, left out [], input event none"#,
    );
    let answer = answered_already(&later_pass, &answered, "parent#1");
    assert_eq!(answer, Some((6, text_response("it is 42"))));
    // Had that turn failed (or ended without an answer), the model is asked.
    for unanswered in [TurnState::Failed, TurnState::Ended, TurnState::Stopped] {
        let state = after_their_turn(&parked, &theirs, "it is 42", unanswered);
        let answer = answered_already(&later_pass, &state, "parent#1");
        assert_eq!(answer, None, "{unanswered:?}");
    }
    // Had the result not been taken in, the parent's pass imports it and asks the model.
    let not_taken_in = check(
        &parked,
        r#"
        1 user research it [own]
        2 assistant [entry 2]
        3 call d1 delegate [entry 2]
        --- mark
        4 user anything new? [waiting]
        5 result d1 delegate the answer is 42
        =>
        Edit
        edit 3 result d1 delegate "the answer is 42"
        input "<background_work_update>"
        sync mark 5, left out [4], input event none"#,
    );
    assert_eq!(answered_already(&not_taken_in, &answered, "parent#1"), None);
}

#[test]
fn a_run_whose_message_another_turn_took_in_and_answered_returns_that_answer() {
    // "mine" arrived just before "theirs", and its run was not yet waiting when the run of
    // "theirs" imported: that import took "mine" in ahead of its own message, and answered.
    let theirs = check(
        &store("answered"),
        r#"
        1 user hi
        2 assistant hello [entry 2]
        --- mark
        3 user mine
        4 user theirs [own]
        =>
        Append
        replay user "mine"
        input "theirs"
        sync mark 4, left out [], input event 4"#,
    );
    let answered = after_their_turn(&store("answered"), &theirs, "both", TurnState::Answered);

    let log = "
        1 user hi
        2 assistant hello [entry 2]
        3 user mine [own]
        4 user theirs
        --- mark
        5 assistant both [entry 5]";
    let mine = check(
        &answered,
        &format!(
            r#"{log}
        =>
        Append
        input "<background_work_update>"
        sync mark 5, left out [], input event none"#
        ),
    );
    let answer = answered_already(&mine, &answered, "mine#0");
    assert_eq!(answer, Some((5, text_response("both"))));
    // The same turn coming back is the harness's to settle, not this rule's.
    assert_eq!(answered_already(&mine, &answered, "theirs#0"), None);

    // A message the run has not had answered yet is its input: the model is asked.
    let next = check(
        &answered,
        &format!(
            r#"{}
        6 user and now? [own]
        =>
        Append
        input "and now?"
        sync mark 6, left out [], input event 6"#,
            log.replace(" [own]", "")
        ),
    );
    assert_eq!(answered_already(&next, &answered, "next#0"), None);

    // Something written after the answer (a notice) is taken in: the model is asked.
    let with_notice = check(
        &answered,
        &format!(
            r#"{log}
        6 notice the plan has open steps
        =>
        Append
        replay user "<notice>the plan has open steps</notice>"
        input "<background_work_update>"
        sync mark 6, left out [], input event none"#
        ),
    );
    assert_eq!(answered_already(&with_notice, &answered, "mine#0"), None);
}

#[test]
fn the_input_carries_the_files_its_message_names_as_the_model_reads_them() {
    let file = |id: &str, name: &str, media_type: &str, size_bytes, content| {
        let (name, media_type) = (name.to_owned(), media_type.to_owned());
        let file = AttachedFile {
            id: id.to_owned(),
            name,
            media_type,
            size_bytes,
            content,
        };
        (id.to_owned(), file)
    };
    let image = AttachedContent::Image(vec![1, 2, 3]);
    let text = AttachedContent::Text(b"hello".to_vec());
    let files = AttachedFiles::from([
        file("a1", "dot.png", "image/png", 3, image),
        file("a2", "notes.txt", "text/plain", 5, text),
    ]);
    // "look" names the two files, the one in full and the other by id.
    let look = |log: &str| {
        let mut given = given(&format!(
            "1 user hi\n--- mark\n2 assistant hello [entry 2]\n{log}"
        ));
        given.log[2].content = json!({"text": "look", "attachments": [
            {"id": "a1", "name": "dot.png", "media_type": "image/png", "size_bytes": 3},
            "a2",
        ]});
        given
    };
    let read = r#"
        + text "attachment:a1 (dot.png, image/png, 3 bytes): the image follows"
        + image image/png AQID
        + text "attachment:a2 (notes.txt, text/plain, 5 bytes):\n<attachment_text>\nhello\n</attachment_text>""#;
    let planned = plan(
        &store("answered"),
        &look("3 user look [own]"),
        &files,
        false,
    );
    let sync = "sync mark 3, left out [], input event 3";
    assert_reads(&planned, &format!("Append\ninput \"look\"{read}\n{sync}"));

    // A rebuild replays the message with the same parts; a file the shell could not read is
    // named as missing.
    let given = look("3 user look\n4 user again [own]");
    let rebuilt = |parts: &str| {
        let replayed = "Rebuild\nreset\nreplay user \"hi\"\nreplay assistant[Stop] \"hello\"";
        let sync = "sync mark 4, left out [], input event 4";
        format!("{replayed}\nreplay user \"look\"{parts}\ninput \"again\"\n{sync}")
    };
    assert_reads(
        &plan(&store("answered"), &given, &files, true),
        &rebuilt(read),
    );
    let missing = r#"
        + text "attachment:a1 (?, ?, 0 bytes): not shown (this session holds no such attachment)"
        + text "attachment:a2 (?, ?, 0 bytes): not shown (this session holds no such attachment)""#;
    assert_reads(
        &plan(&store("answered"), &given, &NO_FILES, true),
        &rebuilt(missing),
    );
}

/// A rebuilt context shows a tool's images as the first one did: read from the attachments its
/// result names; one the shell did not read as an image (a model that takes none, a file gone)
/// is left out, and the result's text still names it.
#[test]
fn a_rebuild_shows_a_results_images_from_its_attachments() {
    let mut given = given(
        "1 user shoot\n--- mark\n2 call c1 shot__take\n3 result c1 shot__take pictured\n4 user again [own]",
    );
    given.log[2].content["attachments"] =
        json!([{"id": "c1-1", "media_type": "image/png", "size_bytes": 3}]);
    let image = AttachedFile {
        id: "c1-1".to_owned(),
        name: "shot__take-1.png".to_owned(),
        media_type: "image/png".to_owned(),
        size_bytes: 3,
        content: AttachedContent::Image(vec![1, 2, 3]),
    };
    let files = AttachedFiles::from([("c1-1".to_owned(), image)]);
    let rebuilt = |images: &str| {
        format!(
            "Rebuild\nreset\nreplay user \"shoot\"\nreplay assistant[ToolUse] call c1 shot__take {{}}\n\
             replay result c1 shot__take \"pictured\"{images}\ninput \"again\"\n\
             sync mark 4, left out [], input event 4"
        )
    };
    assert_reads(
        &plan(&store("empty"), &given, &files, false),
        &rebuilt("\n+ image image/png AQID (c1-1)"),
    );
    assert_reads(
        &plan(&store("empty"), &given, &NO_FILES, false),
        &rebuilt(""),
    );
}
