// A small, safe markdown renderer for model and user text. Text is HTML-escaped as it is
// emitted; the markup this emits is built only from fixed tags, so text can never become markup.
// Links keep only http(s) and mailto addresses (allowed-scheme). Supported: paragraphs,
// headings, fenced and inline code, bold, italics, strikethrough, links, lists, block quotes and
// rules.
//
// It runs in time linear in its input, whatever the input: no regular expression here can
// backtrack (blocks are recognized by plain scans of a line, inline markup by passes that find
// each closing marker through a precomputed next-index table), and block quotes nest at most
// QUOTE_DEPTH_MAX deep (deeper `>` stay text), so rendering never recurses without bound.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/**
 * How deep block quotes nest. Quoting in a conversation rarely goes past three; a `>` deeper
 * than this stays text, which bounds the renderer's recursion and its passes over the text.
 */
export const QUOTE_DEPTH_MAX = 8;

const SAFE_LINK = /^(https?:\/\/|mailto:)/i;

/** Whether `c` (one character) is white space, as `\s` and `String.prototype.trim` see it. */
function isSpace(c) {
  return c !== undefined && c.length === 1 && c.trim() === "";
}

/** Whether `c` is a word character as `\w` sees it: an ASCII letter, digit or `_`. */
function isWord(c) {
  if (typeof c !== "string" || c.length !== 1) return false;
  const code = c.charCodeAt(0);
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95;
}

function isDigit(c) {
  return c !== undefined && c >= "0" && c <= "9";
}

/** The number of white-space characters `line` starts with. */
function leadingSpaces(line) {
  let at = 0;
  while (at < line.length && isSpace(line[at])) at++;
  return at;
}

// ---- inline markup ----
//
// A line is a list of tokens: a one-character string of text, or a Markup already rendered.
// Each pass turns one kind of markup into Markup tokens, in the order code spans, links, `**`,
// `__`, `*`, `_`, `~~`; a later pass sees a Markup as one character that is neither a word
// character, white space nor a marker.

/** Rendered HTML inside a line, opaque to the passes after the one that made it. */
class Markup {
  constructor(html) {
    this.html = html;
  }
}

/**
 * For each index i of `tokens`, the first index at or after i that holds `marker`, or -1; one
 * more entry (at tokens.length) is -1. Every pass finds closing markers here, in constant time.
 */
function nextIndexes(tokens, marker) {
  const next = new Int32Array(tokens.length + 1);
  let at = -1;
  next[tokens.length] = -1;
  for (let i = tokens.length - 1; i >= 0; i--) {
    if (tokens[i] === marker) at = i;
    next[i] = at;
  }
  return next;
}

/** Code spans (`` `code` ``, not empty) as Markup; their text takes no further markup. */
function codeSpans(text) {
  const tokens = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === "`") {
      const close = text.indexOf("`", i + 1);
      if (close > i + 1) {
        tokens.push(new Markup(`<code>${escapeHtml(text.slice(i + 1, close))}</code>`));
        i = close + 1;
        continue;
      }
      if (close === -1) {
        for (; i < text.length; i++) tokens.push(text[i]);
        break;
      }
    }
    tokens.push(text[i]);
    i++;
  }
  return tokens;
}

/**
 * For each index i of `tokens`, the first index at or after i where an address must stop (a
 * `)`, white space or Markup), or tokens.length.
 */
function addressStops(tokens) {
  const stops = new Int32Array(tokens.length + 1);
  let at = tokens.length;
  stops[tokens.length] = at;
  for (let i = tokens.length - 1; i >= 0; i--) {
    if (typeof tokens[i] !== "string" || tokens[i] === ")" || isSpace(tokens[i])) at = i;
    stops[i] = at;
  }
  return stops;
}

/**
 * Links `[label](address)` with a safe address as Markup, the label rendered on its own; a
 * label holds no `]`, an address no `)` or white space. A link with an unsafe address stays
 * text.
 */
