// Runs: this principal's recent runs (GET /runs) with status, the limits each ran under, what it
// used and its proof; interrupted runs; and, for an admin, the reconcile action of a workflow
// step left in progress (POST /runs/{id}/reconcile). One run's timeline (GET /runs/{id}/timeline):
// its turns, model and tool calls, approvals, compactions, limits and how it ended, every attempt
// of it; a run that ended incomplete has Continue, which goes on in its conversation (chat.js).

import { api, get, openStream } from "./api.js";
import { errorText, formatTime, h, limitText, toast } from "./dom.js";
import { continuable, continueFields, notice, refusalText } from "./chatstate.js";
import { continueForm, continueInChat } from "./chat.js";

// The limits a row shows at a glance; every limit is in the row's details.
const SHOWN = [["max_turns", "turns"], ["max_tokens", "tokens"], ["run_timeout", "run"]];

function limitsCell(run) {
  const limits = run.limits;
  if (!limits) return h("td", { class: "note", text: "not kept" });
  const summary = SHOWN.filter(([name]) => limits[name]).map(([name, label]) => `${label} ${limitText(limits[name])}`).join(" · ");
  const items = Object.entries(limits)
    .filter(([, limit]) => limit && typeof limit === "object")
    .flatMap(([name, limit]) => [
      h("dt", {}, h("code", { text: name })),
      h("dd", { dataset: { limit: name }, text: [limitText(limit), limit.source].filter(Boolean).join(" · ") })]);
  return h("td", { class: "limits" }, h("details", {},
    h("summary", { text: summary || `${items.length / 2} limits` }),
    h("dl", { "aria-label": `Limits of run ${run.run_id}` }, items)));
}

function statusCell(run) {
  const { kind, text } = notice({ status: run.status, verification: run.verification, reason: run.incomplete_reason, error: run.error });
  const cell = h("td", {}, h("span", { class: `notice ${kind}`, text }));
  const lease = run.lease;
  if (run.status === "interrupted" && lease && lease.owner) {
    const owner = lease.owner;
    const where = [owner.pid ? `pid ${owner.pid}` : "", owner.host ? `on ${owner.host}` : ""].filter(Boolean).join(" ");
    const beat = lease.heartbeat_at;
    cell.append(h("div", { class: "note", text: `Last owner ${where || "unknown"}${beat ? ` · last heartbeat ${formatTime(beat)}` : ""}` }));
  }
  return cell;
}

function reconcileItem(run, step, canReconcile, main) {
  const label = h("span", {}, "Run ", h("code", { text: run.run_id }), " stopped during step ", h("code", { text: step }),
    ". Its action may have happened: say whether it did before the run id is retried.");
  if (!canReconcile) {
    return h("li", {}, label, " ", h("span", { class: "note" }, "An admin decides here, or on the server: ",
      h("code", { text: `soulacy runs reconcile ${run.run_id} --step ${step} --completed|--failed` })));
  }
  const status = h("span", { class: "note", role: "status" });
  const decide = (decision) => async (event) => {
    const buttons = event.target.closest("li").querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const answer = await api("POST", `/runs/${encodeURIComponent(run.run_id)}/reconcile`, { step, decision });
      toast(answer.said, "ok");
      await renderRuns(main);
    } catch (error) {
      status.textContent = errorText(error);
      buttons.forEach((b) => { b.disabled = false; });
    }
  };
  const name = `step ${step} of run ${run.run_id}`;
  const happened = "It happened (completed)";
  const didNot = "It did not happen (run it again)";
  return h("li", { dataset: { runId: run.run_id, step } }, label, h("div", { class: "actions" },
    h("button", { type: "button", class: "small", "aria-label": `${happened}: ${name}`, onclick: decide("completed"), text: happened }),
    h("button", { type: "button", class: "small", "aria-label": `${didNot}: ${name}`, onclick: decide("failed"), text: didNot }),
    status));
}

