// Unit tests of the UI's pure modules (markdown, the meter and its estimate, following a
// continuation, merging streamed text, the handoff as the runtime normalizes it, verb forms from
// their schemas, which messages offer a retry and which failed turns' lines show, which cut-off
// reply offers Go on, the model picker's change), run by `node --test` with the end-to-end
// suite.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Worker } from "node:worker_threads";

import { argumentOfError, briefDescription, formArguments, formFields, initialValue, jsonExample } from "../../ui/forms.js";
import { QUOTE_DEPTH_MAX, renderMarkdown } from "../../ui/markdown.js";
import {
  Follower,
  actionSummary,
  contextUsage,
  describeSource,
  failedMessages,
  failedRunNotice,
  failedTurnShown,
  formatBytes,
  goOnOffer,
  handoffMarkdown,
  handoffSections,
  isCutOff,
  listRefreshDelay,
  mergeDelta,
  meterLevel,
  modelChange,
  messageAttachments,
  meterLabel,
  meterTitle,
  normalizeInput,
  noticeLine,
  revealedChars,
  sectionTexts,
  successorFromResult,
  toolLabel,
  toolServers,
} from "../../ui/logic.js";

test("markdown escapes every tag and attribute, and keeps only safe links", () => {
  const html = renderMarkdown('<img src=x onerror="alert(1)"> **bold** `<b>` [x](javascript:alert(1)) [ok](https://example.org/?a=1&b=2)');
  assert.ok(!html.includes("<img"), html);
  assert.ok(html.includes("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"), html);
  assert.ok(html.includes("<strong>bold</strong>"), html);
  assert.ok(html.includes("<code>&lt;b&gt;</code>"), html);
  assert.ok(!html.includes('href="javascript'), html);
  assert.ok(html.includes('<a href="https://example.org/?a=1&amp;b=2" rel="noopener noreferrer" target="_blank">ok</a>'), html);
});

test("markdown renders blocks: headings, lists, code fences, quotes", () => {
  const html = renderMarkdown("## Plan\n\n- one\n- *two*\n\n1. first\n\n```js\nlet x = '<a>';\n```\n> quoted");
  assert.equal(
    html,
    "<h4>Plan</h4><ul><li>one</li><li><em>two</em></li></ul><ol><li>first</li></ol>" +
      '<pre><code class="language-js">let x = &#39;&lt;a&gt;&#39;;</code></pre><blockquote><p>quoted</p></blockquote>',
  );
});

/**
 * The hang guard of the adversarial renders below. Each input is sized so that a renderer linear
 * in its input takes milliseconds on it and one that backtracks (quadratic or worse) takes
 * minutes to hours; past the guard the render is stopped and the test fails.
 */
const RENDER_GUARD_MS = 60_000;

/**
 * `renderMarkdown(source)` in a worker thread, so that a runaway render fails its test at the
 * guard (the worker is stopped) instead of blocking the suite, and a stack overflow fails it too.
 */
function renderGuarded(source) {
  const module = new URL("../../ui/markdown.js", import.meta.url).href;
  const code = `
    const { parentPort, workerData } = require("node:worker_threads");
    import(workerData.module).then(({ renderMarkdown }) => parentPort.postMessage(renderMarkdown(workerData.source)));
  `;
  return new Promise((resolve, reject) => {
    const worker = new Worker(code, { eval: true, workerData: { module, source } });
    const guard = setTimeout(() => {
      worker.terminate();
      reject(new Error(`the render did not end within ${RENDER_GUARD_MS / 1000} s: the renderer is not linear on this input`));
    }, RENDER_GUARD_MS);
    worker.once("message", (html) => {
      clearTimeout(guard);
      worker.terminate();
      resolve(html);
    });
    worker.once("error", (error) => {
      clearTimeout(guard);
      reject(error);
    });
  });
}

