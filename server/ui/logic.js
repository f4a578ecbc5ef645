// The UI's pure logic (no DOM, no network): the context meter (an estimate marked as one),
// following a continuation, merging streamed text, reading tool results, the handoff as the
// runtime normalizes it, which messages offer a retry and which failed turns' lines show, which
// cut-off reply offers Go on, the model picker's change, formatting. Unit-tested with `node --test`
// (server/tests/ui/unit.test.js).

/** The meter's level for a percentage: muted below 70, amber from 70, red from 85. */
export function meterLevel(percent) {
  if (percent >= 85) return "red";
  if (percent >= 70) return "amber";
  return "muted";
}

/** The prompt size of an assistant message's `meta.usage`: input + cache_read + cache_write. */
export function promptTokens(usage) {
  if (!usage || typeof usage !== "object") return null;
  const n = (value) => (Number.isFinite(value) ? value : 0);
  return n(usage.input) + n(usage.cache_read) + n(usage.cache_write);
}

/**
 * The context meter from a session's events and its model's window: the newest assistant
 * message carrying usage. `estimated`: the usage is the runtime's estimate from the request's
 * size (`usage.estimated`), as for a model server that reports none. Null when either is unknown.
 */
export function contextUsage(events, contextWindow) {
  if (!contextWindow || contextWindow <= 0) return null;
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event.type === "message" && event.role === "assistant" && event.meta && event.meta.usage) {
      const tokens = promptTokens(event.meta.usage);
      if (tokens === null) continue;
      const percent = (tokens * 100) / contextWindow;
      const estimated = event.meta.usage.estimated === true;
      return { tokens, window: contextWindow, percent, level: meterLevel(percent), estimated };
    }
  }
  return null;
}

/**
 * "Context: 150,000 of 200,000 tokens (75%)"; an estimate says so: "Context: about 12,000 of
 * 200,000 tokens (6%), estimated: the model server reports no usage".
 */
export function meterTitle(usage) {
  if (!usage) return "Context: no usage reported yet";
  const pct = usage.percent >= 10 ? Math.round(usage.percent) : Math.round(usage.percent * 10) / 10;
  const numbers = `${formatNumber(usage.tokens)} of ${formatNumber(usage.window)} tokens (${pct}%)`;
  if (usage.estimated) return `Context: about ${numbers}, estimated: the model server reports no usage`;
  return `Context: ${numbers}`;
}

/** The meter's label: "75%", or "≈6%" for an estimate. */
export function meterLabel(usage) {
  return `${usage.estimated ? "≈" : ""}${Math.round(usage.percent)}%`;
}

