// The transcript's pieces as DOM: message bubbles (markdown; a reply cut off by the output
// limit marked, with a Go on button), tool rows (collapsed), the continuation transition row
// (predecessor side), the handoff card (successor side), the streaming bubble, the context
// meter (an estimate marked). Text goes in as text nodes or through the escaping
// markdown renderer, never as markup.

import { renderMarkdown } from "./markdown.js";
import {
  actionSummary,
  describeSource,
  formatBytes,
  handoffMarkdown,
  isCutOff,
  messageAttachments,
  normalizeInput,
  meterLabel,
  meterTitle,
  revealedChars,
  successorFromResult,
  toolLabel,
} from "./logic.js";
import * as api from "./api.js";

/** `h("div", {class: "x"}, "text", child)`: an element; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") element.className = value;
    else if (key === "dataset") Object.assign(element.dataset, value);
    else if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function markdown(text, className = "markdown") {
  const element = h("div", { class: className });
  element.innerHTML = renderMarkdown(text);
  return element;
}

const SVG = "http://www.w3.org/2000/svg";

/**
 * The context meter: a small pie, muted, amber from 70%, red from 85%; numbers on hover. An
 * estimate (the model server reports no usage) has a dashed ring and "≈" in its label.
 */
export function meter(usage, { label = true } = {}) {
  const percent = usage ? Math.min(100, usage.percent) : 0;
  const level = usage ? usage.level : "none";
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 20 20");
  svg.setAttribute("width", "16");
  svg.setAttribute("height", "16");
  svg.setAttribute("aria-hidden", "true");
  const track = document.createElementNS(SVG, "circle");
  track.setAttribute("cx", "10");
  track.setAttribute("cy", "10");
  track.setAttribute("r", "9");
  track.setAttribute("class", "meter-track");
  const slice = document.createElementNS(SVG, "circle");
  slice.setAttribute("cx", "10");
  slice.setAttribute("cy", "10");
  slice.setAttribute("r", "4.5");
  slice.setAttribute("pathLength", "100");
  slice.setAttribute("stroke-dasharray", `${percent.toFixed(2)} 100`);
  slice.setAttribute("transform", "rotate(-90 10 10)");
  slice.setAttribute("class", "meter-slice");
  svg.append(track, slice);
  const title = meterTitle(usage);
  const estimated = !!(usage && usage.estimated);
  return h(
    "span",
    {
      class: `meter level-${level}${estimated ? " estimated" : ""}`,
      dataset: estimated ? { level, estimated: "1" } : { level },
      title,
      role: "img",
      "aria-label": title,
    },
    svg,
    label && usage ? h("span", { class: "meter-label" }, meterLabel(usage)) : null,
  );
}

/** A wrench, drawn: the palette's button and a verb run by hand. */
export function wrenchIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "15");
  svg.setAttribute("height", "15");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon wrench-icon");
  for (const d of ["M19.8 7.7A5 5 0 1 1 16.3 4.2", "M11.5 12.5L4.5 19.5"]) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

function shortJson(value, max = 80) {
  const text = JSON.stringify(value) ?? "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function pre(text, className = "") {
  return h("pre", { class: className }, text);
}

/**
 * What a handoff call says, in full: the hover bubble of a transition row. The arguments are
 * read as the runtime reads them (normalized), so the sections show the texts the model got.
 */
function handoffDetails(callArguments, thisThread) {
  const args = normalizeInput(callArguments) || {};
  const rows = [];
  const field = (name, value) =>
    value !== undefined && value !== null && value !== "" ? rows.push(h("div", { class: "detail" }, h("b", {}, `${name}: `), String(value))) : null;
  field("Title", args.title);
  field("Reason", args.reason);
  field("Description", args.description);
  const body = h("div", { class: "bubble-body" }, rows);
  const md = handoffMarkdown(args.handoff);
  if (md) body.append(markdown(md, "markdown handoff-md"));
  const sources = Array.isArray(args.sources) ? args.sources : [];
  if (sources.length) {
    body.append(h("div", { class: "detail" }, h("b", {}, "Sources")));
    body.append(h("ul", { class: "sources" }, sources.map((s) => h("li", {}, describeSource(s, thisThread).label))));
  }
  if (args.transfer) field("Transfer", JSON.stringify(args.transfer));
  return body;
}

/**
 * The predecessor's continue_session call as a transition row: a chevron, "Continued in “title”
 * (reason)", Open session on the right, a hover bubble with every detail. A refused call keeps
 * error styling. `result` is its tool_result event, when it has one.
 */