/** The renderer's own tags; anything else in its output must be escaped text. */
const OWN_TAGS =
  /<\/?(?:p|br|h[1-6]|ul|ol|li|pre|code|blockquote|hr|strong|em|del|a)>|<code class="language-[\w+-]+">|<a href="[^"<>]*" rel="noopener noreferrer" target="_blank">/g;

function assertEscaped(html) {
  const rest = html.replace(OWN_TAGS, "");
  const raw = /[<>"']/.exec(rest);
  assert.equal(raw, null, `unescaped ${raw?.[0]} in the text: ...${rest.slice(Math.max(0, (raw?.index ?? 0) - 40), (raw?.index ?? 0) + 40)}...`);
}

const spaces = " ".repeat(30_000);
const deepQuote = ">".repeat(10_000);
const quoteLines = Array.from({ length: 2_600 }, (_, i) => `${">".repeat(i + 1)} <i>`).join("\n");
const ADVERSARIAL = [
  {
    name: "a heading with 30,000 spaces inside",
    source: `# <b>${spaces}</b>`,
    expected: `<h3>&lt;b&gt;${spaces}&lt;/b&gt;</h3>`,
  },
  {
    name: "10,000 nested quotes on one line",
    source: `${deepQuote} <script>x</script>`,
    expected:
      "<blockquote>".repeat(QUOTE_DEPTH_MAX) +
      `<p>${"&gt;".repeat(10_000 - QUOTE_DEPTH_MAX)} &lt;script&gt;x&lt;/script&gt;</p>` +
      "</blockquote>".repeat(QUOTE_DEPTH_MAX),
  },
  {
    name: "quotes one deeper on each of 2,600 lines",
    source: quoteLines,
    check: (html) => {
      assert.equal(html.split("<blockquote>").length - 1, QUOTE_DEPTH_MAX, "nesting stops at the cap");
      assert.ok(html.endsWith(`&gt; &lt;i&gt;</p>${"</blockquote>".repeat(QUOTE_DEPTH_MAX)}`), html.slice(-200));
    },
  },
  {
    name: "300,000 opening brackets before a long unclosed address",
    source: `${"[".repeat(300_000)}x](${"y".repeat(300_000)}`,
    expected: `<p>${"[".repeat(300_000)}x](${"y".repeat(300_000)}</p>`,
  },
  {
    name: "150,000 unclosed links",
    source: "[a](b".repeat(150_000),
    expected: `<p>${"[a](b".repeat(150_000)}</p>`,
  },
  {
    name: "runs of 100,000 of each emphasis marker",
    source: ["*", "_", "~"].map((marker) => `x${marker.repeat(100_000)}x`).join("\n"),
    expected: `<p>${["*", "_", "~"].map((marker) => `x${marker.repeat(100_000)}x`).join("<br>")}</p>`,
  },
  {
    name: "100,000 openings of italics that never close",
    source: "*a ".repeat(100_000),
    expected: `<p>${"*a ".repeat(100_000)}</p>`,
  },
  {
    name: "50,000 bold words in a row",
    source: "**a**".repeat(50_000),
    expected: `<p>${"<strong>a</strong>".repeat(50_000)}</p>`,
  },
  {
    name: "100,001 backticks",
    source: `${"`".repeat(100_001)}<b>`,
    expected: `<p>${"`".repeat(100_001)}&lt;b&gt;</p>`,
  },
  {
    name: "every inline marker in runs of 50,000",
    source: ["*", "_", "~", "`", "[", "]", "(", ")", "<", "\"", "#"].map((c) => c.repeat(50_000)).join("x"),
    check: (html) => assert.ok(html.startsWith("<p>") && html.endsWith("</p>"), html.slice(0, 100)),
  },
];

for (const { name, source, expected, check } of ADVERSARIAL) {
  test(`markdown renders ${name} in linear time, escaped`, async () => {
    const html = await renderGuarded(source);
    assertEscaped(html);
    if (expected !== undefined) assert.ok(html === expected, `${name}: ${html.slice(0, 200)}...${html.slice(-200)}`);
    check?.(html);
  });
}

test("markdown keeps text out of markup, whatever the markers around it", () => {
  const attempts = [
    '**<script>alert(1)</script>**',
    '[<img src=x onerror=alert(1)>](https://example.org/"onmouseover="alert(1))',
    "[x](https://example.org/'><script>)",
    "`</code><script>alert(1)</script>`",
    "# <svg onload=alert(1)>",
    "> > <iframe src=javascript:alert(1)>",
    "```js\"><script>\n<b>\n```",
    "- _<b>_ ~~<i>~~ [a](javascript:alert(1))",
    '*[a](https://x/*"*) _[b](https://y/_\'_)',
    `${">".repeat(QUOTE_DEPTH_MAX + 3)} <b onclick=x>`,
  ];
  for (const source of attempts) {
    const html = renderMarkdown(source);
    assertEscaped(html);
    assert.ok(!/<(?:script|img|svg|iframe|b |i>|b>)/i.test(html), `${source} -> ${html}`);
    assert.ok(!html.includes('href="javascript'), `${source} -> ${html}`);
  }
  // A link's address is one attribute; markers in it are not markup.
  assert.equal(
    renderMarkdown("[a](https://x/_b_) _c_"),
    '<p><a href="https://x/_b_" rel="noopener noreferrer" target="_blank">a</a> <em>c</em></p>',
  );
});

test("the meter is muted below 70%, amber from 70%, red from 85%", () => {
  assert.deepEqual([0, 69.9, 70, 84.9, 85, 120].map(meterLevel), ["muted", "muted", "amber", "amber", "red", "red"]);
  const events = [
    { type: "message", role: "assistant", meta: { usage: { input: 10, cache_read: 0, cache_write: 0 } } },
    { type: "message", role: "user", meta: {} },
    { type: "message", role: "assistant", meta: { usage: { input: 100000, cache_read: 40000, cache_write: 10000 } } },
    { type: "tool_call", role: "assistant", meta: {} },
  ];
  const usage = contextUsage(events, 200000);
  assert.deepEqual(usage, { tokens: 150000, window: 200000, percent: 75, level: "amber", estimated: false });
  assert.equal(meterTitle(usage), "Context: 150,000 of 200,000 tokens (75%)");
  assert.equal(meterLabel(usage), "75%");
  assert.equal(contextUsage(events, null), null);
  assert.equal(contextUsage([], 1000), null);
});

test("a meter read from estimated usage says it is an estimate, in its title and its label", () => {
  const estimate = { input: 11000, output: 40, cache_read: 0, cache_write: 1000, estimated: true };
  const events = [
    { type: "message", role: "assistant", meta: { usage: { input: 500, cache_read: 0, cache_write: 0 } } },
    { type: "message", role: "user", meta: {} },
    { type: "message", role: "assistant", meta: { usage: estimate } },
  ];
  const usage = contextUsage(events, 200000);
  assert.deepEqual(usage, { tokens: 12000, window: 200000, percent: 6, level: "muted", estimated: true });
  assert.equal(meterTitle(usage), "Context: about 12,000 of 200,000 tokens (6%), estimated: the model server reports no usage");
  assert.equal(meterLabel(usage), "≈6%");
  // A reported figure after the estimate is read as reported.
  const reported = contextUsage([...events, { type: "message", role: "assistant", meta: { usage: { input: 14000 } } }], 200000);
  assert.equal(reported.estimated, false);
  assert.equal(meterTitle(reported), "Context: 14,000 of 200,000 tokens (7%)");
  // Only `true` marks an estimate.
  assert.equal(contextUsage([{ type: "message", role: "assistant", meta: { usage: { input: 1, estimated: "yes" } } }], 100).estimated, false);
});

test("a client follows a continuation once, and only when it followed the turn", () => {
  const storage = new Map();
  const store = { getItem: (k) => storage.get(k) ?? null, setItem: (k, v) => storage.set(k, v) };
  const follower = new Follower(store);
  follower.view("a");
  assert.equal(follower.shouldMove("a", "b"), false, "not following: stays");
  follower.follow("a");
  assert.equal(follower.shouldMove("a", "b"), true, "following: moves");
  assert.equal(follower.shouldMove("a", "b"), false, "once per successor");
  assert.equal(follower.shouldMove("a", "b", { sentHere: true }), false, "once, even for the sender");
  // Back to the predecessor: a new view that follows nothing; the memory survives a reload.
  const reloaded = new Follower(store);
  reloaded.view("a");
  reloaded.follow("a");
  assert.equal(reloaded.shouldMove("a", "b"), false);
  assert.equal(reloaded.shouldMove("a", "c", { sentHere: true }), true, "a new branch's successor");
  reloaded.view("c");
  assert.equal(reloaded.isFollowing("a"), false);
});

test("the handoff renders as markdown sections, sources as labels", () => {
  const md = handoffMarkdown({
    purpose: ["Plan the trip"],
    currentRequest: "Book it",
    next_actions: ["Call", "Pay"],
    extra: { budget: ["€900"] },
  });
  assert.equal(md, "## Purpose\n\nPlan the trip\n\n## Current request\n\nBook it\n\n## Next actions\n\n- Call\n- Pay\n\n## budget\n\n€900");
  const thread = "0190f0e0-0000-7000-8000-000000000001";
  assert.deepEqual(describeSource({ type: "session_events", thread, from_seq: 1, to_seq: 4 }), {
    label: "thread:0190f0e0… seqs 1–4",
    kind: "thread",
    thread,
    from: 1,
    to: 4,
  });
  assert.equal(successorFromResult(`Continued in session ${thread} (“x”). This turn ends here`), thread);
  assert.equal(successorFromResult("error: nope"), null);
});

// The runtime's cases (projections/src/continuation.rs is tested against the same file).
const HANDOFF_CASES = JSON.parse(readFileSync(new URL("../../../projections/tests/handoff_normalization.json", import.meta.url), "utf8"));

test("a handoff section's texts agree with the runtime's, case by case", () => {
  assert.ok(HANDOFF_CASES.section_texts.length > 0);
  for (const { value, texts } of HANDOFF_CASES.section_texts) {
    assert.deepEqual(sectionTexts(value), texts, `section_texts of ${JSON.stringify(value)}`);
  }
});

test("continue_session's arguments normalize as the runtime normalizes them, case by case", () => {
  assert.ok(HANDOFF_CASES.normalize_input.length > 0);
  for (const { arguments: args, normalized } of HANDOFF_CASES.normalize_input) {
    const before = JSON.stringify(args);
    assert.deepEqual(normalizeInput(args), normalized, `normalize_input of ${before}`);
    assert.equal(JSON.stringify(args), before, "the arguments are not changed in place");
  }
  assert.equal(normalizeInput("not an object"), "not an object");
  assert.deepEqual(normalizeInput({ handoff: "prose" }), { handoff: "prose" });
});

test("a handoff's sections read as the model reads them: object values as key: value texts, keys in order", () => {
  const handoff = {
    purpose: "Plan the trip",
    currentRequest: { nights: 4, budget: "150 a night" },
    zebra: "last of the others",
    risks: [{ when: "June", risk: "prices rise" }, " "],
    extra: { budget: ["€900"], empty: [] },
    cautions: null,
  };
  assert.deepEqual(handoffSections(handoff), [
    ["Purpose", ["Plan the trip"]],
    ["Current request", ["budget: 150 a night", "nights: 4"]],
    ["budget", ["€900"]],
    ["risks", ["risk: prices rise; when: June"]],
    ["zebra", ["last of the others"]],
  ]);
  assert.equal(
    handoffMarkdown(handoff),
    "## Purpose\n\nPlan the trip\n\n## Current request\n\n- budget: 150 a night\n- nights: 4\n\n" +
      "## budget\n\n€900\n\n## risks\n\nrisk: prices rise; when: June\n\n## zebra\n\nlast of the others",
  );
});

test("a delta adds only what the text in flight lacks, counting chars as code points", () => {
  assert.equal(mergeDelta("", 0, "Hello"), "Hello");
  assert.equal(mergeDelta("Hello", 5, ", world"), "Hello, world");
  // Text read from /live already holds part of the delta, or all of it.
  assert.equal(mergeDelta("Hello, wo", 5, ", world"), "Hello, world");
  assert.equal(mergeDelta("Hello, world", 5, ", wor"), "Hello, world");
  // An astral char counts once, as the server counts it.
  assert.equal(mergeDelta("a🌍b", 2, "bc"), "a🌍bc");
  assert.equal(mergeDelta("a🌍", 2, "b"), "a🌍b");
  // Chars are missing between the two: the caller reads the text in flight again.
  assert.equal(mergeDelta("Hel", 5, ", world"), null);
  assert.equal(mergeDelta("", 3, "x"), null);
});

test("a chunk of streamed text is revealed evenly over its duration", () => {
  assert.deepEqual(
    [0, 10, 45, 89, 90, 500].map((elapsed) => revealedChars(10, 100, elapsed, 90)),
    [10, 20, 55, 99, 100, 100],
  );
  assert.equal(revealedChars(7, 7, 0, 90), 7, "nothing to reveal");
  assert.equal(revealedChars(10, 100, -5, 90), 10, "a frame stamped before the chunk");
});

test("the session list is read again at once for a new, deleted or continued session, later for a step, never for text", () => {
  assert.equal(listRefreshDelay({ type: "account-change", reasons: ["session-updated", "session-continued"], reason: "session-updated" }), 0);
  assert.equal(listRefreshDelay({ type: "account-change", reasons: ["session-created"] }), 0);
  assert.equal(listRefreshDelay({ type: "account-change", reasons: ["session-updated"] }), 150);
  assert.equal(listRefreshDelay({ type: "session-change", reason: "events", from_seq: 3, to_seq: 4 }), 150);
  assert.equal(listRefreshDelay({ type: "run-finished", status: "succeeded" }), 150);
  assert.equal(listRefreshDelay({ type: "text-delta", offset_chars: 0, text: "x" }), null);
  assert.equal(listRefreshDelay({ type: "tool-call", seq: 4 }), null);
});

test("a notice reads as one line: who, then its text", () => {
  assert.equal(noticeLine({ type: "notice", actor: "system", content: { text: "The plan has 1 unfinished step(s)." } }), "system: The plan has 1 unfinished step(s).");
  assert.equal(noticeLine({ type: "notice", actor: "runtime", content: { tool_call_id: "c1", content: "done" } }), "runtime: done");
  assert.equal(noticeLine({ type: "message", role: "system", content: { n: 1 } }), "system: {\"n\":1}");
});

test("sizes read as people say them, and a message's attachments are read in either form", () => {
  assert.deepEqual(
    [0, 512, 1024, 1536, 12 * 1024, 3.4 * 1024 * 1024, 5 * 1024 ** 3].map(formatBytes),
    ["0 B", "512 B", "1 KB", "1.5 KB", "12 KB", "3.4 MB", "5 GB"],
  );
  assert.deepEqual(
    messageAttachments({
      text: "see",
      attachments: ["a1", { id: "a2", name: "dot.png", media_type: "image/png", size_bytes: 70 }, { name: "no id" }, 7],
    }),
    [
      { id: "a1", name: "a1", media_type: "", size_bytes: null },
      { id: "a2", name: "dot.png", media_type: "image/png", size_bytes: 70 },
    ],
  );
  assert.deepEqual(messageAttachments({ text: "none" }), []);
  assert.deepEqual(messageAttachments(null), []);
});

// Verb schemas as GET /v1/sessions/{id}/actions serves them (abridged descriptions).
const STATUS_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    description: { type: "string", maxLength: 1000, description: "The live status" },
    title: { type: "string", minLength: 1, maxLength: 200, description: "The session's new title; leave out to keep the current one" },
  },
  required: ["description"],
};
const KITCHEN_SCHEMA = {
  type: "object",
  properties: {
    limit: { type: "integer", minimum: 1, maximum: 1000 },
    ratio: { type: ["number", "null"] },
    target: { type: "string", description: "\"thread:<session id>\" or a memory path" },
    content: { type: "string", description: "For write and append: the text to write" },
    action: { type: "string", enum: ["write", "append", "delete"] },
    loud: { type: "boolean" },
    quiet: { type: "boolean", default: true },
    steps: {
      type: "array",
      items: { type: "object", properties: { step: { type: "string" }, done: { type: "boolean" } }, required: ["step", "done"] },
    },
    anything: {},
  },
  required: ["steps", "action"],
};

