// The UI suite's harness: the browser (headless Chromium, Debian's /usr/bin/chromium, driven by
// playwright-core), signed in once with the login link of the `seed serve` scripts/ui-test.sh
// started (SEED_URL, SEED_LOGIN_URL, SEED_OTHER_TOKEN, SEED_BIN, SEED_UI_SCREENSHOTS); the pages'
// logged errors; the steps the tests share (a new session, a message and its answer, a second
// client, screenshots); and services a test starts itself, stopped by their pid.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before } from "node:test";

import { chromium } from "playwright-core";

export const SEED_URL = process.env.SEED_URL;
export const LOGIN_URL = process.env.SEED_LOGIN_URL;
export const OTHER_TOKEN = process.env.SEED_OTHER_TOKEN;
export const SEED_BIN = process.env.SEED_BIN;
export const SHOTS = process.env.SEED_UI_SCREENSHOTS || join(process.cwd(), "ui-screenshots");
const TIMEOUT_MS = 15000;

if (!SEED_URL || !LOGIN_URL) {
  throw new Error("run through scripts/ui-test.sh: SEED_URL and SEED_LOGIN_URL are not set");
}

let browser;
let context;
/** The page of the account the login link signed in, and its token. */
export let page;
export let token;
/** What the pages logged as errors; the suite's last test checks it is empty. */
export const consoleErrors = [];

export async function newContext() {
  const created = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  created.setDefaultTimeout(TIMEOUT_MS);
  return created;
}

export function watch(p) {
  p.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  p.on("pageerror", (error) => consoleErrors.push(String(error)));
}

/**
 * Runs `task`, in which requests the service refuses with `status` are expected: the browser
 * logs each as an error, and those are not counted against the page.
 */
export async function expectingRefusals(status, task) {
  const from = consoleErrors.length;
  await task();
  const expected = `Failed to load resource: the server responded with a status of ${status} `;
  for (let i = consoleErrors.length - 1; i >= from; i--) {
    if (consoleErrors[i].startsWith(expected)) consoleErrors.splice(i, 1);
  }
}

export async function shot(p, name) {
  await p.screenshot({ path: join(SHOTS, `${name}.png`) });
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.SEED_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    // Each launch gets a fresh user-data-dir of its own (playwright makes a temporary one).
  });
  context = await newContext();
  page = await context.newPage();
  watch(page);
  // The one-time login link: it stores a token and opens the UI.
  await page.goto(LOGIN_URL);
  await page.waitForURL(`${SEED_URL}/`);
  await page.locator("#new-session").waitFor();
  token = await page.evaluate(() => localStorage.getItem("seed.token"));
  assert.ok(token, "the login link left a token");
});

after(async () => {
  if (browser) await browser.close();
  await stopServices();
});

/** A new session through the UI; returns its id once its view is ready. */
export async function newSession(p = page) {
  const before = p.url();
  await p.locator("#new-session").click();
  await p.waitForURL((url) => /\/s\/[0-9a-f-]{36}$/.test(url.pathname) && url.href !== before);
  const id = sessionIdOf(p);
  await p.locator(`.session-view[data-session-id="${id}"][data-ready='1']`).waitFor();
  return id;
}

export function sessionIdOf(p) {
  return new URL(p.url()).pathname.split("/").pop();
}

/** Sends through the composer and waits for the reply that contains `answer`. */
export async function say(text, answer, p = page) {
  const before = await p.locator(".msg.assistant:not(.streaming)").count();
  await p.locator("#composer-input").fill(text);
  await p.locator("#composer-input").press("Enter");
  if (answer) {
    await p.locator(".msg.assistant:not(.streaming)").nth(before).waitFor();
    await p.locator(".msg.assistant:not(.streaming)", { hasText: answer }).last().waitFor();
  }
}

/** A second browser, signed in with a pasted token (the form a minted token goes into). */
export async function secondClient(withToken = token, { expectErrors = false } = {}) {
  const other = await newContext();
  const p = await other.newPage();
  if (!expectErrors) watch(p);
  await p.goto(`${SEED_URL}/`);
  await p.locator("#token-input").fill(withToken);
  await p.locator("#token-submit").click();
  await p.locator("#new-session").waitFor();
  return { other, p };
}

// The services a test started itself, to be stopped by their pid.
const services = new Set();

/**
 * Starts `seed serve` (the scripted model) on `dataDir`; resolves once it prints its login
 * link, with its URL, the link, and a promise of its exit.
 */
export function startService(dataDir, { listen = "127.0.0.1:0", crashAt = null, extraArgs = [] } = {}) {
  const args = ["serve", "--data-dir", dataDir, "--listen", listen, ...extraArgs];
  if (crashAt) args.push("--crash-at", crashAt);
  const env = { ...process.env, SEED_PROVIDER: "scripted", RUST_LOG: "warn" };
  delete env.SEED_CRASH_AT;
  const child = spawn(SEED_BIN, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  services.add(child);
  const exited = new Promise((resolve) => {
    child.once("exit", (code, signal) => {
      services.delete(child);
      resolve({ code, signal });
    });
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (chunk) => (err += chunk));
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const url = /^seed: listening on (\S+)$/m.exec(out);
      const login = /^sign in a browser \(one time\): (\S+)$/m.exec(out);
      if (url && login) resolve({ url: url[1], login: login[1], exited });
    });
    exited.then(({ code, signal }) => reject(new Error(`seed serve ended (${code ?? signal}) before it listened: ${err}`)));
  });
}

export async function stopServices() {
  const running = [...services];
  for (const child of running) process.kill(child.pid, "SIGTERM");
  await Promise.all(running.map((child) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", resolve)))));
}
