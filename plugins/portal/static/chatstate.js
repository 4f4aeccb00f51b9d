// The chat's state, apart from the page: a cache in local storage of the conversations this
// browser followed (one namespace per key, so that another principal on this browser does not
// see them; the list of conversations is the server's, GET /api/v1/conversations), replies
// keyed by run id, and durable history from GET /api/v1/history/{session}. A reply's status is changed only through
// its own run id: a late result never touches another reply.

const PREFIX = "soulacy-chat:";
const MAX_CONVERSATIONS = 50;

// FNV-1a, 64 bits as two halves: a name for the key's storage, not a secret.
function fnv(text) {
  let a = 0x811c9dc5;
  let b = 0xcbf29ce4;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x01000193 + 2) >>> 0;
  }
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0");
}

export async function namespace(key) {
  if (!key) return "local";
  if (crypto.subtle) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`soulacy:${key}`));
    return Array.from(new Uint8Array(digest).slice(0, 8), (x) => x.toString(16).padStart(2, "0")).join("");
  }
  return fnv(`soulacy:${key}`);
}

export function load(ns) {
  try {
    const data = JSON.parse(localStorage.getItem(PREFIX + ns) || "null");
    if (data && typeof data === "object" && data.conversations) return data;
  } catch {
    /* a damaged entry starts afresh */
  }
  return { conversations: {}, current: null };
}

export function save(ns, state) {
  const ids = Object.keys(state.conversations);
  if (ids.length > MAX_CONVERSATIONS) {
    ids.sort((x, y) => state.conversations[x].updated - state.conversations[y].updated);
    for (const id of ids.slice(0, ids.length - MAX_CONVERSATIONS)) delete state.conversations[id];
  }
  localStorage.setItem(PREFIX + ns, JSON.stringify(state));
}

export function newConversation(agentId, sessionId) {
  return { session_id: sessionId, agent_id: agentId, title: "", updated: Date.now(), messages: [] };
}

export function reply(conv, runId) {
  return conv.messages.find((m) => m.role === "assistant" && m.run_id === runId) || null;
}

export function pendingReply(runId) {
  return {
    role: "assistant", run_id: runId, text: "", streamed: "", status: "running", verification: null,
    reason: null, error: null, lastEventId: 0, final: false, activity: [],
  };
}

// A result (the SSE result event, a run record, or history metadata) for the reply of runId.
// Returns the reply it changed, or null: no other reply is ever changed.
export function applyResult(conv, runId, result) {
  const target = reply(conv, runId);
  if (!target) return null;
  const meta = result.metadata || {};
  target.status = result.status || meta.status || target.status;
  target.verification = result.verification ?? meta.verification ?? target.verification;
  target.reason = result.incomplete_reason ?? meta.incomplete_reason ?? null;
  target.error = meta.error ?? result.error ?? null;
  if (meta.proof) target.proof = meta.proof;
  const attempt = meta.attempt ?? result.attempt;
  if (typeof attempt === "number") target.attempt = attempt;
  const tokens = result.tokens || meta.tokens;
  if (tokens && typeof tokens === "object") target.tokens = tokens;
  const cost = result.cost_usd !== undefined ? result.cost_usd : meta.cost_usd;
  if (cost !== undefined) target.cost_usd = cost;
  if (result.reply) target.text = result.reply;
  target.final = target.status !== "running";
  target.reconnecting = false;
  conv.updated = Date.now();
  return target;
}

// Durable history entries grouped by run, in order: the user's text, the reply, the metadata.
export function runsOf(entries) {
  const runs = new Map();
  for (const entry of entries) {
    const id = entry.run_id || `entry-${entry.id}`;
    if (!runs.has(id)) runs.set(id, { run_id: id, agent_id: entry.agent_id, user: null, reply: "", metadata: null });
    const run = runs.get(id);
    if (entry.role === "user" && run.user === null) run.user = entry.content;
    if (entry.role === "assistant" && entry.content) run.reply = entry.content;
    if (entry.metadata && entry.metadata.status) run.metadata = entry.metadata;
  }
  return [...runs.values()];
}

// Bring a conversation up to date with its durable history: each run's reply updated by its run
// id (a final status there wins over a local "running"), runs this browser never saw added.
export function mergeHistory(conv, entries) {
  const changed = [];
  for (const run of runsOf(entries)) {
    let target = reply(conv, run.run_id);
    if (!target) {
      conv.messages.push({ role: "user", text: run.user || "", run_id: run.run_id });
      target = pendingReply(run.run_id);
      target.text = run.reply;
      conv.messages.push(target);
      if (!conv.agent_id) conv.agent_id = run.agent_id;
    }
    const stale = Boolean(run.metadata) && (run.metadata.attempt ?? 1) < (target.attempt || 1);
    if (run.metadata && !stale) { // an earlier attempt's end never undoes a continuation seen here
      const local = target.final ? { status: target.status, verification: target.verification } : null;
      if (!local || local.status !== run.metadata.status || local.verification !== run.metadata.verification) {
        applyResult(conv, run.run_id, { status: run.metadata.status, metadata: run.metadata, reply: run.reply });
        changed.push(run.run_id);
      } else if (!target.text && run.reply) {
        target.text = run.reply;
      }
    } else if (!stale && !target.text && run.reply) {
      target.text = run.reply;
    }
  }
  if (!conv.title) conv.title = titleOf(conv);
  return changed;
}

