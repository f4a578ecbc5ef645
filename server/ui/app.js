// The Seed web UI: the session list, the session view (transcript, composer, stop, model,
// context meter), continuation cards and follow-continuation, Go on after a reply cut off by
// the output limit; the wrench palette is palette.js, failed runs (their Retry, and failed
// turns' lines) runs.js, the model picker modelpicker.js, the sign-in page signin.js.
// Plain ES modules, no build step.

import * as api from "./api.js";
import { AttachmentTray } from "./attachments.js";
import { ModelPicker } from "./modelpicker.js";
import { Palette } from "./palette.js";
import { PendingApprovals } from "./approvals.js";
import { SessionSchedules } from "./schedules.js";
import { FailedRuns } from "./runs.js";
import { LineageMap } from "./lineage.js";
import { branchAction, forkPill } from "./branch.js";
import { ContinueDialog } from "./continue_dialog.js";
import { signInPage } from "./signin.js";
import {
  Follower,
  GO_ON_TEXT,
  contextUsage,
  failedRunNotice,
  goOnOffer,
  isUuid,
  listRefreshDelay,
  mergeDelta,
  noticeLine,
  relativeTime,
  toolServers,
} from "./logic.js";
import {
  actionRow,
  bubble,
  h,
  handoffCard,
  meter,
  orphanResult,
  streamingBubble,
  toolRow,
  transitionRow,
} from "./transcript.js";

const root = document.getElementById("app");
const follower = new Follower(sessionStorage);
let sessions = [];
let view = null;
let subscription = null;
let shell = null;
let listTimer = null;
let automaticFollows = 0;

// Routing: `/` is the list, `/s/<id>` a session; history entries are real, so Back works.

export function navigate(path, { replace = false } = {}) {
  if (location.pathname === path) return;
  history[replace ? "replaceState" : "pushState"]({}, "", path);
  route();
}

window.addEventListener("popstate", () => route());

function route() {
  if (!api.token()) {
    signInPage(root, route);
    return;
  }
  ensureShell();
  ensureSubscription();
  const match = /^\/s\/([0-9a-f-]{36})$/i.exec(location.pathname);
  const sessionId = match && isUuid(match[1]) ? match[1].toLowerCase() : null;
  if (view && view.sessionId === sessionId) return;
  if (view) view.close();
  view = null;
  follower.view(sessionId);
  if (sessionId) {
    view = new SessionView(sessionId);
    shell.main.replaceChildren(view.element);
    const opened = view;
    view.load().catch((error) => opened.failed(error));
  } else {
    shell.main.replaceChildren(homeView());
  }
  renderSessionList();
  refreshSessions();
}

function handleError(error) {
  if (error instanceof api.SignedOut) {
    if (view) view.close();
    view = null;
    if (subscription) subscription.close();
    subscription = null;
    shell = null;
    signInPage(root, route, "Your sign-in ended. Open a new login link, or paste a token.");
    return;
  }
  console.error(error);
  toast(error.message || String(error), "error");
}

function toast(text, kind = "info") {
  if (!shell) return;
  const item = h("div", { class: `toast ${kind}`, role: "status" }, text);
  shell.toasts.append(item);
  setTimeout(() => item.remove(), 6000);
}

// The shell: the sidebar with the session list, and the main pane.

function ensureShell() {
  if (shell) return;
  const list = h("nav", { id: "sessions", "aria-label": "Sessions" });
  const main = h("main", { id: "main" });
  const toasts = h("div", { class: "toasts", "aria-live": "polite" });
  const newButton = h("button", { id: "new-session", type: "button", onclick: () => newSession().catch(handleError) }, "+ New session");
  const signOutButton = h(
    "button",
    {
      type: "button",
      class: "link",
      onclick: () => {
        api.revokeAndSignOut();
        if (subscription) subscription.close();
        subscription = null;
        shell = null;
        signInPage(root, route);
      },
    },
    "Sign out",
  );
  root.replaceChildren(
    h(
      "div",
      { class: "layout" },
      h(
        "aside",
        { class: "sidebar" },
        h("div", { class: "brand" }, h("a", { href: "/", onclick: (e) => (e.preventDefault(), navigate("/")) }, h("span", { class: "logo" }, "◆"), " Seed")),
        newButton,
        list,
        h("footer", { class: "sidebar-footer" }, signOutButton),
      ),
      main,
      toasts,
    ),
  );
  shell = { list, main, toasts };
}

