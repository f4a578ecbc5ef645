// The one-time login page: moves the token its meta tags carry into localStorage, then opens
// the UI (the page itself runs no inline script).

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.getAttribute("content");
const token = meta("seed.token");
if (token) {
  localStorage.setItem("seed.token", token);
  localStorage.setItem("seed.token_expires_at_ms", meta("seed.token_expires_at_ms") || "");
  location.replace("/");
}
