// Failed runs in the transcript: after a message whose newest run failed, a row with what went
// wrong and a Retry button (POST …/messages/{event_id}/retry); and where a failed run left its
// notice in the log, a failed turn's line with the reason, hidden while a Retry row tells the
// same run's reason. The runs are read (GET …/runs) when the session opens and whenever a run
// ends; which messages get a row is logic.js's `failedMessages`, which lines show its
// `failedTurnShown`. A retried run that succeeds takes the row away, and its line shows again.

import * as api from "./api.js";
import { failedMessages, failedTurnShown } from "./logic.js";
import { h } from "./transcript.js";

/** How many of the session's newest runs are read: messages older than these get no row. */
const RUNS_READ = 50;

export class FailedRuns {
  /**
   * `transcript`: the element the message bubbles are in. `onRetry()`: a retry is being sent;
   * `onRetried(answer)`: the retry was queued (and, as it waits, ended), with the service's
   * answer; `onSignedOut(error)`: the token ended.
   */
  constructor(sessionId, transcript, { onRetry, onRetried, onSignedOut }) {
    this.sessionId = sessionId;
    this.transcript = transcript;
    this.onRetry = onRetry;
    this.onRetried = onRetried;
    this.onSignedOut = onSignedOut;
    this.failed = new Map(); // event id -> { runId, error }
    this.rows = new Map(); // event id -> row
    this.lines = []; // failed turns' lines, each with `runId` and `readsBefore`
    // Reads of the runs started, and the number of the newest one applied: an older read that
    // answers late is not applied over a newer one.
    this.readsStarted = 0;
    this.readApplied = 0;
  }

  /**
   * Reads the session's newest runs and shows a row for each message whose newest run failed.
   * Returns the runs read, or null when a newer read was applied first.
   */
  async read() {
    const number = ++this.readsStarted;
    const page = await api.get(`/v1/sessions/${this.sessionId}/runs?limit=${RUNS_READ}`);
    if (number <= this.readApplied) return null;
    this.readApplied = number;
    this.failed = failedMessages(page.runs);
    this.place();
    return page.runs;
  }

  /**
   * The line of a failed turn (`notice`: logic.js's failedRunNotice of the notice event), for
   * the transcript at the notice's place; hidden until `place` decides.
   */
  line(event, notice) {
    const line = h(
      "div",
      { class: "failed-turn", dataset: { seq: event.seq, runId: notice.runId }, hidden: true },
      h("span", { class: "failed-run-icon", "aria-hidden": "true" }, "!"),
      h("div", { class: "failed-turn-reason" }, notice.text),
    );
    this.lines.push({ element: line, runId: notice.runId, readsBefore: this.readsStarted });
    return line;
  }

  /**
   * Puts each row right after its message (once the message is in view), and drops the rest;
   * shows each failed turn's line that no row stands for.
   */
  place() {
    for (const line of this.lines) line.element.hidden = !failedTurnShown(line, this.failed, this.readApplied);
    for (const [eventId, row] of this.rows) {
      if (this.failed.has(eventId)) continue;
      row.remove();
      this.rows.delete(eventId);
    }
    for (const [eventId, failure] of this.failed) {
      let row = this.rows.get(eventId);
      if (!row || row.dataset.runId !== failure.runId) {
        const fresh = this.row(eventId, failure);
        if (row) row.replaceWith(fresh);
        row = fresh;
        this.rows.set(eventId, row);
      }
      const message = this.transcript.querySelector(`.msg.user[data-event-id="${CSS.escape(eventId)}"]`);
      if (!message) row.remove();
      else if (message.nextElementSibling !== row) message.after(row);
    }
  }

  row(eventId, failure) {
    const problem = h("div", { class: "failed-run-problem", role: "alert" });
    const retry = h("button", { type: "button", class: "retry" }, "Retry");
    retry.addEventListener("click", async () => {
      retry.disabled = true;
      retry.textContent = "Retrying…";
      problem.textContent = "";
      this.onRetry();
      try {
        const answer = await api.post(`/v1/sessions/${this.sessionId}/messages/${eventId}/retry`, { wait: true });
        this.onRetried(answer);
      } catch (error) {
        if (error instanceof api.SignedOut) return this.onSignedOut(error);
        problem.textContent = `Could not retry: ${error.message}`;
        this.onRetried(null);
      } finally {
        retry.disabled = false;
        retry.textContent = "Retry";
      }
      await this.read().catch((error) => {
        problem.textContent = `Could not read the runs: ${error.message}`;
      });
    });
    return h(
      "div",
      { class: "failed-run", dataset: { eventId, runId: failure.runId } },
      h("span", { class: "failed-run-icon", "aria-hidden": "true" }, "!"),
      h(
        "div",
        { class: "failed-run-text" },
        h("div", { class: "failed-run-title" }, "This message got no answer: its run failed."),
        h("div", { class: "failed-run-reason" }, failure.error),
        problem,
      ),
      retry,
    );
  }
}