test("a verb's schema makes a form: a control per argument's type, the required ones first and marked", () => {
  assert.deepEqual(
    formFields(STATUS_SCHEMA).map((field) => [field.name, field.kind, field.required, field.placeholder]),
    [
      ["description", "textarea", true, "at most 1000 characters"],
      ["title", "text", false, "at most 200 characters"],
    ],
  );
  const fields = formFields(KITCHEN_SCHEMA);
  assert.deepEqual(
    fields.map((field) => [field.name, field.kind, field.required]),
    [
      ["action", "enum", true],
      ["steps", "json", true],
      ["limit", "integer", false],
      ["ratio", "number", false],
      ["target", "text", false],
      ["content", "textarea", false],
      ["loud", "boolean", false],
      ["quiet", "boolean", false],
      ["anything", "json", false],
    ],
  );
  const byName = Object.fromEntries(fields.map((field) => [field.name, field]));
  assert.deepEqual(byName.action.options.map((option) => option.label), ["write", "append", "delete"]);
  assert.deepEqual([byName.limit.min, byName.limit.max], [1, 1000]);
  assert.equal(byName.steps.placeholder, '[{"step":"","done":false}]');
  assert.deepEqual(jsonExample({ type: "object", properties: { n: { type: "integer", minimum: 1 } } }), { n: 1 });
  assert.deepEqual([initialValue(byName.quiet), initialValue(byName.loud), initialValue(byName.target)], [true, false, ""]);
  assert.deepEqual(formFields({ type: "object" }), [], "a verb of no arguments has an empty form");
  assert.deepEqual(formFields(null), []);
});

