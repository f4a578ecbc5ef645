// The wake-ups a session's agent scheduled for itself: a line for each one still to fire, above
// the composer, saying when (as the service words it), when next, and the agent's note, with
// Cancel (DELETE …/schedules/{id}). They are read (GET …/schedules) when the session opens, when
// the socket reconnects, and whenever a run ends (a turn may have set or cancelled one, and a
// wake-up that fired moved on). The note reaches the page as a text node only.

import * as api from "./api.js";
import { h } from "./transcript.js";

/** When a wake-up is next due, as a person reads it (local time), or "" when not known. */
export function nextDue(ms, now = Date.now()) {
  if (typeof ms !== "number") return "";
  const date = new Date(ms);
  const sameDay = new Date(now).toDateString() === date.toDateString();
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return sameDay ? `next at ${time}` : `next ${date.toLocaleDateString()} ${time}`;
}

export class SessionSchedules {
  /** `onSignedOut(error)`: the token ended. */
  constructor(sessionId, { onSignedOut }) {
    this.sessionId = sessionId;
    this.onSignedOut = onSignedOut;
    this.element = h("div", { class: "schedules", "aria-label": "Wake-ups" });
    // Reads started, and the newest applied: an older read that answers late is not applied.
    this.readsStarted = 0;
    this.readApplied = 0;
  }

  /** Reads the session's wake-ups and shows a line for each. */
  async read() {
    const number = ++this.readsStarted;
    const page = await api.get(`/v1/sessions/${this.sessionId}/schedules`);
    if (number <= this.readApplied) return;
    this.readApplied = number;
    this.element.replaceChildren(...page.schedules.map((schedule) => this.line(schedule)));
  }

  /** Reads again when a run ended. */
  onUpdate(update) {
    if (update.type !== "run-finished") return;
    this.reread();
  }

  reread() {
    this.read().catch((error) => {
      if (error instanceof api.SignedOut) this.onSignedOut(error);
    });
  }

  line(schedule) {
    const problem = h("span", { class: "schedule-problem", role: "alert" });
    const cancel = h("button", { type: "button", class: "cancel-schedule" }, "Cancel");
    cancel.addEventListener("click", async () => {
      cancel.disabled = true;
      problem.textContent = "";
      try {
        await api.request("DELETE", `/v1/sessions/${this.sessionId}/schedules/${encodeURIComponent(schedule.id)}`);
        line.remove();
      } catch (error) {
        if (error instanceof api.SignedOut) return this.onSignedOut(error);
        problem.textContent = `Could not cancel: ${error.message}`;
        cancel.disabled = false;
      }
      this.reread();
    });
    const line = h(
      "div",
      { class: "schedule", dataset: { scheduleId: schedule.id } },
      h("span", { class: "schedule-when" }, `Wake-up ${schedule.when}`),
      h("span", { class: "schedule-next" }, nextDue(schedule.next_due_at_ms)),
      h("span", { class: "schedule-note" }, schedule.note),
      cancel,
      problem,
    );
    return line;
  }
}
