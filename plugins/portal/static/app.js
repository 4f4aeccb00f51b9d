// The portal: one page, four views chosen by the address's #fragment. No framework, no build:
// plain ES modules served by the portal plugin (docs/portal.md).

import { apiKey, setApiKey } from "./api.js";
import { renderAgents, renderEditor } from "./agents.js";
import { renderChat } from "./chat.js";
import { renderRuns } from "./runs.js";
import { renderSettings } from "./settings.js";

const main = document.getElementById("main");
const dialog = document.getElementById("key-dialog");

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "chat";
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  return { page: parts[0], rest: parts.slice(1), params: new URLSearchParams(query) };
}

async function show() {
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
  else if (page === "runs") await renderRuns(main);
  else await renderChat(main, params);
}

function showWho() {
  document.getElementById("who").textContent = apiKey() ? "key set" : "";
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
window.addEventListener("hashchange", () => {
  show();
  main.focus({ preventScroll: true });
});
showWho();
show();
