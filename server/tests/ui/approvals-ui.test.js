// The approval card end to end: a `seed serve --mcp` of its own, whose Python test server's
// `count_keyed` (it appends its key to a file, so each run is counted) needs approval. The card
// shows the call; Edit then approve runs it once with the edited arguments; Deny sends the
// reason the model reads, and the call never runs. Skipped when scripts/mcp-servers.sh has not
// installed the test servers.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { newContext, newSession, say, shot, startService, stopServices, watch } from "./harness.js";

const REPO = resolve(import.meta.dirname, "../../..");
const PYTHON = join(process.env.CARGO_TARGET_DIR || join(REPO, "target"), "mcp-servers/venv/bin/python");

function counted(path) {
  return existsSync(path) ? readFileSync(path, "utf8") : "";
}

test(
  "a call waiting for approval shows a card: edited then approved it runs once; denied it never runs",
  { skip: !existsSync(PYTHON) && "the MCP test servers are not installed (scripts/mcp-servers.sh)" },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "seed-ui-approvals-"));
    const count = join(dir, "count");
    const config = join(dir, "mcp.json");
    const server = {
      command: PYTHON,
      args: [join(REPO, "tests/mcp/test_server.py")],
      env: { SEED_MCP_COUNT_FILE: count },
      seed: { tools: { count_keyed: { needs_approval: true } } },
    };
    writeFileSync(config, JSON.stringify({ mcpServers: { py: server } }));
    const context = await newContext();
    try {
      const service = await startService(join(dir, "data"), { extraArgs: ["--mcp", config] });
      const p = await context.newPage();
      watch(p);
      await p.goto(service.login);
      await p.waitForURL(`${service.url}/`);
      await newSession(p);

      await say('call: py__count_keyed {"key": "k1"}', null, p);
      const card = p.locator(".approval");
      await card.waitFor();
      assert.match(await card.locator(".approval-title").innerText(), /py__count_keyed/);
      assert.match(await card.locator(".approval-arguments").innerText(), /"k1"/);
      assert.equal(counted(count), "", "nothing runs before a decision");
      await shot(p, "20-approval-card");
      await card.locator("button.edit").click();
      await card.locator(".approval-editor").fill('{"key": "k2"}');
      await card.locator("button.edit").click();
      await p.locator(".msg.assistant:not(.streaming)", { hasText: "counted k2" }).waitFor();
      assert.equal(await p.locator(".approval").count(), 0, "the card is gone once decided");
      assert.equal(counted(count), "k2\n", "it ran once, as edited");

      await say('call: py__count_keyed {"key": "k3"}', null, p);
      await p.locator(".approval").waitFor();
      await p.locator(".approval .approval-reason").fill("not today");
      await p.locator(".approval button.deny").click();
      await p.locator(".msg.assistant:not(.streaming)", { hasText: "not today" }).waitFor();
      assert.equal(counted(count), "k2\n", "the denied call never ran");
    } finally {
      await context.close();
      await stopServices();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
