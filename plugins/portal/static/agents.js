// Agents: the list, a new agent, and the editor (Everyday: purpose, model, tools, permissions;
// Advanced: limits, reasoning, tuning, outcome assertions, schedule) with the resolved policy
// beside the fields. Saving sends the changed fields only (PATCH /agents/{id}); the server edits
// SOUL.yaml in place, so comments and every key the editor does not show stay.

import { ApiError, api, get } from "./api.js";
import {
  FieldSet, applyView, at, errorText, h, leaving, limitText, nested, revealErrors, sourceText, toast, valueText, viewSwitch,
} from "./dom.js";

const OPERATORS = ["eq", "ne", "gt", "ge", "lt", "le", "contains", "not_contains", "matches", "in", "exists", "truthy"];

// The resolved policy's limits, in the order shown, with a label each.
const POLICY_ROWS = [
  ["max_turns", "Turns"], ["max_tokens", "Tokens per run"], ["max_llm_calls", "Model calls per run"],
  ["max_output_tokens", "Output tokens per response"], ["run_timeout", "Run timeout"],
  ["http_timeout", "HTTP timeout"], ["llm_timeout", "Model call timeout"], ["step_timeout", "Step timeout"],
  ["tool_timeout", "Tool timeout"], ["no_progress_limit", "No-progress limit"],
  ["reasoning_max_steps", "Reasoning steps"], ["reasoning_step_timeout", "Reasoning step timeout"],
  ["reasoning_total_timeout", "Reasoning total timeout"], ["context_window", "Context window"],
];

export async function renderAgents(main) {
  main.replaceChildren(h("h1", { text: "Agents" }), h("p", { class: "loading", text: "Loading…" }));
  let agents;
  try {
    ({ agents } = await get("/agents"));
  } catch (error) {
    main.replaceChildren(h("h1", { text: "Agents" }), h("p", { class: "notice", role: "alert", text: errorText(error) }));
    return;
  }
  const list = agents.length
    ? h("ul", { class: "agents" }, agents.map((a) => h("li", {},
      h("a", { href: `#/agents/${encodeURIComponent(a.id)}` }, h("strong", { text: a.name || a.id })),
      a.name && a.name !== a.id ? h("span", { class: "muted", text: ` (${a.id})` }) : "",
      a.enabled ? "" : h("span", { class: "badge", text: "disabled" }),
      a.description ? h("p", { class: "help", text: a.description }) : "")))
    : h("p", { class: "note", text: "No agents yet." });
  main.replaceChildren(h("h1", { text: "Agents" }), list, newAgentForm());
}

function newAgentForm() {
  const status = h("p", { class: "save-status", role: "status" });
  const id = h("input", { id: "new-id", name: "id", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]{0,63}",
    autocomplete: "off", spellcheck: "false", "aria-describedby": "new-id-help" });
  const name = h("input", { id: "new-name", name: "name", autocomplete: "off" });
  const description = h("input", { id: "new-description", name: "description", autocomplete: "off" });
  const provider = h("input", { id: "new-provider", name: "provider", autocomplete: "off", spellcheck: "false",
    "aria-describedby": "new-provider-help" });
  const form = h("form", { class: "card new-agent", "aria-labelledby": "new-agent-title" },
    h("h2", { id: "new-agent-title", text: "New agent" }),
    h("p", { class: "note", text: "A new agent starts with the workspace provider and its default model, inherits the " +
      "turn and output allowances of the workspace, and leaves nucleus sampling (top_p) to the provider." }),
    h("div", { class: "field" }, h("label", { for: "new-id", text: "Agent id" }), id,
      h("p", { class: "help", id: "new-id-help", text: "Letters, digits, - and _; the folder agents/ID/." })),
    h("div", { class: "field" }, h("label", { for: "new-name", text: "Name" }), name),
    h("div", { class: "field" }, h("label", { for: "new-description", text: "Description" }), description),
    h("div", { class: "field" }, h("label", { for: "new-provider", text: "Provider" }), provider,
      h("p", { class: "help", id: "new-provider-help", text: "Empty: the workspace provider (Settings). The scripted " +
        "provider starts the agent with a script of its own (agents/ID/script.yaml) that answers in place of a model." })),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", text: "Create agent" }), status));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const agentId = id.value.trim();
    const body = {};
    if (name.value.trim()) body.name = name.value.trim();
    if (description.value.trim()) body.description = description.value.trim();
    if (provider.value.trim()) body.llm = { provider: provider.value.trim() };
    status.textContent = "Creating…";
    try {
      await api("PUT", `/agents/${encodeURIComponent(agentId)}`, body);
      toast(`Created agent ${agentId}`, "ok");
      location.hash = `#/agents/${encodeURIComponent(agentId)}`;
    } catch (error) {
      status.textContent = error instanceof ApiError && error.status === 403
        ? "Creating agents needs an admin principal (server.admins)."
        : `Not created: ${errorText(error)}`;
    }
  });
  return form;
}