function links(tokens) {
  const nextClose = nextIndexes(tokens, "]");
  const stops = addressStops(tokens);
  /** The index of the `)` that ends the address after the `]` at `close`, or -1. */
  const addressEnd = (close) => {
    if (tokens[close + 1] !== "(") return -1;
    const stop = stops[close + 2];
    return stop > close + 2 && tokens[stop] === ")" ? stop : -1;
  };
  const out = [];
  let i = 0;
  while (i < tokens.length) {
    if (tokens[i] === "[") {
      const close = nextClose[i + 1];
      const end = close > i + 1 ? addressEnd(close) : -1;
      if (end !== -1) {
        const address = tokens.slice(close + 2, end).join("");
        if (SAFE_LINK.test(address)) {
          const label = emit(emphasis(tokens.slice(i + 1, close)));
          out.push(new Markup(`<a href="${escapeHtml(address)}" rel="noopener noreferrer" target="_blank">${label}</a>`));
        } else {
          for (let at = i; at <= end; at++) out.push(tokens[at]);
        }
        i = end + 1;
        continue;
      }
    }
    out.push(tokens[i]);
    i++;
  }
  return out;
}

/** Appends tokens[from..to) to `out` inside `tag`. */
function wrap(out, tokens, from, to, tag) {
  out.push(new Markup(`<${tag}>`));
  for (let at = from; at < to; at++) out.push(tokens[at]);
  out.push(new Markup(`</${tag}>`));
}

/** `MMtextMM` (M doubled, text without M, not empty) wrapped in `tag`. */
function doubled(tokens, marker, tag) {
  const next = nextIndexes(tokens, marker);
  const out = [];
  let i = 0;
  while (i < tokens.length) {
    if (tokens[i] === marker && tokens[i + 1] === marker && i + 2 < tokens.length) {
      const close = next[i + 2];
      if (close > i + 2 && tokens[close + 1] === marker) {
        wrap(out, tokens, i + 2, close, tag);
        i = close + 2;
        continue;
      }
    }
    out.push(tokens[i]);
    i++;
  }
  return out;
}

/**
 * `MtextM` (M single, text without M that neither starts nor ends with white space) wrapped in
 * `tag`, when the opening M follows neither a word character nor M and the closing M is
 * followed by neither: `2*3*4` stays text.
 */
function single(tokens, marker, tag) {
  const next = nextIndexes(tokens, marker);
  const out = [];
  let i = 0;
  while (i < tokens.length) {
    if (tokens[i] === marker) {
      const before = tokens[i - 1];
      const first = tokens[i + 1];
      const close = i + 1 < tokens.length ? next[i + 1] : -1;
      const after = close === -1 ? undefined : tokens[close + 1];
      if (
        (i === 0 || (before !== marker && !isWord(before))) &&
        first !== undefined &&
        first !== marker &&
        !isSpace(first) &&
        close >= i + 2 &&
        !isSpace(tokens[close - 1]) &&
        after !== marker &&
        !isWord(after)
      ) {
        wrap(out, tokens, i + 1, close, tag);
        i = close + 1;
        continue;
      }
    }
    out.push(tokens[i]);
    i++;
  }
  return out;
}

/** Bold, italics and strikethrough, in the order the markers bind. */
function emphasis(tokens) {
  let out = doubled(tokens, "*", "strong");
  out = doubled(out, "_", "strong");
  out = single(out, "*", "em");
  out = single(out, "_", "em");
  return doubled(out, "~", "del");
}

function emit(tokens) {
  let html = "";
  for (const token of tokens) html += typeof token === "string" ? (ESCAPES[token] ?? token) : token.html;
  return html;
}

/** Markers of inline markup: a line without any is only escaped. */
const INLINE_MARKERS = /[`[*_~]/;

/** Inline markup on one line of text. */
function inline(text) {
  if (!INLINE_MARKERS.test(text)) return escapeHtml(text);
  return emit(emphasis(links(codeSpans(text))));
}

// ---- blocks ----

/** A fence line's marker and language (`` ```js ``), or null. */
function fenceOf(line) {
  const trimmed = line.trim();
  const marker = trimmed.slice(0, 3);
  if (marker !== "```" && marker !== "~~~") return null;
  const language = trimmed.slice(3).trim();
  for (const c of language) if (!isWord(c) && c !== "+" && c !== "-") return null;
  return { marker, language };
}