export function transitionRow(call, result, navigate, sessionId) {
  const args = call.content.arguments || {};
  const row = h("div", { class: "transition", dataset: { callId: call.content.id, seq: call.seq } });
  const update = (result) => {
    row.replaceChildren();
    const bubble = h("div", { class: "bubble", role: "tooltip" }, handoffDetails(args, sessionId));
    const chevron = h("span", { class: "chevron", "aria-hidden": "true" }, "›");
    if (!result) {
      row.className = "transition pending";
      row.append(chevron, h("span", { class: "transition-text" }, `Continuing in “${args.title ?? ""}”…`));
    } else if (result.content.is_error) {
      row.className = "transition refused error";
      row.append(
        h("span", { class: "chevron", "aria-hidden": "true" }, "!"),
        h("span", { class: "transition-text" }, `Continuation refused: ${result.content.content}`),
      );
    } else {
      const successor = successorFromResult(result.content.content);
      row.className = "transition done";
      row.dataset.successor = successor || "";
      row.append(
        chevron,
        h("span", { class: "transition-text" }, `Continued in “${args.title ?? ""}” (${args.reason ?? ""})`),
        successor
          ? h(
              "a",
              {
                class: "open-session",
                href: `/s/${successor}`,
                onclick: (event) => {
                  event.preventDefault();
                  navigate(`/s/${successor}`);
                },
              },
              "Open session",
            )
          : null,
      );
    }
    row.append(bubble);
    row.tabIndex = 0;
  };
  update(result);
  row.setResult = update;
  return row;
}

/**
 * A tool call with its result, collapsed by default; a tool of an MCP server (`mcpServer`)
 * shows the server's name beside its own.
 */