test("a form's values become the arguments: typed as the schema says, empty ones left out, unreadable ones named", () => {
  const fields = formFields(KITCHEN_SCHEMA);
  assert.deepEqual(
    formArguments(fields, {
      action: "1",
      steps: '[{"step": "pack", "done": true}]',
      limit: " 20 ",
      ratio: "0.5",
      target: "",
      content: "line one\nline two",
      loud: false,
      quiet: true,
      anything: "",
    }),
    { arguments: { action: "append", steps: [{ step: "pack", done: true }], limit: 20, ratio: 0.5, content: "line one\nline two" }, errors: {} },
  );
  // A checkbox goes when it differs from its default; a required field left empty is the
  // service's to refuse, by name.
  assert.deepEqual(formArguments(fields, { action: "", steps: "", loud: true, quiet: false }), {
    arguments: { loud: true, quiet: false },
    errors: {},
  });
  const unread = formArguments(fields, { action: "7", steps: "[{step: 1}]", limit: "many" });
  assert.deepEqual(Object.keys(unread.errors), ["action", "steps", "limit"]);
  assert.match(unread.errors.steps, /^not valid JSON: /);
  assert.equal(unread.errors.limit, "expected a whole number");
  const required = formFields({ type: "object", properties: { on: { type: "boolean" } }, required: ["on"] });
  assert.deepEqual(formArguments(required, { on: false }).arguments, { on: false }, "a required checkbox always goes");
});