function ensureSubscription() {
  if (subscription) return;
  subscription = api.subscribe(
    onUpdate,
    (reconnected, point) => {
      document.documentElement.dataset.live = "1";
      if (reconnected) {
        refreshSessions();
        if (view) view.catchUp(point !== null && point.session === view.sessionId);
      }
    },
    () => (view ? view.resumePoint() : null),
  );
}

function onUpdate(update) {
  const delay = listRefreshDelay(update);
  if (delay !== null) scheduleListRefresh(delay);
  if (view) view.onUpdate(update);
}

function scheduleListRefresh(delayMs) {
  clearTimeout(listTimer);
  listTimer = setTimeout(refreshSessions, delayMs);
}

async function refreshSessions() {
  try {
    const page = await api.get("/v1/sessions?limit=200");
    sessions = page.sessions;
    renderSessionList();
  } catch (error) {
    handleError(error);
  }
}

function renderSessionList() {
  if (!shell) return;
  const current = view ? view.sessionId : null;
  if (!sessions.length) {
    shell.list.replaceChildren(h("div", { class: "empty muted" }, "No sessions yet."));
    return;
  }
  const now = Date.now();
  shell.list.replaceChildren(
    ...sessions.map((session) => {
      const active = session.id === current;
      const item = h(
        "a",
        {
          class: `session-item${active ? " active" : ""}`,
          href: `/s/${session.id}`,
          dataset: { sessionId: session.id },
          onclick: (event) => {
            event.preventDefault();
            navigate(`/s/${session.id}`);
          },
        },
        h(
          "div",
          { class: "session-item-top" },
          h("span", { class: "session-item-title" }, session.title || "Untitled session"),
          active && view ? meter(view.usage, { label: false }) : null,
        ),
        session.description ? h("div", { class: "session-item-description" }, session.description) : null,
        h(
          "div",
          { class: "session-item-meta" },
          h("time", { datetime: new Date(session.updated_at_ms).toISOString(), title: new Date(session.updated_at_ms).toLocaleString() }, relativeTime(session.updated_at_ms, now)),
          session.continued_to ? h("span", { class: "chip continued-in", title: session.continued_to.reason }, `Continued in “${session.continued_to.title}”`) : null,
          session.continued_from ? h("span", { class: "chip continued-from-chip" }, `Continued from “${session.continued_from.title}”`) : null,
        ),
      );
      return item;
    }),
  );
}

async function newSession() {
  const session = await api.post("/v1/sessions", {});
  sessions = [session, ...sessions.filter((s) => s.id !== session.id)];
  navigate(`/s/${session.id}`);
}

function homeView() {
  document.title = "Seed";
  return h(
    "div",
    { class: "home" },
    h("h2", {}, "Talk to an agent"),
    h("p", { class: "muted" }, "Pick a session on the left, or start a new one. Every step is kept; when a conversation moves on, it continues into a new session you can follow."),
    h("button", { type: "button", class: "primary", onclick: () => newSession().catch(handleError) }, "Start a new session"),
  );
}

/** One session on screen, live. */
class SessionView {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.info = null;
    this.events = [];
    this.lastSeq = 0;
    this.calls = new Map(); // tool call id -> row with setResult
    this.results = new Map(); // tool call id -> result event, for calls rendered later
    this.stream = null; // the response in flight: { runId, text, element }
    this.busy = false;
    this.knownSuccessor = null;
    this.closed = false;
    // Loading, catching up and streamed text are applied one at a time, in the order the
    // subscription told of them, so that a step's events are in view before the next step's
    // text streams (its deltas start again at offset 0).
    this.queue = Promise.resolve();
    this.usage = null;

