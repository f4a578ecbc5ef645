// End-to-end tests of Seed's web UI: headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a real `seed serve` with the scripted model, started by
// scripts/ui-test.sh, which passes SEED_URL, SEED_LOGIN_URL, SEED_OTHER_TOKEN (a token of a
// second account, minted by `seed token`), SEED_BIN (the `seed` binary, for the test that
// crashes a service of its own) and SEED_UI_SCREENSHOTS. The browser, the sign-in and the
// steps the tests share are harness.js.
//
// The scripted model's directives (server/src/model.rs) script the scenarios: `[slow N]` paces
// the streaming, `[steps N]` makes a turn of N responses (each step calling the status verb),
// `[usage N%]` sets the reported prompt size, `title:` names a session, `continue: X`
// continues into a successor titled X, `[refuse]` makes that call one the runtime refuses,
// `[fail]` fails a message's run when the message is its input (with `continue:`, the
// successor's run), so that a retry is answered, `[cut off]` stops the answer at the output
// token limit, and `[no usage]` makes the answer report no usage (the runtime estimates it).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import {
  LOGIN_URL,
  OTHER_TOKEN,
  SEED_BIN,
  SEED_URL,
  consoleErrors,
  expectingRefusals,
  newContext,
  newSession,
  page,
  say,
  secondClient,
  sessionIdOf,
  shot,
  startService,
  stopServices,
  token,
  watch,
} from "./harness.js";
// The resumed stream's test, run with this suite: the harness signs in once a run.
import "./resume.test.js";
// The approval card's test, against a service of its own with an MCP server.
import "./approvals-ui.test.js";
// A server's question as a form, against a service of its own with the reference MCP server.
import "./elicitation-ui.test.js";
// The wake-ups' lines and their Cancel.
import "./schedules-ui.test.js";
// "Branch from here" and the lineage map.
import "./fork-lineage.test.js";
// "Continue in a new session": the preview dialog.
import "./continue-dialog.test.js";

test("the login link works once; the UI is served with a strict policy and lists the account's sessions", async () => {
  const response = await page.request.get(`${SEED_URL}/`);
  assert.equal(response.status(), 200);
  const csp = response.headers()["content-security-policy"];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'/);
  const again = await page.request.get(LOGIN_URL);
  assert.equal(again.status(), 401, "a login link is good once");
  const id = await newSession();
  await page.locator(`#sessions .session-item[data-session-id="${id}"]`).waitFor();
  // A forged token signs nobody in.
  const other = await newContext();
  const p = await other.newPage();
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill("forged");
  await p.locator("#token-submit").click();
  await p.locator(".signin-error", { hasText: "unknown or expired" }).waitFor();
  assert.equal(await p.locator("#sessions").count(), 0);
  await other.close();
});

test("another account, signed in with a minted token, sees none of these sessions", async () => {
  assert.ok(OTHER_TOKEN, "scripts/ui-test.sh minted a token for a second account");
  const mine = await newSession();
  // Its browser logs the 404 of the session it may not see.
  const { other, p } = await secondClient(OTHER_TOKEN, { expectErrors: true });
  await p.locator("#sessions .empty").waitFor();
  assert.equal(await p.locator("#sessions .session-item").count(), 0);
  await p.goto(`${SEED_URL}/s/${mine}`);
  await p.locator(".not-found").waitFor();
  assert.equal(await p.locator("#transcript").count(), 0);
  await shot(p, "00-other-account-not-found");
  await other.close();
});

test("a message streams in as it is written, rendered as markdown", async () => {
  await newSession();
  const words = Array.from({ length: 24 }, (_, i) => `word${i}`).join(" ");
  await page.locator("#composer-input").fill(`[slow 40] Stream **this**: ${words}`);
  await page.locator("#send").click();
  const streaming = page.locator(".msg.assistant.streaming");
  await streaming.waitFor();
  assert.equal(await page.locator("#stop").isDisabled(), false, "Stop is offered while the turn runs");
  const partial = await streaming.innerText();
  await shot(page, "01-streaming");
  const final = page.locator(".msg.assistant:not(.streaming)", { hasText: "word23" });
  await final.waitFor();
  const finalText = await final.innerText();
  assert.ok(partial.length > 0 && partial.length < finalText.length, `saw a part (${partial.length} of ${finalText.length} chars)`);
  assert.ok(finalText.startsWith(partial.replace(/\s+$/, "").slice(0, 8)), "the part is the answer's start");
  assert.equal(await final.locator("strong").innerText(), "this", "markdown, not raw stars");
  await streaming.waitFor({ state: "detached" });
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  const user = page.locator(".msg.user").last();
  assert.match(await user.innerText(), /Stream this:/);
  assert.equal(await page.locator("#session-model").innerText(), "scripted");
  await shot(page, "02-answered");
});

