// "Continue in a new session": a dialog opened from the session header where a person writes
// continue_session's arguments (reason, title, description, the handoff, the seq ranges to
// cite) and sees, before anything is created, what the successor would start from: the
// projection's bytes and tokens against the budget, each source and whether it fits, the
// ranges left out with their sizes, the successor's first request as a share of the model's
// window, and the ranges worth citing (each with why, one click to cite). Each change asks
// POST /v1/sessions/{id}/continuation/preview again (debounced; a stale answer is dropped),
// which creates nothing. A refusal is shown as the service words it, at the field it names.
//
// Confirming creates the successor as the agent's continue_session would, from the same
// arguments (POST /v1/sessions/{id}/continuation), and opens it: it starts from the
// projection just previewed and answers the session's newest message.

import * as api from "./api.js";
import { h } from "./transcript.js";

/** How long typing pauses before the preview is asked again, in milliseconds. */
const PREVIEW_DEBOUNCE_MS = 250;

/**
 * The seq ranges typed as `3-6, 9` (an en dash or `..` also separate the ends) as sources:
 * `{sources}` or `{error}` naming the part that is not a range.
 */
export function parseSeqRanges(text) {
  const sources = [];
  for (const part of text.split(/[,\s]+/).filter(Boolean)) {
    const match = /^(\d+)(?:\s*(?:-|–|\.\.)\s*(\d+))?$/.exec(part);
    if (!match) return { error: `“${part}” is not a seq or a range like 3-6` };
    const from = Number(match[1]);
    const to = match[2] === undefined ? from : Number(match[2]);
    if (from < 1 || to < from) return { error: `“${part}” is not a range of seqs from 1` };
    sources.push(from === to ? { type: "session_event", seq: from } : { type: "session_events", fromSeq: from, toSeq: to });
  }
  return { sources };
}

/** continue_session's arguments from the dialog's fields (empty handoff sections left out). */
export function continueArguments(fields) {
  const handoff = {};
  if (fields.purpose.trim()) handoff.purpose = fields.purpose.trim();
  if (fields.currentRequest.trim()) handoff.currentRequest = fields.currentRequest.trim();
  const next = fields.nextActions
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  if (next.length) handoff.nextActions = next;
  const body = { reason: fields.reason, title: fields.title, description: fields.description, handoff };
  const ranges = parseSeqRanges(fields.sources);
  if (ranges.sources?.length) body.sources = ranges.sources;
  return body;
}

/** `n` with thousands separated: 32,768. */
export function count(n) {
  return Number(n).toLocaleString("en-US");
}

/** A range as the preview names it: `seq 3–6`, or `seq 3`. */
export function seqRange(from, to) {
  return from === to ? `seq ${from}` : `seq ${from}–${to}`;
}

/** The preview's headline figures, as lines of text. */
export function summaryLines(preview) {
  const first = preview.first_request;
  const share =
    first.window_percent === undefined || first.window_percent === null
      ? `${count(first.tokens)} tokens (the model's window is not known)`
      : `${first.window_percent}% of the model's window (${count(first.tokens)} of ${count(first.window_tokens)} tokens)`;
  return [
    `${count(preview.projection_bytes)} of ${count(preview.budget_bytes)} bytes`,
    `≈ ${count(preview.projection_tokens)} of ${count(preview.budget_tokens)} tokens`,
    `First request: ${share}`,
  ];
}

const LOADED = {
  whole: "fits",
  cut: "cut",
  omitted: "does not fit",
  listed: "listed, read on demand",
};

