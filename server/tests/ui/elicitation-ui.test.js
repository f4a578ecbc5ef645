// A server's question as a card end to end: a `seed serve --mcp` of its own with the reference
// server `@modelcontextprotocol/server-everything`, whose `trigger-elicitation-request` tool asks
// the person for a form during the call. The card shows the server's message and a form from
// the requested schema; a required field left empty is refused on the page; submitted, the
// tool's result carries what was filled in; declined, the server hears so. Skipped when
// scripts/mcp-servers.sh has not installed the reference servers.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { newContext, newSession, say, shot, startService, stopServices, watch } from "./harness.js";

const REPO = resolve(import.meta.dirname, "../../..");
const EVERYTHING = join(
  process.env.CARGO_TARGET_DIR || join(REPO, "target"),
  "mcp-servers/node/node_modules/.bin/mcp-server-everything",
);
const TOOL = "everything__trigger-elicitation-request";

/** Waits (up to 30 s) until the service offers the elicitation tool, which the server registers after the handshake. */
async function toolOffered(url, bearer) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const response = await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${bearer}` } });
    const listed = await response.json();
    if (listed.tools.some((tool) => tool.name === TOOL)) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error(`${TOOL} was never offered`);
}

test(
  "a server's question shows a form: submitted, the tool's result carries the answer; declined, the server hears so",
  { skip: !existsSync(EVERYTHING) && "the MCP reference servers are not installed (scripts/mcp-servers.sh)" },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "seed-ui-elicitation-"));
    const config = join(dir, "mcp.json");
    writeFileSync(config, JSON.stringify({ mcpServers: { everything: { command: EVERYTHING } } }));
    const context = await newContext();
    try {
      const service = await startService(join(dir, "data"), { extraArgs: ["--mcp", config] });
      const p = await context.newPage();
      watch(p);
      await p.goto(service.login);
      await p.waitForURL(`${service.url}/`);
      const bearer = await p.evaluate(() => localStorage.getItem("seed.token"));
      await toolOffered(service.url, bearer);
      await newSession(p);

      await say(`call: ${TOOL} {}`, null, p);
      const card = p.locator(".approval.question");
      await card.waitFor();
      assert.match(await card.locator(".approval-title").innerText(), /Please provide inputs for the following fields:/);
      assert.equal(await card.locator(".question-field").count() >= 5, true, "a control for each field");
      assert.equal(await card.locator('input[name="integer"]').inputValue(), "42", "the default is filled in");
      await shot(p, "22-elicitation-card");
      await card.locator("button.accept").click();
      await card.locator(".approval-problem", { hasText: "required" }).waitFor();
      await card.locator('input[name="name"]').fill("Ada");
      await card.locator('input[name="check"]').check();
      await card.locator('input[name="integer"]').fill("7");
      await card.locator("button.accept").click();
      await p.locator(".msg.assistant:not(.streaming)", { hasText: "Name: Ada" }).waitFor();
      assert.match(
        await p.locator(".msg.assistant:not(.streaming)", { hasText: "Name: Ada" }).innerText(),
        /Favorite Integer: 7/,
      );
      assert.equal(await p.locator(".approval").count(), 0, "the card is gone once answered");

      await say(`call: ${TOOL} {}`, null, p);
      await p.locator(".approval.question").waitFor();
      await p.locator(".approval.question button.decline").click();
      await p.locator(".msg.assistant:not(.streaming)", { hasText: "declined" }).waitFor();
    } finally {
      await context.close();
      await stopServices();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
