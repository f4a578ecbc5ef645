// Signing in: the one-time login link `seed serve` prints leaves a token in localStorage (see
// login.js); a token minted by a signed POST /v1/tokens can be pasted here instead. The page
// replaces what `root` shows, and `onSignedIn` runs once the service accepts the token.

import * as api from "./api.js";
import { h } from "./transcript.js";

export function signInPage(root, onSignedIn, message) {
  document.title = "Seed · sign in";
  const input = h("input", {
    id: "token-input",
    type: "password",
    autocomplete: "off",
    placeholder: "Bearer token",
    "aria-label": "Token",
  });
  const error = h("div", { class: "signin-error", role: "alert" }, message || "");
  const form = h(
    "form",
    {
      id: "token-form",
      onsubmit: async (event) => {
        event.preventDefault();
        const value = input.value.trim();
        if (!value) return;
        api.setToken(value, null);
        try {
          await api.get("/v1/sessions?limit=1");
          onSignedIn();
        } catch (failure) {
          api.signOut();
          error.textContent = failure instanceof api.SignedOut ? "That token is unknown or expired." : failure.message;
        }
      },
    },
    input,
    h("button", { id: "token-submit", type: "submit" }, "Sign in"),
  );
  root.replaceChildren(
    h(
      "div",
      { class: "signin" },
      h("h1", {}, h("span", { class: "logo", "aria-hidden": "true" }, "◆"), " Seed"),
      h(
        "p",
        {},
        "Open the one-time login link that ",
        h("code", {}, "seed serve"),
        " printed, or paste a token minted by a signed ",
        h("code", {}, "POST /v1/tokens"),
        ".",
      ),
      form,
      error,
    ),
  );
}