export function formatNumber(n) {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** "just now", "5 min ago", "3 h ago", else a date. */
/** A file's size for people: `512 B`, `1.5 KB`, `12 KB`, `3.4 MB` (units of 1024). */
export function formatBytes(n) {
  const bytes = Math.max(0, Number(n) || 0);
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1).replace(/\.0$/, "") : Math.round(value)} ${units[unit]}`;
}

/**
 * The attachments a message's content names, each as `{id, name, media_type, size_bytes}`
 * (an item that is an id alone has its id for a name).
 */
export function messageAttachments(content) {
  const items = content && Array.isArray(content.attachments) ? content.attachments : [];
  return items
    .map((item) => (typeof item === "string" ? { id: item } : item))
    .filter((item) => item && typeof item.id === "string")
    .map((item) => ({
      id: item.id,
      name: typeof item.name === "string" ? item.name : item.id,
      media_type: typeof item.media_type === "string" ? item.media_type : "",
      size_bytes: typeof item.size_bytes === "number" ? item.size_bytes : null,
    }));
}

export function relativeTime(ms, nowMs) {
  const seconds = Math.max(0, Math.round((nowMs - ms) / 1000));
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  return new Date(ms).toISOString().slice(0, 10);
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/** The successor a continue_session result names ("Continued in session <id> …"). */
export function successorFromResult(text) {
  if (typeof text !== "string") return null;
  const match = /Continued in session ([0-9a-f-]{36})/i.exec(text);
  return match && UUID.test(match[1]) ? match[1].toLowerCase() : null;
}

export function isUuid(text) {
  return typeof text === "string" && text.length === 36 && UUID.test(text);
}

/**
 * Following a continuation. A client moves to the successor only if it was following the turn
 * (it sent the message, or saw the session streaming); it moves once per successor, ever (the
 * successors it followed are remembered in `storage`, so Back to the predecessor never
 * redirects again); other clients only get a notice.
 */
export class Follower {
  constructor(storage) {
    this.storage = storage;
    this.followingSession = null;
    try {
      this.followed = new Set(JSON.parse(storage.getItem("seed.followed") || "[]"));
    } catch {
      this.followed = new Set();
    }
  }

  /** A new view: whatever was followed before belongs to another session. */
  view(sessionId) {
    if (this.followingSession !== sessionId) this.followingSession = null;
  }

  /** This client sent a message in the session, or saw it streaming. */
  follow(sessionId) {
    this.followingSession = sessionId;
  }

  /** The turn this client followed ended (and what it led to was handled). */
  unfollow(sessionId) {
    if (this.followingSession === sessionId) this.followingSession = null;
  }

  isFollowing(sessionId) {
    return this.followingSession === sessionId;
  }

  /**
   * `sessionId` continued into `successorId`: whether this client moves there now. True at most
   * once per successor.
   */
  shouldMove(sessionId, successorId, { sentHere = false } = {}) {
    if (!successorId || this.followed.has(successorId)) return false;
    if (!sentHere && !this.isFollowing(sessionId)) return false;
    this.followed.add(successorId);
    try {
      this.storage.setItem("seed.followed", JSON.stringify([...this.followed].slice(-200)));
    } catch {
      // A full or missing storage only loses the memory across reloads.
    }
    return true;
  }
}

/** The handoff's named sections in the order they are rendered: [snake_case key, heading]. */
export const HANDOFF_SECTIONS = [
  ["purpose", "Purpose"],
  ["current_request", "Current request"],
  ["established_facts", "Established facts"],
  ["decisions", "Decisions"],
  ["open_questions", "Open questions"],
  ["next_actions", "Next actions"],
  ["cautions", "Cautions"],
];

/** The argument keys that fill a named section (the call's camelCase, the manifest's snake_case). */
const SECTION_OF_KEY = {
  purpose: "purpose",
  currentRequest: "current_request",
  current_request: "current_request",
  establishedFacts: "established_facts",
  established_facts: "established_facts",
  decisions: "decisions",
  openQuestions: "open_questions",
  open_questions: "open_questions",
  nextActions: "next_actions",
  next_actions: "next_actions",
  cautions: "cautions",
};

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Strings by code point, the order of the runtime's JSON objects (their keys, as UTF-8 bytes). */
function byCodePoint(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** An object's entries in the runtime's order: sorted by key. */
function sortedEntries(object) {
  return Object.keys(object)
    .sort(byCodePoint)
    .map((key) => [key, object[key]]);
}

/**
 * A value as the runtime's compact JSON: keys sorted at every level. (A number JSON.parse
 * cannot hold exactly, or a float the runtime writes in exponent form, may read differently.)
 */
export function compactJson(value) {
  if (Array.isArray(value)) return `[${value.map(compactJson).join(",")}]`;
  if (isObject(value)) return `{${sortedEntries(value).map(([key, inner]) => `${JSON.stringify(key)}:${compactJson(inner)}`).join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

/** Whitespace as the runtime trims it (Unicode White_Space; not U+FEFF, which JS trims). */
const EDGE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

function trimmed(text) {
  return text.replace(EDGE_SPACE, "");
}

/**
 * A handoff section's value as the texts the model gets, by the runtime's rule
 * (projections/src/continuation.rs `section_texts`, checked against the same cases in
 * projections/tests/handoff_normalization.json): a string as it is; a number or a boolean as
 * written; an object as one `key: value` text per field, in key order; a list as a text per item
 * (an object item as its fields `key: value`, joined by `; `). A value inside an object that is
 * not a string is its compact JSON. Texts are trimmed; empty ones dropped.
 */
export function sectionTexts(value) {
  const fieldText = ([key, inner]) => `${key}: ${typeof inner === "string" ? inner : compactJson(inner)}`;
  let texts;
  if (value === null || value === undefined) texts = [];
  else if (typeof value === "string") texts = [value];
  else if (Array.isArray(value)) {
    texts = value.map((item) => {
      if (typeof item === "string") return item;
      if (isObject(item)) return sortedEntries(item).map(fieldText).join("; ");
      return compactJson(item);
    });
  } else if (isObject(value)) texts = sortedEntries(value).map(fieldText);
  else texts = [compactJson(value)];
  return texts.map(trimmed).filter((text) => text !== "");
}

/** The keys a model may nest inside `handoff` that belong at the top level. */
const HOISTED = ["sources", "transfer", "description"];

/**
 * continue_session's arguments as the runtime reads them (`normalize_input`): `sources`,
 * `transfer` and `description` nested inside `handoff` move to the top level; when one is given
 * at both levels, the top level's value wins and the nested copy is dropped. Returns a copy;
 * anything else is left as it is.
 */
export function normalizeInput(args) {
  if (!isObject(args)) return args;
  const normalized = { ...args };
  if (isObject(normalized.handoff)) normalized.handoff = { ...normalized.handoff };
  for (const key of HOISTED) {
    if (!isObject(normalized.handoff) || !Object.hasOwn(normalized.handoff, key)) continue;
    const nested = normalized.handoff[key];
    delete normalized.handoff[key];
    if (normalized[key] === undefined || normalized[key] === null) normalized[key] = nested;
  }
  return normalized;
}

/**
 * A handoff (as the manifest stores it, or as a call wrote it, normalized) as its sections, in
 * the order the model reads them: `[heading, texts]` for each named section with text, then
 * each other key (and each key under `extra`) in key order, texts as `sectionTexts` makes them.
 */
export function handoffSections(handoff) {
  if (!isObject(handoff)) return [];
  const named = new Map(HANDOFF_SECTIONS.map(([key]) => [key, []]));
  const extra = new Map();
  const addExtra = (name, texts) => {
    if (!texts.length) return;
    if (!extra.has(name)) extra.set(name, []);
    extra.get(name).push(...texts);
  };
  for (const [key, value] of sortedEntries(handoff)) {
    if (key === "extra" && isObject(value)) {
      for (const [name, inner] of sortedEntries(value)) addExtra(name, sectionTexts(inner));
      continue;
    }
    const section = Object.hasOwn(SECTION_OF_KEY, key) ? SECTION_OF_KEY[key] : null;
    if (section) named.get(section).push(...sectionTexts(value));
    else addExtra(key, sectionTexts(value));
  }
  const sections = HANDOFF_SECTIONS.map(([key, heading]) => [heading, named.get(key)]);
  const others = [...extra.keys()].sort(byCodePoint).map((name) => [name, extra.get(name)]);
  return [...sections, ...others].filter(([, texts]) => texts.length);
}

/**
 * A handoff as markdown, the way the model reads it: one `## Section` per section with text, a
 * list when it has several texts.
 */
export function handoffMarkdown(handoff) {
  const out = [];
  for (const [heading, texts] of handoffSections(handoff)) {
    out.push(`## ${heading.replace(/\n/g, " ")}`, "");
    if (texts.length === 1) out.push(texts[0], "");
    else out.push(...texts.map((text) => `- ${text.replace(/\n/g, " ")}`), "");
  }
  return out.join("\n").trim();
}

/** A source (manifest or call form) as a short label and, for thread ranges, the range. */
export function describeSource(source, thisThread) {
  if (typeof source === "string") return { label: source, kind: "resource" };
  if (!isObject(source)) return { label: compactJson(source), kind: "other" };
  const type = source.type;
  if (type === "resource") return { label: source.uri || source.url || source.address, kind: "resource" };
  if (type === "memory") return { label: source.path, kind: "memory" };
  if (type === "session_events" || type === "session_event") {
    const thread = String(source.thread || source.session_id || thisThread || "").replace(/^thread:/, "");
    const from = source.from_seq ?? source.fromSeq ?? source.seq;
    const to = source.to_seq ?? source.toSeq ?? source.seq;
    const seqs = from === to ? `seq ${from}` : `seqs ${from}–${to}`;
    return { label: `thread:${thread.slice(0, 8)}… ${seqs}`, kind: "thread", thread, from, to };
  }
  return { label: JSON.stringify(source), kind: "other" };
}

/**
 * The messages to offer a retry for, from a session's newest runs (`GET …/runs`, oldest
 * first): each message whose newest run failed, by its event id (as text), with that run's id
 * and what went wrong (the run's `result.error`). A message whose newest run is still open,
 * succeeded or was stopped is not one of them.
 */
export function failedMessages(runs) {
  const newest = new Map();
  for (const run of Array.isArray(runs) ? runs : []) {
    for (const eventId of Array.isArray(run.user_event_ids) ? run.user_event_ids : []) newest.set(String(eventId), run);
  }
  const failed = new Map();
  for (const [eventId, run] of newest) {
    if (run.status !== "failed") continue;
    const error = run.result && typeof run.result.error === "string" && run.result.error.trim() ? run.result.error : "the run failed and said no more";
    failed.set(eventId, { runId: run.id, error });
  }
  return failed;
}

/**
 * The failed run a notice tells of (the one a failed run leaves in its log, with its end:
 * `meta.run_failed`, `meta.reason`): `{runId, reason, text}`, `text` being its line in plain
 * words ("This turn failed: the model server refused the key (401)"), or the notice's own text
 * when it says more than that (a write the disk refused: what was kept, what to do); null for
 * any other event.
 */
export function failedRunNotice(event) {
  const meta = event && event.meta;
  if (!event || event.type !== "notice" || !meta || !meta.run_failed) return null;
  const reason = typeof meta.reason === "string" && meta.reason.trim() ? meta.reason : "the run failed and said no more";
  const own = typeof event.content?.text === "string" ? event.content.text.trim() : "";
  const text = own && own !== `The turn failed: ${reason}` ? own : `This turn failed: ${reason}`;
  return { runId: String(meta.run_failed), reason, text };
}

/**
 * Whether a failed turn's line shows. `line`: its `runId`, and `readsBefore`, how many reads of
 * the runs had started when it came. `failed`: failedMessages of the newest read applied, whose
 * number is `readApplied`. Until a read that started after the line came is applied, whether its
 * run offers Retry is unknown, and the line waits hidden (else it would show, then hide for the
 * Retry row); then it is hidden only while a Retry row tells the same run's reason, so the
 * reason shows once, and the failure stays in the transcript once the retry is answered.
 */
export function failedTurnShown(line, failed, readApplied) {
  if (readApplied <= line.readsBefore) return false;
  for (const failure of failed.values()) if (failure.runId === line.runId) return false;
  return true;
}

/** Whether `event` is a reply the model's output token limit cut off (`meta.stop_reason` "length"). */
export function isCutOff(event) {
  return event.type === "message" && event.role === "assistant" && event.meta?.stop_reason === "length";
}

/**
 * The seq of the cut-off reply that offers Go on: the session's newest message, when it is a
 * reply cut off by the output limit; null when there is none or anything was said after it (an
 * older cut-off reply only shows its note).
 */
export function goOnOffer(events) {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event.type !== "message" || (event.role !== "user" && event.role !== "assistant")) continue;
    return isCutOff(event) ? event.seq : null;
  }
  return null;
}

