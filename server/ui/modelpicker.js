// The model picker in a session's header: the model the session's turns ask, and the reasoning
// level when one is set; a click opens a small form to change them (PUT …/model). What shows is
// what the service answered.

import * as api from "./api.js";
import { REASONING_LEVELS, modelChange } from "./logic.js";
import { h } from "./transcript.js";

export class ModelPicker {
  /** `onSaved(session)`: the service took the change; `onSignedOut(error)`: the token ended. */
  constructor(sessionId, { onSaved, onSignedOut }) {
    this.sessionId = sessionId;
    this.onSaved = onSaved;
    this.onSignedOut = onSignedOut;
    this.info = null;
    this.modelEl = h("span", { class: "model", id: "session-model" });
    this.reasoningEl = h("span", { class: "reasoning", id: "session-reasoning", title: "Reasoning level", hidden: true });
    this.button = h(
      "button",
      {
        type: "button",
        class: "model-button",
        id: "model-button",
        title: "The model this session's turns ask; click to change it or its reasoning level",
        "aria-haspopup": "dialog",
        "aria-expanded": "false",
        onclick: () => (this.form.hidden ? this.open() : this.close()),
      },
      this.modelEl,
      this.reasoningEl,
    );
    this.modelInput = h("input", { id: "model-input", type: "text", autocomplete: "off", spellcheck: "false", "aria-describedby": "model-input-error" });
    this.levelSelect = h(
      "select",
      { id: "reasoning-select", "aria-describedby": "reasoning-select-error" },
      h("option", { value: "" }, "default"),
      REASONING_LEVELS.map((level) => h("option", { value: level }, level)),
    );
    this.modelError = h("div", { class: "field-error", id: "model-input-error", role: "alert" });
    this.levelError = h("div", { class: "field-error", id: "reasoning-select-error", role: "alert" });
    this.formError = h("div", { class: "form-error", role: "alert" });
    this.saveButton = h("button", { type: "submit", class: "primary", id: "model-save" }, "Save");
    this.form = h(
      "form",
      {
        class: "model-form",
        id: "model-form",
        role: "dialog",
        "aria-label": "The session's model",
        hidden: true,
        onsubmit: (event) => {
          event.preventDefault();
          this.save();
        },
        onkeydown: (event) => {
          if (event.key === "Escape") {
            event.preventDefault();
            this.close();
            this.button.focus();
          }
        },
      },
      h("label", { for: "model-input", class: "field-label" }, "Model"),
      this.modelInput,
      h("div", { class: "field-hint" }, "Empty: the service's default."),
      this.modelError,
      h("label", { for: "reasoning-select", class: "field-label" }, "Reasoning"),
      this.levelSelect,
      h("div", { class: "field-hint" }, "How hard the model thinks; default is as the provider is configured."),
      this.levelError,
      this.formError,
      h(
        "div",
        { class: "model-form-actions" },
        h("button", { type: "button", onclick: () => this.close() }, "Cancel"),
        this.saveButton,
      ),
    );
    this.element = h("span", { class: "model-picker" }, this.button, this.form);
  }

  /** The session as `GET /v1/sessions/{id}` answered: the model asked, and the level. */
  show(info) {
    this.info = info;
    this.modelEl.textContent = info.model || "";
    const level = info.session.reasoning_level;
    this.reasoningEl.textContent = level || "";
    this.reasoningEl.hidden = !level;
    this.element.dataset.reasoning = level || "";
  }

  open() {
    const session = this.info ? this.info.session : {};
    this.modelInput.value = session.model || "";
    this.modelInput.placeholder = session.model ? "the service's default" : `the service's default (${this.info ? this.info.model : ""})`;
    this.levelSelect.value = session.reasoning_level || "";
    this.clearErrors();
    this.form.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
    this.modelInput.focus();
  }

  close() {
    this.form.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
  }

  clearErrors() {
    for (const slot of [this.modelError, this.levelError, this.formError]) slot.textContent = "";
    this.modelInput.removeAttribute("aria-invalid");
    this.levelSelect.removeAttribute("aria-invalid");
  }

  async save() {
    this.clearErrors();
    this.saveButton.disabled = true;
    try {
      const session = await api.put(`/v1/sessions/${this.sessionId}/model`, modelChange(this.modelInput.value, this.levelSelect.value));
      if (this.info) {
        // The level as the service holds it now; the model asked comes with the next read.
        this.show({ ...this.info, model: session.model || this.info.model, session });
      }
      this.close();
      this.onSaved(session);
    } catch (error) {
      if (error instanceof api.SignedOut) return this.onSignedOut(error);
      if (error.field === "model") {
        this.modelError.textContent = error.message;
        this.modelInput.setAttribute("aria-invalid", "true");
      } else if (error.field === "reasoning_level") {
        this.levelError.textContent = error.message;
        this.levelSelect.setAttribute("aria-invalid", "true");
      } else {
        this.formError.textContent = `Could not save: ${error.message}`;
      }
    } finally {
      this.saveButton.disabled = false;
    }
  }
}
