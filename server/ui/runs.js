// Failed runs in the transcript: after a message whose newest run failed, a row with what went
// wrong and a Retry button (POST …/messages/{event_id}/retry). The runs are read
// (GET …/runs) when the session opens and whenever a run ends; which messages get a row is
// logic.js's `failedMessages`. A retried run that succeeds takes the row away.

import * as api from "./api.js";
import { failedMessages } from "./logic.js";
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
  }

  /** Reads the session's newest runs and shows a row for each message whose newest run failed. */
  async read() {
    const page = await api.get(`/v1/sessions/${this.sessionId}/runs?limit=${RUNS_READ}`);
    this.failed = failedMessages(page.runs);
    this.place();
  }

  /** Puts each row right after its message (once the message is in view), and drops the rest. */
  place() {
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