/** What Go on sends: an ordinary message, as if typed. */
export const GO_ON_TEXT = "Go on.";

/** The reasoning levels a session may ask for; none is the provider's configuration. */
export const REASONING_LEVELS = ["low", "medium", "high"];

/**
 * The body of `PUT …/model` the model picker sends: the model typed (empty: the service's
 * default) and the reasoning level chosen (anything else: null, the provider's configuration).
 * Both are always sent: a model left out would be reset to the default.
 */
export function modelChange(modelText, level) {
  const model = String(modelText ?? "").trim();
  return { model: model || null, reasoning_level: REASONING_LEVELS.includes(level) ? level : null };
}

/** `text` on one line (newlines as ⏎), at most `charsMax` chars. */
/**
 * How a tool call's row names its tool: the MCP server it comes from (from `GET /v1/tools`'
 * `mcp_server`, `null` for a verb built in) and the tool's own name, the verb name without the
 * server's `SERVER__` prefix when it has one.
 */
export function toolLabel(name, mcpServer) {
  if (!mcpServer) return { server: null, tool: name };
  const prefix = `${mcpServer}__`;
  return { server: mcpServer, tool: name.startsWith(prefix) ? name.slice(prefix.length) : name };
}

/** The MCP server of each tool `GET /v1/tools` lists, by verb name. */
export function toolServers(list) {
  const servers = new Map();
  for (const tool of list?.tools ?? []) {
    if (tool.mcp_server) servers.set(tool.name, tool.mcp_server);
  }
  return servers;
}