test("Stop cuts the streaming answer off and keeps what was written", async () => {
  await newSession();
  const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ");
  await page.locator("#composer-input").fill(`[slow 150] ${words}`);
  await page.locator("#send").click();
  const streaming = page.locator(".msg.assistant.streaming");
  await streaming.waitFor();
  await page.locator("#stop").click();
  await streaming.waitFor({ state: "detached" });
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  const answers = await page.locator(".msg.assistant").allInnerTexts();
  assert.ok(!answers.some((text) => text.includes("w59")), `the answer was cut off: ${answers}`);
  assert.ok(answers.some((text) => text.startsWith("You said")), `what was written stays: ${answers}`);
  const id = sessionIdOf(page);
  const title = await page.locator("#session-title").innerText();
  await page.waitForFunction(
    ([sessionId, want]) => document.querySelector(`#sessions .session-item[data-session-id="${sessionId}"] .session-item-title`)?.textContent === want,
    [id, title],
  );
  await shot(page, "02b-stopped");
});

test("the context meter is muted at 50%, amber at 75% and red at 90%", async () => {
  const id = await newSession();
  const expected = [
    [50, "muted", "100,000 of 200,000 tokens (50%)"],
    [75, "amber", "150,000 of 200,000 tokens (75%)"],
    [90, "red", "180,000 of 200,000 tokens (90%)"],
  ];
  for (const [percent, level, numbers] of expected) {
    await say(`[usage ${percent}%] at ${percent} percent`, `You said: at ${percent} percent`);
    const header = page.locator("#header-meter .meter");
    await page.waitForFunction((want) => document.querySelector("#header-meter .meter")?.dataset.level === want, level);
    assert.ok((await header.getAttribute("class")).includes(`level-${level}`));
    assert.match(await header.getAttribute("title"), new RegExp(numbers.replace(/[()]/g, "\\$&")));
    const color = await page.evaluate(() => getComputedStyle(document.querySelector("#header-meter .meter")).color);
    const sidebar = page.locator(`#sessions .session-item[data-session-id="${id}"] .meter`);
    await page.waitForFunction(
      ([sessionId, want]) => document.querySelector(`#sessions .session-item[data-session-id="${sessionId}"] .meter`)?.dataset.level === want,
      [id, level],
    );
    assert.equal(await sidebar.getAttribute("data-level"), level);
    const expectedColor = { muted: "rgb(140, 144, 152)", amber: "rgb(217, 138, 4)", red: "rgb(210, 59, 59)" }[level];
    assert.equal(color, expectedColor, `${level} is drawn in its colour`);
    await header.hover();
    await shot(page, `03-meter-${percent}`);
  }
});

/** Names a session, then asks it to continue; returns the predecessor's id. */
async function predecessorWithHistory(title) {
  const id = await newSession();
  await say(`title: ${title}`, `You said: title: ${title}`);
  await page.locator("#session-title", { hasText: title }).waitFor();
  return id;
}

test("a continuation: the row appears, the client follows once, the pill leads back, Back stays, another client stays and sees the card", async () => {
  const predecessor = await predecessorWithHistory("Trip planning");
  // A second client on the same session, which does not follow the turn.
  const { other, p: otherPage } = await secondClient();
  await otherPage.goto(`${SEED_URL}/s/${predecessor}`);
  await otherPage.locator(".session-view[data-ready='1']").waitFor();

  // Slow, so that the successor is still answering when this client arrives there.
  await say("[slow 250] continue: Lisbon hotels", null);
  await page.waitForURL(new RegExp(`/s/(?!${predecessor})[0-9a-f-]{36}$`));
  const successor = sessionIdOf(page);
  await page.locator(".session-view[data-ready='1']").waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.follows), "1");
  // The answer in flight shows from its start, whenever this client arrived.
  const streaming = page.locator(".msg.assistant.streaming");
  await streaming.waitFor();
  assert.match(await streaming.innerText(), /^You said/);

  // The successor: the pill, the handoff card (never a bubble), the replayed message's chip.
  const pill = page.locator(".pill.continued-from");
  assert.equal(await pill.innerText(), "‹ Continued from “Trip planning”");
  const card = page.locator(".handoff-card");
  await card.locator(".handoff-md").waitFor();
  assert.match(await card.innerText(), /Carry on with: Lisbon hotels/);
  assert.equal(await page.locator(".msg", { hasText: "<continuation" }).count(), 0, "the projection is no bubble");
  const replayed = page.locator(".msg.user", { hasText: "continue: Lisbon hotels" });
  assert.equal(await replayed.locator(".chip.from-previous").innerText(), "From previous session");
  await page.locator(".msg.assistant", { hasText: "You said: continue: Lisbon hotels" }).waitFor();
  assert.equal(await page.locator("#session-title").innerText(), "Lisbon hotels");
  await shot(page, "04-successor-handoff-card");

  // The other client stayed, and sees the transition row and the notice.
  const row = otherPage.locator(".transition.done");
  await row.waitFor();
  assert.match(await row.locator(".transition-text").innerText(), /^Continued in “Lisbon hotels” \(user request\)$/);
  await otherPage.locator(".notice.continued").waitFor();
  assert.equal(sessionIdOf(otherPage), predecessor, "a client that did not follow the turn stays");
  assert.equal(await otherPage.evaluate(() => document.documentElement.dataset.follows ?? "0"), "0");
  await row.hover();
  const bubble = row.locator(".bubble");
  await bubble.waitFor({ state: "visible" });
  const details = await bubble.innerText();
  for (const part of ["Lisbon hotels", "user request", "continued at the user's request", "Carry on with: Lisbon hotels", "Next actions", "example.org/notes/lisbon-hotels"]) {
    assert.ok(details.includes(part), `the bubble shows ${part}: ${details}`);
  }
  await shot(otherPage, "05-predecessor-transition-row-hover");
  await other.close();

  // Back returns to the predecessor and stays there.
  await page.goBack();
  await page.waitForURL(`${SEED_URL}/s/${predecessor}`);
  await page.locator(`.session-view[data-session-id="${predecessor}"][data-ready='1']`).waitFor();
  await page.locator(".transition.done").waitFor();
  await page.waitForTimeout(1000); // Nothing to wait on: this checks that nothing happens.
  assert.equal(sessionIdOf(page), predecessor, "Back does not bounce forward");
  assert.equal(await page.evaluate(() => document.documentElement.dataset.follows), "1");

  // Open session goes forward by hand; the pill leads back.
  await page.locator(".transition.done .open-session").click();
  await page.waitForURL(`${SEED_URL}/s/${successor}`);
  await page.locator(".pill.continued-from").click();
  await page.waitForURL(`${SEED_URL}/s/${predecessor}`);
  await page.locator(`.session-view[data-session-id="${predecessor}"][data-ready='1']`).waitFor();

  // Typing in a continued session branches: a new run on the predecessor, which stays.
  await say("one more thing", "You said: one more thing");
  assert.equal(sessionIdOf(page), predecessor);
  assert.equal(await page.evaluate(() => document.documentElement.dataset.follows), "1");
  // The list shows where the predecessor went.
  const chip = page.locator(`#sessions .session-item[data-session-id="${predecessor}"] .chip.continued-in`);
  await chip.waitFor();
  assert.equal(await chip.innerText(), "Continued in “Lisbon hotels”");
  await shot(page, "06-predecessor-after-branching");
  // The list on its own.
  await page.locator(".brand a").click();
  await page.waitForURL(`${SEED_URL}/`);
  await page.locator(".home").waitFor();
  const item = page.locator(`#sessions .session-item[data-session-id="${successor}"]`);
  assert.match(await item.locator(".session-item-description").innerText(), /continued at the user's request/);
  assert.match(await item.locator("time").innerText(), /just now|min ago/);
  await shot(page, "09-session-list");
});

