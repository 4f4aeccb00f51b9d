// Small DOM helpers and the editable field rows shared by Settings and the agent editor.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// What the page on screen has not saved: an editor sets `leaving.unsaved` (a function saying
// whether there are unsaved edits), and the app asks before the page is left.
export const leaving = { unsaved: null };

let counter = 0;
export const uid = (prefix = "f") => `${prefix}-${++counter}`;

export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  if (!box) return;
  box.textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  clearTimeout(box._timer);
  box._timer = setTimeout(() => {
    box.hidden = true;
  }, 6000);
}

export function errorText(error) {
  if (!error) return "";
  const fields = error.fields && Object.keys(error.fields).length
    ? ": " + Object.entries(error.fields).map(([k, v]) => `${k}: ${v}`).join("; ")
    : "";
  return `${error.message}${fields}`;
}

// "config.yaml:3:5" -> "config.yaml line 3"; an environment variable; "default".
export function sourceText(location) {
  if (!location) return "default";
  if (location.startsWith("environment variable ")) return `environment (${location.slice(21)})`;
  const match = location.match(/^(.*?):(\d+)(?::\d+)?$/);
  return match ? `${match[1]} line ${match[2]}` : location;
}

export function valueText(value) {
  if (value === null || value === undefined) return "not set";
  if (Array.isArray(value)) return value.length ? value.join(", ") : "(none)";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// A view switch: Everyday / Advanced, as two toggle buttons (keyboard and screen readers).
export function viewSwitch(current, onChange) {
  const group = h("div", { class: "views", role: "group", "aria-label": "View" });
  for (const [view, label] of [["everyday", "Everyday"], ["advanced", "Advanced"]]) {
    const button = h("button", {
      type: "button",
      dataset: { view },
      "aria-pressed": String(view === current),
      text: label,
    });
    button.addEventListener("click", () => {
      for (const b of group.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
      onChange(view);
    });
    group.append(button);
  }
  return group;
}

// Show the sections of a view: Everyday sections always, Advanced ones in Advanced only. The
// fields stay in the page either way, so pending edits and saved overrides are never lost.
export function applyView(root, view) {
  root.dataset.view = view;
  for (const section of root.querySelectorAll("[data-level='advanced']")) section.hidden = view !== "advanced";
}

class Invalid extends Error {}

function shown(type, value) {
  if (value === null || value === undefined) return "";
  if (type === "list") return Array.isArray(value) ? value.join("\n") : String(value);
  return String(value);
}

// One editable value: its row (label, input, meaning, source) and what it reads back.
export class Field {
  constructor(desc, original, { source, note, onInput } = {}) {
    this.desc = desc;
    this.key = desc.key;
    this.original = original === undefined ? null : original;
    const id = uid("field");
    const described = [];
    const help = desc.help ? h("p", { class: "help", id: `${id}-help`, text: desc.help }) : null;
    if (help) described.push(help.id);
    const sourceLine = source !== undefined
      ? h("p", { class: "source", id: `${id}-src` }, `Source: ${sourceText(source)}`, note ? ` · ${note}` : "")
      : null;
    if (sourceLine) described.push(sourceLine.id);
    this.error = h("p", { class: "error", id: `${id}-err`, hidden: true, role: "alert" });
    described.push(this.error.id);
    const common = { id, name: desc.key, "aria-describedby": described.join(" "), dataset: { key: desc.key } };
    const type = desc.type;
    if (type === "bool") {
      this.input = h("input", { ...common, type: "checkbox", disabled: desc.readonly });
      this.input.checked = Boolean(this.original);
    } else if (type === "select") {
      this.input = h("select", { ...common, disabled: desc.readonly },
        desc.options.map(([value, label]) => h("option", { value, text: label })));
      this.input.value = this.original === null ? "" : String(this.original);
    } else if (type === "textarea" || type === "list") {
      this.input = h("textarea", { ...common, rows: desc.rows || (type === "list" ? 4 : 6), readonly: desc.readonly });
      this.input.value = shown(type, this.original);
    } else {
      const numeric = type === "int" || type === "number";
      this.input = h("input", {
        ...common,
        type: numeric ? "number" : "text",
        inputmode: type === "int" ? "numeric" : type === "number" ? "decimal" : null,
        step: type === "int" ? "1" : type === "number" ? "any" : null,
        min: desc.min,
        placeholder: desc.placeholder,
        list: desc.datalist ? `${id}-list` : null,
        readonly: desc.readonly,
        autocomplete: "off",
        spellcheck: "false",
      });
      this.input.value = shown(type, this.original);
    }
    const datalist = desc.datalist
      ? h("datalist", { id: `${id}-list` }, desc.datalist.map((v) => h("option", { value: v })))
      : null;
    const label = h("label", { for: id, text: desc.label });
    const control = type === "bool"
      ? h("div", { class: "check" }, this.input, label)
      : [label, this.input];
    this.element = h("div", { class: `field${desc.readonly ? " readonly" : ""}`, dataset: { key: desc.key } },
      control, datalist, help, sourceLine, this.error);
    if (onInput) {
      this.input.addEventListener("input", onInput);
      this.input.addEventListener("change", onInput);
    }
    // What the control showed when loaded, and the value it read as then: a field the person
    // has not touched is never a change, however the saved value is spelled (Go's "" for an
    // unset string reads as empty, as a missing key does).
    this.initial = this.state();
    try {
      this.loaded = this.comparable(this.read());
    } catch {
      this.loaded = null; // not readable as loaded: any readable value is a change
    }
  }

  state() {
    if (this.desc.type === "bool") return this.input.checked;
    // Text typed into a number field reads as "" to scripts: it is a change all the same.
    if (this.input.validity && this.input.validity.badInput) return "\u0000not a number";
    return this.input.value;
  }

  read() {
    const { type, nullable } = this.desc;
    if (type === "bool") return this.input.checked;
    if (type === "list") {
      const items = this.input.value.split("\n").map((s) => s.trim()).filter(Boolean);
      return items.length || !nullable ? items : null;
    }
    const raw = type === "textarea" ? this.input.value : this.input.value.trim();
    if (this.input.validity && this.input.validity.badInput) {
      throw new Invalid(type === "int" ? "a whole number is expected" : "a number is expected");
    }
    if (raw === "") {
      if (nullable || type === "text" || type === "textarea") return nullable ? null : "";
      throw new Invalid("a value is required");
    }
    if (type === "int") {
      if (!/^-?[0-9]+$/.test(raw)) throw new Invalid("expected a whole number");
      const value = Number(raw);
      if (this.desc.min !== undefined && value < this.desc.min) throw new Invalid(`expected ${this.desc.min} or more`);
      return value;
    }
    if (type === "number") {
      const value = Number(raw);
      if (!Number.isFinite(value)) throw new Invalid("expected a number");
      if (this.desc.min !== undefined && value < this.desc.min) throw new Invalid(`expected ${this.desc.min} or more`);
      return value;
    }
    return raw;
  }

  comparable(value) {
    if (value === undefined) return "null";
    if (this.desc.type === "select" && value === "" && this.desc.nullable) return "null";
    return JSON.stringify(value);
  }

  // Changed: the person changed what the control shows, to a value other than the loaded one.
  changed() {
    if (this.desc.readonly || this.state() === this.initial) return false;
    try {
      return this.comparable(this.read()) !== this.loaded;
    } catch {
      return true;
    }
  }

  setError(message) {
    this.error.textContent = message || "";
    this.error.hidden = !message;
    this.input.setAttribute("aria-invalid", message ? "true" : "false");
  }
}

// The fields of one page: which changed, and their values (only those are saved).
export class FieldSet {
  constructor(onChange) {
    this.fields = new Map();
    this.onChange = onChange;
  }

  add(desc, original, options = {}) {
    const field = new Field(desc, original, { ...options, onInput: () => this.onChange && this.onChange() });
    this.fields.set(desc.key, field);
    return field;
  }

  changed() {
    return [...this.fields.values()].filter((f) => f.changed());
  }

  // {key: value} of the changed fields, or null with the errors shown beside the fields.
  changes() {
    const out = {};
    let ok = true;
    for (const field of this.changed()) {
      try {
        out[field.key] = field.read();
        field.setError("");
      } catch (error) {
        field.setError(error.message);
        ok = false;
      }
    }
    return ok ? out : null;
  }

  // The server's errors beside their fields; returns those it could not place, {key: message}.
  showErrors(fields) {
    const unplaced = {};
    for (const [key, message] of Object.entries(fields || {})) {
      const name = key.replace(/^changes\./, "");
      const field = this.fields.get(name) || [...this.fields.values()].find((f) => name.startsWith(f.key + "."));
      if (field) field.setError(field.error.hidden ? message : `${field.error.textContent}; ${message}`);
      else unplaced[key] = message;
    }
    return unplaced;
  }

  // The fields showing an error, in the page's order.
  invalid() {
    return [...this.fields.values()]
      .filter((f) => !f.error.hidden)
      .sort((a, b) => (a.element.compareDocumentPosition(b.element) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
  }

  clearErrors() {
    for (const field of this.fields.values()) field.setError("");
  }
}

// A dotted path of a nested object: at(config, "runtime.timeouts.run").
export function at(data, path) {
  let node = data;
  for (const part of path.split(".")) {
    if (node === null || node === undefined || typeof node !== "object" || !(part in node)) return undefined;
    node = node[part];
  }
  return node;
}

// {"llm.model": "x", "budget.max_tokens": null} -> {llm: {model: "x"}, budget: {max_tokens: null}}
export function nested(flat) {
  const out = {};
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) node = node[part] = node[part] || {};
    node[parts[parts.length - 1]] = value;
  }
  return out;
}

export function formatTime(seconds) {
  if (!seconds) return "";
  return new Date(seconds * 1000).toLocaleString();
}

// A resolved limit ({value, unlimited, source, location, reason, text}) as text.
export function limitText(limit) {
  if (!limit) return "";
  if (limit.unlimited) return "unlimited";
  return limit.text || String(limit.value);
}

// After a refused save: every invalid field named in the status line, and the first one shown
// (its section's view chosen) and focused, scrolled to the middle of the window so that the
// sticky save bar never covers it.
export function revealErrors(form, fields, status, unplaced = {}) {
  const invalid = fields.invalid();
  const names = invalid.map((f) => f.desc.label);
  const others = Object.entries(unplaced).map(([k, v]) => `${k.replace(/^changes\./, "")}: ${v}`);
  const count = invalid.length + others.length;
  status.textContent = `Not saved: ${count} value${count === 1 ? " is" : "s are"} not valid` +
    `${names.length ? ` (${names.join(", ")})` : ""}${others.length ? `; ${others.join("; ")}` : ""}. Nothing was saved.`;
  const first = invalid[0];
  if (!first) return;
  const section = first.element.closest("[data-level='advanced']");
  if (section && section.hidden) {
    const button = form.closest("main").querySelector(".views button[data-view='advanced']");
    if (button) button.click();
  }
  first.input.focus({ preventScroll: true });
  first.element.scrollIntoView({ block: "center" });
}