export function oneLine(text, charsMax) {
  const line = String(text ?? "").trim().replace(/\r?\n/g, " ⏎ ");
  const chars = Array.from(line);
  return chars.length > charsMax ? `${chars.slice(0, charsMax - 1).join("")}…` : line;
}

/**
 * A verb a person ran by hand (an `action` event's content), in brief: the call
 * (`status title: “Named”, description: “Working”`), the result's start, and whether it failed.
 */
export function actionSummary(content) {
  const verb = typeof content?.verb === "string" ? content.verb : "verb";
  const args = isObject(content?.arguments) ? Object.entries(content.arguments) : [];
  const parts = args.map(([name, value]) => `${name}: ${typeof value === "string" ? `“${value}”` : compactJson(value)}`);
  return {
    call: oneLine(parts.length ? `${verb} ${parts.join(", ")}` : verb, 140),
    result: oneLine(content?.result ?? "", 100),
    isError: content?.is_error === true,
  };
}

/**
 * A notice (or a message from neither side) as one line, `who: text`. The transcript lines the
 * model reads come from the server (`GET /v1/sessions/{id}/transcript`), not from here.
 */
export function noticeLine(event) {
  const content = event.content ?? {};
  let text;
  if (typeof content === "string") text = content;
  else if (typeof content.text === "string") text = content.text;
  else if (typeof content.content === "string") text = content.content;
  else text = JSON.stringify(content);
  return `${event.actor || event.role || "system"}: ${text}`;
}

