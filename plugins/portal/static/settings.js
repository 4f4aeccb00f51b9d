// Settings: Everyday (provider, search, memory, updates, support) and Advanced (execution
// limits, Studio allowances, costs, model roles and tuning, memory internals, server
// administration). Every field stays in the page in both views; Save sends only the changed
// fields (PATCH /config), so nothing hidden is reset.

import { ApiError, api, download, get } from "./api.js";
import {
  FieldSet, applyView, at, errorText, h, leaving, revealErrors, sourceText, toast, valueText, viewSwitch,
} from "./dom.js";

const UNLIMITED = "0 means unlimited";

// Every row of the execution policy's table, with what its values mean.
const LIMITS = [
  { key: "runtime.default_max_turns", label: "Default max turns", type: "int", min: 0,
    help: "Turns an agent gets when it sets none (default 256). 0 means unlimited." },
  { key: "runtime.max_turns_ceiling", label: "Max turns ceiling", type: "int", min: 0,
    help: "Positive values cap all agents, including unlimited requests. 0 means no ceiling." },
  { key: "runtime.default_budget.max_tokens", label: "Default budget: tokens per run", type: "int", min: 0,
    help: `Input + output tokens of a run. ${UNLIMITED} for that dimension.` },
  { key: "runtime.default_budget.max_llm_calls", label: "Default budget: model calls per run", type: "int", min: 0,
    help: `${UNLIMITED} for that dimension.` },
  { key: "runtime.max_budget.max_tokens", label: "Budget ceiling: tokens", type: "int", min: 0,
    help: "Optional workspace ceiling on any agent's or request's budget. 0 means no ceiling." },
  { key: "runtime.max_budget.max_llm_calls", label: "Budget ceiling: model calls", type: "int", min: 0,
    help: "Optional workspace ceiling. 0 means no ceiling." },
  { key: "costs.default_max_output_tokens", label: "Output allowance per response", type: "int", min: 0,
    help: "Per-response allowance (default 16384); model capacity still applies. 0 leaves it to the model." },
  { key: "costs.max_output_tokens_ceiling", label: "Output ceiling", type: "int", min: 0,
    help: "Optional workspace output ceiling. 0 means no ceiling." },
  { key: "runtime.timeouts.run", label: "Run timeout", type: "duration",
    help: 'Default 48h. "0" means no practical deadline; parent deadlines still apply.' },
  { key: "runtime.timeouts.http", label: "HTTP timeout", type: "duration",
    help: 'Default 48h1m. Must accommodate the run; use "0" for unlimited runs.' },
  { key: "runtime.timeouts.llm", label: "Model call timeout", type: "duration",
    help: "Default 5m. Individual operation timeouts: tool ≤ model call ≤ step ≤ run." },
  { key: "runtime.timeouts.step", label: "Step timeout", type: "duration", help: "Default 10m; one turn with its tool calls." },
  { key: "runtime.timeouts.tool", label: "Tool timeout", type: "duration", help: "Default 2m; one tool call." },
  { key: "runtime.no_progress_limit", label: "No-progress limit", type: "int", min: 0,
    help: "Consecutive repeated tool results that stop a run as incomplete (default 20). 0 disables stall detection." },
  { key: "runtime.max_concurrent_sessions", label: "Concurrent runs", type: "int", min: 0,
    help: "Runs at once in this server (default 100); beyond it a chat is refused (429). 0 means no cap." },
  { key: "runtime.max_concurrent_sessions_per_principal", label: "Concurrent runs per principal", type: "int", min: 0,
    help: "Default 50. 0 means no cap." },
];

const STUDIO = [
  { key: "llm.studio.max_build_tokens", label: "Build tokens", type: "int", min: 0, help: "Per build. 0 means unlimited." },
  { key: "llm.studio.max_build_cost_usd", label: "Build spend (USD)", type: "number", min: 0, help: "Per build. 0 means unlimited." },
  { key: "llm.studio.max_build_attempts", label: "Build attempts", type: "int", min: -1,
    help: "Default 32. -1 means unlimited; 0 selects the default." },
  { key: "llm.studio.max_build_elapsed", label: "Build elapsed time", type: "duration",
    help: 'Default 48h. "0" means no practical elapsed-time limit.' },
];