export async function renderRuns(main) {
  main.replaceChildren(h("h1", { text: "Runs" }), h("p", { class: "loading", text: "Loading…" }));
  let runs;
  let canReconcile;
  try {
    ({ runs, can_reconcile: canReconcile } = await get("/runs?limit=50"));
  } catch (error) {
    main.replaceChildren(h("h1", { text: "Runs" }), h("p", { class: "notice", role: "alert", text: errorText(error) }));
    return;
  }
  const rows = runs.map((run) => h("tr", { dataset: { runId: run.run_id, status: run.status } },
    h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(run.run_id)}`, title: run.run_id,
      "aria-label": `Timeline of run ${run.run_id.slice(0, 12)}` }, h("code", { text: run.run_id.slice(0, 12) })),
    run.attempt > 1 ? ` (attempt ${run.attempt})` : ""),
    h("td", { text: run.agent_id }),
    h("td", {}, h("a", { href: `#/chat?session=${encodeURIComponent(run.session_id)}`, text: run.session_id.slice(0, 12) })),
    statusCell(run),
    limitsCell(run),
    h("td", { text: run.turns ?? "" }),
    h("td", { text: run.tokens ?? "" }),
    h("td", { class: "cost", text: typeof run.cost_usd === "number" ? costText(run.cost_usd) : "—" }),
    h("td", {}, run.proof ? [String(run.proof.receipts), " · ", h("code", { text: run.proof.sha256.slice(0, 12) })] : "—"),
    h("td", { text: formatTime(run.started_at) })));
  const interrupted = runs.filter((r) => r.status === "interrupted");
  const pending = runs.flatMap((r) => (r.steps_in_progress || []).map((step) => [r, step]));
  const spend = h("section", { class: "card today", "aria-labelledby": "today-title" },
    h("h2", { id: "today-title", text: "Today's spend" }), h("p", { class: "loading", text: "Loading…" }));
  showToday(spend);
  main.replaceChildren(...[
    h("h1", { text: "Runs" }),
    h("p", { class: "lead", text: "Your recent runs, newest first, with the limits each ran under. Open a run for its timeline, a session for its conversation." }),
    spend,
    runs.length
      ? h("div", { class: "scroll" }, h("table", { class: "table runs" },
        h("thead", {}, h("tr", {}, ["run", "agent", "session", "status", "limits", "turns", "tokens", "cost", "proof (receipts · sha256)", "started"]
          .map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, rows)))
      : h("p", { class: "note", text: "No runs yet." }),
    interrupted.length
      ? h("section", { class: "card", "aria-labelledby": "interrupted-title" },
        h("h2", { id: "interrupted-title", text: "Interrupted runs" }),
        h("p", { class: "note", text: "The process running these stopped before they ended (its lease expired or its owner is gone). " +
          "Retrying the same run id goes on from its last completed step." }),
        h("ul", {}, interrupted.map((r) => h("li", {}, h("code", { text: r.run_id }), ` · ${r.agent_id} · started ${formatTime(r.started_at)}`))))
      : null,
    pending.length
      ? h("section", { class: "card", "aria-labelledby": "reconcile-title" },
        h("h2", { id: "reconcile-title", text: "Workflow steps to reconcile" }),
        h("ul", { class: "reconcile" }, pending.map(([r, step]) => reconcileItem(r, step, canReconcile, main))))
      : null].filter(Boolean));
}

// Today's spend against the budgets (GET /costs/today), in `box` (a card): the daily dollar
// budget with everyone's spend as a meter, each token quota that is set, and this key's runs.
async function showToday(box) {
  let today;
  try {
    today = await get("/costs/today");
  } catch (error) {
    box.replaceChildren(box.firstChild, h("p", { class: "notice", text: `Not loaded: ${errorText(error)}` }));
    return;
  }
  const lines = todayLines(today);
  box.replaceChildren(box.firstChild, ...lines.map(([label, value, meter]) => h("div", { class: "spend-row" },
    h("span", { class: "spend-label", text: label }), h("span", { class: "spend-value", text: value }),
    meter ? h("meter", { min: "0", max: String(meter.max), value: String(Math.min(meter.value, meter.max)), high: String(meter.max * 0.8),
      optimum: "0", "aria-label": `${label}: ${value}` }) : null)),
  h("p", { class: "help", text: `UTC day ${today.day}; the counters start again at midnight UTC (${new Date(today.resets_at * 1000).toLocaleTimeString()}, your time).` }));
}