test("the handoff card loads an excerpt on demand, as the model reads it", async () => {
  const predecessor = await predecessorWithHistory("Reading list");
  await say("continue: Poetry", null);
  await page.waitForURL(new RegExp(`/s/(?!${predecessor})[0-9a-f-]{36}$`));
  const card = page.locator(".handoff-card");
  const threadSource = card.locator(".source-thread").first();
  await threadSource.waitFor();
  assert.match(await threadSource.innerText(), /seqs 1–4/);
  assert.equal(await card.locator(".excerpt").count(), 0, "nothing loaded before it is asked for");
  const loaded = page.waitForResponse(
    (response) => response.url().includes(`/v1/sessions/${predecessor}/transcript?from_seq=1&to_seq=4`) && response.status() === 200,
  );
  await threadSource.locator(".load-excerpt").click();
  const served = (await (await loaded).json()).lines.map((entry) => entry.line);
  const excerpt = threadSource.locator(".excerpt");
  await excerpt.waitFor();
  const text = await excerpt.innerText();
  // The server's lines, word for word: the title call (no empty message before it), its
  // result, and the answer.
  assert.equal(text, served.join("\n"));
  assert.equal(served.length, 4, text);
  assert.equal(served[0], "[1] user: title: Reading list");
  assert.match(served[1], /^\[2\] assistant → status\(\{.*"title":"Reading list".*\}\)$/);
  assert.equal(served[2], "[3] tool status: status set");
  assert.equal(served[3], "[4] assistant: You said: title: Reading list");
  await shot(page, "07-handoff-excerpt-loaded");
});

test("a refused continuation keeps error styling and creates nothing", async () => {
  const id = await newSession();
  await say("hello", "You said: hello");
  await say("continue: Nowhere [refuse]", "You said: continue: Nowhere");
  const row = page.locator(".transition");
  await row.waitFor();
  assert.ok((await row.getAttribute("class")).includes("refused"), "refused styling");
  assert.ok((await row.getAttribute("class")).includes("error"), "error styling");
  assert.match(await row.innerText(), /Continuation refused: .*toSeq/);
  assert.equal(await row.evaluate((element) => getComputedStyle(element).color), "rgb(210, 59, 59)");
  assert.equal(await page.locator(".transition .open-session").count(), 0);
  assert.equal(sessionIdOf(page), id, "nothing to follow");
  assert.equal(await page.locator(".notice.continued").count(), 0);
  await shot(page, "08-refused-continuation");
});

/** The transcript's tool rows as `[summary, result label]`, in order. */
function toolRows(p = page) {
  return p
    .locator("#transcript details.tool")
    .evaluateAll((rows) => rows.map((row) => [row.querySelector(".tool-summary").textContent, row.querySelector(".tool-result .tool-label").textContent]));
}