export function titleOf(conv) {
  const first = conv.messages.find((m) => m.role === "user" && m.text);
  return first ? first.text.slice(0, 60) : conv.session_id;
}

const REASONS = {
  max_turns: "the turn limit was reached (max_turns)",
  max_llm_calls: "the model-call budget was used (max_llm_calls)",
  max_tokens: "the token budget was used (max_tokens)",
  no_progress: "no progress: the same results kept coming (no_progress)",
  run_timeout: "the run timeout expired",
  step_timeout: "one step took longer than the step timeout",
  llm_timeout: "a model call took longer than its timeout",
  max_cost_usd: "the run's dollar budget was spent",
  daily_cost_budget: "the daily dollar budget was spent",
  provider_error: "the provider failed",
  context_length: "the input was too long for the model",
  context_overflow: "the instructions and tools alone exceed the model's input",
  storage_error: "the store failed",
  lease_lost: "another process took the conversation over",
  outcome_failed: "an outcome assertion failed",
  step_failed: "a workflow step failed",
  cancelled: "cancelled",
};

export function reasonText(reason) {
  if (!reason) return "";
  if (REASONS[reason]) return REASONS[reason];
  if (reason.startsWith("token_quota_per_")) return `the token quota per ${reason.slice(16)} was used`;
  return reason;
}

// A run's error as a person reads it: without the exception's class name, and for a provider
// the agent lacks, what is wrong in plain words with `fix: "provider"` (the notice then links
// to the agent's editor). {text, fix}.
export function plainError(error) {
  if (!error) return { text: "", fix: null };
  const text = String(error).replace(/^[A-Z][A-Za-z]*(Error|Exception): /, "");
  if (/names no llm\.provider/.test(text)) {
    return { text: "this agent has no provider: its SOUL.yaml names none and no workspace provider is set (Settings)", fix: "provider" };
  }
  const unknown = text.match(/unknown provider '([^']+)'/);
  if (unknown) return { text: `this agent's provider '${unknown[1]}' does not exist (${text})`, fix: "provider" };
  if (/scripted provider needs llm\.model/.test(text)) {
    return { text: "the scripted provider needs a script file as the agent's model (llm.model)", fix: "provider" };
  }
  return { text, fix: null };
}

// What a reply's notice says: {kind, text, fix}.
export function notice(m) {
  const shown = noticeOf(m);
  const error = ["failed", "refused"].includes(m.status) ? plainError(m.error) : null;
  return { ...shown, fix: error ? error.fix : null };
}

function noticeOf(m) {
  if (m.status === "running") {
    if (m.lost) return { kind: "error", text: "Connection lost: the run may still finish; reopen the conversation to see it." };
    return { kind: "running", text: m.reconnecting ? "Running · reconnecting…" : "Running…" };
  }
  if (m.status === "completed") {
    if (m.verification === "verified") return { kind: "ok", text: "Completed · verified by its outcome assertions" };
    if (m.verification === "failed") return { kind: "warn", text: "Completed · verification failed: an outcome assertion does not hold" };
    return { kind: "info", text: "Completed · unverified: nothing independent checked this reply" };
  }
  if (m.status === "incomplete") return { kind: "warn", text: `Incomplete: ${reasonText(m.reason) || "stopped before an answer"}` };
  if (m.status === "failed") {
    const why = [reasonText(m.reason), plainError(m.error).text].filter(Boolean).join(" — ");
    return { kind: "error", text: `Failed${why ? `: ${why}` : ""}` };
  }
  if (m.status === "cancelled") {
    const why = m.reason && m.reason !== "cancelled" ? `: ${reasonText(m.reason)}` : "";
    return { kind: "muted", text: `Cancelled${why}` };
  }
  if (awaitsDecision(m)) return { kind: "warn", text: "Waiting for a decision: the run is suspended until you decide, then it goes on" };
  if (m.status === "interrupted") return { kind: "error", text: "Interrupted: the process running it stopped" };
  if (m.status === "refused") return { kind: "error", text: `Not started: ${plainError(m.error).text || "refused"}` };
  return { kind: "info", text: m.status || "unknown" };
}

// -- approvals of tool calls (tool.approval events; docs/approvals.md) ----------------------

