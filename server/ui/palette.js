// The wrench palette: the verbs a person may run by hand in a session (GET …/actions), each
// picked from a list and run from a small form its arguments' schema makes (forms.js). The
// action and its result go to the log (POST …/actions) and show in the transcript as a user
// action; a refused argument is shown next to its field, and the form stays open.

import * as api from "./api.js";
import { argumentOfError, briefDescription, formArguments, formFields, initialValue } from "./forms.js";
import { h, wrenchIcon } from "./transcript.js";

export class Palette {
  /**
   * `onRan(answer)`: a verb ran (its action is in the log); `onSignedOut(error)`: the token
   * ended.
   */
  constructor(sessionId, { onRan, onSignedOut }) {
    this.sessionId = sessionId;
    this.onRan = onRan;
    this.onSignedOut = onSignedOut;
    this.verbs = null;
    this.element = h("div", {
      class: "palette",
      id: "palette",
      role: "dialog",
      "aria-label": "Run a verb by hand",
      hidden: true,
    });
    this.element.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.close();
        this.button.focus();
      }
    });
    this.button = h(
      "button",
      {
        type: "button",
        id: "wrench",
        class: "wrench",
        title: "Run a verb by hand",
        "aria-label": "Run a verb by hand",
        "aria-expanded": "false",
        onclick: () => (this.element.hidden ? this.open() : this.close()),
      },
      wrenchIcon(),
    );
  }

  get isOpen() {
    return !this.element.hidden;
  }

  async open() {
    this.element.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
    if (!this.verbs) {
      this.show(h("div", { class: "palette-loading muted" }, "Loading the verbs…"));
      try {
        this.verbs = (await api.get(`/v1/sessions/${this.sessionId}/actions`)).verbs;
      } catch (error) {
        if (error instanceof api.SignedOut) return this.onSignedOut(error);
        this.show(h("div", { class: "form-error", role: "alert" }, `Could not list the verbs: ${error.message}`));
        return;
      }
    }
    if (this.isOpen) this.showList();
  }

  close() {
    this.element.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
    this.element.replaceChildren();
  }

  /** The palette's content under its header; `back` offers the way back to the list. */
  show(content, { title = "Run a verb by hand", back = false } = {}) {
    this.element.replaceChildren(
      h(
        "div",
        { class: "palette-header" },
        back ? h("button", { type: "button", class: "link palette-back", onclick: () => this.showList() }, "‹ Verbs") : null,
        h("span", { class: "palette-title" }, title),
        h("button", { type: "button", class: "link palette-close", "aria-label": "Close", title: "Close (Esc)", onclick: () => this.close() }, "×"),
      ),
      content,
    );
  }

  showList() {
    const items = this.verbs.map((verb) =>
      h(
        "li",
        {},
        h(
          "button",
          { type: "button", class: "palette-verb", dataset: { verb: verb.name }, onclick: () => this.showForm(verb) },
          h("span", { class: "palette-verb-name" }, verb.name),
          h("span", { class: "palette-verb-brief" }, briefDescription(verb.description)),
        ),
      ),
    );
    this.show(items.length ? h("ul", { class: "palette-verbs" }, items) : h("div", { class: "muted" }, "This service runs no verb by hand."));
    const first = this.element.querySelector(".palette-verb");
    if (first) first.focus();
  }

  /** The verb's form: a control per argument, its description under it, its error slot. */
  showForm(verb) {
    const fields = formFields(verb.parameters);
    const controls = new Map();
    const errors = new Map();
    const rows = fields.map((field) => {
      const control = fieldControl(field);
      const error = h("div", { class: "field-error", role: "alert", id: `arg-${field.name}-error` });
      control.setAttribute("aria-describedby", error.id);
      controls.set(field.name, control);
      errors.set(field.name, error);
      const label = h(
        "label",
        { for: control.id, class: "field-label" },
        field.name,
        field.required ? h("span", { class: "required", title: "required", "aria-label": "required" }, " *") : null,
      );
      const hint = field.description ? h("div", { class: "field-hint" }, field.description) : null;
      const row = h("div", { class: `field field-${field.kind}`, dataset: { field: field.name } });
      if (field.kind === "boolean") row.append(h("div", { class: "field-inline" }, control, label), hint, error);
      else row.append(label, control, hint, error);
      return row;
    });
    const formError = h("div", { class: "form-error", role: "alert" });
    const run = h("button", { type: "submit", class: "primary", id: "palette-run" }, `Run ${verb.name}`);
    const form = h(
      "form",
      { id: "palette-form", class: "palette-form", dataset: { verb: verb.name }, novalidate: true },
      h("details", { class: "palette-about" }, h("summary", {}, briefDescription(verb.description)), h("p", {}, verb.description)),
      rows.length ? rows : h("p", { class: "muted" }, "It takes no arguments."),
      formError,
      h("div", { class: "palette-actions" }, run),
    );
    const clearErrors = () => {
      formError.textContent = "";
      for (const [name, slot] of errors) {
        slot.textContent = "";
        controls.get(name).removeAttribute("aria-invalid");
      }
    };
    const showError = (name, message) => {
      const slot = errors.get(name);
      if (!slot) {
        formError.textContent = message;
        return;
      }
      slot.textContent = message;
      controls.get(name).setAttribute("aria-invalid", "true");
    };
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors();
      const values = {};
      for (const [name, control] of controls) values[name] = control.type === "checkbox" ? control.checked : control.value;
      const read = formArguments(fields, values);
      const unread = Object.entries(read.errors);
      if (unread.length) {
        for (const [name, message] of unread) showError(name, message);
        controls.get(unread[0][0]).focus();
        return;
      }
      run.disabled = true;
      run.textContent = "Running…";
      try {
        const answer = await api.post(`/v1/sessions/${this.sessionId}/actions`, { verb: verb.name, arguments: read.arguments });
        this.close();
        this.onRan(answer);
      } catch (error) {
        if (error instanceof api.SignedOut) return this.onSignedOut(error);
        const at = error.status === 400 ? argumentOfError(error.field) : null;
        if (at && errors.has(at.name)) {
          showError(at.name, at.path ? `${at.path}: ${error.message}` : error.message);
          controls.get(at.name).focus();
        } else {
          formError.textContent = error.field ? `${error.field}: ${error.message}` : error.message;
        }
      } finally {
        run.disabled = false;
        run.textContent = `Run ${verb.name}`;
      }
    });
    this.show(form, { title: verb.name, back: true });
    const first = form.querySelector("input, textarea, select");
    (first || run).focus();
  }
}

/** The input a field's kind asks for, holding the field's starting value. */
function fieldControl(field) {
  const id = `arg-${field.name}`;
  const value = initialValue(field);
  switch (field.kind) {
    case "textarea":
      return h("textarea", { id, name: field.name, rows: "3", placeholder: field.placeholder || null }, value);
    case "json":
      return h("textarea", { id, name: field.name, rows: "3", class: "json", spellcheck: "false", placeholder: field.placeholder || null }, value);
    case "integer":
    case "number":
      return h("input", {
        id,
        name: field.name,
        type: "number",
        step: field.kind === "integer" ? "1" : "any",
        min: field.min,
        max: field.max,
        value,
      });
    case "boolean":
      return h("input", { id, name: field.name, type: "checkbox", checked: value });
    case "enum":
      return h(
        "select",
        { id, name: field.name },
        h("option", { value: "" }, field.required ? "choose…" : "—"),
        field.options.map((option, index) => h("option", { value: String(index), selected: value === String(index) }, option.label)),
      );
    default:
      return h("input", { id, name: field.name, type: "text", autocomplete: "off", placeholder: field.placeholder || null, value });
  }
}
