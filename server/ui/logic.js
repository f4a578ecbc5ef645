// The UI's pure logic (no DOM, no network): the context meter, following a continuation,
// merging streamed text, reading tool results, formatting. Unit-tested with `node --test`
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
 * message carrying usage. Null when either is unknown.
 */
export function contextUsage(events, contextWindow) {
  if (!contextWindow || contextWindow <= 0) return null;
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event.type === "message" && event.role === "assistant" && event.meta && event.meta.usage) {
      const tokens = promptTokens(event.meta.usage);
      if (tokens === null) continue;
      const percent = (tokens * 100) / contextWindow;
      return { tokens, window: contextWindow, percent, level: meterLevel(percent) };
    }
  }
  return null;
}

/** "150,000 of 200,000 tokens (75%)". */
export function meterTitle(usage) {
  if (!usage) return "Context: no usage reported yet";
  const pct = usage.percent >= 10 ? Math.round(usage.percent) : Math.round(usage.percent * 10) / 10;
  return `Context: ${formatNumber(usage.tokens)} of ${formatNumber(usage.window)} tokens (${pct}%)`;
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

/** The handoff's sections in the order the spec names them, then the extra ones. */
export const HANDOFF_SECTIONS = [
  ["purpose", "Purpose"],
  ["current_request", "Current request"],
  ["established_facts", "Established facts"],
  ["decisions", "Decisions"],
  ["open_questions", "Open questions"],
  ["next_actions", "Next actions"],
  ["cautions", "Cautions"],
];

const CAMEL = {
  currentRequest: "current_request",
  establishedFacts: "established_facts",
  openQuestions: "open_questions",
  nextActions: "next_actions",
};

function paragraphs(value) {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap(paragraphs);
  if (typeof value === "string") return value.trim() ? [value] : [];
  return [JSON.stringify(value)];
}

/**
 * A handoff (as the manifest stores it, or as a continue_session call wrote it) as markdown:
 * one `## Section` per non-empty section, a list when it has several paragraphs.
 */
export function handoffMarkdown(handoff) {
  if (!handoff || typeof handoff !== "object") return "";
  const sections = new Map();
  const extra = [];
  for (const [key, value] of Object.entries(handoff)) {
    if (key === "extra" && value && typeof value === "object" && !Array.isArray(value)) {
      for (const [name, inner] of Object.entries(value)) extra.push([name, paragraphs(inner)]);
      continue;
    }
    const name = CAMEL[key] || key;
    if (HANDOFF_SECTIONS.some(([known]) => known === name)) sections.set(name, paragraphs(value));
    else extra.push([key, paragraphs(value)]);
  }
  const out = [];
  const emit = (heading, items) => {
    if (!items.length) return;
    out.push(`## ${heading}`, "");
    if (items.length === 1) out.push(items[0], "");
    else out.push(...items.map((item) => `- ${item.replace(/\n/g, " ")}`), "");
  };
  for (const [key, heading] of HANDOFF_SECTIONS) emit(heading, sections.get(key) || []);
  for (const [name, items] of extra) emit(name, items);
  return out.join("\n").trim();
}

/** A source (manifest or call form) as a short label and, for thread ranges, the range. */
export function describeSource(source, thisThread) {
  if (typeof source === "string") return { label: source, kind: "resource" };
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