/**
 * A text delta merged into the text in flight. `offsetChars` chars (code points) of the
 * response came before `delta`, so only the part of it that `text` lacks is added. Null when
 * chars are missing between the two: read the text in flight again.
 */
export function mergeDelta(text, offsetChars, delta) {
  const have = Array.from(text).length;
  if (offsetChars > have) return null;
  return text + Array.from(delta).slice(have - offsetChars).join("");
}

/**
 * How many chars of a streaming answer to show `elapsedMs` into revealing a chunk: the chars
 * from `from` to `to` appear evenly over `durationMs`, so that text flows between commits
 * instead of jumping at each one.
 */
export function revealedChars(from, to, elapsedMs, durationMs) {
  if (to <= from || elapsedMs >= durationMs) return to;
  return from + Math.floor(((to - from) * Math.max(0, elapsedMs)) / durationMs);
}

const LIST_REASONS = new Set(["session-created", "session-deleted", "session-continued"]);

/**
 * How soon the session list is read again after a subscription update, in ms; null when the
 * update changes nothing the list shows. The steps of a turn are many and batch; a session
 * created, deleted or continued shows at once.
 */
export function listRefreshDelay(update) {
  switch (update.type) {
    case "account-change": {
      const reasons = Array.isArray(update.reasons) ? update.reasons : [];
      return reasons.some((reason) => LIST_REASONS.has(reason)) ? 0 : 150;
    }
    case "session-change":
    case "run-finished":
      return 150;
    default:
      return null;
  }
}