function section(title, level, ...children) {
  const id = `sec-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
  return h("section", { class: "card", "aria-labelledby": id, dataset: { level } }, h("h2", { id, text: title }), children);
}

export async function renderEditor(main, agentId, view = "everyday") {
  main.replaceChildren(h("h1", { text: `Agent ${agentId}` }), h("p", { class: "loading", text: "Loading…" }));
  let agent;
  try {
    agent = await get(`/agents/${encodeURIComponent(agentId)}`);
  } catch (error) {
    const text = error instanceof ApiError && error.status === 403
      ? "Editing agents needs an admin principal (server.admins)."
      : errorText(error);
    main.replaceChildren(h("h1", { text: `Agent ${agentId}` }), h("p", { class: "notice", role: "alert", text }),
      h("p", {}, h("a", { href: "#/agents", text: "All agents" })));
    return;
  }
  const state = { view };
  const doc = agent.document;
  const set = agent.set;
  const pending = h("p", { class: "pending", "aria-live": "polite" });
  const fields = new FieldSet(() => updatePending());

  const add = (desc) => {
    const source = set[desc.key] ?? (Object.keys(set).some((k) => k.startsWith(desc.key + ".")) ? agent.file : undefined);
    const saved = at(doc, desc.key);
    const original = saved === undefined && desc.fallback !== undefined ? desc.fallback : saved;
    return fields.add(desc, original, { source: source ?? null, note: source ? null : desc.inherits }).element;
  };

  // Tools: the ones plugins offer, as checkboxes, and any other entries (file.py:function).
  // A list holding the original system's tool definitions ({name, python_file, ...}) is shown,
  // not edited: the editor writes names only, and would lose the definitions.
  const listed = Array.isArray(doc.tools) ? doc.tools : [];
  const definitions = listed.some((t) => typeof t !== "string");
  const offered = new Set(agent.tools_available.map((t) => t.name));
  const toolBoxes = agent.tools_available.map((tool) => {
    const box = h("input", { type: "checkbox", id: `tool-${tool.name}`, value: tool.name, dataset: { tool: tool.name },
      disabled: definitions });
    box.checked = listed.includes(tool.name);
    box.addEventListener("change", () => updatePending());
    return h("li", { class: "check" }, box, h("label", { for: box.id }, h("code", { text: tool.name }),
      tool.description ? ` — ${tool.description}` : ""));
  });
  const otherTools = h("textarea", { id: "tools-other", rows: 3, "aria-describedby": "tools-other-help", readonly: definitions });
  otherTools.value = listed.filter((t) => !offered.has(t))
    .map((t) => (typeof t === "string" ? t : `${t.name} (defined in SOUL.yaml)`)).join("\n");
  otherTools.addEventListener("input", () => updatePending());
  const readTools = () => {
    if (definitions) return listed;
    const chosen = [...main.querySelectorAll("input[data-tool]")].filter((b) => b.checked).map((b) => b.value);
    const others = otherTools.value.split("\n").map((s) => s.trim()).filter(Boolean);
    const all = [...chosen, ...others];
    // The saved order stays when the same entries are chosen.
    const same = all.length === listed.length && all.every((t) => listed.includes(t));
    return same ? listed : all;
  };
  const toolsChanged = () => JSON.stringify(readTools()) !== JSON.stringify(listed);

  // Outcome assertions: a list edited as a whole.
  const assertions = (at(doc, "outcome.assertions") || []).map((a) => ({ ...a }));
  const assertionList = h("ol", { class: "assertions" });
  const renderAssertions = () => {
    assertionList.replaceChildren(...assertions.map((a, index) => assertionRow(a, index)));
    updatePending();
  };
  const assertionRow = (a, index) => {
    const target = h("input", { "aria-label": `Assertion ${index + 1} target`, value: a.target || "" });
    const op = h("select", { "aria-label": `Assertion ${index + 1} operator` }, OPERATORS.map((o) => h("option", { value: o, text: o })));
    op.value = a.op || "eq";
    const value = h("input", { "aria-label": `Assertion ${index + 1} value (JSON or text)`,
      value: a.value === undefined || a.value === null ? "" : typeof a.value === "string" ? a.value : JSON.stringify(a.value) });
    const describe = h("input", { "aria-label": `Assertion ${index + 1} description`, value: a.describe || "" });
    const update = () => {
      a.target = target.value;
      a.op = op.value;
      a.describe = describe.value;
      const raw = value.value.trim();
      if (raw === "") a.value = null;
      else {
        try {
          a.value = JSON.parse(raw);
        } catch {
          a.value = value.value;
        }
      }
      updatePending();
    };
    for (const input of [target, op, value, describe]) input.addEventListener("input", update);
    const remove = h("button", { type: "button", text: "Remove", "aria-label": `Remove assertion ${index + 1}` });
    remove.addEventListener("click", () => {
      assertions.splice(index, 1);
      renderAssertions();
    });
    return h("li", { class: "assertion" }, target, op, value, describe, remove);
  };
  const cleanAssertions = () => assertions.map((a) => {
    const out = { target: a.target, op: a.op || "eq" };
    if (a.value !== null && a.value !== undefined) out.value = a.value;
    if (a.describe) out.describe = a.describe;
    return out;
  });
  const assertionsChanged = () => JSON.stringify(cleanAssertions()) !== JSON.stringify(
    (at(doc, "outcome.assertions") || []).map((a) => {
      const out = { target: a.target, op: a.op || "eq" };
      if (a.value !== null && a.value !== undefined) out.value = a.value;
      if (a.describe) out.describe = a.describe;
      return out;
    }));
  const addAssertion = h("button", { type: "button", text: "Add assertion" });
  addAssertion.addEventListener("click", () => {
    assertions.push({ target: "reply", op: "contains", value: "", describe: "" });
    renderAssertions();
  });

  const permissions = Object.entries(agent.permissions || {});
  const implemented = agent.implemented_by || {};
  const inEffect = Object.entries(agent.permissions_in_effect || {}).filter(([k]) => k !== "confirm_tools");
  const kept = agent.kept || [];
  const form = h("form", { class: "editor", novalidate: true },
    section("Purpose", "everyday",
      add({ key: "name", label: "Name", type: "text", nullable: true }),
      add({ key: "description", label: "Description", type: "text", nullable: true }),
      add({ key: "system_prompt", label: "System prompt", type: "textarea", nullable: true, rows: 8 })),
    section("Model", "everyday",
      add({ key: "llm.provider", label: "Provider", type: "text", nullable: true,
        help: "Empty: the workspace provider (llm.default.provider).", inherits: "inherits the workspace provider" }),
      add({ key: "llm.model", label: "Model", type: "text", nullable: true,
        help: "Empty: the provider's model, then the workspace default model.", inherits: "inherits" })),
    section("Tools", "everyday",
      h("p", { class: "note", text: "The agent is offered exactly the tools listed here." }),
      definitions
        ? h("p", { class: "note", text: "This list holds tool definitions in the original system's form: edit it in SOUL.yaml." })
        : null,
      toolBoxes.length ? h("ul", { class: "tools" }, toolBoxes) : h("p", { class: "note", text: "No plugin offers tools by name." }),
      h("div", { class: "field" }, h("label", { for: "tools-other", text: "Other entries (one per line)" }), otherTools,
        h("p", { class: "help", id: "tools-other-help", text: "Such as file.py:function, a Python function in a file beside SOUL.yaml." }))),
    section("Permissions", "everyday",
      add({ key: "enabled", label: "Enabled (runs and schedules may use it)", type: "bool", fallback: true }),
      h("p", { class: "note", text: "What the agent may do is its tool list above; the workspace's budgets, quotas and ceilings apply to every run." }),
      implemented.confirm_tools
        ? add({ key: "confirm_tools", label: "Tools that wait for approval", type: "list", nullable: true, rows: 3,
          help: "One tool name per line. Every call of a listed tool pauses its run until a person approves or denies it " +
            "(in Chat, or soulacy runs approve|deny). Empty: no call waits.", inherits: "no call waits" })
        : null,
      inEffect.length
        ? h("div", { class: "in-effect" },
          h("p", { text: "Permission keys in this file that loaded plugins implement, in effect (edit them in SOUL.yaml):" }),
          h("ul", {}, inEffect.map(([k, v]) => h("li", {}, h("code", { text: k }), ": ", h("code", { text: valueText(v) }),
            ` (the ${implemented[k]} plugin)`))))
        : null,
      permissions.length
        ? h("div", { class: "kept" },
          h("p", { text: "Permission keys of the original system in this file that no loaded plugin implements, kept with no effect:" }),
          h("ul", {}, permissions.map(([k, v]) => h("li", {}, h("code", { text: k }), ": ", h("code", { text: valueText(v) })))))
        : null),
    section("Limits", "advanced",
      h("p", { class: "note", text: "No fixed ceilings here: empty inherits the workspace value; the workspace ceilings still apply." }),
      h("div", { class: "grid", id: "limits" },
        add({ key: "max_turns", label: "Max turns", type: "int", min: -1, nullable: true,
          help: "Empty or 0 inherits the workspace value; -1 requests unlimited turns.", inherits: "inherits" }),
        add({ key: "budget.max_tokens", label: "Budget: tokens per run", type: "int", min: 0, nullable: true,
          help: "Empty inherits the workspace default; 0 requests unlimited tokens.", inherits: "inherits" }),
        add({ key: "budget.max_llm_calls", label: "Budget: model calls per run", type: "int", min: 0, nullable: true,
          help: "Empty inherits; 0 requests unlimited calls.", inherits: "inherits" }),
        add({ key: "run_timeout", label: "Run timeout", type: "duration", nullable: true,
          help: 'Empty inherits; "0" requests no deadline. Such as 90s, 15m, 2h.', inherits: "inherits" }),
        add({ key: "llm.max_tokens", label: "Output tokens per response", type: "int", min: 0, nullable: true,
          help: "Empty or 0 inherits the workspace allowance; model capacity still applies.", inherits: "inherits" }),
        add({ key: "no_progress_limit", label: "No-progress limit", type: "int", min: 0, nullable: true,
          help: "Empty inherits; 0 disables stall detection for jobs with expected repeats.", inherits: "inherits" }))),
    section("Reasoning", "advanced",
      h("div", { class: "grid" },
        add({ key: "reasoning.strategy", label: "Strategy", type: "select", nullable: true,
          options: [["", "classic tool loop"], ["react", "react"], ["plan_execute", "plan_execute"]] }),
        add({ key: "reasoning.max_steps", label: "Reasoning steps", type: "int", min: -1, nullable: true,
          help: "Empty inherits the turn allowance; -1 is unlimited; the turn ceiling still caps it.", inherits: "inherits" }),
        add({ key: "reasoning.step_timeout", label: "Reasoning step timeout", type: "duration", nullable: true, inherits: "inherits" }),
        add({ key: "reasoning.total_timeout", label: "Reasoning total timeout", type: "duration", nullable: true, inherits: "inherits" }))),
    section("Model tuning", "advanced",
      h("div", { class: "grid" },
        add({ key: "llm.temperature", label: "Temperature", type: "number", min: 0, nullable: true,
          help: "0 to 2; empty leaves it to the provider.", inherits: "left to the provider" }),
        add({ key: "llm.top_p", label: "Nucleus sampling (top_p)", type: "number", min: 0, nullable: true,
          help: "0 to 1; empty leaves it to the provider.", inherits: "left to the provider" }),
        add({ key: "llm.tool_choice", label: "Tool choice", type: "text", nullable: true, inherits: "left to the provider" }))),
    section("Outcome assertions", "advanced",
      h("p", { class: "note", text: "Checked after a completed run: all hold, verified; one fails, verification failed. " +
        "With none, a completed run is explicitly unverified." }),
      assertionList, addAssertion,
      add({ key: "outcome.enforce", label: "When an assertion fails", type: "select", fallback: "report",
        options: [["report", "report it (status stays completed)"], ["fail", "fail the run (outcome_failed)"]] })),
    section("Schedule", "advanced",
      doc.schedule
        ? h("dl", { class: "pairs" }, Object.entries(doc.schedule).map(([k, v]) => [h("dt", { text: k }), h("dd", { text: valueText(v) })]))
        : h("p", { class: "note", text: "No schedule." }),
      h("p", { class: "note", text: "Edit schedule: in SOUL.yaml; the scheduler reads it when soulacy serve starts." })),
    kept.length
      ? section("Kept keys", "advanced", h("p", { class: "note", text: "Keys of the original system in this file that no loaded plugin implements: kept, shown, never changed." }),
        h("ul", {}, kept.map((k) => h("li", {}, h("code", { text: k.path }), ` (${sourceText(k.location)})`))))
      : null,
  );
  const save = h("button", { type: "submit", class: "primary", text: "Save agent" });
  const status = h("p", { class: "save-status", role: "status" });
  form.append(h("div", { class: "actions" }, pending, save, status));
  renderAssertions();

  function collect() {
    const flat = fields.changes();
    if (flat === null) return null;
    if (toolsChanged()) flat.tools = readTools();
    if (assertionsChanged()) flat["outcome.assertions"] = cleanAssertions();
    return nested(flat);
  }

  function unsaved() {
    return fields.changed().length + (toolsChanged() ? 1 : 0) + (assertionsChanged() ? 1 : 0);
  }
  leaving.unsaved = () => main.contains(form) && unsaved() > 0;

  function updatePending() {
    const count = unsaved();
    pending.textContent = count ? `${count} unsaved change${count === 1 ? "" : "s"}` : "No unsaved changes";
    save.disabled = count === 0;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fields.clearErrors();
    const changes = collect();
    if (changes === null) {
      revealErrors(form, fields, status);
      return;
    }
    save.disabled = true;
    status.textContent = "Saving…";
    try {
      const answer = await api("PATCH", `/agents/${encodeURIComponent(agentId)}`, { changes });
      toast(`Saved ${agentId}: ${answer.changed.join(", ") || "nothing changed"}`, "ok");
      await renderEditor(main, agentId, state.view);
      const line = main.querySelector(".save-status");
      if (line) line.textContent = `Saved: ${answer.changed.join(", ") || "nothing changed"}.`;
    } catch (error) {
      if (error instanceof ApiError && Object.keys(error.fields).length) {
        revealErrors(form, fields, status, fields.showErrors(error.fields));
      } else {
        status.textContent = `Not saved: ${errorText(error)}`;
      }
      updatePending();
    }
  });

  const aside = h("aside", { class: "policy card", "aria-labelledby": "policy-title" },
    h("h2", { id: "policy-title", text: "Resolved policy" }),
    h("p", { class: "help", text: "What a run of this agent gets now (run.limits), each value with its source." }),
    h("table", { class: "table" },
      h("thead", {}, h("tr", {}, ["limit", "value", "source"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, POLICY_ROWS.filter(([name]) => agent.policy[name]).map(([name, label]) => {
        const limit = agent.policy[name];
        return h("tr", { dataset: { limit: name } }, h("th", { scope: "row", text: label }),
          h("td", { class: "value", text: limitText(limit) }),
          h("td", { class: "source" }, limit.location ? sourceText(limit.location).replace(/^agents\/[^/]+\//, "") : limit.source,
            limit.reason ? h("span", { class: "reason", text: ` — ${limit.reason}` }) : ""));
      }))));

  const head = h("div", { class: "page-head" },
    h("h1", { text: doc.name ? `${doc.name}` : agentId }),
    viewSwitch(state.view, (next) => {
      state.view = next;
      applyView(form, next);
    }));
  main.replaceChildren(...[head,
    h("p", { class: "lead" }, h("a", { href: "#/agents", text: "All agents" }), ` · ${agent.file} · `,
      h("a", { href: `#/chat?agent=${encodeURIComponent(agentId)}`, text: "Chat with it" })),
    agent.provider_error
      ? h("p", { class: "notice error provider-error", role: "alert" },
        `This agent cannot run as it is: ${agent.provider_error}. Choose its provider under Model.`)
      : null,
    h("div", { class: "with-aside" }, form, aside)].filter(Boolean));
  applyView(form, state.view);
  updatePending();
}