    this.titleEl = h("h1", { class: "session-title", id: "session-title" });
    this.descriptionEl = h("div", { class: "session-description" });
    this.pillSlot = h("div", { class: "pill-slot" });
    this.modelPicker = new ModelPicker(sessionId, { onSaved: () => this.refresh().catch(handleError), onSignedOut: handleError });
    this.meterSlot = h("span", { class: "meter-slot", id: "header-meter" });
    this.lineage = new LineageMap(sessionId, { navigate, onError: handleError });
    this.continueDialog = new ContinueDialog(sessionId, {
      // The successor answers the copied message: open it, as following a continuation does.
      onContinued: (successor) => navigate(`/s/${successor}`),
      onSignedOut: handleError,
    });
    this.noticeSlot = h("div", { class: "notice-slot" });
    this.transcript = h("div", { class: "transcript", id: "transcript", "aria-live": "polite" });
    this.scroller = h("div", { class: "scroller" }, this.transcript);
    this.approvals = new PendingApprovals(sessionId, { onSignedOut: handleError });
    this.schedules = new SessionSchedules(sessionId, { onSignedOut: handleError });
    this.failedRuns = new FailedRuns(sessionId, this.transcript, {
      onRetry: () => {
        follower.follow(this.sessionId);
        this.setBusy(true);
      },
      onRetried: (answer) => {
        if (!answer) this.setBusy(false);
        else if (answer.continued_to_session_id && !this.closed) {
          this.knownSuccessor = answer.continued_to_session_id;
          this.continued(answer.continued_to_session_id, { sentHere: true });
        }
      },
      onSignedOut: handleError,
    });
    this.input = h("textarea", {
      id: "composer-input",
      rows: "2",
      placeholder: "Message the agent — Enter to send, Shift+Enter for a new line",
      "aria-label": "Message",
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    this.sendButton = h("button", { id: "send", type: "submit", class: "primary" }, "Send");
    this.stopButton = h("button", { id: "stop", type: "button", disabled: true, onclick: () => this.stop() }, "Stop");
    const composer = h("form", {
      id: "composer",
      class: "composer",
      onsubmit: (event) => {
        event.preventDefault();
        this.send();
      },
    });
    this.tray = new AttachmentTray(composer);
    this.tray.render();
    this.palette = new Palette(sessionId, { onRan: () => this.refresh().catch(handleError), onSignedOut: handleError });
    composer.append(
      this.palette.element,
      h("div", { class: "composer-main" }, this.tray.chips, this.input),
      h("div", { class: "composer-buttons" }, this.palette.button, this.tray.picker, this.tray.button, this.stopButton, this.sendButton),
    );
    this.element = h(
      "div",
      { class: "session-view", dataset: { sessionId } },
      h(
        "header",
        { class: "session-header" },
        h("div", { class: "session-heading" }, this.pillSlot, this.titleEl, this.descriptionEl, this.lineage.element),
        h("div", { class: "session-facts" }, this.continueDialog.element, this.modelPicker.element, this.meterSlot),
      ),
      this.noticeSlot,
      this.scroller,
      this.approvals.element,
      this.schedules.element,
      composer,
    );
  }

  close() {
    this.closed = true;
  }

  /** The session could not be opened: not found (or another account's), or an error. */
  failed(error) {
    if (!(error instanceof api.ApiError) || error.status !== 404) {
      handleError(error);
      return;
    }
    document.title = "Not found · Seed";
    this.element.replaceChildren(
      h(
        "div",
        { class: "home not-found" },
        h("h2", {}, "No such session"),
        h("p", { class: "muted" }, "It was deleted, or it belongs to another account."),
      ),
    );
  }

  /** Runs `task` after every task queued before it; a failed task does not stop the queue. */
  serial(task) {
    const run = this.queue.then(() => (this.closed ? undefined : task()));
    this.queue = run.catch(() => {});
    return run;
  }

  load() {
    return this.serial(async () => {
      const [info, events, tools] = await Promise.all([
        api.get(`/v1/sessions/${this.sessionId}`),
        api.events(this.sessionId, 1),
        api.tools().catch(() => null),
      ]);
      if (this.closed) return;
      this.toolServers = toolServers(tools);
      this.info = info;
      this.knownSuccessor = info.session.continued_to ? info.session.continued_to.session_id : null;
      this.append(events);
      this.renderHeader();
      // Read after the events, so that the text in flight is no older than what they hold.
      await Promise.all([this.readLive(), this.failedRuns.read(), this.approvals.read(), this.schedules.read(), this.lineage.read()]);
      if (this.closed) return;
      this.element.dataset.ready = "1";
      this.scrollToEnd();
      this.input.focus();
    });
  }

  /**
   * Catches up: the session's info, and its events after the last one shown up to `toSeq` (the
   * last seq a change made visible), or to the log's end.
   */
  refresh(toSeq = null) {
    return this.serial(async () => {
      const wanted = toSeq === null || toSeq > this.lastSeq;
      const [info, events] = await Promise.all([
        api.get(`/v1/sessions/${this.sessionId}`),
        wanted ? api.events(this.sessionId, this.lastSeq + 1, toSeq) : [],
      ]);
      if (this.closed) return;
      this.info = info;
      this.append(events);
      this.renderHeader();
      const successor = info.session.continued_to ? info.session.continued_to.session_id : null;
      if (successor && successor !== this.knownSuccessor) {
        this.knownSuccessor = successor;
        this.continued(successor, {});
      }
    });
  }

  /**
   * After a reconnection: what was committed meanwhile, and the text in flight now. A socket
   * that resumed this session brings both itself, in order; then only the session's info (up to
   * the events shown) and its runs are read again.
   */
  catchUp(resumed) {
    this.schedules.reread();
    if (resumed) {
      this.refresh(this.lastSeq).catch(handleError);
      this.serial(async () => this.settleIfIdle(await this.failedRuns.read())).catch(handleError);
      return;
    }
    this.refresh().catch(handleError);
    this.serial(async () => {
      const [, runs] = await Promise.all([this.readLive(), this.failedRuns.read()]);
      this.settleIfIdle(runs);
    }).catch(handleError);
  }

  /**
   * A run that ended while the socket was down was never heard of: with no run of the session
   * still open (`runs`, as just read), the page is idle again.
   */
  settleIfIdle(runs) {
    if (!runs || this.closed || !this.busy) return;
    if (runs.some((run) => run.status === "queued" || run.status === "running" || run.status === "parked")) return;
    if (this.stream) this.endStream();
    follower.unfollow(this.sessionId);
    this.setBusy(false);
  }

  /**
   * Where a socket opened now resumes this session: the last seq shown and the chars of the
   * answer in flight shown; null while the session loads (its load reads both).
   */
  resumePoint() {
    if (this.closed || !this.element.dataset.ready) return null;
    const offsetChars = this.stream ? Array.from(this.stream.text).length : 0;
    return { session: this.sessionId, afterSeq: this.lastSeq, offsetChars };
  }

  /** The response in flight, as the store holds it, shown as the streaming answer. */
  async readLive() {
    const live = await api.live(this.sessionId);
    if (this.closed || !live) return;
    // Seeing the session stream counts as following its turn.
    follower.follow(this.sessionId);
    this.setBusy(true);
    this.showStream(live.run_id, live.text);
  }

  /** A text delta: the part the streaming answer lacks; on a gap, the text in flight again. */
  async addDelta(update) {
    const have = this.stream && this.stream.runId === update.run_id ? this.stream.text : "";
    const merged = mergeDelta(have, update.offset_chars, update.text);
    if (merged === null) await this.readLive();
    else this.showStream(update.run_id, merged);
  }

  /** `text` of run `runId`'s response in flight, as the streaming answer. */
  showStream(runId, text) {
    if (this.stream && this.stream.runId !== runId) this.endStream();
    if (!this.stream) this.stream = { runId, text: "", element: streamingBubble() };
    this.stream.text = text;
    if (!text) {
      this.stream.element.remove();
      return;
    }
    this.stream.element.setText(text);
    const stick = this.nearEnd();
    this.transcript.append(this.stream.element);
    if (stick) this.scrollToEnd();
  }

  endStream() {
    this.stream.element.remove();
    this.stream = null;
  }

  /** The run ended: its answer is in the log, and this client follows it no more. */
  runFinished(runId) {
    if (this.stream && this.stream.runId === runId) this.endStream();
    follower.unfollow(this.sessionId);
    this.setBusy(false);
  }

  /** This session continued into `successor`: move there if this client followed the turn. */
  continued(successor, options) {
    if (this.closed) return;
    if (follower.shouldMove(this.sessionId, successor, options)) {
      automaticFollows += 1;
      document.documentElement.dataset.follows = String(automaticFollows);
      navigate(`/s/${successor}`);
      return;
    }
    this.renderNotice(true);
  }

  onUpdate(update) {
    if (update.session_id !== this.sessionId) return;
    this.approvals.onUpdate(update);
    this.schedules.onUpdate(update);
    switch (update.type) {
      case "text-delta":
        // Seeing the session stream counts as following its turn.
        follower.follow(this.sessionId);
        this.setBusy(true);
        this.serial(() => this.addDelta(update)).catch(handleError);
        break;
      case "events":
        // A resumed socket's catch-up: the events committed while it was away.
        this.serial(() => this.append(update.events)).catch(handleError);
        break;
      case "tool-call":
        // Its row comes with the events of the change told just before; the turn runs.
        this.setBusy(true);
        break;
      case "session-change":
        if (update.reason === "deleted") {
          this.noticeSlot.replaceChildren(h("div", { class: "notice error" }, "This session was deleted."));
          return;
        }
        this.refresh(update.to_seq ?? null).catch(handleError);
        // A fork or a continuation of this session, or this one's making: the map changed.
        if (["forked", "forked-from", "continued", "continued-from"].includes(update.reason)) this.lineage.read();
        break;
      case "run-finished":
        this.refresh().catch(handleError);
        this.serial(() => this.runFinished(update.run_id)).catch(handleError);
        this.serial(() => this.failedRuns.read()).catch(handleError);
        break;
    }
  }

  append(events) {
    if (!events.length) return;
    const stick = this.nearEnd();
    let failedNotice = false;
    for (const event of events) {
      if (event.seq <= this.lastSeq) continue;
      this.lastSeq = event.seq;
      this.events.push(event);
      failedNotice ||= failedRunNotice(event) !== null;
      const node = this.render(event);
      if (node) this.transcript.append(node);
      // The response in flight is in the log now: its message takes the streaming answer's place.
      if (this.stream && event.type === "message" && event.role === "assistant" && event.run_id === this.stream.runId) {
        this.endStream();
      }
    }
    if (this.stream && this.stream.text) this.transcript.append(this.stream.element);
    this.failedRuns.place();
    // A failed turn's line waits for the runs as read after it came (is a Retry row its?).
    if (failedNotice && this.element.dataset.ready) this.serial(() => this.failedRuns.read()).catch(handleError);
    this.offerGoOn();
    this.usage = contextUsage(this.events, this.info ? this.info.context_window : null);
    if (stick) this.scrollToEnd();
  }

  /** Go on shows on the newest reply when the output limit cut it off; older ones keep the note. */
  offerGoOn() {
    const offered = String(goOnOffer(this.events));
    for (const button of this.transcript.querySelectorAll(".msg.assistant .go-on")) {
      button.hidden = button.closest(".msg").dataset.seq !== offered;
    }
  }

  /** Go on: "Go on." to the session, as an ordinary message; the button waits while it goes. */
  async goOn(button) {
    button.disabled = true;
    await this.post(GO_ON_TEXT);
    button.disabled = false;
  }

  render(event) {
    const open = (path) => navigate(path);
    const failure = failedRunNotice(event);
    if (failure) return this.failedRuns.line(event, failure);
    switch (event.type) {
      case "message":
        if (event.meta && event.meta.continuation) {
          // A fork's copy of a projection names the successor whose edge holds its handoff.
          const successor = event.meta.continuation.successor_session_id || this.sessionId;
          return handoffCard(event, successor, this.info?.session?.continued_from, open);
        }
        if (event.role === "assistant" && !event.content?.text && !event.content?.thinking && !event.meta?.error_message) return null;
        if (event.role === "user" || event.role === "assistant") {
          const node = bubble(event, {
            onOpenPredecessor: (id) => open(`/s/${id}`),
            onDownload: (attachment) => api.download(this.sessionId, attachment).catch(handleError),
            onGoOn: (button) => this.goOn(button),
          });
          node.append(branchAction(event, this.sessionId, { onForked: (id) => open(`/s/${id}`), onError: handleError }));
          return node;
        }
        return h("div", { class: "notice-line" }, noticeLine(event));
      case "tool_call": {
        const result = this.results.get(event.content.id);
        const row = event.content.name === "continue_session" ? transitionRow(event, result, open, this.sessionId) : toolRow(event, result, this.toolServers?.get(event.content.name));
        this.calls.set(event.content.id, row);
        return row;
      }
      case "tool_result": {
        const row = this.calls.get(event.content.tool_call_id);
        this.results.set(event.content.tool_call_id, event);
        if (row) {
          row.setResult(event);
          return null;
        }
        return orphanResult(event);
      }
      case "action":
        return actionRow(event);
      default:
        return h("div", { class: "notice-line" }, noticeLine(event));
    }
  }

  renderHeader() {
    const session = this.info.session;
    document.title = `${session.title || "Untitled session"} · Seed`;
    this.titleEl.textContent = session.title || "Untitled session";
    this.descriptionEl.textContent = session.description || "";
    this.modelPicker.show(this.info);
    this.pillSlot.replaceChildren();
    const from = session.continued_from;
    if (from) {
      this.pillSlot.append(
        h(
          "a",
          {
            class: "pill continued-from",
            href: `/s/${from.session_id}`,
            title: `Continued from “${from.title}” (${from.reason}); go back to it`,
            onclick: (event) => {
              event.preventDefault();
              navigate(`/s/${from.session_id}`);
            },
          },
          "‹ ",
          `Continued from “${from.title}”`,
        ),
      );
    }
    const forked = forkPill(session.forked_from, navigate);
    if (forked) this.pillSlot.append(forked);
    const drawn = meter(this.usage);
    const current = this.meterSlot.firstElementChild;
    if (!current || current.title !== drawn.title || current.dataset.level !== drawn.dataset.level) {
      this.meterSlot.replaceChildren(drawn);
    }
    this.renderNotice(false);
    // The list shows what this view knows, until its own refresh comes.
    sessions = sessions.map((listed) => (listed.id === session.id ? session : listed));
    renderSessionList();
  }

  /** The notice on a continued session: where it went, and that typing here branches. */
  renderNotice(live) {
    const to = this.info && this.info.session.continued_to;
    if (!to) {
      this.noticeSlot.replaceChildren();
      return;
    }
    const existing = this.noticeSlot.querySelector(".notice.continued");
    if (existing && existing.dataset.successor === to.session_id && !live) return;
    this.noticeSlot.replaceChildren(
      h(
        "div",
        { class: `notice continued${live ? " live" : ""}`, dataset: { successor: to.session_id }, role: "status" },
        h("span", {}, `This conversation continued in “${to.title}” (${to.reason}). Writing here starts a new branch.`),
        h(
          "a",
          {
            class: "open-session",
            href: `/s/${to.session_id}`,
            onclick: (event) => {
              event.preventDefault();
              navigate(`/s/${to.session_id}`);
            },
          },
          "Open session",
        ),
      ),
    );
  }

  setBusy(busy) {
    this.busy = busy;
    this.stopButton.disabled = !busy;
    this.element.classList.toggle("busy", busy);
  }

  async send() {
    const text = this.input.value.trim();
    if (!text) {
      if (this.tray.pending) toast("Write a message to send with the files.");
      return;
    }
    this.input.value = "";
    // The files leave the composer with the message; a refused message gives them back,
    // uploaded, for the next try.
    let taken = [];
    const sent = await this.post(text, async () => {
      const attachments = this.tray.pending ? await this.tray.upload(this.sessionId) : [];
      taken = this.tray.take();
      return attachments;
    });
    if (sent) return;
    if (!this.input.value) this.input.value = text;
    if (taken.length) this.tray.restore(taken);
  }

  /**
   * Sends `text` (with the files `attachmentsOf()` gives) as a message and waits for its turn;
   * whether the service took it (else the error is shown).
   */
  async post(text, attachmentsOf = async () => []) {
    follower.follow(this.sessionId);
    this.setBusy(true);
    try {
      const attachments = await attachmentsOf();
      const sent = await api.post(`/v1/sessions/${this.sessionId}/messages`, { text, wait: true, attachments });
      if (sent.continued_to_session_id && !this.closed) {
        this.knownSuccessor = sent.continued_to_session_id;
        this.continued(sent.continued_to_session_id, { sentHere: true });
      }
      return true;
    } catch (error) {
      this.setBusy(false);
      handleError(error);
      return false;
    }
  }

  async stop() {
    try {
      await api.post(`/v1/sessions/${this.sessionId}/stop`, {});
      this.setBusy(false);
    } catch (error) {
      handleError(error);
    }
  }

  nearEnd() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }

  scrollToEnd() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }
}

route();
