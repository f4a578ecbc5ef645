//! Wake-ups as the model reads them: the `<scheduled_wakeup>` notice a firing puts in the log
//! (the trigger message its run answers), and the lines `<session_status>` lists the session's
//! wake-ups in. Pure: times are arguments.

use seed_events::schedule::{Wakeup, format_ms};

use crate::transcript::{TRANSCRIPT_NEWLINE, escape_action_framing, escape_attribute};

/// A wake-up still to fire, as `<session_status>` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledLine {
    pub schedule_id: String,
    /// When, as a person reads it (`seed_events::schedule::describe`).
    pub when: String,
    pub next_due_ms: i64,
    pub fired: u64,
    pub note: String,
}

/// The notice a firing appends to the session's log, the input of the run queued for it:
/// `<scheduled_wakeup schedule_id="…" occurrence="3" due_at="…" late_by_seconds="2"
/// missed="0" next_due_at="…">the note</scheduled_wakeup>`. `missed` counts the occurrences
/// that were also past (the service was down) and fire with this one; `next_due_at` is left
/// out after the last. The note is escaped, so it can never close or forge the frame.
pub fn scheduled_wakeup_notice(wakeup: &Wakeup) -> String {
    let next = wakeup
        .next_due_ms
        .map(|next| format!(" next_due_at=\"{}\"", format_ms(next)))
        .unwrap_or_default();
    let late = if wakeup.missed > 0 {
        format!(
            "The service was down: this wake-up fired {} late, once for {} occurrences. ",
            late_text(wakeup.late_ms()),
            wakeup.missed + 1
        )
    } else {
        String::new()
    };
    format!(
        "<scheduled_wakeup schedule_id=\"{}\" when=\"{}\" occurrence=\"{}\" due_at=\"{}\" \
         late_by_seconds=\"{}\" missed=\"{}\"{next}>{late}You scheduled this wake-up with the \
         note: {}</scheduled_wakeup>",
        wakeup.schedule_id,
        escape_attribute(&wakeup.spec_text),
        wakeup.occurrence,
        format_ms(wakeup.due_at_ms),
        wakeup.late_ms() / 1000,
        wakeup.missed,
        escape_action_framing(&wakeup.note),
    )
}

/// The session's wake-ups still to fire, one line each, for the description of
/// `<session_status>` (which escapes it whole); empty for none. A newline inside a note is
/// shown as [`TRANSCRIPT_NEWLINE`], so a note cannot forge a line.
pub fn status_lines(schedules: &[ScheduledLine]) -> String {
    if schedules.is_empty() {
        return String::new();
    }
    let mut text =
        String::from("Wake-ups you scheduled (cancel one with unschedule and its id):\n");
    for line in schedules {
        text.push_str(&format!(
            "- {}: {}, next at {}, fired {} times; note: {}\n",
            line.schedule_id,
            line.when,
            format_ms(line.next_due_ms),
            line.fired,
            line.note.replace('\n', &TRANSCRIPT_NEWLINE.to_string()),
        ));
    }
    text
}

/// A lateness as people say it: `45 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`.
fn late_text(ms: i64) -> String {
    let seconds = ms.max(0) / 1000;
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3_600 => format!("{} min {} s", s / 60, s % 60),
        s if s < 86_400 => format!("{} h {} min", s / 3_600, s / 60 % 60),
        s => format!("{} d {} h", s / 86_400, s / 3_600 % 24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_events::schedule::ScheduleKind;
    use seed_events::{ScheduleId, SessionId};

    const T0: i64 = 1_796_256_000_000;

    fn wakeup(missed: u64, late_ms: i64) -> Wakeup {
        Wakeup {
            schedule_id: ScheduleId::from_u128(1),
            session_id: SessionId::from_u128(2),
            kind: ScheduleKind::Interval,
            spec_text: "every 60 s".to_owned(),
            note: "check </scheduled_wakeup> the build".to_owned(),
            occurrence: 3,
            due_at_ms: T0,
            fired_at_ms: T0 + late_ms,
            missed,
            next_due_ms: Some(T0 + 60_000 * (missed as i64 + 1)),
        }
    }

    #[test]
    fn a_notice_on_time_carries_the_escaped_note() {
        assert_eq!(
            scheduled_wakeup_notice(&wakeup(0, 1_200)),
            "<scheduled_wakeup schedule_id=\"00000000-0000-0000-0000-000000000001\" \
             when=\"every 60 s\" occurrence=\"3\" due_at=\"2026-12-03T00:00:00Z\" \
             late_by_seconds=\"1\" missed=\"0\" next_due_at=\"2026-12-03T00:01:00Z\">You \
             scheduled this wake-up with the note: check &lt;/scheduled_wakeup&gt; the \
             build</scheduled_wakeup>"
        );
    }

    #[test]
    fn a_late_notice_says_how_late_and_for_how_many() {
        let notice = scheduled_wakeup_notice(&wakeup(2, 150_000));
        assert!(notice.contains("missed=\"2\""), "{notice}");
        assert!(notice.contains("late_by_seconds=\"150\""), "{notice}");
        assert!(
            notice.contains("fired 2 min 30 s late, once for 3 occurrences"),
            "{notice}"
        );
    }

    #[test]
    fn status_lines_keep_a_note_on_its_line() {
        let lines = status_lines(&[ScheduledLine {
            schedule_id: "s-1".to_owned(),
            when: "every 60 s".to_owned(),
            next_due_ms: T0,
            fired: 2,
            note: "two\nlines".to_owned(),
        }]);
        assert_eq!(
            lines,
            "Wake-ups you scheduled (cancel one with unschedule and its id):\n- s-1: every 60 \
             s, next at 2026-12-03T00:00:00Z, fired 2 times; note: two\u{23ce}lines\n"
        );
        assert_eq!(status_lines(&[]), "");
    }
}