test("a refusal's field names the form's field, and the path under it", () => {
  assert.deepEqual(argumentOfError("arguments.title"), { name: "title", path: null });
  assert.deepEqual(argumentOfError("arguments.steps[0].done"), { name: "steps", path: "steps[0].done" });
  assert.deepEqual(argumentOfError("arguments.a.b"), { name: "a", path: "a.b" });
  assert.equal(argumentOfError("arguments"), null);
  assert.equal(argumentOfError("verb"), null);
  assert.equal(argumentOfError(undefined), null);
});

test("a verb reads in brief by its first sentence; an action by its call and its result", () => {
  assert.equal(briefDescription("Sets this session's status, shown to you every turn. description is the live status."), "Sets this session's status, shown to you every turn.");
  assert.equal(briefDescription("Reads a thread: thread:x"), "Reads a thread: thread:x");
  assert.equal(briefDescription(`${"a".repeat(200)}.`).length, 140);
  assert.deepEqual(actionSummary({ verb: "status", arguments: { description: "Working", title: "Named" }, result: "status set", is_error: false }), {
    call: "status description: “Working”, title: “Named”",
    result: "status set",
    isError: false,
  });
  assert.deepEqual(actionSummary({ verb: "plan", arguments: { steps: [{ step: "a", done: false }] }, result: "[ ] a\n[ ] b", is_error: true }), {
    call: 'plan steps: [{"done":false,"step":"a"}]',
    result: "[ ] a ⏎ [ ] b",
    isError: true,
  });
  assert.deepEqual(actionSummary({ verb: "read" }), { call: "read", result: "", isError: false });
});

