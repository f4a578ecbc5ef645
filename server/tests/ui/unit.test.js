// Unit tests of the UI's pure modules (markdown, the meter, following a continuation, merging
// streamed text), run by `node --test` with the end-to-end suite.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { renderMarkdown } from "../../ui/markdown.js";
import {
  Follower,
  contextUsage,
  describeSource,
  formatBytes,
  handoffMarkdown,
  handoffSections,
  listRefreshDelay,
  mergeDelta,
  meterLevel,
  messageAttachments,
  meterTitle,
  normalizeInput,
  noticeLine,
  revealedChars,
  sectionTexts,
  successorFromResult,
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

test("the meter is muted below 70%, amber from 70%, red from 85%", () => {
  assert.deepEqual([0, 69.9, 70, 84.9, 85, 120].map(meterLevel), ["muted", "muted", "amber", "amber", "red", "red"]);
  const events = [
    { type: "message", role: "assistant", meta: { usage: { input: 10, cache_read: 0, cache_write: 0 } } },
    { type: "message", role: "user", meta: {} },
    { type: "message", role: "assistant", meta: { usage: { input: 100000, cache_read: 40000, cache_write: 10000 } } },
    { type: "tool_call", role: "assistant", meta: {} },
  ];
  const usage = contextUsage(events, 200000);
  assert.deepEqual(usage, { tokens: 150000, window: 200000, percent: 75, level: "amber" });
  assert.equal(meterTitle(usage), "Context: 150,000 of 200,000 tokens (75%)");
  assert.equal(contextUsage(events, null), null);
  assert.equal(contextUsage([], 1000), null);
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
