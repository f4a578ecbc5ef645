// An MCP server's question during a call (an elicitation), as a card among the pending
// approvals: the server's message and a small form built from the requested schema's fields (a
// text box for a string, a number box for a number or an integer, a checkbox for a boolean, a
// list for an enum, one of several or many), answered with Submit (accept with the content),
// Decline or Cancel. The service checks the content against the schema too, and says which
// field does not fit. The server's text (message, titles, descriptions) reaches the page as
// text nodes only.

import { h } from "./transcript.js";

/** The options of an enum field: `[{ value, label }]`, or null when it is not one. */
function optionsOf(schema) {
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, idx) => ({ value, label: String(names[idx] ?? value) }));
  }
  const listed = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
  if (!listed) return null;
  return listed.filter((option) => "const" in option).map((option) => ({ value: option.const, label: String(option.title ?? option.const) }));
}

/**
 * The form's fields, in the schema's order: `{ name, kind, label, description, required,
 * options, default }`, `kind` one of string, number, integer, boolean, enum (one of `options`)
 * or multi (several of them). A field of any other kind is left out.
 */
export function questionFields(schema) {
  const properties = (schema && schema.properties) || {};
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const fields = [];
  for (const [name, field] of Object.entries(properties)) {
    const base = {
      name,
      label: String(field.title || name),
      description: field.description ? String(field.description) : "",
      required: required.has(name),
      default: field.default,
    };
    const type = field.type || "string";
    if (type === "array") {
      const options = optionsOf(field.items || {});
      if (options) fields.push({ ...base, kind: "multi", options });
      continue;
    }
    const options = type === "string" ? optionsOf(field) : null;
    if (options) fields.push({ ...base, kind: "enum", options });
    else if (["string", "number", "integer", "boolean"].includes(type)) fields.push({ ...base, kind: type, options: null });
  }
  return fields;
}

/**
 * The content the form's values stand for: `{ content }`, or `{ error }` naming the field.
 * `values` maps a field's name to what its control holds: text for a box or a list, a boolean
 * for a checkbox, an array of the chosen values for a multiple choice. An empty optional field
 * is left out.
 */
export function questionContent(fields, values) {
  const content = {};
  for (const field of fields) {
    const raw = values[field.name];
    const empty = raw === undefined || raw === "" || (Array.isArray(raw) && raw.length === 0);
    if (field.kind === "boolean") {
      content[field.name] = Boolean(raw);
      continue;
    }
    if (empty) {
      if (field.required) return { error: `${field.label}: required` };
      continue;
    }
    if (field.kind === "number" || field.kind === "integer") {
      const number = Number(raw);
      if (!Number.isFinite(number) || (field.kind === "integer" && !Number.isInteger(number))) {
        return { error: `${field.label}: not ${field.kind === "integer" ? "a whole number" : "a number"}` };
      }
      content[field.name] = number;
    } else if (field.kind === "enum") {
      const option = field.options.find((candidate) => String(candidate.value) === String(raw));
      if (!option) return { error: `${field.label}: not one of the choices` };
      content[field.name] = option.value;
    } else if (field.kind === "multi") {
      content[field.name] = field.options.filter((option) => raw.includes(String(option.value))).map((option) => option.value);
    } else {
      content[field.name] = String(raw);
    }
  }
  return { content };
}

/** A control for `field`, and how to read what it holds. */
function control(field) {
  const id = `question-${field.name}-${Math.random().toString(36).slice(2)}`;
  let input;
  let read;
  if (field.kind === "boolean") {
    input = h("input", { type: "checkbox", id, name: field.name });
    input.checked = field.default === true;
    read = () => input.checked;
  } else if (field.kind === "enum" || field.kind === "multi") {
    const multiple = field.kind === "multi";
    const options = field.options.map((option) => h("option", { value: String(option.value) }, option.label));
    if (!multiple && !field.required) options.unshift(h("option", { value: "" }, "—"));
    input = h("select", multiple ? { id, name: field.name, multiple: true } : { id, name: field.name }, ...options);
    const chosen = (Array.isArray(field.default) ? field.default : field.default === undefined ? [] : [field.default]).map(String);
    for (const option of input.options) option.selected = chosen.includes(option.value);
    read = () => (multiple ? [...input.selectedOptions].map((option) => option.value) : input.value);
  } else {
    const number = field.kind === "number" || field.kind === "integer";
    input = h("input", { type: number ? "number" : "text", id, name: field.name, step: field.kind === "integer" ? "1" : "any" });
    if (field.default !== undefined) input.value = String(field.default);
    read = () => input.value;
  }
  const label = h("label", { for: id }, field.label, field.required ? " *" : "");
  const row = h("div", { class: "question-field", dataset: { field: field.name } }, label, input);
  if (field.description) row.append(h("div", { class: "question-description" }, field.description));
  return { row, read };
}

/**
 * The card for a pending question. `answer(body)` posts an answer and resolves to null once it
 * is taken, else to the problem's text, which the card shows.
 */
export function questionCard(approval, { answer }) {
  const fields = questionFields(approval.requested_schema);
  const controls = fields.map((field) => ({ field, ...control(field) }));
  const problem = h("div", { class: "approval-problem", role: "alert" });
  const buttons = [];
  const send = async (body) => {
    for (const button of buttons) button.disabled = true;
    problem.textContent = "";
    const refused = await answer(body);
    for (const button of buttons) button.disabled = false;
    if (refused) problem.textContent = refused;
    else card.remove();
  };
  const submit = h("button", { type: "submit", class: "primary accept" }, "Submit");
  const decline = h("button", { type: "button", class: "decline", onclick: () => send({ decision: "decline" }) }, "Decline");
  const cancel = h("button", { type: "button", class: "cancel", onclick: () => send({ decision: "cancel" }) }, "Cancel");
  buttons.push(submit, decline, cancel);
  const form = h(
    "form",
    { class: "question-form" },
    ...controls.map((entry) => entry.row),
    h("div", { class: "approval-actions" }, submit, decline, cancel),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(controls.map((entry) => [entry.field.name, entry.read()]));
    const taken = questionContent(fields, values);
    if (taken.error) {
      problem.textContent = taken.error;
      return;
    }
    send({ decision: "accept", content: taken.content });
  });
  const card = h(
    "div",
    { class: "approval question", dataset: { callId: approval.call_id } },
    h("div", { class: "approval-title" }, h("code", {}, approval.name), " asks: ", h("span", { class: "question-message" }, approval.message || "")),
    form,
    problem,
  );
  return card;
}