/** The committed answers' texts, in order. */
function answers(p = page) {
  return p.locator("#transcript .msg.assistant:not(.streaming)").allInnerTexts();
}

/** The seqs of the transcript's rows, in the order shown: each once, rising. */
async function assertRowsInOrder(p = page) {
  const seqs = await p.locator("#transcript > [data-seq]").evaluateAll((rows) => rows.map((row) => Number(row.dataset.seq)));
  assert.ok(
    seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]),
    `each row once, in the log's order: ${seqs}`,
  );
}

const STEP_ROWS = [
  ["status: step 1 of 3", "Result"],
  ["status: step 2 of 3", "Result"],
];

test("a turn of several steps shows each step's rows as it is committed, before the answer", async () => {
  await newSession();
  await page.locator("#composer-input").fill("[steps 3] [slow 200] plan the trip");
  await page.locator("#send").click();
  // The first step's text, its status call and the call's result, while the turn still runs.
  const firstRow = page.locator("details.tool", { hasText: "step 1 of 3" });
  await firstRow.locator(".tool-label", { hasText: "Result" }).waitFor({ state: "attached" });
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "Step 1 of 3." }).waitFor();
  assert.equal(await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said" }).count(), 0, "the answer is still to come");
  assert.equal(await page.locator("#stop").isDisabled(), false, "the turn runs");
  await firstRow.locator("summary").click();
  await shot(page, "10-steps-running");
  // The second step, still before the answer.
  await page.locator("details.tool", { hasText: "step 2 of 3" }).locator(".tool-label", { hasText: "Result" }).waitFor({ state: "attached" });
  assert.equal(await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said" }).count(), 0, "the answer is still to come");
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said: plan the trip" }).waitFor();
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  assert.deepEqual(await toolRows(), STEP_ROWS);
  assert.deepEqual(await answers(), ["Step 1 of 3.", "Step 2 of 3.", "You said: plan the trip"]);
  await assertRowsInOrder();
  await shot(page, "11-steps-answered");
});

test("a page reloaded mid-turn shows what is committed, the answer in flight, then the answer", async () => {
  const id = await newSession();
  const words = Array.from({ length: 12 }, (_, i) => `part${i}`).join(" ");
  await page.locator("#composer-input").fill(`[steps 3] [slow 200] ${words}`);
  await page.locator("#send").click();
  // Both steps are in the log and the answer streams: reload.
  await page.locator(".msg.assistant.streaming", { hasText: "You said" }).waitFor();
  const live = page.waitForResponse((response) => response.url().endsWith(`/v1/sessions/${id}/live`) && response.status() === 200);
  await page.reload();
  await page.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  const inFlight = (await (await live).json()).live;
  assert.ok(inFlight && inFlight.text.startsWith("You said"), `the answer in flight: ${JSON.stringify(inFlight)}`);
  // What was committed before the reload, as it was shown before it.
  assert.deepEqual(await toolRows(), STEP_ROWS);
  assert.deepEqual(await answers(), ["Step 1 of 3.", "Step 2 of 3."]);
  // The answer in flight, from its start, and the turn still running.
  const streaming = page.locator(".msg.assistant.streaming");
  const partial = await streaming.innerText();
  assert.match(partial, /^You said/);
  assert.ok(!partial.includes("part11"), `the answer is still streaming: ${partial}`);
  assert.equal(await page.locator("#stop").isDisabled(), false, "Stop is offered after the reload");
  await shot(page, "12-reloaded-mid-turn");
  // Later deltas continue it, each char once (a delta's part the page had from /live is
  // skipped), and the answer replaces it.
  const later = page.locator(".msg.assistant.streaming", { hasText: "part6" });
  await later.waitFor();
  const longer = (await later.innerText()).trim();
  assert.ok(`You said: ${words}`.startsWith(longer), `the answer's start, nothing twice: ${longer}`);
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "part11" }).waitFor();
  await streaming.waitFor({ state: "detached" });
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  assert.deepEqual(await toolRows(), STEP_ROWS);
  assert.deepEqual(await answers(), ["Step 1 of 3.", "Step 2 of 3.", `You said: ${words}`]);
  await assertRowsInOrder();
  await shot(page, "13-reloaded-answered");
});