test("a message offers Retry when its newest run failed, and not once a newer run is open or answered it", () => {
  const run = (id, status, userEventIds, result = null) => ({ id, status, user_event_ids: userEventIds, result });
  const failed = failedMessages([
    run("r1", "failed", [3], { error: "http 500: boom" }),
    run("r2", "succeeded", [3], { answer: "You said: hello" }),
    run("r3", "failed", [5, 6], { error: "provider down" }),
    run("r4", "running", [6]),
    run("r5", "canceled", [8], { error: "stopped" }),
    run("r6", "failed", [9], {}),
    run("r7", "succeeded", [10], { answer: "x" }),
    run("r8", "failed", [10], { error: "the retry failed too" }),
    run("r9", "queued", [11]),
  ]);
  assert.deepEqual(
    [...failed],
    [
      ["5", { runId: "r3", error: "provider down" }],
      ["9", { runId: "r6", error: "the run failed and said no more" }],
      ["10", { runId: "r8", error: "the retry failed too" }],
    ],
  );
  assert.deepEqual([...failedMessages([])], []);
  assert.deepEqual([...failedMessages(undefined)], []);
});

test("a failed run's notice reads as a failed turn's line in plain words; any other event is none", () => {
  const notice = (meta, text) => ({ type: "notice", role: "system", actor: "runtime", run_id: "r1", content: { text }, meta });
  assert.deepEqual(
    failedRunNotice(notice({ run_failed: "r1", reason: "the model server refused the key (401)" }, "The turn failed: the model server refused the key (401)")),
    { runId: "r1", reason: "the model server refused the key (401)", text: "This turn failed: the model server refused the key (401)" },
  );
  // A notice that says more than the reason (a write the disk refused) is read as it says.
  const stopped = "The turn stopped: the database refused a write: disk full. What it had done is kept; send the message again once there is room.";
  assert.deepEqual(failedRunNotice(notice({ run_failed: "r2", reason: "the database refused a write: disk full" }, stopped)), {
    runId: "r2",
    reason: "the database refused a write: disk full",
    text: stopped,
  });
  assert.equal(failedRunNotice(notice({ run_failed: "r3" }, undefined)).text, "This turn failed: the run failed and said no more");
  assert.equal(failedRunNotice(notice({}, "The plan has 1 unfinished step(s).")), null);
  assert.equal(failedRunNotice({ type: "message", role: "assistant", meta: { run_failed: "r1" }, content: {} }), null);
});

