// "Branch from here" on a message: forks the session at the message's seq (POST
// /v1/sessions/{id}/fork), a new session whose conversation is this one's up to that message,
// and opens it. The service says which seqs a conversation can be cut at (a message with every
// earlier tool call answered); a refusal is shown as the service words it.

import * as api from "./api.js";
import { h } from "./transcript.js";

/** Forks session `sessionId` at `seq`; the service's answer (`session`, `continuation_id`, …). */
export function fork(sessionId, seq, title = null) {
  return api.post(`/v1/sessions/${sessionId}/fork`, title ? { seq, title } : { seq });
}

/**
 * The action on a message bubble (`event`, a message of session `sessionId`): `onForked(id)`
 * with the new session once it exists, `onError(error)` when the service refused.
 */
export function branchAction(event, sessionId, { onForked, onError }) {
  const button = h(
    "button",
    {
      type: "button",
      class: "branch-here",
      title: "Start a new session with this conversation up to this message",
      "aria-label": "Branch from here",
      dataset: { seq: event.seq },
    },
    // The label is drawn by the style sheet (`.branch-here::before`), so that it is no part of
    // the message's text: not in what is copied, nor in the bubble's innerText.
  );
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const forked = await fork(sessionId, event.seq);
      onForked(forked.session.id);
    } catch (error) {
      onError(error);
    } finally {
      button.disabled = false;
    }
  });
  return h("div", { class: "msg-actions" }, button);
}

/**
 * The pill of a fork's header: "Branched from “title”", leading back to the session it was
 * forked from (`link`, the session's `forked_from`); null for a session that is no fork.
 */
export function forkPill(link, navigate) {
  if (!link) return null;
  return h(
    "a",
    {
      class: "pill forked-from",
      href: `/s/${link.session_id}`,
      title: `Forked from “${link.title}” (${link.reason}); go to it`,
      onclick: (event) => {
        event.preventDefault();
        navigate(`/s/${link.session_id}`);
      },
    },
    "‹ ",
    `Branched from “${link.title}”`,
  );
}