/** A heading's level (1 to 6) and text, with closing `#`s dropped, or null. */
function headingOf(line) {
  let level = 0;
  while (line[level] === "#") level++;
  if (level < 1 || level > 6 || !isSpace(line[level])) return null;
  let text = line.slice(level).trim();
  let end = text.length;
  while (end > 0 && text[end - 1] === "#") end--;
  text = text.slice(0, end).trimEnd();
  return { level, text };
}

/** Whether `line` is a rule: three or more of one of `-`, `*`, `_`, and white space only. */
function isRule(line) {
  const trimmed = line.trim();
  const marker = trimmed[0];
  if (marker !== "-" && marker !== "*" && marker !== "_") return false;
  let n = 0;
  for (const c of trimmed) {
    if (c === marker) n++;
    else if (!isSpace(c)) return false;
  }
  return n >= 3;
}

/** A list item's kind (`ul` or `ol`) and text, or null. */
function listItemOf(line) {
  const start = leadingSpaces(line);
  const c = line[start];
  if ((c === "-" || c === "*" || c === "+") && isSpace(line[start + 1])) {
    return { tag: "ul", text: line.slice(start + 1).trimStart() };
  }
  let end = start;
  while (isDigit(line[end])) end++;
  if (end > start && (line[end] === "." || line[end] === ")") && isSpace(line[end + 1])) {
    return { tag: "ol", text: line.slice(end + 1).trimStart() };
  }
  return null;
}

/** `lines` as blocks, inside `depth` block quotes. */
function blocks(lines, depth) {
  const out = [];
  let paragraph = [];
  let list = null; // { tag, items }
  let quote = [];

  const flushParagraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(inline).join("<br>")}</p>`);
    paragraph = [];
  };
  const flushList = () => {
    if (list) out.push(`<${list.tag}>${list.items.map((item) => `<li>${inline(item)}</li>`).join("")}</${list.tag}>`);
    list = null;
  };
  const flushQuote = () => {
    if (quote.length) out.push(`<blockquote>${blocks(quote, depth + 1)}</blockquote>`);
    quote = [];
  };
  const flushAll = () => {
    flushParagraph();
    flushList();
    flushQuote();
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = fenceOf(line);
    if (fence) {
      flushAll();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence.marker)) body.push(lines[i++]);
      const language = fence.language ? ` class="language-${escapeHtml(fence.language)}"` : "";
      out.push(`<pre><code${language}>${escapeHtml(body.join("\n"))}</code></pre>`);
      continue;
    }
    const indent = leadingSpaces(line);
    if (line[indent] === ">" && depth < QUOTE_DEPTH_MAX) {
      flushParagraph();
      flushList();
      quote.push(line.slice(isSpace(line[indent + 1]) ? indent + 2 : indent + 1));
      continue;
    }
    flushQuote();
    if (indent === line.length) {
      flushParagraph();
      flushList();
      continue;
    }
    const heading = headingOf(line);
    if (heading) {
      flushAll();
      const level = Math.min(heading.level + 2, 6); // inside a message, headings stay small
      out.push(`<h${level}>${inline(heading.text)}</h${level}>`);
      continue;
    }
    if (isRule(line)) {
      flushAll();
      out.push("<hr>");
      continue;
    }
    const item = listItemOf(line);
    if (item) {
      flushParagraph();
      if (list && list.tag !== item.tag) flushList();
      if (!list) list = { tag: item.tag, items: [] };
      list.items.push(item.text);
      continue;
    }
    if (list && indent >= 2) {
      list.items[list.items.length - 1] += ` ${line.trim()}`;
      continue;
    }
    flushList();
    paragraph.push(line);
  }
  flushAll();
  return out.join("");
}

/** Renders markdown `source` as HTML; safe to assign to innerHTML. */
export function renderMarkdown(source) {
  return blocks(String(source ?? "").replace(/\r\n?/g, "\n").split("\n"), 0);
}
