// "Continue in a new session": the dialog from the session header previews what the successor
// would start from as the fields are written (bytes and tokens against the budget, each source
// and whether it fits, what is left out, the share of the window, the ranges worth citing),
// creating nothing; a range past the log's end is refused at the field; confirming creates the
// successor and opens it. Its pure helpers are checked alone too. Run with the rest of the
// suite (ui.test.js imports it).

import assert from "node:assert/strict";
import { test } from "node:test";

import { SEED_URL, expectingRefusals, newSession, page, say, shot, token } from "./harness.js";
import { continueArguments, parseSeqRanges, summaryLines } from "../../ui/continue_dialog.js";

test("the dialog's seq ranges, arguments and headline figures", () => {
  assert.deepEqual(parseSeqRanges("3-6, 9 10–12"), {
    sources: [
      { type: "session_events", fromSeq: 3, toSeq: 6 },
      { type: "session_event", seq: 9 },
      { type: "session_events", fromSeq: 10, toSeq: 12 },
    ],
  });
  assert.deepEqual(parseSeqRanges(""), { sources: [] });
  assert.match(parseSeqRanges("3-x").error, /“3-x” is not a seq/);
  assert.match(parseSeqRanges("6-3").error, /not a range/);
  assert.deepEqual(
    continueArguments({
      reason: "phase change",
      title: "Porto",
      description: "Planning",
      purpose: " Plan the trip ",
      currentRequest: "",
      nextActions: "book\n\ncompare ",
      sources: "1-2",
    }),
    {
      reason: "phase change",
      title: "Porto",
      description: "Planning",
      handoff: { purpose: "Plan the trip", nextActions: ["book", "compare"] },
      sources: [{ type: "session_events", fromSeq: 1, toSeq: 2 }],
    },
  );
  const preview = {
    projection_bytes: 1423,
    budget_bytes: 32768,
    projection_tokens: 360,
    budget_tokens: 8192,
    first_request: { tokens: 4217, window_tokens: 200000, window_percent: 2.1 },
  };
  assert.deepEqual(summaryLines(preview), [
    "1,423 of 32,768 bytes",
    "≈ 360 of 8,192 tokens",
    "First request: 2.1% of the model's window (4,217 of 200,000 tokens)",
  ]);
});

test("Continue in a new session previews the successor as it is written, then creates it and opens it", async () => {
  const id = await newSession();
  await say("hello", "You said: hello");
  await say("what about trains?", "You said: what about trains?");
  const sessions = async () =>
    (await (await page.request.get(`${SEED_URL}/v1/sessions`, { headers: { Authorization: `Bearer ${token}` } })).json()).sessions.length;
  const before = await sessions();

  await page.locator("#continue-button").click();
  const dialog = page.locator("#continue-dialog");
  try {
    await previewAndClose(id, dialog, sessions, before);
  } finally {
    // The dialog covers the page: a failure here must not leave it over the next tests.
    if (await dialog.isVisible()) await page.locator("#continue-close").click();
  }
});

async function previewAndClose(id, dialog, sessions, before) {
  await dialog.waitFor();
  await page.locator("#continue-status", { hasText: "Write the reason" }).waitFor();

  const previews = [];
  page.on("request", (request) => {
    if (request.url().endsWith(`/v1/sessions/${id}/continuation/preview`)) previews.push(JSON.parse(request.postData()));
  });
  await page.locator("#continue-reason").fill("phase change: the hotels are booked");
  await page.locator("#continue-title").fill("Porto trains");
  await page.locator("#continue-description").fill("Comparing trains to Porto");
  await page.locator("#continue-purpose").fill("Plan the train to Porto");
  await page.locator("#continue-next").fill("Compare the morning trains\nBook one");
  await page.locator("#continue-sources").fill("1-2");

  // The figures: bytes and tokens against the budget, the share of the window, the source
  // (seqs 1–2) fitting whole, and what is left out.
  const figures = page.locator("#continue-figures");
  await figures.waitFor();
  await page.locator("#continue-source-fits tbody tr").waitFor();
  const lines = await figures.locator("li").allInnerTexts();
  assert.match(lines[0], /^[\d,]+ of 32,768 bytes$/);
  assert.match(lines[1], /^≈ [\d,]+ of 8,192 tokens$/);
  assert.match(lines[2], /^First request: [\d.]+% of the model's window \([\d,]+ of [\d,]+ tokens\)$/);
  const row = page.locator("#continue-source-fits tbody tr").first();
  assert.deepEqual(await row.locator("td").allInnerTexts().then((cells) => [cells[0], cells[2]]), ["seq 1–2", "fits"]);
  assert.equal(await row.getAttribute("data-fits"), "true");
  await page.locator("#continue-recommended").waitFor();
  await page.locator("#continue-omitted").waitFor();
  const last = previews.at(-1);
  assert.deepEqual(last.sources, [{ type: "session_events", fromSeq: 1, toSeq: 2 }]);
  assert.deepEqual(last.handoff, { purpose: "Plan the train to Porto", nextActions: ["Compare the morning trains", "Book one"] });
  await shot(page, "40-continue-preview");

  // The preview follows the fields: a range past the log's end is refused at the field, as
  // continue_session would refuse it.
  await expectingRefusals(400, async () => {
    await page.locator("#continue-sources").fill("1-2, 3-999");
    await page.locator("#continue-sources-error", { hasText: "sources[1]" }).waitFor();
  });
  assert.equal(await page.locator("#continue-sources").getAttribute("aria-invalid"), "true");
  await page.locator("#continue-sources").fill("1-2");
  await figures.waitFor();
  assert.equal(await page.locator("#continue-sources-error").innerText(), "");

  // Nothing was made while previewing; closing and opening again keeps the fields.
  assert.equal(await sessions(), before, "a preview creates no session");
  assert.equal(await page.locator("#transcript .msg").count(), 4, "nor anything in the transcript");
  await page.locator("#continue-close").click();
  assert.equal(await dialog.isVisible(), false);
  await page.locator("#continue-button").click();
  assert.equal(await page.locator("#continue-title").inputValue(), "Porto trains");
  await figures.waitFor();

  // Continue: the successor opens, starting from the handoff, and answers the newest message.
  const confirm = page.locator("#continue-confirm");
  await page.waitForFunction(() => !document.querySelector("#continue-confirm").disabled);
  await confirm.click();
  await page.waitForURL((url) => /\/s\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.endsWith(id));
  const successor = new URL(page.url()).pathname.split("/").pop();
  await page.locator(`.session-view[data-session-id="${successor}"][data-ready='1']`).waitFor();
  await page.locator(".handoff-card").waitFor();
  assert.match(await page.locator(".handoff-card").innerText(), /Plan the train to Porto/);
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said: what about trains?" }).waitFor();
  assert.equal(await page.locator("#session-title").innerText(), "Porto trains");
  assert.equal(await sessions(), before + 1);
  await shot(page, "43-continued-by-hand");
}
