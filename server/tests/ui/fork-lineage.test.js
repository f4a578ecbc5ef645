// Forks on the page: "Branch from here" on a message makes a new session with the conversation
// up to that message and opens it; the lineage map in the header shows both sessions and the
// fork's edge, and a node opens its session. The map's layout is checked alone too.
// Run with the rest of the suite (ui.test.js imports it: the login link signs in once).

import assert from "node:assert/strict";
import { test } from "node:test";

import { SEED_URL, newContext, newSession, page, say, sessionIdOf, shot, token, watch } from "./harness.js";
import { layoutLineage } from "../../ui/lineage.js";

test("the lineage map puts each session one column past those it came from", () => {
  const node = (id, at) => ({ session_id: id, title: id, created_at_ms: at });
  const layout = layoutLineage({
    nodes: [node("a", 1), node("b", 2), node("c", 3), node("d", 4), node("e", 5)],
    edges: [
      { from: "a", to: "b", kind: "continuation" },
      { from: "a", to: "c", kind: "fork" },
      { from: "b", to: "d", kind: "delegation" },
      // An edge to a session not shown (the lineage was cut) places nothing.
      { from: "a", to: "z", kind: "fork" },
    ],
  });
  const at = (id) => layout.positions.get(id);
  assert.deepEqual([at("a"), at("b"), at("c"), at("d"), at("e")], [
    { column: 0, row: 0 },
    { column: 1, row: 0 },
    { column: 1, row: 1 },
    { column: 2, row: 0 },
    { column: 0, row: 1 },
  ]);
  assert.equal(layout.columns, 3);
  assert.equal(layout.rows, 2);
  assert.deepEqual(layoutLineage({ nodes: [], edges: [] }).columns, 0);
});

test("Branch from here on a message creates the fork and opens it; the lineage map shows both with the fork edge", async () => {
  const original = await newSession();
  await say("hello", "You said: hello");
  await say("second thoughts", "You said: second thoughts");
  assert.equal(await page.locator("#lineage-map").isVisible(), false, "a session alone has no map");

  // The first answer (seq 2): its action shows on hover.
  const answer = page.locator(".msg.assistant", { hasText: "You said: hello" });
  assert.equal(await answer.getAttribute("data-seq"), "2");
  await answer.hover();
  const branch = answer.locator("button.branch-here");
  await page.waitForFunction(() => getComputedStyle(document.querySelector(".msg.assistant button.branch-here")).opacity === "1");
  assert.equal(await branch.getAttribute("aria-label"), "Branch from here");
  assert.equal(await answer.locator(".markdown").innerText(), "You said: hello", "the action is no part of the message's text");
  await shot(page, "41-branch");

  const forkRequest = page.waitForRequest((request) => request.url().endsWith(`/v1/sessions/${original}/fork`) && request.method() === "POST");
  await branch.click();
  assert.deepEqual(JSON.parse((await forkRequest).postData()), { seq: 2 });
  await page.waitForURL((url) => /\/s\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.endsWith(original));
  const fork = sessionIdOf(page);
  await page.locator(`.session-view[data-session-id="${fork}"][data-ready='1']`).waitFor();

  // Its header leads back to the session it branched from.
  const pill = page.locator(".pill.forked-from");
  assert.equal(await pill.innerText(), "‹ Branched from “hello”");
  assert.equal(await pill.getAttribute("title"), "Forked from “hello” (branched from seq 2); go to it");

  // The fork holds the conversation up to the answer, and nothing after it.
  const texts = await page.locator("#transcript .msg .markdown").allInnerTexts();
  assert.deepEqual(texts, ["hello", "You said: hello"]);
  const edge = await (await page.request.get(`${SEED_URL}/v1/sessions/${fork}/continuation`, { headers: { Authorization: `Bearer ${token}` } })).json();
  assert.equal(edge.predecessor_session_id, original);
  assert.equal(edge.manifest.fork.seq, 2);

  // The map: both sessions, the fork's edge from the original to it, this one marked.
  const map = page.locator("#lineage-map");
  await map.locator(".lineage-node").nth(1).waitFor();
  assert.equal(await map.locator(".lineage-node").count(), 2);
  assert.equal(await map.locator(`.lineage-node.current[data-session-id="${fork}"]`).count(), 1);
  const forkEdge = map.locator(`.lineage-edge.kind-fork[data-from="${original}"][data-to="${fork}"]`);
  assert.equal(await forkEdge.count(), 1);
  assert.equal(await forkEdge.evaluate((path) => getComputedStyle(path).strokeDasharray !== "none"), true, "a fork's edge is dashed");
  assert.equal(await map.locator(".lineage-legend .kind-fork").innerText(), "fork");
  await shot(page, "42-lineage-map");

  // The fork answers from its own conversation.
  await say("another way", "You said: another way");

  // A node opens its session; there, the map shows the same graph.
  await map.locator(`.lineage-node[data-session-id="${original}"]`).click();
  await page.waitForURL((url) => url.pathname.endsWith(original));
  await page.locator(`.session-view[data-session-id="${original}"][data-ready='1']`).waitFor();
  await page.locator(`#lineage-map .lineage-node.current[data-session-id="${original}"]`).waitFor();
  assert.equal(await page.locator(`#lineage-map .lineage-edge.kind-fork[data-to="${fork}"]`).count(), 1);
  assert.equal(await page.locator("#transcript .msg.assistant").count(), 2, "the original is as it was");
});

test("a fork of a successor shows the successor's handoff card, and the map shows the continuation and the fork", async () => {
  // A page of its own: following the continuation here counts nothing on the shared page.
  const context = await newContext();
  const p = await context.newPage();
  watch(p);
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill(token);
  await p.locator("#token-submit").click();
  await p.locator("#new-session").waitFor();
  const predecessor = await newSession(p);
  await say("hello", "You said: hello", p);
  await say("continue: Porto trains", null, p);
  await p.waitForURL((url) => /\/s\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.endsWith(predecessor));
  const successor = sessionIdOf(p);
  await p.locator(`.session-view[data-session-id="${successor}"][data-ready='1']`).waitFor();
  const replayed = p.locator(".msg.user", { hasText: "continue: Porto trains" });
  await p.locator(".msg.assistant:not(.streaming)", { hasText: "You said: continue: Porto trains" }).waitFor();

  // Branch at the successor's copied message (seq 2): the fork starts with the projection.
  await replayed.hover();
  await replayed.locator("button.branch-here").click();
  await p.waitForURL((url) => /\/s\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.endsWith(successor));
  const fork = sessionIdOf(p);
  await p.locator(`.session-view[data-session-id="${fork}"][data-ready='1']`).waitFor();
  const card = p.locator(".handoff-card");
  await card.locator(".handoff-md").waitFor();
  assert.match(await card.innerText(), /Carry on with: Porto trains/, "the successor's handoff, not the fork's empty one");
  assert.equal(await p.locator(".msg", { hasText: "<continuation" }).count(), 0, "the projection is no bubble");

  const map = p.locator("#lineage-map");
  await map.locator(".lineage-node").nth(2).waitFor();
  assert.equal(await map.locator(`.lineage-edge.kind-continuation[data-from="${predecessor}"][data-to="${successor}"]`).count(), 1);
  assert.equal(await map.locator(`.lineage-edge.kind-fork[data-from="${successor}"][data-to="${fork}"]`).count(), 1);
  await context.close();
});