const COSTS = [
  { key: "costs.max_run_cost_usd", label: "Dollar budget per run", type: "number", min: 0,
    help: "A run stops as incomplete (max_cost_usd) once it spent this much. 0 means none." },
  { key: "costs.max_daily_cost_usd", label: "Dollar budget per UTC day", type: "number", min: 0,
    help: "All runs of every process sharing the store. 0 means none." },
  { key: "rate_limit.tokens_per_minute", label: "Token quota per minute", type: "int", min: 0, help: "0 means none." },
  { key: "rate_limit.tokens_per_hour", label: "Token quota per hour", type: "int", min: 0, help: "0 means none." },
  { key: "rate_limit.tokens_per_day", label: "Token quota per day", type: "int", min: 0, help: "0 means none." },
];

const MEMORY = [
  { key: "compaction.chars_per_token", label: "Characters per token (estimate)", type: "number", help: "Default 4.0." },
  { key: "compaction.message_overhead_tokens", label: "Tokens per message overhead", type: "int", min: 0, help: "Default 4." },
  { key: "compaction.keep_recent_exchanges", label: "Recent exchanges always kept", type: "int", min: 1, help: "Default 2." },
  { key: "compaction.excerpt_chars", label: "Excerpt length (characters)", type: "int", min: 100, help: "Default 1000." },
  { key: "compaction.max_excerpts", label: "Excerpts per compaction", type: "int", min: 0, help: "Default 8." },
  { key: "progress.window", label: "Progress window", type: "int", min: 2,
    help: "Recent tool results a repeat is looked for in (default 30)." },
  { key: "progress.volatile_fields", label: "Volatile fields", type: "list",
    help: "Keys ignored when comparing structured results, one per line (saving replaces the list)." },
  { key: "leases.ttl", label: "Lease lifetime", type: "duration", help: "Default 30s." },
  { key: "leases.heartbeat", label: "Lease heartbeat", type: "duration", help: "Default 10s; at most half the lifetime." },
  { key: "leases.cancel_poll", label: "Cancellation poll", type: "duration", help: "Default 1s." },
  { key: "store.path", label: "Store file", type: "text", readonly: true, help: "The trust root: edit config.yaml and restart." },
  { key: "store.busy_timeout", label: "Store busy timeout", type: "text", readonly: true, help: "The trust root." },
  { key: "store.synchronous", label: "Store synchronous mode", type: "text", readonly: true, help: "The trust root." },
];

const SERVER_EDITABLE = [
  { key: "server.max_body_bytes", label: "Largest request body (bytes)", type: "int", min: 1, help: "Default 1048576." },
  { key: "server.max_json_depth", label: "Deepest JSON nesting", type: "int", min: 1, help: "Default 64." },
  { key: "server.stream_token_ttl", label: "Events token lifetime (seconds)", type: "int", min: 1, help: "Default 3600." },
  { key: "server.events_per_run", label: "SSE events kept per run", type: "int", min: 1, help: "Default 10000." },
  { key: "server.finished_runs_kept", label: "Finished runs kept in memory", type: "int", min: 0, help: "Default 1000." },
  { key: "scheduler.enabled", label: "Scheduler on", type: "bool", help: "Cron runs of agents with schedule:." },
  { key: "scheduler.timezone", label: "Scheduler time zone", type: "text", help: "An IANA name (default UTC)." },
  { key: "scheduler.max_failures", label: "Failures before a schedule is disabled", type: "int", min: 0, help: "0: never." },
];

const TRUST_ROOT = ["server.host", "server.port", "server.enabled", "server.admins", "server.allowed_hosts",
  "server.allowed_origins", "plugins.enable", "plugins.disable"];

