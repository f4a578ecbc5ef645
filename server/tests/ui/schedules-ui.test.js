// The session's wake-ups on the page: a turn that schedules one shows its line above the
// composer (when, when next, the agent's note), and Cancel ends it at the service.
// Run with the rest of the suite (ui.test.js imports it: the login link signs in once).

import assert from "node:assert/strict";
import { test } from "node:test";

import { SEED_URL, newContext, newSession, say, shot, token, watch } from "./harness.js";

test("a wake-up the agent scheduled is listed with its note, and Cancel ends it", async () => {
  const context = await newContext();
  const p = await context.newPage();
  watch(p);
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill(token);
  await p.locator("#token-submit").click();
  await p.locator("#new-session").waitFor();
  const id = await newSession(p);
  const listed = async () => {
    const response = await p.request.get(`${SEED_URL}/v1/sessions/${id}/schedules`, { headers: { Authorization: `Bearer ${token}` } });
    return (await response.json()).schedules;
  };

  await say('call: schedule {"note": "water the <b>plants</b>", "every_seconds": 3600}', null, p);
  const line = p.locator(".schedule");
  await line.waitFor();
  assert.match(await line.locator(".schedule-when").innerText(), /every/);
  assert.match(await line.locator(".schedule-next").innerText(), /^next /);
  assert.equal(await line.locator(".schedule-note").innerText(), "water the <b>plants</b>", "the note is text");
  assert.equal((await listed()).length, 1);
  await shot(p, "30-wake-up");

  await line.locator("button.cancel-schedule").click();
  await p.waitForFunction(() => document.querySelectorAll(".schedule").length === 0);
  assert.deepEqual(await listed(), [], "cancelled at the service");
  await context.close();
});
