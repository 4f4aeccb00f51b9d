// The portal: one page, four views chosen by the address's #fragment. No framework, no build:
// plain ES modules served by the portal plugin (docs/portal.md).

import { apiKey, get, setApiKey } from "./api.js";
import { renderAgents, renderEditor } from "./agents.js";
import { renderChat } from "./chat.js";
import { renderRuns, renderTimeline } from "./runs.js";
import { renderSettings } from "./settings.js";
import { leaving } from "./dom.js";

const main = document.getElementById("main");
const dialog = document.getElementById("key-dialog");

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "chat";
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  return { page: parts[0], rest: parts.slice(1), params: new URLSearchParams(query) };
}

let shownHash = location.hash; // the address of the page on screen
let returning = false; // the hashchange of putting that address back

async function show() {
  leaving.unsaved = null; // the page being replaced had its chance to ask
  shownHash = location.hash;
  const { page, rest, params } = route();
  for (const link of document.querySelectorAll("nav a[data-page]")) {
    if (link.dataset.page === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const titles = { chat: "Chat", agents: "Agents", runs: "Runs", settings: "Settings" };
  document.title = `${titles[page] || "Soulacy"} · Soulacy`;
  if (page === "settings") await renderSettings(main);
  else if (page === "agents" && rest[0]) await renderEditor(main, rest[0]);
  else if (page === "agents") await renderAgents(main);
  else if (page === "runs" && rest[0]) await renderTimeline(main, rest[0]);
  else if (page === "runs") await renderRuns(main);
  else await renderChat(main, params);
}

// Who the key is (GET /whoami): the principal, and whether it is an admin.
async function showWho() {
  const who = document.getElementById("who");
  try {
    const me = await get("/whoami");
    who.textContent = `${me.principal}${me.admin ? " · admin" : ""}${me.sees_everything && !apiKey() ? " (no keys: loopback only)" : ""}`;
    who.title = me.admin ? "This key's principal is an admin (server.admins)" : "This key's principal is not an admin";
  } catch {
    who.textContent = apiKey() ? "key not accepted" : "no key";
    who.removeAttribute("title");
  }
}

document.getElementById("key-button").addEventListener("click", () => {
  document.getElementById("key-input").value = "";
  dialog.showModal();
});
dialog.addEventListener("close", () => {
  if (dialog.returnValue === "save") {
    setApiKey(document.getElementById("key-input").value.trim(), document.getElementById("key-remember").checked);
  } else if (dialog.returnValue === "forget") {
    setApiKey("", false);
  }
});
window.addEventListener("soulacy:unauthorized", () => {
  if (!dialog.open) dialog.showModal();
});
window.addEventListener("soulacy:key", () => {
  showWho();
  show();
});
// Leaving a page with unsaved edits asks first: discard them, or stay (the address goes back).
const leaveDialog = document.getElementById("leave-dialog");
leaveDialog.addEventListener("close", () => {
  if (leaveDialog.returnValue === "discard") {
    leaving.unsaved = null;
    go();
  } else if (location.hash !== shownHash) {
    returning = true;
    location.hash = shownHash;
  }
});
window.addEventListener("beforeunload", (event) => {
  if (leaving.unsaved && leaving.unsaved()) {
    event.preventDefault();
    event.returnValue = "";
  }
});

function go() {
  show();
  main.focus({ preventScroll: true });
}

window.addEventListener("hashchange", () => {
  if (returning) {
    returning = false;
    return;
  }
  if (leaving.unsaved && leaving.unsaved()) {
    leaveDialog.returnValue = "";
    if (!leaveDialog.open) leaveDialog.showModal();
    return;
  }
  go();
});
showWho();
show();
