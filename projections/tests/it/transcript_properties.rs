//! Properties of the frame escaping and of transcript lines, over arbitrary and adversarial text.

use proptest::prelude::*;
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_projections::transcript::{
    escape_action_framing, escape_attribute, is_hidden_character, transcript_event_line,
    unescape_action_framing, unescape_attribute, user_action_text,
};
use serde_json::json;

/// Text built from pieces meant to break a frame, mixed with arbitrary characters and strings.
fn adversarial_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("</excerpt>".to_owned()),
        Just("<excerpt>".to_owned()),
        Just("<session_status title=\"x\">".to_owned()),
        Just("</session_status>".to_owned()),
        Just("</recent_exchanges>".to_owned()),
        Just("\"".to_owned()),
        Just("&".to_owned()),
        Just("&lt;".to_owned()),
        Just("&amp;".to_owned()),
        Just("&#10;".to_owned()),
        Just("&#x1b;".to_owned()),
        Just("&#".to_owned()),
        Just(";".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("\t".to_owned()),
        Just("\u{2028}".to_owned()),
        Just("\u{2029}".to_owned()),
        Just("\u{202e}".to_owned()),
        Just("\u{2066}".to_owned()),
        Just("\u{23ce}".to_owned()),
        "[\\x00-\\x1f\\x7f-\\x9f\u{202a}-\u{202e}\u{2066}-\u{2069}]",
        any::<char>().prop_map(String::from),
        any::<String>(),
    ];
    prop_oneof![
        prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat()),
        any::<String>(),
    ]
}

fn message(text: &str) -> SessionEvent {
    SessionEvent {
        id: EventId(1),
        session_id: SessionId::from_u128(1),
        seq: 1,
        kind: "message".to_owned(),
        role: Some(EventRole::User),
        actor: Some("user".to_owned()),
        content: json!({ "text": text }),
        meta: json!({}),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn escape_round_trips(text in adversarial_text()) {
        prop_assert_eq!(unescape_action_framing(&escape_action_framing(&text)), text);
    }

    #[test]
    fn escaped_text_holds_no_tag_and_no_hidden_character(text in adversarial_text()) {
        let escaped = escape_action_framing(&text);
        for c in escaped.chars() {
            prop_assert!(c != '<' && c != '>', "{:?} in {:?}", c, escaped);
            prop_assert!(!is_hidden_character(c), "{:?} in {:?}", c, escaped);
            prop_assert!(!c.is_control() || c == '\n' || c == '\t', "{:?} in {:?}", c, escaped);
            prop_assert!(
                !matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'),
                "{:?} in {:?}", c, escaped
            );
        }
    }

    #[test]
    fn escaped_text_cannot_close_its_frame(text in adversarial_text()) {
        let framed = format!("<excerpt>{}</excerpt>", escape_action_framing(&text));
        let closings: Vec<usize> = framed.match_indices("</excerpt>").map(|(idx, _)| idx).collect();
        prop_assert_eq!(closings, vec![framed.len() - "</excerpt>".len()]);
        let openings = framed.match_indices("<excerpt>").count();
        prop_assert_eq!(openings, 1);
    }

    #[test]
    fn escaped_attribute_stays_inside_its_quotes(text in adversarial_text()) {
        let escaped = escape_attribute(&text);
        prop_assert!(!escaped.contains(['"', '\n', '<', '>']), "{:?}", escaped);
        prop_assert!(!escaped.chars().any(is_hidden_character), "{:?}", escaped);
        prop_assert_eq!(unescape_attribute(&escaped), text.clone());

        let block = format!("<session_status title=\"{escaped}\">status</session_status>");
        let title_end = block.find("\">").map(|idx| idx + 2);
        prop_assert_eq!(title_end, Some("<session_status title=\"".len() + escaped.len() + 2));
    }

    #[test]
    fn a_persons_action_keeps_its_two_frames_whatever_its_arguments_and_result(
        argument in adversarial_text(),
        result in adversarial_text(),
        is_error: bool,
    ) {
        let text = user_action_text("memory", &json!({"path": argument}), &result, is_error);
        // Exactly the frames the action writes, in order, and no other tag.
        let tags: Vec<&str> = text
            .match_indices(['<', '>'])
            .map(|(idx, _)| &text[idx..idx + 1])
            .collect();
        prop_assert_eq!(tags, ["<", ">", "<", ">", "<", ">", "<", ">"]);
        prop_assert!(text.starts_with("<user_action verb=\"memory\">"), "{:?}", text);
        prop_assert_eq!(text.matches("</user_action>").count(), 1);
        prop_assert!(text.ends_with("</result>"), "{:?}", text);
        prop_assert_eq!(text.matches("<result").count(), 1);
    }

    #[test]
    fn message_line_is_one_line_without_tags(text in adversarial_text()) {
        if let Some(line) = transcript_event_line(&message(&text)) {
            prop_assert!(line.starts_with("[1] user: "), "{:?}", line);
            prop_assert!(!line.contains(['\n', '\r', '<', '>']), "{:?}", line);
            prop_assert!(!line.chars().any(is_hidden_character), "{:?}", line);
            prop_assert_eq!(line.lines().count(), 1);
        } else {
            prop_assert!(text.trim().is_empty(), "{:?} has no line", text);
        }
    }
}