test("a failed turn's line shows once the runs are read after it came, and not while a Retry row tells its reason", () => {
  const offering = new Map([["5", { runId: "r3", error: "provider down" }]]);
  const none = new Map();
  const line = (runId, readsBefore) => ({ runId, readsBefore });
  const cases = [
    // [line, failed, readApplied, shown]
    [line("r3", 1), offering, 2, false], // its Retry row shows the reason
    [line("r1", 1), offering, 2, true], // an older failure of the same message: history
    [line("r3", 1), none, 2, true], // the retry was answered: the failure stays, once
    [line("r3", 1), none, 1, false], // no read since it came: whether a row is its is unknown
    [line("r1", 0), none, 0, false], // nothing read yet
  ];
  for (const [l, failed, readApplied, shown] of cases) {
    assert.equal(failedTurnShown(l, failed, readApplied), shown, JSON.stringify([l, [...failed], readApplied]));
  }
});

test("only the newest reply, when the output limit cut it off, offers Go on", () => {
  const message = (seq, role, text, meta = {}) => ({ seq, type: "message", role, content: { text }, meta });
  const cut = (seq, text) => message(seq, "assistant", text, { stop_reason: "length" });
  assert.equal(isCutOff(cut(2, "You said: hi, and then")), true);
  assert.equal(isCutOff(message(2, "assistant", "done", { stop_reason: "stop" })), false);
  assert.equal(isCutOff(message(2, "user", "hi", { stop_reason: "length" })), false);
  const cases = [
    [[message(1, "user", "hi"), cut(2, "You said: hi, and then")], 2],
    // A tool's row or a notice after it does not take the offer away.
    [[message(1, "user", "hi"), cut(2, "a"), { seq: 3, type: "action", content: {} }, { seq: 4, type: "notice", role: "system", content: {} }], 2],
    // Go on was sent: the message is newer.
    [[message(1, "user", "hi"), cut(2, "a"), message(3, "user", "Go on.")], null],
    // ...and answered: an older cut-off reply only shows its note.
    [[message(1, "user", "hi"), cut(2, "a"), message(3, "user", "Go on."), message(4, "assistant", "b")], null],
    [[message(1, "user", "hi"), cut(2, "a"), message(3, "user", "Go on."), cut(4, "b")], 4],
    [[message(1, "user", "hi"), message(2, "assistant", "done")], null],
    [[], null],
  ];
  for (const [events, offered] of cases) assert.equal(goOnOffer(events), offered, JSON.stringify(events.map((e) => e.seq)));
});

