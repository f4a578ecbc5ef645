// The lineage map in the session header: the sessions joined to this one by continuation, fork
// and delegation (GET /v1/sessions/{id}/lineage), drawn as a small graph, oldest on the left;
// each node opens its session, each edge is styled by its kind. Hidden while the session stands
// alone. Titles go in as text nodes, never as markup.

import * as api from "./api.js";
import { h } from "./transcript.js";

const SVG = "http://www.w3.org/2000/svg";
/** The map's grid: a column per generation, a row per session of it. */
const COLUMN_PX = 132;
const ROW_PX = 26;
const PAD_PX = 10;
const NODE_R = 5;
/** The characters of a title shown beside its node (the whole title is its tooltip). */
const LABEL_CHARS_MAX = 16;

const KIND_WORDS = {
  continuation: "continued in",
  fork: "branched into",
  delegation: "delegated to",
};

/**
 * Where each session of `lineage` goes, pure: its column is its generation (one past the
 * furthest of the sessions it came from; edges run from the earlier session to the later), its
 * row its place among its generation's sessions, oldest first. Returns `{ columns, rows,
 * positions }`, `positions` a Map from session id to `{ column, row }`.
 */
export function layoutLineage(lineage) {
  const nodes = [...(lineage?.nodes ?? [])].sort((a, b) => a.created_at_ms - b.created_at_ms || (a.session_id < b.session_id ? -1 : 1));
  const shown = new Set(nodes.map((node) => node.session_id));
  const sources = new Map();
  for (const edge of lineage?.edges ?? []) {
    if (!shown.has(edge.from) || !shown.has(edge.to)) continue;
    if (!sources.has(edge.to)) sources.set(edge.to, []);
    sources.get(edge.to).push(edge.from);
  }
  const column = new Map();
  const columnOf = (id, seen = new Set()) => {
    if (column.has(id)) return column.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const from = sources.get(id) ?? [];
    const value = from.length ? Math.max(...from.map((source) => columnOf(source, seen) + 1)) : 0;
    column.set(id, value);
    return value;
  };
  const positions = new Map();
  const rowsUsed = [];
  for (const node of nodes) {
    const at = columnOf(node.session_id);
    const row = rowsUsed[at] ?? 0;
    rowsUsed[at] = row + 1;
    positions.set(node.session_id, { column: at, row });
  }
  return {
    columns: rowsUsed.length,
    rows: Math.max(0, ...rowsUsed.filter((n) => n !== undefined)),
    positions,
  };
}

function svg(tag, attributes = {}) {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

function label(title) {
  const text = title || "Untitled session";
  return text.length > LABEL_CHARS_MAX ? `${text.slice(0, LABEL_CHARS_MAX - 1)}…` : text;
}

/** The graph as SVG: edges under nodes; `current` is marked. */
export function drawLineage(lineage, current, navigate) {
  const { columns, rows, positions } = layoutLineage(lineage);
  const width = PAD_PX * 2 + Math.max(1, columns) * COLUMN_PX;
  const height = PAD_PX * 2 + Math.max(1, rows) * ROW_PX;
  const root = svg("svg", { class: "lineage-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "group" });
  const centre = (id) => {
    const at = positions.get(id);
    return { x: PAD_PX + NODE_R + at.column * COLUMN_PX, y: PAD_PX + ROW_PX / 2 + at.row * ROW_PX };
  };
  const titles = new Map((lineage.nodes ?? []).map((node) => [node.session_id, node.title || "Untitled session"]));
  for (const edge of lineage.edges ?? []) {
    if (!positions.has(edge.from) || !positions.has(edge.to)) continue;
    const a = centre(edge.from);
    const b = centre(edge.to);
    const bend = Math.max(16, (b.x - a.x) / 2);
    const path = svg("path", {
      class: `lineage-edge kind-${edge.kind}`,
      d: `M ${a.x} ${a.y} C ${a.x + bend} ${a.y}, ${b.x - bend} ${b.y}, ${b.x} ${b.y}`,
      "data-from": edge.from,
      "data-to": edge.to,
      "data-kind": edge.kind,
    });
    const tip = svg("title");
    tip.textContent = `“${titles.get(edge.from)}” ${KIND_WORDS[edge.kind] ?? edge.kind} “${titles.get(edge.to)}”`;
    path.append(tip);
    root.append(path);
  }
  for (const node of lineage.nodes ?? []) {
    const { x, y } = centre(node.session_id);
    const isCurrent = node.session_id === current;
    const group = svg("g", {
      class: `lineage-node${isCurrent ? " current" : ""}`,
      "data-session-id": node.session_id,
      role: "link",
      tabindex: "0",
      "aria-label": `${isCurrent ? "This session" : "Open"}: ${node.title || "Untitled session"}`,
    });
    const tip = svg("title");
    tip.textContent = node.title || "Untitled session";
    const text = svg("text", { x: x + NODE_R + 4, y: y + 4, class: "lineage-label" });
    text.textContent = label(node.title);
    group.append(tip, svg("circle", { cx: x, cy: y, r: NODE_R }), text);
    const open = () => {
      if (!isCurrent) navigate(`/s/${node.session_id}`);
    };
    group.addEventListener("click", open);
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        open();
      }
    });
    root.append(group);
  }
  return root;
}

/** The map of one session's lineage; `read()` fetches and draws it again. */
export class LineageMap {
  constructor(sessionId, { navigate, onError }) {
    this.sessionId = sessionId;
    this.navigate = navigate;
    this.onError = onError;
    this.element = h("div", { class: "lineage-map", id: "lineage-map", hidden: true, "aria-label": "Lineage" });
    this.reading = null;
  }

  /** Reads the lineage and draws it; one read at a time, the last asked for wins. */
  read() {
    this.reading = (this.reading ?? Promise.resolve()).then(async () => {
      try {
        const lineage = await api.get(`/v1/sessions/${this.sessionId}/lineage`);
        this.draw(lineage);
      } catch (error) {
        this.onError(error);
      }
    });
    return this.reading;
  }

  draw(lineage) {
    const alone = (lineage.nodes ?? []).length < 2;
    this.element.hidden = alone;
    this.element.dataset.nodes = String((lineage.nodes ?? []).length);
    if (alone) {
      this.element.replaceChildren();
      return;
    }
    const legend = h(
      "div",
      { class: "lineage-legend" },
      ["continuation", "fork", "delegation"]
        .filter((kind) => lineage.edges.some((edge) => edge.kind === kind))
        .map((kind) => h("span", { class: `legend kind-${kind}` }, kind)),
      lineage.truncated ? h("span", { class: "muted" }, "(more not shown)") : null,
    );
    this.element.replaceChildren(drawLineage(lineage, this.sessionId, this.navigate), legend);
  }
}
