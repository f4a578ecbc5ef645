// Talking to the service: the bearer token the login link left (or one pasted in), the REST
// API under /v1, and the /v1/subscribe WebSocket with reconnection.

const TOKEN_KEY = "seed.token";
const EXPIRES_KEY = "seed.token_expires_at_ms";

export class SignedOut extends Error {}

export class ApiError extends Error {
  /** `field`: the request field at fault (`arguments.title`), when the service names one. */
  constructor(status, message, field = null) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export function token() {
  const value = localStorage.getItem(TOKEN_KEY);
  const expires = Number(localStorage.getItem(EXPIRES_KEY) || 0);
  if (!value || (expires && expires <= Date.now())) return null;
  return value;
}

export function setToken(value, expiresAtMs) {
  localStorage.setItem(TOKEN_KEY, value);
  if (expiresAtMs) localStorage.setItem(EXPIRES_KEY, String(expiresAtMs));
  else localStorage.removeItem(EXPIRES_KEY);
}

export function signOut() {
  localStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(EXPIRES_KEY);
}

/**
 * Signs this browser out at the service too: `DELETE /v1/tokens/current` revokes its token (and
 * closes the WebSockets opened with it), and the token is forgotten here whatever the answer.
 */
export async function revokeAndSignOut() {
  const bearer = token();
  signOut();
  if (!bearer) return;
  try {
    await fetch("/v1/tokens/current", { method: "DELETE", headers: { Authorization: `Bearer ${bearer}` } });
  } catch (error) {
    console.warn("the token could not be revoked", error);
  }
}

let toolList = null;

/** `GET /v1/tools`, read once a page: the tools on offer do not change with the session. */
export function tools() {
  toolList ??= get("/v1/tools").catch((error) => {
    toolList = null;
    throw error;
  });
  return toolList;
}

export async function request(method, path, body) {
  const bearer = token();
  if (!bearer) throw new SignedOut("not signed in");
  const headers = { Authorization: `Bearer ${bearer}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return answer(response);
}

/** A response's JSON, or the ApiError its `{"error": …}` says (a 401 signs out). */
async function answer(response) {
  if (response.status === 401) {
    signOut();
    throw new SignedOut("the token is unknown or expired");
  }
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, (value && value.error) || `HTTP ${response.status}`, (value && value.field) || null);
  }
  return value;
}

/**
 * Uploads `file` (a File or Blob with a name) to the session: its bytes as the body, its type
 * (application/octet-stream when the browser knows none: the service tells it from the bytes)
 * and its name. Returns the attachment (`{id, name, media_type, size_bytes, …}`).
 */
export async function upload(sessionId, file) {
  const bearer = token();
  if (!bearer) throw new SignedOut("not signed in");
  const response = await fetch(`/v1/sessions/${sessionId}/attachments?name=${encodeURIComponent(file.name)}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${bearer}`, "Content-Type": file.type || "application/octet-stream" },
    body: file,
  });
  return answer(response);
}

/** Downloads an attachment of the session and hands it to the browser as a file to save. */
export async function download(sessionId, attachment) {
  const bearer = token();
  if (!bearer) throw new SignedOut("not signed in");
  const response = await fetch(`/v1/sessions/${sessionId}/attachments/${encodeURIComponent(attachment.id)}`, {
    headers: { Authorization: `Bearer ${bearer}` },
  });
  if (!response.ok) return answer(response);
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = attachment.name || "attachment";
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return null;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body ?? {});
export const put = (path, body) => request("PUT", path, body ?? {});

/** Every event of a session from `fromSeq` on (or the range up to `toSeq`), page by page. */
export async function events(sessionId, fromSeq = 1, toSeq = null) {
  const all = [];
  let next = fromSeq;
  while (next !== null && next !== undefined) {
    const range = toSeq ? `&to_seq=${toSeq}` : "";
    const page = await get(`/v1/sessions/${sessionId}/events?from_seq=${next}&limit=500${range}`);
    all.push(...page.events);
    next = page.next_seq;
  }
  return all;
}

/**
 * A range of a session's log as the transcript lines the model reads (`[seq] who: text`),
 * rendered by the server, page by page.
 */
export async function transcript(sessionId, fromSeq, toSeq) {
  const lines = [];
  let next = fromSeq;
  while (next !== null && next !== undefined) {
    const page = await get(`/v1/sessions/${sessionId}/transcript?from_seq=${next}&to_seq=${toSeq}&limit=500`);
    lines.push(...page.lines.map((entry) => entry.line));
    next = page.next_seq;
  }
  return lines;
}

/** The response in flight of the session's running turn (`{run_id, text, thinking}`), or null. */
export async function live(sessionId) {
  return (await get(`/v1/sessions/${sessionId}/live`)).live;
}

/**
 * The subscription: calls `onUpdate(update)` for every message and `onOpen(reconnected, point)`
 * each time it (re)connects, so the caller can catch up on what it missed. It reconnects on its
 * own when the socket drops, waiting longer after each failed try. `resumePoint()`, asked at each
 * connection, names the session to resume and what the page holds of it (`{session, afterSeq,
 * offsetChars}`, or null): the service then sends what the page lacks of it first (`events`
 * updates, then the text in flight past `offsetChars`), each event and char once; `point` is
 * the one the socket was opened with.
 */
export function subscribe(onUpdate, onOpen, resumePoint = () => null) {
  let socket = null;
  let attempts = 0;
  let closed = false;
  let opened = false;
  const connect = () => {
    const bearer = token();
    if (!bearer || closed) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const point = resumePoint();
    const resume = point ? `&session=${encodeURIComponent(point.session)}&after_seq=${point.afterSeq}&offset_chars=${point.offsetChars}` : "";
    socket = new WebSocket(`${scheme}://${location.host}/v1/subscribe?token=${encodeURIComponent(bearer)}${resume}`);
    socket.addEventListener("open", () => {
      attempts = 0;
      onOpen(opened, point);
      opened = true;
    });
    socket.addEventListener("message", (message) => {
      try {
        onUpdate(JSON.parse(message.data));
      } catch (error) {
        console.warn("a subscription message did not parse", error);
      }
    });
    socket.addEventListener("close", () => {
      if (closed) return;
      attempts += 1;
      setTimeout(connect, Math.min(500 * 2 ** attempts, 10000));
    });
  };
  connect();
  return {
    close() {
      closed = true;
      if (socket) socket.close();
    },
    get connected() {
      return socket !== null && socket.readyState === WebSocket.OPEN;
    },
  };
}