export class ContinueDialog {
  /** `onContinued(id)`: the successor exists; `onSignedOut(error)`: the token ended. */
  constructor(sessionId, { onContinued, onSignedOut }) {
    this.sessionId = sessionId;
    this.onContinued = onContinued;
    this.onSignedOut = onSignedOut;
    this.timer = null;
    this.asked = 0; // the newest preview asked for; older answers are dropped
    this.button = h(
      "button",
      {
        type: "button",
        class: "continue-button",
        id: "continue-button",
        title: "Preview carrying this conversation into a new session",
        "aria-haspopup": "dialog",
        onclick: () => this.open(),
      },
      "Continue…",
    );
    const input = (id, label, hint, attrs = {}) => {
      const field = h(attrs.rows ? "textarea" : "input", {
        id,
        name: id,
        autocomplete: "off",
        "aria-describedby": `${id}-error`,
        oninput: () => this.changed(),
        ...attrs,
      });
      return {
        field,
        error: h("div", { class: "field-error", id: `${id}-error`, role: "alert" }),
        label: h("label", { for: id, class: "field-label" }, label),
        hint: hint ? h("div", { class: "field-hint" }, hint) : null,
      };
    };
    this.fields = {
      reason: input("continue-reason", "Reason", "Why a new session now: topic change, phase change, refocus…", { type: "text" }),
      title: input("continue-title", "Title", "What the new session is about.", { type: "text" }),
      description: input("continue-description", "Description", "Its live status.", { type: "text" }),
      purpose: input("continue-purpose", "Purpose", "For a colleague who has read nothing: what the work is for.", { rows: "2" }),
      currentRequest: input("continue-request", "Current request", null, { rows: "2" }),
      nextActions: input("continue-next", "Next actions", "One a line.", { rows: "2" }),
      sources: input("continue-sources", "Cite seqs", "Ranges of this session to load as excerpts: 3-6, 9.", { type: "text" }),
    };
    this.status = h("div", { class: "continue-status", id: "continue-status", role: "status" });
    this.previewEl = h("div", { class: "continue-preview", id: "continue-preview", "aria-live": "polite" });
    this.formError = h("div", { class: "form-error", id: "continue-form-error", role: "alert" });
    this.closeButton = h("button", { type: "button", id: "continue-close", onclick: () => this.close() }, "Close");
    this.confirmButton = h(
      "button",
      { type: "button", class: "primary", id: "continue-confirm", disabled: true, onclick: () => this.confirm() },
      "Continue in a new session",
    );
    const fieldEls = Object.values(this.fields).flatMap((f) => [f.label, f.field, f.hint, f.error]);
    this.dialog = h(
      "div",
      {
        class: "continue-dialog",
        id: "continue-dialog",
        role: "dialog",
        "aria-modal": "true",
        "aria-labelledby": "continue-dialog-title",
        hidden: true,
        onkeydown: (event) => {
          if (event.key === "Escape") {
            event.preventDefault();
            this.close();
          }
        },
      },
      h(
        "div",
        { class: "continue-panel" },
        h("h2", { id: "continue-dialog-title" }, "Continue in a new session"),
        h(
          "div",
          { class: "continue-columns" },
          h("form", { class: "continue-form", onsubmit: (event) => event.preventDefault() }, fieldEls),
          h("div", { class: "continue-side" }, h("h3", {}, "What the new session would start from"), this.status, this.previewEl),
        ),
        this.formError,
        h(
          "div",
          { class: "continue-actions" },
          h(
            "span",
            { class: "field-hint", id: "continue-note" },
            "Nothing is created until you continue. The new session answers this session's newest message.",
          ),
          h("span", { class: "continue-buttons" }, this.closeButton, this.confirmButton),
        ),
      ),
    );
    this.element = h("span", { class: "continue-slot" }, this.button, this.dialog);
  }

  open() {
    this.dialog.hidden = false;
    this.fields.reason.field.focus();
    this.changed();
  }

  close() {
    this.dialog.hidden = true;
    clearTimeout(this.timer);
    this.asked += 1;
    this.button.focus();
  }

  values() {
    return Object.fromEntries(Object.entries(this.fields).map(([key, f]) => [key, f.field.value]));
  }