test("a continuation cut off by a crash is answered on restart and shows as the normal transition row", async () => {
  assert.ok(SEED_BIN, "scripts/ui-test.sh passes the seed binary in SEED_BIN");
  const dataDir = mkdtempSync(join(tmpdir(), "seed-ui-crash-"));
  // This browser sees its service abort: the errors it logs then are expected, so its pages
  // are not watched.
  const crashContext = await newContext();
  try {
    const crashing = await startService(dataDir, { crashAt: "continuation.after_create" });
    const p = await crashContext.newPage();
    await p.goto(crashing.login);
    await p.waitForURL(`${crashing.url}/`);
    const predecessor = await newSession(p);
    await say("continue: Lisbon hotels", null, p);
    // The successor, its edge and its events are committed; the call has no result yet.
    const { signal } = await crashing.exited;
    assert.equal(signal, "SIGABRT", "the service aborted at the crash point");

    // The same data dir and origin; the tokens were in the old process's memory.
    const restarted = await startService(dataDir, { listen: new URL(crashing.url).host });
    assert.equal(restarted.url, crashing.url);
    await p.goto(restarted.login);
    await p.waitForURL(`${restarted.url}/`);
    await p.goto(`${restarted.url}/s/${predecessor}`);
    await p.locator(`.session-view[data-session-id="${predecessor}"][data-ready='1']`).waitFor();
    const row = p.locator(".transition.done");
    await row.waitFor();
    assert.equal(await p.locator(".transition").count(), 1);
    assert.equal(await row.locator(".transition-text").innerText(), "Continued in “Lisbon hotels” (user request)");
    const classes = await row.getAttribute("class");
    assert.ok(!classes.includes("refused") && !classes.includes("error"), `no refused styling: ${classes}`);
    assert.notEqual(await row.evaluate((element) => getComputedStyle(element).color), "rgb(210, 59, 59)", "not drawn in red");
    const successor = await row.getAttribute("data-successor");
    assert.match(successor, /^[0-9a-f-]{36}$/);
    assert.equal(await row.locator(".open-session").getAttribute("href"), `/s/${successor}`);
    await p.locator(".notice.continued").waitFor();
    await shot(p, "14-recovered-continuation");
    // The successor is the one the service recorded, and its run answered after the restart.
    await row.locator(".open-session").click();
    await p.waitForURL(`${restarted.url}/s/${successor}`);
    await p.locator(".pill.continued-from", { hasText: "Continued from" }).waitFor();
    await p.locator(".msg.assistant:not(.streaming)", { hasText: "You said: continue: Lisbon hotels" }).waitFor();
    await shot(p, "15-recovered-successor");
  } finally {
    await crashContext.close();
    await stopServices();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("Sign out revokes the browser's token at the service", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "seed-ui-signout-"));
  const signOutContext = await newContext();
  try {
    const service = await startService(dataDir);
    const p = await signOutContext.newPage();
    watch(p);
    await p.goto(service.login);
    await p.waitForURL(`${service.url}/`);
    await p.locator("#new-session").waitFor();
    const bearer = await p.evaluate(() => localStorage.getItem("seed.token"));
    const listed = await p.request.get(`${service.url}/v1/sessions`, { headers: { Authorization: `Bearer ${bearer}` } });
    assert.equal(listed.status(), 200);
    const revoked = p.waitForResponse((response) => response.url().endsWith("/v1/tokens/current"));
    await p.locator("button", { hasText: "Sign out" }).click();
    assert.equal((await revoked).status(), 204);
    await p.locator("#token-input").waitFor();
    const refused = await p.request.get(`${service.url}/v1/sessions`, { headers: { Authorization: `Bearer ${bearer}` } });
    assert.equal(refused.status(), 401, "the token is refused once signed out");
  } finally {
    await signOutContext.close();
    await stopServices();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("files attached with the button and by dropping show as chips, go with the message, and the model names them", async () => {
  await newSession();
  // A text file through the Attach button's file picker.
  await page.locator("#attach-input").setInputFiles({
    name: "notes.txt",
    mimeType: "text/plain",
    buffer: Buffer.from("hello from a file\nsecond line"),
  });
  // An image, and a file to take off again, dropped onto the composer.
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
  const dropped = await page.evaluateHandle((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const transfer = new DataTransfer();
    transfer.items.add(new File([bytes], "dot.png", { type: "image/png" }));
    transfer.items.add(new File(["not this one"], "extra.txt", { type: "text/plain" }));
    return transfer;
  }, png);
  await page.locator("#composer").dispatchEvent("drop", { dataTransfer: dropped });
  const tray = page.locator("#composer-attachments .chip.attachment");
  await tray.nth(2).waitFor();
  assert.deepEqual(await tray.allTextContents(), ["notes.txt29 B×", "dot.png70 B×", "extra.txt12 B×"]);
  await tray.filter({ hasText: "extra.txt" }).locator(".attachment-remove").click();
  assert.equal(await tray.count(), 2, "a chip's × takes its file off");
  await shot(page, "20-attachments-in-the-composer");

  await say("what are these?", "[attached: notes.txt");
  const answer = page.locator(".msg.assistant:not(.streaming)").last();
  assert.equal(
    await answer.innerText(),
    "You said: what are these? [attached: notes.txt \u201chello from a file\u201d; dot.png (image/png, 70 bytes)]",
  );
  assert.equal(await tray.count(), 0, "the files went with the message");
  const sent = page.locator(".msg.user").last().locator(".chip.attachment");
  assert.deepEqual(await sent.allTextContents(), ["notes.txt29 B", "dot.png70 B"]);
  await shot(page, "21-attachments-sent");

  // A sent file's chip downloads it.
  const [download] = await Promise.all([page.waitForEvent("download"), sent.filter({ hasText: "notes.txt" }).click()]);
  assert.equal(download.suggestedFilename(), "notes.txt");
  const chunks = [];
  for await (const chunk of await download.createReadStream()) chunks.push(chunk);
  assert.equal(Buffer.concat(chunks).toString(), "hello from a file\nsecond line");
});

test("the wrench palette runs status by hand: a form from its schema, a refused argument at its field, the title in the header and the transcript", async () => {
  const id = await newSession();
  await page.locator("#wrench").click();
  const palette = page.locator("#palette");
  await palette.locator(".palette-verb").last().waitFor();
  const verbs = await palette.locator(".palette-verb .palette-verb-name").allInnerTexts();
  assert.deepEqual(verbs, ["read", "plan", "status", "memory"]);
  await shot(page, "30-palette-verbs");
  await palette.locator('.palette-verb[data-verb="status"]').click();
  const form = page.locator('#palette-form[data-verb="status"]');
  // The schema's description (required, marked) is a text area; its title a one-line input.
  assert.equal(await form.locator('[data-field="description"] textarea#arg-description').count(), 1);
  assert.equal(await form.locator('[data-field="description"] .required').count(), 1);
  assert.equal(await form.locator('[data-field="title"] input[type="text"]#arg-title').count(), 1);
  assert.equal(await form.locator('[data-field="title"] .required').count(), 0);

  // A title over the limit (as the served schema states it, from the service's constant): the
  // service names the field, the form shows it there and stays.
  const titleMax = Number((await page.locator("#arg-title").getAttribute("placeholder")).match(/\d+/)[0]);
  await page.locator("#arg-description").fill("Planning the trip");
  await page.locator("#arg-title").fill("x".repeat(titleMax + 1));
  const titleError = form.locator('[data-field="title"] .field-error');
  await expectingRefusals(400, async () => {
    await page.locator("#palette-run").click();
    await titleError.filter({ hasText: `at most ${titleMax} characters, got ${titleMax + 1}` }).waitFor();
  });
  assert.equal(await page.locator("#arg-title").getAttribute("aria-invalid"), "true");
  assert.equal(await form.locator('[data-field="description"] .field-error').innerText(), "");
  assert.ok(await form.isVisible(), "the form stays open");
  assert.equal(await page.locator("#arg-description").inputValue(), "Planning the trip", "what was typed stays");
  assert.equal(await page.locator("#transcript details.action").count(), 0, "nothing ran");
  await shot(page, "31-palette-field-error");

  await page.locator("#arg-title").fill("Palette trip");
  await page.locator("#palette-run").click();
  await palette.waitFor({ state: "hidden" });
  await page.locator("#session-title", { hasText: "Palette trip" }).waitFor();
  await page.locator(".session-description", { hasText: "Planning the trip" }).waitFor();
  await page.waitForFunction(
    (sessionId) => document.querySelector(`#sessions .session-item[data-session-id="${sessionId}"] .session-item-title`)?.textContent === "Palette trip",
    id,
  );
  const row = page.locator("#transcript details.action");
  await row.waitFor();
  assert.equal(
    await row.locator("summary").innerText(),
    "You ran\nstatus description: “Planning the trip”, title: “Palette trip”\n→ status set",
  );
  assert.ok(!(await row.getAttribute("class")).includes("error"));
  await row.locator("summary").click();
  assert.deepEqual(await row.locator(".action-arguments dt").allInnerTexts(), ["description", "title"]);
  assert.equal(await row.locator(".tool-result pre").innerText(), "status set");
  await shot(page, "32-palette-action-in-transcript");

  // A nested argument refused by the service, and JSON the form cannot read, each at its field.
  await page.locator("#wrench").click();
  await palette.locator('.palette-verb[data-verb="plan"]').click();
  const steps = page.locator('#palette-form[data-verb="plan"] [data-field="steps"]');
  await page.locator("#arg-steps").fill('[{"step": "pack"');
  await page.locator("#palette-run").click();
  await steps.locator(".field-error", { hasText: "not valid JSON" }).waitFor();
  await page.locator("#arg-steps").fill('[{"step": "pack"}]');
  await expectingRefusals(400, async () => {
    await page.locator("#palette-run").click();
    await steps.locator(".field-error", { hasText: "steps[0].done: required" }).waitFor();
  });
  await page.keyboard.press("Escape");
  await palette.waitFor({ state: "hidden" });

  // A verb that runs and fails shows in error styling.
  await page.locator("#wrench").click();
  await palette.locator('.palette-verb[data-verb="read"]').click();
  await page.locator("#arg-target").fill("thread:nope");
  await page.locator("#palette-run").click();
  const failed = page.locator("#transcript details.action.error");
  await failed.waitFor();
  assert.match(await failed.locator(".action-result").innerText(), /^failed: invalid arguments for read/);
  assert.equal(await page.locator("#transcript details.action").count(), 2);
  await assertRowsInOrder();
});

/** How many times `text` shows in the transcript, as a person reads it (hidden rows not). */
async function timesShown(text, p = page) {
  return (await p.locator("#transcript").innerText()).split(text).length - 1;
}

test("a failed run shows its reason once, with Retry, after its message, after a reload too; once retried and answered, the failed turn stays in the transcript, once", async () => {
  const id = await newSession();
  // Whether the failed turn's line ever shows before the retry (it must not show, then hide).
  await page.evaluate(() => {
    const transcript = document.querySelector("#transcript");
    window.failedTurnShown = false;
    new MutationObserver(() => {
      if (transcript.querySelector(".failed-turn:not([hidden])")) window.failedTurnShown = true;
    }).observe(transcript, { subtree: true, childList: true, attributes: true, attributeFilter: ["hidden"] });
  });
  await page.locator("#composer-input").fill("[fail] hello");
  await page.locator("#composer-input").press("Enter");
  const row = page.locator(".failed-run");
  await row.waitFor();
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  const reason = await row.locator(".failed-run-reason").innerText();
  assert.match(reason, /the scripted model fails this message, as \[fail\] asks/);
  const before = () => row.evaluate((element) => element.previousElementSibling.matches(".msg.user") && element.previousElementSibling.innerText);
  assert.equal(await before(), "[fail] hello", "the row follows the message it answers");
  assert.equal(await page.locator(".msg.assistant").count(), 0);
  // The run's notice is in the log, but its line waits while the row tells the reason.
  const line = page.locator(".failed-turn");
  assert.equal(await line.count(), 1, "the notice is in the transcript");
  assert.equal(await line.isVisible(), false, "its line is hidden while the Retry row shows");
  assert.equal(await timesShown(reason), 1, "the reason shows once");
  assert.equal(await timesShown("runtime:"), 0, "no raw notice line");
  assert.equal(await page.evaluate(() => window.failedTurnShown), false, "the line never showed while the turn failed");
  // The page learns of failed runs on load too.
  await page.reload();
  await page.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  await row.waitFor();
  assert.equal(await before(), "[fail] hello");
  assert.equal(await line.isVisible(), false);
  assert.equal(await timesShown(reason), 1, "the reason shows once after a reload");
  await shot(page, "40-failed-run");
  await row.locator("button.retry").click();
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said: hello" }).waitFor();
  await row.waitFor({ state: "detached" });
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  assert.deepEqual(await answers(), ["You said: hello"]);
  // The failure stays as history: the failed turn's line, between the message and the answer.
  const afterRetry = async () => {
    await line.waitFor({ state: "visible" });
    assert.equal(await line.locator(".failed-turn-reason").innerText(), `This turn failed: ${reason}`);
    assert.equal(await timesShown(reason), 1, "the reason shows once");
    assert.equal(await page.locator("button.retry").count(), 0, "no Retry");
    const order = await page
      .locator("#transcript > .msg, #transcript > .failed-turn")
      .evaluateAll((rows) => rows.map((row) => (row.matches(".failed-turn") ? "failed" : row.innerText)));
    assert.deepEqual(order, ["[fail] hello", "failed", "You said: hello"]);
    await assertRowsInOrder();
  };
  await afterRetry();
  await shot(page, "40b-failed-turn-retried");
  await page.reload();
  await page.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  await afterRetry();
});

test("a successor whose run failed offers Retry on its replayed message, and the retry is answered there", async () => {
  const predecessor = await newSession();
  await say("continue: Trip [fail]", null);
  await page.waitForURL(new RegExp(`/s/(?!${predecessor})[0-9a-f-]{36}$`));
  const successor = sessionIdOf(page);
  await page.locator(`.session-view[data-session-id="${successor}"][data-ready='1']`).waitFor();
  const row = page.locator(".failed-run");
  await row.waitFor();
  assert.match(await row.locator(".failed-run-reason").innerText(), /as \[fail\] asks/);
  const replayed = await row.evaluate((element) => {
    const message = element.previousElementSibling;
    return message.matches(".msg.user") && message.querySelector(".chip.from-previous")?.textContent;
  });
  assert.equal(replayed, "From previous session", "the row follows the replayed message");
  await shot(page, "41-successor-failed-run");
  await row.locator("button.retry").click();
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said: continue: Trip" }).waitFor();
  await row.waitFor({ state: "detached" });
  assert.equal(sessionIdOf(page), successor, "answered here, not continued again");
  assert.equal(await page.locator(".failed-run").count(), 0);
  await shot(page, "42-successor-retried");
});

test("a reply cut off by the output limit says so; the newest offers Go on, which sends “Go on.” and is answered", async () => {
  const id = await newSession();
  const note = "Cut off: the reply reached the model's output limit";
  await say("[cut off] list them", "You said: list them, and then");
  const first = page.locator(".msg.assistant", { hasText: "You said: list them, and then" });
  assert.equal(await first.locator(".cut-off-text").innerText(), note);
  await first.locator("button.go-on").waitFor({ state: "visible" });
  // A second cut-off reply: only the newest offers Go on; the older keeps its note.
  await say("[cut off] and more", "You said: and more, and then");
  const second = page.locator(".msg.assistant", { hasText: "You said: and more, and then" });
  await second.locator("button.go-on").waitFor({ state: "visible" });
  await first.locator("button.go-on").waitFor({ state: "hidden" });
  assert.equal(await first.locator(".cut-off-text").innerText(), note);
  assert.equal(await page.locator("button.go-on:visible").count(), 1);
  await shot(page, "60-cut-off");

  const sent = page.waitForRequest((request) => request.url().endsWith(`/v1/sessions/${id}/messages`) && request.method() === "POST");
  await second.locator("button.go-on").click();
  const body = JSON.parse((await sent).postData());
  assert.equal(body.text, "Go on.", "an ordinary message");
  assert.deepEqual(body.attachments, []);
  await page.locator(".msg.user", { hasText: "Go on." }).waitFor();
  await page.locator(".msg.assistant:not(.streaming)", { hasText: "You said: Go on." }).waitFor();
  await page.waitForFunction(() => document.querySelector("#stop").disabled);
  const settled = async () => {
    const texts = await page.locator("#transcript .msg.assistant > .markdown").allInnerTexts();
    assert.deepEqual(texts, ["You said: list them, and then", "You said: and more, and then", "You said: Go on."]);
    assert.equal(await page.locator("button.go-on:visible").count(), 0, "Go on is gone once said");
    assert.equal(await page.locator(".cut-off-text").count(), 2, "the cut-off replies keep their notes");
    assert.equal(await page.locator(".msg.assistant", { hasText: "You said: Go on." }).locator(".cut-off-text").count(), 0);
  };
  await settled();
  await shot(page, "61-gone-on");
  await page.reload();
  await page.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  await settled();
});

// A [no usage] answer reports no usage; the runtime estimates it from the request's size and
// marks it (meta.usage.estimated).
test("a meter read from usage the model server did not report says it is an estimate", async () => {
  const id = await newSession();
  await say("[no usage] hello", "You said: hello");
  const header = page.locator("#header-meter .meter");
  await page.waitForFunction(() => document.querySelector("#header-meter .meter")?.dataset.estimated === "1");
  const title = await header.getAttribute("title");
  assert.match(title, /^Context: about [\d,]+ of 200,000 tokens \([\d.]+%\), estimated: the model server reports no usage$/);
  assert.notEqual(title, "Context: about 0 of 200,000 tokens (0%), estimated: the model server reports no usage", "an estimate, not zero");
  assert.match(await header.locator(".meter-label").innerText(), /^≈[\d]+%$/);
  assert.ok((await header.getAttribute("class")).includes("estimated"));
  assert.equal(await header.locator(".meter-track").evaluate((track) => getComputedStyle(track).strokeDasharray !== "none"), true, "a dashed ring");
  await page.waitForFunction(
    (sessionId) => document.querySelector(`#sessions .session-item[data-session-id="${sessionId}"] .meter`)?.dataset.estimated === "1",
    id,
  );
  await header.hover();
  await shot(page, "62-meter-estimated");
  // Usage the server reports again is read as reported.
  await say("[usage 50%] reported", "You said: reported");
  await page.waitForFunction(() => document.querySelector("#header-meter .meter")?.dataset.level === "muted" && !document.querySelector("#header-meter .meter").dataset.estimated);
  assert.equal(await header.getAttribute("title"), "Context: 100,000 of 200,000 tokens (50%)");
  assert.equal(await header.locator(".meter-label").innerText(), "50%");
});

test("the model picker sets the reasoning level, a reload shows what the service holds, and default clears it", async () => {
  const id = await newSession();
  const readSession = async () =>
    (await page.request.get(`${SEED_URL}/v1/sessions/${id}`, { headers: { Authorization: `Bearer ${token}` } })).json();
  assert.equal(await page.locator("#session-model").innerText(), "scripted");
  assert.equal(await page.locator("#session-reasoning").isVisible(), false, "no level set");
  await page.locator("#model-button").click();
  assert.equal(await page.locator("#model-input").inputValue(), "", "the session has no model of its own");
  assert.match(await page.locator("#model-input").getAttribute("placeholder"), /scripted/);
  assert.equal(await page.locator("#reasoning-select").inputValue(), "");

  // A model name over the limit: the service's refusal shows at the model's input.
  await page.locator("#model-input").fill("m".repeat(201));
  await expectingRefusals(400, async () => {
    await page.locator("#model-save").click();
    await page.locator("#model-input-error", { hasText: "at most 200" }).waitFor();
  });
  assert.equal(await page.locator("#model-form").isVisible(), true, "the form stays open");

  await page.locator("#model-input").fill("");
  await page.locator("#reasoning-select").selectOption("high");
  const put = page.waitForRequest((request) => request.url().endsWith(`/v1/sessions/${id}/model`) && request.method() === "PUT");
  await page.locator("#model-save").click();
  assert.deepEqual(JSON.parse((await put).postData()), { model: null, reasoning_level: "high" });
  await page.locator("#model-form").waitFor({ state: "hidden" });
  await page.locator("#session-reasoning", { hasText: "high" }).waitFor();
  assert.equal((await readSession()).session.reasoning_level, "high");

  await page.reload();
  await page.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  assert.equal(await page.locator("#session-reasoning").innerText(), "high");
  assert.equal(await page.locator("#session-model").innerText(), "scripted");
  await page.locator("#model-button").click();
  assert.equal(await page.locator("#reasoning-select").inputValue(), "high");
  await shot(page, "50-model-picker");

  // Default: the provider's configuration again.
  await page.locator("#reasoning-select").selectOption("");
  await page.locator("#model-save").click();
  await page.locator("#session-reasoning").waitFor({ state: "hidden" });
  assert.equal((await readSession()).session.reasoning_level, null);
  await say("still there?", "You said: still there?");
});

test("no page logged an error", () => {
  assert.deepEqual(consoleErrors, []);
});
