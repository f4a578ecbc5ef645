// A verb's arguments as a form, from their JSON Schema, and the form's values back as the
// arguments to send. Pure (no DOM, no network): the palette (palette.js) draws what these
// return. Unit-tested with `node --test` (server/tests/ui/unit.test.js).
//
// The service checks the arguments against the same schema and names the field at fault, so
// the form does not check them itself: it only reads what a person typed into the types the
// schema asks for (a number, a JSON value), and says so when it cannot.

/** Texts longer than this many characters get a text area instead of a one-line input. */
const LONG_TEXT_CHARS_MIN = 200;
/** Names and descriptions that say a string holds prose. */
const LONG_TEXT_WORDS = /\b(content|text|body|notes?|prose|markdown|message)\b/i;

/** A property's type, the first one that is not null when it names several. */
function typeOf(property) {
  const type = property.type;
  if (Array.isArray(type)) return type.find((name) => name !== "null") ?? null;
  return typeof type === "string" ? type : null;
}

/** Whether a string property holds long text: a large maxLength, or prose by its name. */
function isLongText(name, property) {
  if (Number.isInteger(property.maxLength)) return property.maxLength > LONG_TEXT_CHARS_MIN;
  return LONG_TEXT_WORDS.test(name) || LONG_TEXT_WORDS.test(String(property.description ?? "").split(/[.;]/)[0]);
}

/** A value that fits `schema`, to show what a JSON field takes: `[{"step": "", "done": false}]`. */
export function jsonExample(schema, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 4) return null;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  switch (typeOf(schema)) {
    case "array":
      return [jsonExample(schema.items, depth + 1)].filter((item) => item !== null);
    case "object": {
      const example = {};
      for (const [name, property] of Object.entries(schema.properties ?? {})) example[name] = jsonExample(property, depth + 1);
      return example;
    }
    case "string":
      return "";
    case "integer":
    case "number":
      return Number.isFinite(schema.minimum) ? schema.minimum : 0;
    case "boolean":
      return false;
    default:
      return null;
  }
}

/**
 * The form for a verb's `parameters` (an object schema): one field per property, the required
 * ones first, each group in the schema's order. A field is
 * `{name, kind, required, description, options, default, min, max, placeholder}`, its kind one of
 * `text`, `textarea`, `integer`, `number`, `boolean`, `enum` (with `options`, each
 * `{label, value}`) and `json` (arrays, objects, and anything else).
 */
export function formFields(schema) {
  const properties = schema && typeof schema.properties === "object" && schema.properties ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const fields = Object.entries(properties).map(([name, property]) => {
    const field = {
      name,
      kind: "json",
      required: required.has(name),
      description: typeof property?.description === "string" ? property.description : "",
      options: null,
      default: property?.default,
      min: null,
      max: null,
      placeholder: "",
    };
    if (!property || typeof property !== "object") return field;
    const type = typeOf(property);
    if (Array.isArray(property.enum) && property.enum.length) {
      field.kind = "enum";
      field.options = property.enum.map((value) => ({ label: typeof value === "string" ? value : JSON.stringify(value), value }));
    } else if (type === "string") {
      field.kind = isLongText(name, property) ? "textarea" : "text";
      if (Number.isInteger(property.maxLength)) field.placeholder = `at most ${property.maxLength} characters`;
    } else if (type === "integer" || type === "number") {
      field.kind = type;
      field.min = Number.isFinite(property.minimum) ? property.minimum : null;
      field.max = Number.isFinite(property.maximum) ? property.maximum : null;
    } else if (type === "boolean") {
      field.kind = "boolean";
    } else {
      const example = jsonExample(property);
      field.placeholder = example === null ? "JSON" : JSON.stringify(example);
    }
    return field;
  });
  return [...fields.filter((field) => field.required), ...fields.filter((field) => !field.required)];
}

/** A field's starting value: its default, else empty (a checkbox unchecked). */
export function initialValue(field) {
  if (field.kind === "boolean") return field.default === true;
  if (field.default === undefined || field.default === null) return "";
  if (field.kind === "json") return JSON.stringify(field.default);
  if (field.kind === "enum") return String(field.options.findIndex((option) => option.value === field.default));
  return String(field.default);
}

/**
 * The arguments a form's `values` make (by field name: the text of an input, the index of an
 * enum's option as text, a checkbox's state), and what could not be read, by field name. An
 * empty field is left out, so the verb's own default holds (and a required one is refused by
 * name); a checkbox is sent when it differs from its default (unchecked when it has none).
 */
export function formArguments(fields, values) {
  const args = {};
  const errors = {};
  for (const field of fields) {
    const value = values[field.name];
    if (field.kind === "boolean") {
      const checked = value === true;
      if (field.required || checked !== (field.default === true)) args[field.name] = checked;
      continue;
    }
    const text = typeof value === "string" ? value : "";
    if (text.trim() === "") continue;
    switch (field.kind) {
      case "integer":
      case "number": {
        const number = Number(text.trim());
        if (Number.isFinite(number)) args[field.name] = number;
        else errors[field.name] = field.kind === "integer" ? "expected a whole number" : "expected a number";
        break;
      }
      case "enum": {
        const option = field.options[Number(text)];
        if (option) args[field.name] = option.value;
        else errors[field.name] = "pick one of the choices";
        break;
      }
      case "json":
        try {
          args[field.name] = JSON.parse(text);
        } catch (error) {
          errors[field.name] = `not valid JSON: ${error.message}`;
        }
        break;
      default:
        args[field.name] = value;
    }
  }
  return { arguments: args, errors };
}

/**
 * Where a refusal's `field` (`arguments.title`, `arguments.steps[0].done`) belongs: the form's
 * field `name`, and the path under it the message is about (null when it is the field itself).
 * Null for a field outside the arguments (`verb`, `arguments` as a whole).
 */
export function argumentOfError(field) {
  if (typeof field !== "string" || !field.startsWith("arguments.")) return null;
  const path = field.slice("arguments.".length);
  const name = path.split(/[.[]/, 1)[0];
  if (!name) return null;
  return { name, path: path === name ? null : path };
}

/** A verb's description in brief, for the palette's list: its first sentence. */
export function briefDescription(description, charsMax = 140) {
  const text = String(description ?? "").trim();
  const sentence = /^.*?[.!?](?=\s|$)/s.exec(text);
  const brief = sentence ? sentence[0] : text;
  return brief.length > charsMax ? `${brief.slice(0, charsMax - 1)}…` : brief;
}