// [label, value text, meter {value, max} or null] of a /costs/today answer.
export function todayLines(today) {
  const out = [];
  const daily = today.daily_budget || {};
  if (typeof daily.limit_usd === "number") {
    const spent = daily.spent_usd || 0;
    out.push(["Daily budget (everyone)", `${costText(spent)} of ${costText(daily.limit_usd)} (${Math.round((spent / daily.limit_usd) * 100)}%)`,
      { value: spent, max: daily.limit_usd }]);
  } else {
    out.push(["Daily budget", "none set (costs.max_daily_cost_usd)", null]);
  }
  for (const [name, quota] of Object.entries(today.token_quotas || {})) {
    out.push([`Token quota (${name})`, `${number(quota.used)} of ${number(quota.limit)} tokens`, { value: quota.used, max: quota.limit }]);
  }
  const yours = today.yours || {};
  out.push([`Your runs today (${yours.principal || "this key"})`,
    `${costText(yours.cost_usd || 0)} · ${number(yours.runs || 0)} run${yours.runs === 1 ? "" : "s"} · ${number(yours.tokens || 0)} tokens` +
    `${yours.runs_without_price ? ` · ${yours.runs_without_price} without a price` : ""}`, null]);
  return out;
}

// -- one run's timeline ---------------------------------------------------------------------

const number = (n) => (typeof n === "number" ? n.toLocaleString("en") : "?");

function costText(cost) {
  if (typeof cost !== "number") return "unknown (no price in costs.pricing)";
  return `$${cost > 0 && cost < 0.01 ? cost.toFixed(4) : cost.toFixed(2)}`;
}

// One step of the timeline: {title, detail (preformatted) or null}.
function stepText(e, attempt) {
  switch (e.kind) {
    case "started": return { title: `${attempt > 1 ? `Attempt ${attempt} started` : "Started"}${e.agent_id ? ` (agent ${e.agent_id})` : ""}`, detail: e.text || null };
    case "limits": return { title: "Limits", detail: Object.entries(e.limits || {}).map(([k, v]) => `${k}: ${v}`).join("\n") };
    case "model_call": return { title: `Turn ${e.turn} · model call with ${number(e.messages)} messages` };
    case "model_reply": return {
      title: `Turn ${e.turn} · model replied: ${number(e.input_tokens)} in / ${number(e.output_tokens)} out tokens · ` +
        `${number(e.duration_ms)} ms · ${number(e.tools)} tool call${e.tools === 1 ? "" : "s"}${e.finish_reason ? ` · ${e.finish_reason}` : ""}` +
        `${"cost_usd" in e ? ` · cost ${costText(e.cost_usd)}` : ""}${e.model ? ` · ${e.provider ? `${e.provider}/` : ""}${e.model}` : ""}`,
    };
    case "tool_call": return { title: `Turn ${e.turn} · tool call ${e.name} (${e.id})`, detail: e.arguments };
    case "tool_result": return {
      title: `Result of ${e.name} (${e.id}): ${e.is_error ? "error" : "ok"}${e.verdict && e.verdict !== "ok" ? ` · ${e.verdict}` : ""} · ${number(e.chars)} characters`,
      detail: e.result,
    };
    case "approval": return { title: `Approval of ${e.name} (${e.id}): ${e.status}${e.approver ? ` by ${e.approver}` : ""}${e.note ? ` · ${e.note}` : ""}` };
    case "compaction": return {
      title: `Compaction: ${number(e.messages_before)} → ${number(e.messages_after)} messages, ` +
        `${number(e.tokens_before)} → ${number(e.tokens_after)} tokens (allowance ${number(e.allowance)})`,
    };
    case "step": return { title: `Workflow step ${e.step}: ${e.status}` };
    case "ended": {
      const { text } = notice({ status: e.status, verification: e.verification, reason: e.incomplete_reason, error: e.error });
      return { title: `Ended · ${text}`, detail: e.evidence ? JSON.stringify(e.evidence, null, 2) : null };
    }
    default: return { title: e.kind };
  }
}