export function toolRow(call, result, mcpServer = null) {
  const name = call.content.name || "tool";
  const args = call.content.arguments;
  const label = toolLabel(name, mcpServer);
  let summaryText = `${label.tool} ${shortJson(args)}`;
  if (name === "status" && args) {
    const title = args.title ? `“${args.title}” — ` : "";
    summaryText = `status: ${title}${args.description ?? ""}`;
  }
  const details = h("details", { class: "tool", dataset: { callId: call.content.id, seq: call.seq } });
  const server = label.server ? h("span", { class: "tool-server", title: `A tool of the MCP server ${label.server}` }, label.server) : null;
  const summary = h("summary", {}, h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"), server, h("span", { class: "tool-summary" }, summaryText));
  const body = h("div", { class: "tool-body" }, h("div", { class: "tool-label" }, "Arguments"), pre(JSON.stringify(args, null, 2)));
  const resultSlot = h("div", { class: "tool-result" });
  details.append(summary, body, resultSlot);
  const setResult = (result) => {
    resultSlot.replaceChildren();
    details.classList.toggle("error", !!(result && result.content.is_error));
    if (!result) {
      resultSlot.append(h("div", { class: "tool-label" }, "Waiting for the result…"));
      return;
    }
    resultSlot.append(h("div", { class: "tool-label" }, result.content.is_error ? "Error" : "Result"), pre(String(result.content.content ?? "")));
  };
  setResult(result);
  details.setResult = setResult;
  return details;
}

/** A tool result whose call is not in view. */
export function orphanResult(event) {
  return h(
    "details",
    { class: `tool${event.content.is_error ? " error" : ""}` },
    h("summary", {}, `${event.content.tool_name || "tool"} result`),
    pre(String(event.content.content ?? "")),
  );
}

/**
 * A verb a person ran by hand (the wrench palette), as the log holds it: who ran what with
 * which arguments, and the result; collapsed to one line, in error styling when it failed.
 */
export function actionRow(event) {
  const content = event.content ?? {};
  const summary = actionSummary(content);
  const args = content.arguments && typeof content.arguments === "object" ? Object.entries(content.arguments) : [];
  return h(
    "details",
    { class: `tool action${summary.isError ? " error" : ""}`, dataset: { seq: event.seq, verb: content.verb ?? "" } },
    h(
      "summary",
      {},
      h("span", { class: "tool-icon", "aria-hidden": "true" }, wrenchIcon()),
      h("span", { class: "action-who" }, "You ran"),
      h("span", { class: "tool-summary" }, summary.call),
      summary.result ? h("span", { class: "action-result" }, `${summary.isError ? "failed:" : "→"} ${summary.result}`) : null,
    ),
    h(
      "div",
      { class: "tool-body" },
      h("div", { class: "tool-label" }, "Arguments"),
      args.length
        ? h(
            "dl",
            { class: "action-arguments" },
            args.flatMap(([name, value]) => [
              h("dt", {}, name),
              h("dd", {}, pre(typeof value === "string" ? value : JSON.stringify(value, null, 2))),
            ]),
          )
        : h("div", { class: "muted" }, "none"),
    ),
    h(
      "div",
      { class: "tool-result" },
      h("div", { class: "tool-label" }, summary.isError ? "Error" : "Result"),
      pre(String(content.result ?? "")),
    ),
  );
}

/**
 * A file as a chip: its name and size; with `onDownload`, a link that downloads it; with
 * `onRemove`, a button that takes it off.
 */
export function attachmentChip(attachment, { onDownload, onRemove } = {}) {
  const size = attachment.size_bytes === null || attachment.size_bytes === undefined ? null : formatBytes(attachment.size_bytes);
  const label = [h("span", { class: "attachment-name" }, attachment.name), size ? h("span", { class: "attachment-size" }, size) : null];
  const chip = onDownload
    ? h(
        "a",
        {
          class: "chip attachment",
          href: "#",
          title: `Download ${attachment.name}`,
          dataset: { attachmentId: attachment.id || "" },
          onclick: (event) => {
            event.preventDefault();
            onDownload(attachment);
          },
        },
        ...label,
      )
    : h("span", { class: "chip attachment", title: attachment.name }, ...label);
  if (onRemove) {
    chip.append(
      h(
        "button",
        {
          type: "button",
          class: "attachment-remove",
          title: `Remove ${attachment.name}`,
          "aria-label": `Remove ${attachment.name}`,
          onclick: () => onRemove(attachment),
        },
        "×",
      ),
    );
  }
  return chip;
}

/**
 * A message bubble. A reply cut off by the output limit ends in a note and a Go on button
 * (`onGoOn(button)`), hidden until the session view offers it (on the newest reply only).
 */
export function bubble(event, { onOpenPredecessor, onDownload, onGoOn } = {}) {
  const role = event.role === "assistant" ? "assistant" : "user";
  const text = typeof event.content?.text === "string" ? event.content.text : "";
  const from = event.meta && event.meta.continued_from;
  const element = h("div", { class: `msg ${role}`, dataset: { seq: event.seq, eventId: event.id } });
  if (from) {
    element.append(
      h(
        "a",
        {
          class: "chip from-previous",
          href: `/s/${from.session_id}`,
          title: `Copied word for word from the previous session (seq ${from.seq})`,
          onclick: (e) => {
            e.preventDefault();
            onOpenPredecessor && onOpenPredecessor(from.session_id);
          },
        },
        "From previous session",
      ),
    );
  }
  if (text) element.append(markdown(text));
  const attachments = messageAttachments(event.content);
  if (attachments.length) {
    element.append(h("div", { class: "attachments" }, attachments.map((attachment) => attachmentChip(attachment, { onDownload }))));
  }
  if (event.content?.thinking) {
    element.prepend(h("details", { class: "thinking" }, h("summary", {}, "Thinking"), pre(event.content.thinking)));
  }
  const errorMessage = event.meta && event.meta.error_message;
  if (errorMessage) element.append(h("div", { class: "msg-error" }, errorMessage));
  if (isCutOff(event)) {
    const goOn = h("button", { type: "button", class: "go-on", hidden: true }, "Go on");
    goOn.addEventListener("click", () => onGoOn && onGoOn(goOn));
    element.classList.add("cut-off");
    element.append(
      h(
        "div",
        { class: "cut-off-note" },
        h("span", { class: "cut-off-text" }, "Cut off: the reply reached the model's output limit"),
        goOn,
      ),
    );
  }
  return element;
}

/** How long a chunk of streamed text takes to appear: about the service's live interval. */
const REVEAL_MS = 90;

/**
 * The answer in flight. `setText` gives the text so far; what it adds to the text shown is
 * revealed over REVEAL_MS, so that text committed in chunks flows. The first text, and a text
 * that does not extend the one shown, appear at once.
 */
export function streamingBubble() {
  const element = h("div", { class: "msg assistant streaming" });
  const body = h("div", { class: "markdown" });
  element.append(body, h("span", { class: "cursor", "aria-hidden": "true" }));
  let target = [];
  let shown = 0;
  let chunk = { from: 0, startedAt: 0 };
  let frame = null;
  const draw = () => {
    body.innerHTML = renderMarkdown(target.slice(0, shown).join(""));
  };
  const step = (now) => {
    frame = null;
    shown = revealedChars(chunk.from, target.length, now - chunk.startedAt, REVEAL_MS);
    draw();
    if (shown < target.length) frame = requestAnimationFrame(step);
  };
  element.setText = (text) => {
    const next = Array.from(text);
    const grows = shown > 0 && shown <= next.length && next.slice(0, shown).join("") === target.slice(0, shown).join("");
    target = next;
    if (!grows) {
      shown = target.length;
      draw();
      return;
    }
    chunk = { from: shown, startedAt: performance.now() };
    if (frame === null && shown < target.length) frame = requestAnimationFrame(step);
  };
  return element;
}

/** A range of a thread as the transcript lines the model reads, rendered by the server. */
function excerptBlock(source) {
  const container = h("div", { class: "excerpt-slot" });
  const button = h("button", { type: "button", class: "load-excerpt" }, "Load excerpt");
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Loading…";
    try {
      const lines = await api.transcript(source.thread, source.from, source.to);
      container.replaceChildren(
        h("pre", { class: "excerpt" }, lines.length ? lines.join("\n") : "(no events in this range)"),
      );
    } catch (error) {
      button.disabled = false;
      button.textContent = "Load excerpt";
      container.append(h("div", { class: "msg-error" }, `Could not load: ${error.message}`));
    }
  });
  container.append(button);
  return container;
}