  changed() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.preview(), PREVIEW_DEBOUNCE_MS);
  }

  /** Marks `key`'s field wrong with `message`, and every other right. */
  showFieldError(key, message) {
    for (const [name, f] of Object.entries(this.fields)) {
      const wrong = name === key;
      f.error.textContent = wrong ? message : "";
      if (wrong) f.field.setAttribute("aria-invalid", "true");
      else f.field.removeAttribute("aria-invalid");
    }
  }

  /** The dialog's field a service's `field` names (`sources[0].toSeq` is the cited seqs). */
  static fieldOf(field) {
    if (!field) return null;
    const head = field.split(/[.[]/)[0];
    return {
      reason: "reason",
      title: "title",
      description: "description",
      handoff: "purpose",
      sources: "sources",
    }[head] ?? null;
  }

  async preview() {
    this.confirmButton.disabled = true;
    const ranges = parseSeqRanges(this.fields.sources.field.value);
    if (ranges.error) {
      this.showFieldError("sources", ranges.error);
      return;
    }
    const values = this.values();
    const asked = ++this.asked;
    if (!["reason", "title", "description", "purpose"].every((key) => values[key].trim())) {
      // Nothing to measure yet: continue_session would refuse for the first empty one.
      this.showFieldError(null, "");
      this.formError.textContent = "";
      this.previewEl.replaceChildren();
      this.status.textContent = "Write the reason, the title, the description and the purpose to see the preview.";
      return;
    }
    this.status.textContent = "Measuring…";
    try {
      const preview = await api.post(`/v1/sessions/${this.sessionId}/continuation/preview`, continueArguments(values));
      if (asked !== this.asked) return;
      this.showFieldError(null, "");
      this.formError.textContent = "";
      this.status.textContent = "";
      this.render(preview);
      this.confirmButton.disabled = false;
    } catch (error) {
      if (asked !== this.asked) return;
      if (error instanceof api.SignedOut) {
        this.onSignedOut(error);
        return;
      }
      this.status.textContent = "";
      this.previewEl.replaceChildren();
      this.showRefusal(error);
    }
  }

  /** Shows a refusal at the field the service names, else under the form. */
  showRefusal(error) {
    const key = ContinueDialog.fieldOf(error.field);
    if (key) {
      this.showFieldError(key, error.message);
      this.formError.textContent = "";
    } else {
      this.showFieldError(null, "");
      this.formError.textContent = error.message;
    }
  }

  /** Creates the successor from the fields as previewed, and opens it. */
  async confirm() {
    clearTimeout(this.timer);
    const asked = ++this.asked;
    this.confirmButton.disabled = true;
    this.status.textContent = "Continuing…";
    try {
      const made = await api.post(`/v1/sessions/${this.sessionId}/continuation`, continueArguments(this.values()));
      this.dialog.hidden = true;
      this.onContinued(made.session.id);
    } catch (error) {
      if (asked !== this.asked) return;
      this.status.textContent = "";
      if (error instanceof api.SignedOut) {
        this.onSignedOut(error);
        return;
      }
      this.showRefusal(error);
    }
  }

  /** Adds the range `from`–`to` to the cited seqs. */
  cite(from, to) {
    const field = this.fields.sources.field;
    const range = from === to ? `${from}` : `${from}-${to}`;
    field.value = field.value.trim() ? `${field.value.trim()}, ${range}` : range;
    this.changed();
  }

  render(preview) {
    const figures = h(
      "ul",
      { class: "continue-figures", id: "continue-figures" },
      summaryLines(preview).map((line) => h("li", {}, line)),
    );
    const sources = preview.sources.length
      ? h(
          "table",
          { class: "continue-sources", id: "continue-source-fits" },
          h("thead", {}, h("tr", {}, h("th", {}, "Source"), h("th", {}, "Bytes"), h("th", {}, "Fits"))),
          h(
            "tbody",
            {},
            preview.sources.map((source) =>
              h(
                "tr",
                { class: `loaded-${source.loaded}`, dataset: { fits: String(source.fits) } },
                h("td", {}, source.source.replace(/^thread:[0-9a-f-]{36} /, "")),
                h("td", {}, source.bytes === undefined ? "—" : count(source.bytes)),
                h("td", {}, source.loaded === "cut" ? `cut after seq ${source.loaded_to_seq}` : LOADED[source.loaded]),
              ),
            ),
          ),
        )
      : h("p", { class: "muted" }, "No sources cited.");
    const omitted = preview.omitted.length
      ? h(
          "ul",
          { class: "continue-omitted", id: "continue-omitted" },
          preview.omitted.map((range) =>
            h("li", {}, `${seqRange(range.from_seq, range.to_seq)}: ${range.counted_whole ? "" : "at least "}${count(range.bytes)} bytes`),
          ),
        )
      : h("p", { class: "muted", id: "continue-omitted" }, "Nothing left out.");
    const recommended = preview.recommended.length
      ? h(
          "ul",
          { class: "continue-recommended", id: "continue-recommended" },
          preview.recommended.map((range) =>
            h(
              "li",
              {},
              `${seqRange(range.from_seq, range.to_seq)}: ${range.reasons.join("; ")} `,
              range.loaded
                ? h("span", { class: "muted" }, "(loaded)")
                : h("button", { type: "button", class: "link", onclick: () => this.cite(range.from_seq, range.to_seq) }, "Cite"),
            ),
          ),
        )
      : h("p", { class: "muted", id: "continue-recommended" }, "No ranges to recommend.");
    this.previewEl.replaceChildren(
      figures,
      h("h4", {}, "Sources"),
      sources,
      h("h4", {}, "Left out (linked, read on demand)"),
      omitted,
      h("h4", {}, "Worth citing"),
      recommended,
    );
  }
}