// A reply's approval of one tool call, by its call id, or null.
export function approvalOf(conv, runId, callId) {
  const target = reply(conv, runId);
  return (target && (target.approvals || []).find((a) => a.call_id === callId)) || null;
}

// A tool.approval event (or a stored request, as POST /chat/confirm's 409 names it) for the
// reply of runId: the notice of that call, found by its call id, is added or updated. An
// event of another run, or a reply that is not there, changes nothing (null); a decision,
// once known, is never turned back into "pending" by an event replayed late.
export function applyApproval(conv, runId, data) {
  const target = reply(conv, runId);
  const callId = data && (data.id || data.call_id);
  if (!target || !callId || (data.run_id && data.run_id !== runId)) return null;
  if (!target.approvals) target.approvals = [];
  let approval = target.approvals.find((a) => a.call_id === callId);
  if (!approval) {
    approval = { call_id: callId, tool: "", arguments: {}, reasons: [], status: "pending", approver: null, decided_by: null, note: null, result: null, cut: false };
    target.approvals.push(approval);
  }
  if (data.name || data.tool) approval.tool = data.name || data.tool;
  if (data.arguments && typeof data.arguments === "object") approval.arguments = data.arguments;
  if (Array.isArray(data.reasons)) approval.reasons = data.reasons.map(String);
  if (data.cut === true) approval.cut = true; // the effect ledger's question, as the server marks it
  const status = data.status || "pending";
  if (status !== "pending" || approval.status === "pending") {
    approval.status = status;
    if (status !== "pending") {
      approval.approver = data.approver ?? null;
      approval.decided_by = data.decided_by ?? null;
      approval.note = data.note ?? null;
      // An event carries a redacted preview of a given result; /chat/confirm's answer, all of it.
      approval.result = data.result ?? data.result_preview ?? null;
      approval.draft = null;
      approval.sending = null;
      approval.sent = null;
      approval.error = null;
    }
  }
  return approval;
}

