// Calls that wait for a person's approval: a card for each pending call of the session, above
// the composer, with the call's name and arguments and three answers: Approve; Deny, with a
// reason the model reads; Edit the arguments, then approve (POST …/approvals/{call_id}). The
// pending calls are read (GET …/approvals) when the session opens, and again whenever an update
// says a call came to wait, was decided, or a run ended. Model text (names, arguments) reaches
// the page as text nodes only. A question an MCP server asks during a call (`kind`
// `elicitation`) is listed with them and shown as a form (elicitation.js).

import * as api from "./api.js";
import { questionCard } from "./elicitation.js";
import { h } from "./transcript.js";

/**
 * The arguments a person edited, from the editor's text: `{ arguments }` when it is a JSON
 * object, else `{ error }` saying what is wrong.
 */
export function editedArguments(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { error: `not JSON: ${error.message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { error: "the arguments must be a JSON object" };
  }
  return { arguments: value };
}

/** The decision's request body: approve (with edited arguments, when given) or deny. */
export function decisionBody(decision, { reason = "", args = null } = {}) {
  if (decision === "deny") {
    const trimmed = reason.trim();
    return trimmed ? { decision: "deny", reason: trimmed } : { decision: "deny" };
  }
  return args === null ? { decision: "approve" } : { decision: "approve", arguments: args };
}

/** Whether `update` (a socket's) may change the session's pending approvals. */
export function changesApprovals(update) {
  return (
    update.type === "approval-pending" ||
    update.type === "run-finished" ||
    (update.type === "session-change" && update.reason === "approval")
  );
}

export class PendingApprovals {
  /** `onSignedOut(error)`: the token ended. */
  constructor(sessionId, { onSignedOut }) {
    this.sessionId = sessionId;
    this.onSignedOut = onSignedOut;
    this.element = h("div", { class: "approvals", "aria-live": "polite" });
    // Reads started, and the newest applied: an older read that answers late is not applied.
    this.readsStarted = 0;
    this.readApplied = 0;
  }

  /** Reads the session's approvals and shows a card for each pending one. */
  async read() {
    const number = ++this.readsStarted;
    const page = await api.get(`/v1/sessions/${this.sessionId}/approvals`);
    if (number <= this.readApplied) return;
    this.readApplied = number;
    const pending = page.approvals.filter((approval) => approval.status === "pending");
    const shown = new Map([...this.element.children].map((card) => [card.dataset.callId, card]));
    this.element.replaceChildren(...pending.map((approval) => shown.get(approval.call_id) || this.card(approval)));
  }

  /** Reads again when `update` may have changed what waits. */
  onUpdate(update) {
    if (!changesApprovals(update)) return;
    this.read().catch((error) => {
      if (error instanceof api.SignedOut) this.onSignedOut(error);
    });
  }

  /** Posts an answer to a server's question: null once taken, else the problem's text. */
  async answer(approval, body) {
    try {
      await api.post(`/v1/sessions/${this.sessionId}/approvals/${encodeURIComponent(approval.call_id)}`, body);
    } catch (error) {
      if (error instanceof api.SignedOut) {
        this.onSignedOut(error);
        return "signed out";
      }
      return `Could not answer: ${error.message}`;
    }
    this.read().catch(() => {});
    return null;
  }

  card(approval) {
    if (approval.kind === "elicitation") {
      return questionCard(approval, { answer: (body) => this.answer(approval, body) });
    }
    const problem = h("div", { class: "approval-problem", role: "alert" });
    const reason = h("input", { type: "text", class: "approval-reason", placeholder: "Why not (the agent reads it)", "aria-label": "Reason" });
    const editor = h("textarea", { class: "approval-editor", rows: "4", hidden: true, "aria-label": "Arguments" });
    editor.value = JSON.stringify(approval.arguments, null, 2);
    const buttons = [];
    const decide = async (body) => {
      for (const button of buttons) button.disabled = true;
      problem.textContent = "";
      try {
        await api.post(`/v1/sessions/${this.sessionId}/approvals/${encodeURIComponent(approval.call_id)}`, body);
        card.remove();
      } catch (error) {
        if (error instanceof api.SignedOut) return this.onSignedOut(error);
        problem.textContent = `Could not decide: ${error.message}`;
      } finally {
        for (const button of buttons) button.disabled = false;
      }
      await this.read().catch(() => {});
    };
    const approve = h("button", { type: "button", class: "primary approve", onclick: () => decide(decisionBody("approve")) }, "Approve");
    const deny = h("button", { type: "button", class: "deny", onclick: () => decide(decisionBody("deny", { reason: reason.value })) }, "Deny");
    const edit = h("button", { type: "button", class: "edit" }, "Edit");
    edit.addEventListener("click", () => {
      if (editor.hidden) {
        editor.hidden = false;
        edit.textContent = "Approve edited";
        editor.focus();
        return;
      }
      const edited = editedArguments(editor.value);
      if (edited.error) {
        problem.textContent = edited.error;
        return;
      }
      decide(decisionBody("approve", { args: edited.arguments }));
    });
    buttons.push(approve, deny, edit);
    const card = h(
      "div",
      { class: "approval", dataset: { callId: approval.call_id } },
      h("div", { class: "approval-title" }, "Waiting for your approval: ", h("code", {}, approval.name)),
      h("pre", { class: "approval-arguments" }, JSON.stringify(approval.arguments, null, 2)),
      editor,
      h("div", { class: "approval-actions" }, approve, edit, reason, deny),
      problem,
    );
    return card;
  }
}