function card(title, level, ...children) {
  const id = `card-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
  return h("section", { class: "card", "aria-labelledby": id, dataset: { level } },
    h("h2", { id, text: title }), children);
}

function note(text) {
  return h("p", { class: "note", text });
}

function keptNote(kept, prefixes) {
  const found = kept.filter((k) => prefixes.some((p) => k.path === p || k.path.startsWith(p + ".")));
  if (!found.length) return null;
  return h("div", { class: "kept" },
    h("p", { text: "Kept from the original system, with no effect in this project:" }),
    h("ul", {}, found.map((k) => h("li", {}, h("code", { text: k.path }), ` (${sourceText(k.location)})`,
      k.value !== null && k.value !== undefined ? [": ", h("code", { text: valueText(k.value) })] : ""))));
}

export async function renderSettings(main) {
  main.replaceChildren(h("h1", { text: "Settings" }), h("p", { class: "loading", text: "Loading…" }));
  let config;
  let meta;
  let plugins;
  try {
    [{ config }, meta, plugins] = await Promise.all([get("/config"), get("/config/sources"), get("/plugins")]);
  } catch (error) {
    const text = error instanceof ApiError && error.status === 403
      ? "Settings need an admin: this key's principal is not listed in server.admins."
      : `Settings could not be loaded: ${errorText(error)}`;
    main.replaceChildren(h("h1", { text: "Settings" }), h("p", { class: "notice", role: "alert", text }));
    return;
  }
  const state = { view: "everyday" };
  const sources = meta.sources;
  const pending = h("p", { class: "pending", "aria-live": "polite" });
  const fields = new FieldSet(() => updatePending());
  const form = h("form", { class: "settings", novalidate: true });

  function add(desc) {
    const source = sources[desc.key] ?? (Object.keys(sources).some((k) => k.startsWith(desc.key + ".")) ? "config.yaml" : null);
    const env = source && source.startsWith("environment variable");
    const readonly = desc.readonly || TRUST_ROOT.includes(desc.key);
    const field = fields.add({ ...desc, readonly }, at(config, desc.key), {
      source,
      note: env ? "the environment wins over config.yaml" : null,
    });
    return field.element;
  }

  leaving.unsaved = () => main.contains(form) && fields.changed().length > 0;

  function updatePending() {
    const count = fields.changed().length;
    pending.textContent = count ? `${count} unsaved change${count === 1 ? "" : "s"}` : "No unsaved changes";
    save.disabled = count === 0;
    discard.disabled = count === 0;
  }

  // -- Everyday ---------------------------------------------------------------------------------
  const providers = at(config, "llm.providers") || {};
  const providerNames = [...new Set([...Object.keys(providers), "scripted", "openai"])];
  const providerRows = Object.entries(providers).map(([name, entry]) => h("tr", {},
    h("th", { scope: "row", text: name }), h("td", { text: entry.type }), h("td", { text: valueText(entry.model) }),
    h("td", { text: entry.base_url || "default" }),
    h("td", { text: entry.api_key ? "in config.yaml (hidden)" : entry.api_key_env ? `$${entry.api_key_env}` : "none" })));
  form.append(
    card("Provider", "everyday",
      add({ key: "llm.default.provider", label: "Workspace provider", type: "text", nullable: true, datalist: providerNames,
        help: "The provider of agents that name none: a name under llm.providers, or a provider kind (scripted, openai). New agents are written with it." }),
      add({ key: "llm.default.model", label: "Default model", type: "text", nullable: true,
        help: "The model of agents that name none (after the provider entry's own model)." }),
      providerRows.length
        ? h("table", { class: "table" }, h("caption", { text: "Configured providers (llm.providers)" }),
          h("thead", {}, h("tr", {}, ["name", "type", "model", "endpoint", "key"].map((t) => h("th", { scope: "col", text: t })))),
          h("tbody", {}, providerRows))
        : note("No provider is configured under llm.providers: agents use a provider kind with its defaults."),
      note("API keys are not edited here: set api_key_env in config.yaml and the variable in the server's environment.")),
    card("Search", "everyday",
      note("Web search is not part of this project: no loaded plugin provides a search tool or a search: section. " +
        "A tool plugin that offers one would appear in the agent editor's tool list."),
      keptNote(meta.kept, ["search"])),
    card("Memory", "everyday",
      note(`Conversations, runs, tool results and proofs are stored in ${valueText(at(config, "store.path")) || "the store"}; ` +
        "each conversation's history is reopened from there. Older context is compacted extractively under the input " +
        "allowance (Advanced: memory internals). There is no long-term or vector memory in this project."),
      keptNote(meta.kept, ["memory", "knowledge", "vector"])),
    card("Updates", "everyday",
      h("p", {}, "Soulacy ", h("strong", { text: plugins.versions.soulacy || "(version unknown)" }),
        ` on Python ${plugins.versions.python}.`),
      note("This project has no update channel: upgrade the installed package (pip install -U soulacy) and restart " +
        "soulacy serve. Saved limits in config.yaml and SOUL.yaml are never rewritten by an update."),
      keptNote(meta.kept, ["updates"])),
    card("Support", "everyday",
      note("A diagnostic bundle: the configuration with secrets hidden and where each value is set, versions, " +
        "plugins, agents that fail to load, recent errors and failed runs. Nothing leaves this machine unless you send it."),
      supportButton()),
  );

  // -- Advanced ---------------------------------------------------------------------------------
  form.append(
    card("Execution limits", "advanced",
      note("Each value with its source. Agents may set shorter or longer limits of their own; ceilings cap them all."),
      h("div", { class: "grid" }, LIMITS.map(add))),
    card("Studio build allowances", "advanced", h("div", { class: "grid" }, STUDIO.map(add))),
    card("Costs, prices and quotas", "advanced",
      h("div", { class: "grid" }, COSTS.map(add)),
      pricingTable(at(config, "costs.pricing") || []),
      keptNote(meta.kept, ["costs", "rate_limit"])),
    card("Model roles and tuning", "advanced",
      note("Studio builder: the model of a build is the build spec's model: (default: the workspace provider). " +
        "Reasoner: the react and plan_execute strategies use the agent's own model."),
      keptNote(meta.kept, ["llm.studio", "llm.reasoner"]),
      Object.keys(providers).length
        ? Object.keys(providers).map((name) => h("fieldset", { class: "provider" },
          h("legend", { text: `Provider ${name}` }),
          h("div", { class: "grid" },
            add({ key: `llm.providers.${name}.model`, label: "Model", type: "text", nullable: true }),
            add({ key: `llm.providers.${name}.base_url`, label: "Endpoint (base URL)", type: "text", nullable: true }),
            add({ key: `llm.providers.${name}.context_window`, label: "Context window (tokens)", type: "int", min: 1, nullable: true,
              help: "The model's capacity, when its API does not report it." }),
            add({ key: `llm.providers.${name}.max_output_tokens`, label: "Model output capacity", type: "int", min: 1, nullable: true,
              help: "Caps the output allowance." }),
            add({ key: `llm.providers.${name}.max_retries`, label: "Retries", type: "int", min: 0 }),
            add({ key: `llm.providers.${name}.stream`, label: "Always stream", type: "bool" }))))
        : note("No provider entries to tune.")),
    card("Memory internals", "advanced", h("div", { class: "grid" }, MEMORY.map(add))),
    card("Server administration", "advanced",
      note("Keys and principals, admins, hosts, origins, plugins and the store are the trust root: they are shown " +
        "here and changed only in config.yaml (then restart). Server values take effect at the next start."),
      principalsTable(config),
      h("div", { class: "grid" },
        ["server.host", "server.port", "server.allowed_hosts", "server.allowed_origins", "plugins.enable", "plugins.disable"]
          .map((key) => add({ key, label: key, type: key.endsWith("port") ? "int" : Array.isArray(at(config, key)) ? "list" : "text", readonly: true })),
        SERVER_EDITABLE.map(add)),
      pluginsTable(plugins.plugins)),
  );

  const save = h("button", { type: "submit", class: "primary", text: "Save changes" });
  const discard = h("button", { type: "button", text: "Discard" });
  const status = h("p", { class: "save-status", role: "status" });
  const actions = h("div", { class: "actions" }, pending, discard, save, status);
  const top = h("div", { class: "page-head" }, h("h1", { text: "Settings" }),
    viewSwitch(state.view, (view) => {
      state.view = view;
      applyView(form, view);
    }));
  form.append(actions);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fields.clearErrors();
    const changes = fields.changes();
    if (changes === null) {
      revealErrors(form, fields, status);
      return;
    }
    save.disabled = true;
    status.textContent = "Saving…";
    try {
      const { changed } = await api("PATCH", "/config", { changes });
      toast(`Saved ${changed.length} change${changed.length === 1 ? "" : "s"} to config.yaml`, "ok");
      const view = state.view;
      await renderSettings(main);
      const again = main.querySelector(`.views button[data-view='${view}']`);
      if (again) again.click();
      const line = main.querySelector(".save-status");
      if (line) line.textContent = `Saved: ${changed.join(", ") || "nothing changed"}. Limits apply to the next run; server values at the next start.`;
    } catch (error) {
      if (error instanceof ApiError && Object.keys(error.fields).length) {
        revealErrors(form, fields, status, fields.showErrors(error.fields));
      } else {
        status.textContent = `Not saved: ${errorText(error)}`;
      }
      updatePending();
    }
  });
  discard.addEventListener("click", async () => {
    const view = state.view;
    await renderSettings(main);
    const again = main.querySelector(`.views button[data-view='${view}']`);
    if (again) again.click();
  });
  const warnings = meta.warnings.length
    ? h("details", { class: "warnings" }, h("summary", { text: `${meta.warnings.length} configuration warning(s)` }),
      h("ul", {}, meta.warnings.map((w) => h("li", { text: w }))))
    : null;
  main.replaceChildren(top, h("p", { class: "lead" }, `Workspace settings in ${meta.file}. `,
    "Everyday shows what most people change; Advanced adds execution limits, model tuning, memory internals and server administration."),
  ...(warnings ? [warnings] : []), form);
  applyView(form, state.view);
  updatePending();
}

function supportButton() {
  const result = h("p", { class: "help", role: "status" });
  const button = h("button", { type: "button", text: "Download diagnostic bundle" });
  button.addEventListener("click", async () => {
    button.disabled = true;
    result.textContent = "Collecting…";
    try {
      const { name, text } = await download("/support/bundle");
      const bundle = JSON.parse(text);
      result.textContent = `Saved ${name}: ${bundle.plugins.length} plugins, ${bundle.recent_errors.length} recent errors, ` +
        `${bundle.failed_runs.length} failed runs.`;
    } catch (error) {
      result.textContent = `No bundle: ${errorText(error)}`;
    } finally {
      button.disabled = false;
    }
  });
  return h("div", {}, button, result);
}

function pricingTable(pricing) {
  if (!pricing.length) return note("Price metadata (costs.pricing): none. Add entries in config.yaml.");
  return h("table", { class: "table" }, h("caption", { text: "Price metadata (costs.pricing), USD per million tokens; edit in config.yaml" }),
    h("thead", {}, h("tr", {}, ["provider", "model", "input", "output"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, pricing.map((p) => h("tr", {}, h("td", { text: p.provider }), h("td", { text: p.model }),
      h("td", { text: String(p.input_per_mtok) }), h("td", { text: String(p.output_per_mtok) })))));
}

function principalsTable(config) {
  const keys = at(config, "server.api_keys") || {};
  const admins = new Set(at(config, "server.admins") || []);
  const names = Object.keys(keys);
  if (at(config, "server.api_key")) names.push("default");
  if (!names.length) {
    return note("No API keys: the server answers loopback clients only, as the principal local, with full access.");
  }
  return h("table", { class: "table" }, h("caption", { text: "Principals (server.api_keys; keys hidden)" }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "principal" }), h("th", { scope: "col", text: "admin" }))),
    h("tbody", {}, names.map((n) => h("tr", {}, h("th", { scope: "row", text: n }), h("td", { text: admins.has(n) ? "yes" : "no" })))));
}

function pluginsTable(plugins) {
  return h("table", { class: "table plugins" }, h("caption", { text: "Loaded plugins and the settings they own" }),
    h("thead", {}, h("tr", {}, ["plugin", "from", "settings", "hooks"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, plugins.map((p) => h("tr", {}, h("th", { scope: "row", text: p.name }),
      h("td", { text: p.version ? `${p.origin} ${p.version}` : p.origin }),
      h("td", { text: p.sections.filter((s) => s.scope === "workspace").map((s) => s.key).join(", ") || "—" }),
      h("td", { text: String(p.hooks.length) })))));
}
