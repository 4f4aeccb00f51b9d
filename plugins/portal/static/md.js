// Markdown of a reply, rendered safely: the text is parsed here and built as DOM nodes, every
// piece of text a text node, so no HTML of the reply ever reaches the page (a tag shows as the
// text it is). Links go only to http(s) and mailto addresses. A small subset, no build step
// (decision 0031): fenced code blocks (with a Copy button), headings, lists, quotes, rules,
// paragraphs, `code`, **strong**, *emphasis* and [links](address).

import { h } from "./dom.js";

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s<>"]+$/i;

// Inline Markdown of one line as nodes: code first (nothing inside it is markup), then links,
// strong and emphasis.
function inline(text) {
  const out = [];
  // Delimiters hug their text (`** x**` is no emphasis); `_` never opens or closes inside a word.
  const pattern = new RegExp([
    /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source,
    /\[([^\]\n]+)\]\(([^()\s]+)\)/.source,
    /\*\*(\S|\S[^*\n]*?\S)\*\*/.source,
    /(?<![\w.])__(\S|\S[^_\n]*?\S)__(?!\w)/.source,
    /\*(\S|\S[^*\n]*?\S)\*/.source,
    /(?<![\w.])_(\S|\S[^_\n]*?\S)_(?!\w)/.source,
  ].join("|"), "g");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    const [whole, , code, label, url, strong, strong2, em, em2] = match;
    if (code !== undefined) out.push(h("code", { text: code }));
    else if (label !== undefined) {
      out.push(SAFE_URL.test(url)
        ? h("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, inline(label))
        : whole); // any other scheme (javascript:, data:) stays text
    } else if (strong !== undefined || strong2 !== undefined) out.push(h("strong", {}, inline(strong ?? strong2)));
    else out.push(h("em", {}, inline(em ?? em2)));
    last = match.index + whole.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// Lines joined inside a paragraph keep their breaks.
function lines(items) {
  const out = [];
  items.forEach((line, index) => {
    if (index) out.push(h("br"));
    out.push(inline(line));
  });
  return out;
}

// What a copy button with an id says after a click, until when: a redraw of its message in
// those two seconds (a reply's end, the conversation list) builds the button saying it still.
const said = new Map();

// The text for the copy button `id`: what a recent click said, or `label`.
export function copyLabel(id, label) {
  const recent = said.get(id);
  return recent && recent.until > Date.now() ? recent.text : label;
}

// Copy `text`, saying so on `button` for two seconds (its own text back after).
export async function copy(text, button) {
  const id = button.id;
  // Its own text: a button redrawn while it said "Copied" has it from the last click.
  const label = (id && said.get(id)?.label) || button.dataset.label || (button.dataset.label = button.textContent);
  let outcome;
  try {
    await navigator.clipboard.writeText(text);
    outcome = "Copied";
  } catch {
    outcome = "Copy failed: select the text";
  }
  const until = Date.now() + 2000;
  if (id) said.set(id, { text: outcome, label, until });
  button.textContent = outcome;
  setTimeout(() => {
    if (id && said.get(id)?.until === until) said.delete(id);
    const now = (id && document.getElementById(id)) || button;
    if (now.textContent === outcome) now.textContent = label;
  }, 2000);
}

function codeBlock(code, lang) {
  const button = h("button", { type: "button", class: "small copy", text: "Copy",
    "aria-label": lang ? `Copy the ${lang} code` : "Copy the code" });
  button.addEventListener("click", () => copy(code, button));
  return h("div", { class: "code-block" }, button,
    h("pre", {}, h("code", { text: code, dataset: lang ? { lang } : null })));
}

// The blocks of a text, as nodes for a container.
export function renderMarkdown(text) {
  const src = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let i = 0;
  while (i < src.length) {
    const line = src[i];
    const fence = line.match(/^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/);
    if (fence) { // a code block, to its closing fence or the end (a reply still streaming)
      const body = [];
      i += 1;
      while (i < src.length && !src[i].trim().startsWith(fence[1])) body.push(src[i++]);
      i += 1;
      blocks.push(codeBlock(body.join("\n"), fence[2]));
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = line.match(/^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) { // strong lines, not page headings: a reply does not change the page outline
      blocks.push(h("p", { class: "md-heading", dataset: { level: heading[1].length } }, h("strong", {}, inline(heading[2]))));
      i += 1;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      blocks.push(h("hr"));
      i += 1;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      const quoted = [];
      while (i < src.length && /^\s{0,3}>/.test(src[i])) quoted.push(src[i++].replace(/^\s{0,3}>\s?/, ""));
      blocks.push(h("blockquote", {}, renderMarkdown(quoted.join("\n"))));
      continue;
    }
    const item = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s{0,3}\d/.test(line);
      const first = ordered ? Number(line.match(/\d+/)[0]) : null;
      const entries = [];
      while (i < src.length && src[i].trim()) {
        if (item.test(src[i]) && /^\s{0,3}\d/.test(src[i]) === ordered) entries.push([src[i].replace(item, "")]);
        else if (entries.length && /^\s+\S/.test(src[i])) entries[entries.length - 1].push(src[i].trim());
        else break;
        i += 1;
      }
      blocks.push(h(ordered ? "ol" : "ul", { start: ordered && first !== 1 ? first : null },
        entries.map((e) => h("li", {}, lines(e)))));
      continue;
    }
    const para = [];
    while (i < src.length && src[i].trim() && !/^\s{0,3}(`{3,}|~{3,}|#{1,6}\s|>)/.test(src[i]) && !(para.length && item.test(src[i]))) {
      para.push(src[i++]);
    }
    blocks.push(h("p", {}, lines(para)));
  }
  return blocks;
}
