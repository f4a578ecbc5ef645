// The web UI's stream across a dropped WebSocket: the page reconnects on its own, resumes the
// open session from the last seq and offset it shows, and ends with the committed answer, byte
// for byte, having shown nothing but prefixes of it and removed nothing from the transcript.
// The page's sockets go through Playwright's WebSocket routes, so that the test can drop one.
// Run with the rest of the suite (ui.test.js imports it: the login link signs in once).

import assert from "node:assert/strict";
import { test } from "node:test";

import { SEED_URL, newContext, newSession, shot, token, watch } from "./harness.js";

/** Waits for `ready()` to hold, polling, for at most `ms`. */
async function until(what, ready, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test("a WebSocket dropped mid-answer reconnects on its own and resumes: the page shows the committed answer, byte for byte, with no flicker", async () => {
  const context = await newContext();
  const sockets = [];
  await context.routeWebSocket(/\/v1\/subscribe/, (socket) => {
    socket.connectToServer();
    sockets.push(socket);
  });
  const p = await context.newPage();
  watch(p);
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill(token);
  await p.locator("#token-submit").click();
  await p.locator("#new-session").waitFor();
  const id = await newSession(p);
  // Every text the streaming answer shows, and every node taken out of the transcript but the
  // streaming answer (which the committed one replaces).
  await p.evaluate(() => {
    const transcript = document.querySelector("#transcript");
    const seen = { texts: [], removed: [] };
    window.seenWhileStreaming = seen;
    new MutationObserver((records) => {
      for (const record of records) {
        if (record.target !== transcript) continue;
        for (const node of record.removedNodes) {
          if (node.nodeType === 1 && !node.classList.contains("streaming") && !node.isConnected) seen.removed.push(node.outerHTML.slice(0, 80));
        }
      }
      const streaming = transcript.querySelector(".msg.assistant.streaming .markdown");
      const text = streaming ? streaming.textContent : null;
      if (text && text !== seen.texts.at(-1)) seen.texts.push(text);
    }).observe(transcript, { childList: true, subtree: true, characterData: true });
  });
  const words = Array.from({ length: 60 }, (_, i) => `alpha${i}`).join(" ");
  await p.locator("#composer-input").fill(`[slow 100] ${words}`);
  await p.locator("#send").click();
  await p.waitForFunction(() => (document.querySelector(".msg.assistant.streaming .markdown")?.textContent || "").length > 30);
  assert.equal(sockets.length, 1);
  await sockets[0].close();
  await until("the page opened a socket again", () => sockets.length === 2);
  const resumed = new URL(sockets[1].url());
  assert.equal(resumed.searchParams.get("session"), id, `it resumes the open session: ${resumed}`);
  const afterSeq = Number(resumed.searchParams.get("after_seq"));
  const offsetChars = Number(resumed.searchParams.get("offset_chars"));
  assert.ok(afterSeq >= 1 && offsetChars > 0, `from the seq and offset it showed: ${resumed}`);

  const final = p.locator(".msg.assistant:not(.streaming)", { hasText: "alpha59" });
  await final.waitFor();
  await shot(p, "resume-answered");
  const response = await p.request.get(`${SEED_URL}/v1/sessions/${id}/events`, { headers: { Authorization: `Bearer ${token}` } });
  const { events } = await response.json();
  const answer = events.find((event) => event.type === "message" && event.role === "assistant").content.text;
  assert.equal(answer, `You said: ${words}`);
  assert.equal(await final.locator(".markdown").textContent(), answer, "the answer on the page is the committed one, byte for byte");

  const seen = await p.evaluate(() => window.seenWhileStreaming);
  assert.ok(
    seen.texts.some((text) => Array.from(text).length > offsetChars),
    `after the reconnection the answer went on streaming (held ${offsetChars} chars; saw ${seen.texts.length} texts)`,
  );
  for (const text of seen.texts) {
    assert.ok(answer.startsWith(text), `every text shown while streaming is the answer's start, no gap or repeat: ${JSON.stringify(text)}`);
  }
  assert.deepEqual(seen.removed, [], "nothing shown was taken out of the transcript");
  assert.equal(await p.locator(".msg.user").count(), 1, "the transcript was not drawn again");
  assert.equal(await p.locator(".msg.assistant").count(), 1);
  await context.close();
});

test("a run that ends while the page's socket is down leaves the page idle once it reconnects", async () => {
  const context = await newContext();
  const sockets = [];
  let release;
  const released = new Promise((resolve) => {
    release = resolve;
  });
  await context.routeWebSocket(/\/v1\/subscribe/, async (socket) => {
    sockets.push(socket);
    // After the first, no socket reaches the service until the run has ended.
    if (sockets.length > 1) await released;
    socket.connectToServer();
  });
  const p = await context.newPage();
  watch(p);
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill(token);
  await p.locator("#token-submit").click();
  await p.locator("#new-session").waitFor();
  const id = await newSession(p);
  const words = Array.from({ length: 30 }, (_, i) => `beta${i}`).join(" ");
  await p.locator("#composer-input").fill(`[slow 50] ${words}`);
  await p.locator("#send").click();
  await p.waitForFunction(() => (document.querySelector(".msg.assistant.streaming .markdown")?.textContent || "").length > 10);
  assert.equal(await p.locator("#stop").isDisabled(), false, "busy while the answer streams");
  await sockets[0].close();
  // The run ends while the page hears nothing.
  const deadline = Date.now() + 30000;
  for (;;) {
    const response = await p.request.get(`${SEED_URL}/v1/sessions/${id}/runs`, { headers: { Authorization: `Bearer ${token}` } });
    const { runs } = await response.json();
    if (runs.length > 0 && runs.every((run) => run.status === "succeeded")) break;
    assert.ok(Date.now() < deadline, "the run ended within 30 s");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  release();
  await p.locator(".msg.assistant:not(.streaming)", { hasText: "beta29" }).waitFor();
  await p.waitForFunction(() => document.querySelector("#stop").disabled, null, { timeout: 15000 });
  assert.equal(await p.locator(".msg.assistant").count(), 1);
  await context.close();
});