// The arguments of a call, as one short line of JSON.
export function argumentsPreview(args, max = 240) {
  let text;
  try {
    text = JSON.stringify(args ?? {});
  } catch {
    text = String(args);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

// A run suspended while a call waited for a decision (`approvals.suspend_after`) has ended its
// attempt, not its wait: the call's notice still decides it, and the decision resumes the run
// (docs/approvals.md#suspended-waits).
export function awaitsDecision(m) {
  return m.status === "interrupted" && m.reason === "awaiting_approval";
}

// A call the effect ledger found cut while it ran (docs/running.md#the-effect-ledger): besides
// approve and deny, a person may say it happened and give its result. The server marks it
// (`cut: true` in the event and the stored request); a call id is the model's to choose.
export function isCutCall(a) {
  return a.cut === true;
}

// What an approval's notice says of its state: {kind, text}. `ended`: the reply is final.
export function approvalNotice(a, ended = false) {
  const who = a.approver ? ` by ${a.approver}` : "";
  const note = a.note ? `: ${a.note}` : "";
  if (a.status === "approved") return { kind: "ok", text: `Approved${who}${note}` };
  if (a.status === "denied") return { kind: "error", text: `Denied${who}${note}; the call did not run` };
  if (a.status === "happened") return { kind: "ok", text: `It happened${who}${note}: not run again; the model got its result` };
  if (ended) return { kind: "muted", text: "No decision: the run ended while the call waited" };
  if (a.error) return { kind: "error", text: `Not sent: ${a.error}` };
  if (a.sent) {
    const what = { approved: "Approval", denied: "Denial", happened: "Result" }[a.sent] || "Decision";
    return { kind: "running", text: `${what} sent; waiting for the run to go on…` };
  }
  if (a.sending) return { kind: "running", text: "Sending…" };
  return { kind: "warn", text: "Waiting for your approval: the call has not run" };
}

// A tool call of a run, counted by name in the order of first use: every name is kept.
export function countTool(target, name) {
  const tools = target.tools || (target.tools = []);
  const found = tools.find((t) => t[0] === name);
  if (found) found[1] += 1;
  else tools.push([name, 1]);
}

// The chat header's one line of today's spend (GET /costs/today) against the daily budget
// ("" when none is set).
export function budgetLine(today) {
  const daily = (today && today.daily_budget) || {};
  if (typeof daily.limit_usd !== "number") return "";
  const dollars = (n) => `$${n > 0 && n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;
  const spent = daily.spent_usd || 0;
  return `Today ${dollars(spent)} of the ${dollars(daily.limit_usd)} daily budget (${Math.round((spent / daily.limit_usd) * 100)}%)`;
}

// The user's message of a run (what Retry sends again), or null.
export function askedBy(conv, runId) {
  const m = conv.messages.find((x) => x.role === "user" && x.run_id === runId);
  return m ? m.text : null;
}

// Tokens and cost of a reply, as one line ("" when the run said neither).
export function usageText(m) {
  const parts = [];
  if (m.tokens && typeof m.tokens.total === "number") {
    parts.push(`${m.tokens.total.toLocaleString("en")} tokens (${m.tokens.input.toLocaleString("en")} in, ` +
      `${m.tokens.output.toLocaleString("en")} out)`);
  }
  if (typeof m.cost_usd === "number") parts.push(`cost $${m.cost_usd < 0.01 && m.cost_usd > 0 ? m.cost_usd.toFixed(4) : m.cost_usd.toFixed(2)}`);
  else if (m.cost_usd === null && parts.length) parts.push("cost unknown (no price for this model in costs.pricing)");
  return parts.join(" · ");
}

// -- continuing a run that ended incomplete (POST /runs/{id}/continue/stream) ----------------
// The form a chat reply and a run's timeline show: an optional steering message, the turn
// limit, and the limit that stopped the run if it is another; the one that stopped it is
// prefilled with its value doubled. A field left empty keeps the agent's own limit (the attempt
// counts from zero).

// The limits a continuation can raise: the run.limits name, its label, how it goes in the
// request's overrides, and whether it is a duration.
const LIMITS = {
  max_turns: { label: "Turn limit (max_turns)", put: (o, v) => { o.max_turns = v; } },
  max_llm_calls: { label: "Model-call budget (max_llm_calls)", put: (o, v) => { (o.budget ||= {}).max_llm_calls = v; } },
  max_tokens: { label: "Token budget (max_tokens)", put: (o, v) => { (o.budget ||= {}).max_tokens = v; } },
  no_progress_limit: { label: "No-progress limit (no_progress_limit)", put: (o, v) => { o.no_progress_limit = v; } },
  run_timeout: { label: "Run timeout (run_timeout)", put: (o, v) => { o.run_timeout = v; }, duration: true },
};
// The limit an incomplete_reason names.
const STOPPED_BY = { no_progress: "no_progress_limit" };

export const continuable = (status) => status === "incomplete";

function stopper(reason) {
  const name = STOPPED_BY[reason] || reason;
  return LIMITS[name] ? name : null;
}

function seconds(value) {
  if (value % 3600 === 0) return `${value / 3600}h`;
  if (value % 60 === 0) return `${value / 60}m`;
  return `${Math.ceil(value)}s`;
}

function doubled(name, limit) {
  if (!limit || limit.unlimited || typeof limit.value !== "number") return "";
  return LIMITS[name].duration ? seconds(limit.value * 2) : String(limit.value * 2);
}

// The form's fields for a run stopped by `reason` under `limits` (its run.limits, or null):
// [{name, label, value, now}]; the limit that stopped it is prefilled doubled.
export function continueFields(reason, limits) {
  const names = ["max_turns"];
  const stopped = stopper(reason);
  if (stopped && stopped !== "max_turns") names.push(stopped);
  return names.map((name) => {
    const limit = limits ? limits[name] : null;
    return { name, label: LIMITS[name].label, duration: Boolean(LIMITS[name].duration), value: name === stopped ? doubled(name, limit) : "", now: limit ? (limit.unlimited ? "unlimited" : limit.text || String(limit.value)) : "" };
  });
}

// The limits kept of a run.limits event: those a continuation may raise.
export function raisable(limits) {
  if (!limits) return null;
  const kept = Object.fromEntries(Object.keys(LIMITS).filter((n) => limits[n]).map((n) => [n, limits[n]]));
  return Object.keys(kept).length ? kept : null;
}

// The request's body: {text?, overrides?}; an empty field is left out.
export function continueBody(text, values) {
  const body = {};
  if (text && text.trim()) body.text = text.trim();
  const overrides = {};
  for (const [name, raw] of Object.entries(values || {})) {
    const value = String(raw ?? "").trim();
    if (!value || !LIMITS[name]) continue;
    LIMITS[name].put(overrides, LIMITS[name].duration ? value : Number(value));
  }
  if (Object.keys(overrides).length) body.overrides = overrides;
  return body;
}

// Why a continuation was refused, in plain words.
export function refusalText(status, body) {
  const said = body && body.error ? body.error : "";
  const fields = body && body.fields ? Object.entries(body.fields).map(([k, v]) => `${k.replace(/^overrides\./, "")}: ${v}`) : [];
  if (status === 404) return "Not continued: this key sees no such run.";
  if (status === 409) return `Not continued: ${said || "the run is no longer incomplete"}.`;
  if (status === 422) return `Not continued: a value is not accepted${fields.length ? ` (${fields.join("; ")})` : said ? ` (${said})` : ""}.`;
  if (status === 503) return "Not continued: the server is shutting down; try again in a moment.";
  if (status === 0) return "Not continued: the server could not be reached.";
  return `Not continued: ${said || `the server answered HTTP ${status}`}.`;
}