test("the model picker always sends the model (empty: the default) and the level (default: null)", () => {
  assert.deepEqual(modelChange("", "high"), { model: null, reasoning_level: "high" });
  assert.deepEqual(modelChange("  gpt-x  ", ""), { model: "gpt-x", reasoning_level: null });
  assert.deepEqual(modelChange(undefined, "extreme"), { model: null, reasoning_level: null });
  assert.deepEqual(["low", "medium"].map((level) => modelChange("m", level).reasoning_level), ["low", "medium"]);
});

test("an MCP server's tool is named with its server, a built-in verb alone", () => {
  const servers = toolServers({
    tools: [
      { name: "read", mcp_server: null },
      { name: "files__read_text_file", mcp_server: "files" },
      { name: "a_b__x", mcp_server: "a.b" },
    ],
  });
  assert.deepEqual([...servers], [
    ["files__read_text_file", "files"],
    ["a_b__x", "a.b"],
  ]);
  assert.deepEqual(toolServers(null), new Map());
  assert.deepEqual(toolLabel("read", servers.get("read")), { server: null, tool: "read" });
  assert.deepEqual(toolLabel("files__read_text_file", "files"), { server: "files", tool: "read_text_file" });
  // A server name fitted to a verb prefix: the verb name stays whole.
  assert.deepEqual(toolLabel("a_b__x", "a.b"), { server: "a.b", tool: "a_b__x" });
});
