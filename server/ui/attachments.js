// The composer's attachments: an Attach button (a file picker) and files dropped onto the
// composer, shown as removable chips until the message is sent; `upload` sends them, and the
// message names the ids the service gave them. Names go into the page as text nodes only.

import * as api from "./api.js";
import { attachmentChip, h } from "./transcript.js";

export class AttachmentTray {
  /** `composer`: the element files may be dropped onto. */
  constructor(composer) {
    this.items = []; // { file, id }: id once uploaded
    this.chips = h("div", { class: "composer-attachments", id: "composer-attachments" });
    this.picker = h("input", {
      type: "file",
      id: "attach-input",
      multiple: true,
      hidden: true,
      onchange: () => {
        this.add(this.picker.files);
        this.picker.value = "";
      },
    });
    this.button = h(
      "button",
      { type: "button", id: "attach", title: "Attach files (or drop them here)", onclick: () => this.picker.click() },
      "Attach",
    );
    composer.addEventListener("dragover", (event) => {
      if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes("Files")) return;
      event.preventDefault();
      composer.classList.add("dropping");
    });
    composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
    composer.addEventListener("drop", (event) => {
      composer.classList.remove("dropping");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      this.add(event.dataTransfer.files);
    });
  }

  /** Adds files (a FileList or an array of File) to the next message. */
  add(files) {
    for (const file of Array.from(files || [])) this.items.push({ file, id: null });
    this.render();
  }

  remove(item) {
    this.items = this.items.filter((kept) => kept !== item);
    this.render();
  }

  render() {
    this.chips.replaceChildren(
      ...this.items.map((item) =>
        attachmentChip({ name: item.file.name, size_bytes: item.file.size }, { onRemove: () => this.remove(item) }),
      ),
    );
    this.chips.hidden = this.items.length === 0;
  }

  /** Whether a message would carry files. */
  get pending() {
    return this.items.length > 0;
  }

  /**
   * Uploads the files not uploaded yet to the session, in order, and returns the ids of all of
   * them. A failed upload throws; what was uploaded keeps its id, so a second try sends only
   * the rest. The tray keeps them until the message takes them.
   */
  async upload(sessionId) {
    for (const item of this.items) {
      if (item.id === null) item.id = (await api.upload(sessionId, item.file)).id;
    }
    return this.items.map((item) => item.id);
  }

  /** Takes every file out of the tray (to go with a message); returns them. */
  take() {
    const taken = this.items;
    this.items = [];
    this.render();
    return taken;
  }

  /** Puts files taken out back in front of any added since. */
  restore(taken) {
    this.items = [...taken, ...this.items];
    this.render();
  }
}