// Continue, for a run that ended incomplete: the form, then the run's conversation, where the
// continued reply streams (the request is made here, so that a refusal is said here).
function continueSection(run) {
  const prefix = `continue-${run.run_id}`;
  const state = { text: "", values: {}, busy: false, error: null };
  const fields = continueFields(run.incomplete_reason, run.limits);
  const section = h("section", { class: "card", "aria-labelledby": "continue-title" });
  const focus = (suffix) => { const el = document.getElementById(`${prefix}-${suffix}`); if (el) el.focus(); };
  const submit = async (body) => {
    state.busy = true;
    state.error = null;
    draw(true);
    let response = null;
    try {
      response = await openStream("POST", `/runs/${encodeURIComponent(run.run_id)}/continue/stream`, { body });
    } catch {
      response = null;
    }
    if (response && response.ok) {
      continueInChat(run.session_id, run.run_id, body.text || "", response);
      return;
    }
    let answer = null;
    try {
      answer = response ? await response.json() : null;
    } catch {
      answer = null;
    }
    state.busy = false;
    state.error = refusalText(response ? response.status : 0, answer);
    draw(true);
    focus("go");
  };
  function draw(open) {
    const head = [h("h2", { id: "continue-title", text: "Continue this run" }),
      h("p", { class: "note", text: "It stopped at a limit. It can go on in place, as its next attempt, in its conversation." })];
    section.replaceChildren(...head, open
      ? continueForm({ runId: run.run_id, state, fields, prefix, onSubmit: submit, onCancel: () => { draw(false); focus("open"); } })
      : h("button", { type: "button", class: "primary", id: `${prefix}-open`, text: "Continue",
        onclick: () => { draw(true); focus("text"); } }));
  }
  draw(false);
  return section;
}

export async function renderTimeline(main, runId) {
  const here = location.hash;
  const title = `Run ${runId.slice(0, 12)}`;
  if (!main.querySelector(".timeline")) main.replaceChildren(h("h1", { text: title }), h("p", { class: "loading", text: "Loading…" }));
  let run;
  try {
    run = await get(`/runs/${encodeURIComponent(runId)}/timeline`);
  } catch (error) {
    main.replaceChildren(h("h1", { text: title }), h("p", { class: "notice", role: "alert", text: errorText(error) }),
      h("p", {}, h("a", { href: "#/runs", text: "All runs" })));
    return;
  }
  if (location.hash !== here) return; // left while it loaded
  const { kind, text } = notice({ status: run.status, verification: run.verification, reason: run.incomplete_reason, error: run.error });
  const tokens = run.tokens || {};
  const pairs = [
    ["agent", run.agent_id],
    ["session", h("a", { href: `#/chat?session=${encodeURIComponent(run.session_id)}`, text: run.session_id })],
    ["status", h("span", { class: `notice ${kind}`, text })],
    ["started", formatTime(run.started_at)],
    ["finished", run.finished_at ? `${formatTime(run.finished_at)} (${(run.finished_at - run.started_at).toFixed(2)} s)` : "—"],
    run.attempt > 1 ? ["attempt", String(run.attempt)] : null,
    ["turns", run.turns ?? "—"],
    ["tokens", tokens.total !== undefined ? `${number(tokens.total)} (${number(tokens.input)} in, ${number(tokens.output)} out)` : "—"],
    ["cost", costText(run.cost_usd)],
    ["proof", run.proof ? `${run.proof.receipts} receipt${run.proof.receipts === 1 ? "" : "s"} · ${run.proof.sha256}` : "—"],
  ];
  let attempt = 0;
  const steps = run.entries.map((e) => {
    if (e.kind === "started") attempt += 1;
    const { title: line, detail } = stepText(e, attempt);
    return h("li", { dataset: { kind: e.kind } }, h("p", { class: "step-title", text: line }),
      detail ? h("pre", { class: "step-detail", text: detail }) : null);
  });
  main.replaceChildren(...[
    h("div", { class: "page-head" }, h("h1", { text: title }), h("a", { href: "#/runs", text: "All runs" })),
    h("p", { class: "lead" }, "Run ", h("code", { text: run.run_id }),
      run.live ? " · live: this page follows it until it ends" : ""),
    h("dl", { class: "pairs card" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)])),
    continuable(run.status) && !run.live ? continueSection(run) : null,
    run.evidence ? h("section", { class: "card", "aria-labelledby": "evidence-title" }, h("h2", { id: "evidence-title", text: "Evidence" }),
      h("pre", { class: "step-detail", text: JSON.stringify(run.evidence, null, 2) })) : null,
    h("section", { class: "card", "aria-labelledby": "steps-title" }, h("h2", { id: "steps-title", text: "Timeline" }),
      run.kept || run.live
        ? h("ol", { class: "timeline" }, steps)
        : h("p", { class: "note timeline", text: "No timeline was kept for this run: it ran while the portal was not served." }),
      run.left_out ? h("p", { class: "note", text: `${run.left_out} later steps were left out (at most 400 are kept per run).` }) : null),
  ].filter(Boolean));
  if (run.live) {
    setTimeout(() => {
      if (location.hash === here && main.isConnected) renderTimeline(main, runId);
    }, 1000);
  }
}