function sourceItem(source, thisThread) {
  const described = describeSource(source, thisThread);
  const item = h("li", { class: `source source-${described.kind}` });
  if (described.kind === "resource" && /^https?:/i.test(described.label)) {
    item.append(h("a", { href: described.label, rel: "noopener noreferrer", target: "_blank" }, described.label));
  } else {
    item.append(h("code", {}, described.label));
  }
  if (described.kind === "thread") item.append(excerptBlock(described));
  return item;
}

/**
 * The successor's projection as a handoff card, never a bubble: the handoff as markdown, the
 * sources, cited and left-out ranges loaded on demand as the model reads them, and the
 * projection text as the model read it (collapsed).
 */
export function handoffCard(event, sessionId, predecessor, navigate) {
  const card = h("section", { class: "handoff-card", dataset: { seq: event.seq } });
  const header = h(
    "header",
    {},
    h("span", { class: "handoff-icon", "aria-hidden": "true" }, "⤷"),
    h("span", { class: "handoff-title" }, "Handoff"),
    predecessor
      ? h(
          "span",
          { class: "handoff-from" },
          "from ",
          h(
            "a",
            {
              href: `/s/${predecessor.session_id}`,
              onclick: (e) => {
                e.preventDefault();
                navigate(`/s/${predecessor.session_id}`);
              },
            },
            `“${predecessor.title}”`,
          ),
          predecessor.reason ? ` (${predecessor.reason})` : "",
        )
      : null,
  );
  const body = h("div", { class: "handoff-body" }, h("div", { class: "muted" }, "Loading the handoff…"));
  const raw = h("details", { class: "projection-raw" }, h("summary", {}, "What the model read"), pre(event.content?.text ?? ""));
  card.append(header, body, raw);
  api
    .get(`/v1/sessions/${sessionId}/continuation`)
    .then((info) => {
      const manifest = info.manifest || {};
      body.replaceChildren();
      if (manifest.description) body.append(h("p", { class: "handoff-description" }, manifest.description));
      body.append(markdown(handoffMarkdown(manifest.handoff) || "(empty handoff)", "markdown handoff-md"));
      const sources = manifest.sources || [];
      if (sources.length) {
        body.append(h("h4", {}, "Sources"), h("ul", { class: "sources" }, sources.map((s) => sourceItem(s, info.predecessor_session_id))));
      }
      const omitted = manifest.omitted || [];
      if (omitted.length) {
        body.append(
          h("h4", {}, "Left out (linked, not loaded)"),
          h(
            "ul",
            { class: "sources omitted" },
            omitted.map((range) => sourceItem({ type: "session_events", ...range }, info.predecessor_session_id)),
          ),
        );
      }
      const facts = [];
      if (manifest.plan) facts.push(`plan: ${manifest.plan}`);
      if (manifest.projection_bytes) facts.push(`projection ${manifest.projection_bytes} of ${manifest.budget_bytes} bytes`);
      if (facts.length) body.append(h("div", { class: "handoff-facts muted" }, facts.join(" · ")));
    })
    .catch((error) => {
      body.replaceChildren(h("div", { class: "muted" }, `The handoff's manifest is not available (${error.message}); the projection as the model read it is below.`));
      raw.open = true;
    });
  return card;
}
