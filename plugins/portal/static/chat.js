// Chat: pick an agent and a conversation, send, stream the reply over SSE (POST /chat/stream,
// ended by its result event), cancel, and reconnect after a dropped connection with
// Last-Event-ID (GET /runs/{id}/events): each event is applied once, by its id. Every reply
// shows its status and keeps it through a reload (local storage) and through reopening the
// conversation from durable history (GET /history/{session}), on this browser or another.
// A tool call that waits for approval (tool.approval, pending) shows a notice with Approve and
// Deny (POST /chat/confirm); a call cut while it ran (the event says `cut`) also takes its result,
// "It happened" (not run again); the notice shows the decision when the stream says it.
// A reply that ended incomplete has Continue: the run goes on in place, as its next attempt
// (POST /runs/{id}/continue/stream), with an optional steering message and a raised limit, and
// its reply streams into the same reply; the earlier attempt stays above it.
// The list of conversations is the server's (GET /conversations: this key's, on every device),
// with search, rename (PATCH) and delete (DELETE, refused while a run of it goes on); local
// storage only caches the state of replies this browser follows. Each message has actions:
// Copy; a reply, Retry (its request again, as a new run); the person's own, Edit and resend.
// The header shows today's spend against the daily budget (GET /costs/today).

import { ApiError, api, apiKey, get, openStream, randomId, readEvents } from "./api.js";
import {
  applyApproval, applyResult, approvalNotice, approvalOf, argumentsPreview, awaitsDecision, continuable, continueBody, continueFields, isCutCall,
  countTool, load, mergeHistory, namespace, newConversation, notice, pendingReply, raisable, refusalText, reply, save,
  titleOf, usageText, budgetLine, askedBy,
} from "./chatstate.js";
import { copy, copyLabel, renderMarkdown } from "./md.js";
import { errorText, formatTime, h, toast, uid } from "./dom.js";

const ctx = {
  ns: null, state: null, main: null, agents: [], following: new Set(), saveTimer: null, drawn: null,
  continuing: new Map(), // run id -> the Continue form's state, while it is open
  handoff: null, // a continuation started elsewhere (a run's timeline), for the chat to follow
  list: null, // the server's list of this key's conversations (GET /conversations?q=), or null
  listError: null,
  query: "", // the search of that list
  renaming: null, // the session id whose title is being edited, and the text typed: {id, text}
  confirming: null, // the session id whose deletion waits for a confirmation
  editing: null, // the run id of the person's message being edited, and the text: {runId, text}
  today: "", // the header's line of today's spend against the daily budget
};

function persistSoon() {
  clearTimeout(ctx.saveTimer);
  ctx.saveTimer = setTimeout(() => save(ctx.ns, ctx.state), 150);
}

function persistNow() {
  clearTimeout(ctx.saveTimer);
  save(ctx.ns, ctx.state);
}

window.addEventListener("pagehide", () => {
  if (ctx.state) persistNow();
});

const conversation = (sessionId) => ctx.state.conversations[sessionId] || null;
const current = () => (ctx.state.current ? conversation(ctx.state.current) : null);
const visible = () => ctx.main && ctx.main.isConnected && ctx.main.querySelector(".chat");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function renderChat(main, params) {
  ctx.main = main;
  const ns = await namespace(apiKey());
  if (ns !== ctx.ns) {
    ctx.ns = ns;
    ctx.state = load(ns);
  }
  const sideReads = Promise.all([loadList(), loadToday()]); // asked beside the agents
  try {
    ({ agents: ctx.agents } = await get("/agents"));
  } catch (error) {
    main.replaceChildren(h("h1", { text: "Chat" }), h("p", { class: "notice", role: "alert", text: errorText(error) }));
    return;
  }
  if (params.get("session")) await openSession(params.get("session"));
  else if (current() && current().messages.length) await stillThere(current());
  if (params.get("agent") && !params.get("session")) {
    // The conversation on screen with this agent stays (a reload reopens it); another agent's
    // starts a new one.
    const on = current();
    if (!on || on.agent_id !== params.get("agent")) startConversation(params.get("agent"));
  }
  await sideReads;
  draw();
  const conv = current();
  if (ctx.handoff && conv && ctx.handoff.sessionId === conv.session_id) {
    const { runId, text, response } = ctx.handoff;
    ctx.handoff = null;
    if (reply(conv, runId)) goOn(conv.session_id, runId, text, response);
  }
  // A conversation started here that has no message yet has no history to read (a 404).
  if (conv && conv.messages.length) refreshFromHistory(conv.session_id, { quiet: true });
  for (const c of Object.values(ctx.state.conversations)) {
    for (const m of c.messages) {
      if (m.role === "assistant" && !m.final && m.status === "running") follow(c.session_id, m.run_id);
    }
  }
}

function startConversation(agentId) {
  for (const [id, c] of Object.entries(ctx.state.conversations)) {
    if (!c.messages.length) delete ctx.state.conversations[id]; // never used: not kept
  }
  const conv = newConversation(agentId, randomId());
  ctx.state.conversations[conv.session_id] = conv;
  ctx.state.current = conv.session_id;
  persistNow();
  return conv;
}

// -- the list of conversations (the server's) --------------------------------------------------

async function loadList() {
  try {
    const q = ctx.query.trim();
    const { conversations } = await get(`/conversations?limit=100${q ? `&q=${encodeURIComponent(q)}` : ""}`);
    ctx.list = conversations;
    ctx.listError = null;
  } catch (error) {
    ctx.listError = errorText(error);
  }
}

async function refreshList() {
  await loadList();
  if (visible()) draw();
}

async function loadToday() {
  try {
    ctx.today = budgetLine(await get("/costs/today"));
  } catch {
    ctx.today = "";
  }
}

// A run ended: the list (status, last activity) and today's spend change.
function ended() {
  Promise.all([loadList(), loadToday()]).then(() => {
    if (visible()) draw();
  });
}

// Forget what this browser keeps of a conversation (deleted here or elsewhere).
function forget(sessionId) {
  delete ctx.state.conversations[sessionId];
  if (ctx.state.current === sessionId) ctx.state.current = null;
  persistNow();
}

// A conversation cached here that was deleted elsewhere is not reopened (GET /conversations/{id}:
// 404). One whose first run has not reached the server yet is kept.
async function stillThere(conv) {
  try {
    await get(`/conversations/${encodeURIComponent(conv.session_id)}`);
  } catch (error) {
    const settled = conv.messages.every((m) => m.role === "user" || m.final);
    if (error instanceof ApiError && error.status === 404 && settled) forget(conv.session_id);
  }
}

async function rename(sessionId, title) {
  try {
    const saved = await api("PATCH", `/conversations/${encodeURIComponent(sessionId)}`, { title: title.trim() || null });
    const conv = conversation(sessionId);
    if (conv) conv.title = saved.title;
    ctx.renaming = null;
    persistNow();
    await refreshList();
    focusById(`conv-${sessionId}`);
  } catch (error) {
    toast(`Not renamed: ${errorText(error)}`, "error");
  }
}

async function remove(sessionId) {
  try {
    await api("DELETE", `/conversations/${encodeURIComponent(sessionId)}`);
  } catch (error) {
    ctx.confirming = null;
    draw();
    toast(error instanceof ApiError && error.status === 409
      ? "Not deleted: a run of this conversation is going on. Cancel it (or let it end), then delete."
      : `Not deleted: ${errorText(error)}`, "error");
    focusById(`conv-delete-${sessionId}`);
    return;
  }
  ctx.confirming = null;
  const was = ctx.state.current === sessionId;
  forget(sessionId);
  if (was) startConversation(ctx.main.querySelector("#chat-agent")?.value || (ctx.agents[0] && ctx.agents[0].id));
  await refreshList();
  toast("Conversation deleted");
  focusById("conv-search");
}

// The list as drawn: the server's, with the conversation on screen first when the server has no
// run of it yet (its first message was just sent).
function listed(conv) {
  const items = [...(ctx.list || [])];
  const onScreen = conv && conv.messages.length && !items.some((c) => c.session_id === conv.session_id);
  if (onScreen && !ctx.query.trim()) {
    items.unshift({ session_id: conv.session_id, title: conv.title || titleOf(conv), agent_id: conv.agent_id, status: "running", local: true });
  }
  return items;
}

function conversationItem(c, conv) {
  const id = c.session_id;
  const title = c.title || id;
  const here = conv && id === conv.session_id;
  if (ctx.renaming && ctx.renaming.id === id) {
    const input = h("input", { id: `conv-title-${id}`, name: "title", autocomplete: "off", maxlength: "200" });
    input.value = ctx.renaming.text;
    input.addEventListener("input", () => { ctx.renaming.text = input.value; });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        ctx.renaming = null;
        draw();
        focusById(`conv-rename-${id}`);
      }
    });
    const form = h("form", { class: "rename", "aria-label": `Rename ${title}` },
      h("label", { for: `conv-title-${id}`, text: "New title (empty: its first message)" }), input,
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "primary small", text: "Save" }),
        h("button", { type: "button", class: "small", text: "Cancel", onclick: () => {
          ctx.renaming = null;
          draw();
          focusById(`conv-rename-${id}`);
        } })));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      rename(id, input.value);
    });
    return h("li", { dataset: { sessionId: id } }, form);
  }
  const when = c.last_activity ? formatTime(c.last_activity) : "";
  const status = c.running ? "running" : c.status;
  const actions = c.local ? null : ctx.confirming === id
    ? h("div", { class: "actions confirm", role: "group", "aria-label": `Delete ${title}?` },
      h("span", { text: "Delete it?" }),
      h("button", { type: "button", class: "small danger", id: `conv-delete-yes-${id}`, text: "Delete",
        "aria-label": `Delete the conversation ${title}`, onclick: () => remove(id) }),
      h("button", { type: "button", class: "small", id: `conv-delete-no-${id}`, text: "Keep", onclick: () => {
        ctx.confirming = null;
        draw();
        focusById(`conv-delete-${id}`);
      } }))
    : h("div", { class: "actions" },
      h("button", { type: "button", class: "small link", id: `conv-rename-${id}`, text: "Rename",
        "aria-label": `Rename the conversation ${title}`, onclick: () => {
          ctx.renaming = { id, text: c.renamed ? title : "" };
          ctx.confirming = null;
          draw();
          focusById(`conv-title-${id}`);
        } }),
      h("button", { type: "button", class: "small link", id: `conv-delete-${id}`, text: "Delete",
        "aria-label": `Delete the conversation ${title}`, onclick: () => {
          ctx.confirming = id;
          ctx.renaming = null;
          draw();
          focusById(`conv-delete-no-${id}`);
        } }));
  return h("li", { dataset: { sessionId: id, status: status || "" } },
    h("a", { href: `#/chat?session=${encodeURIComponent(id)}`, id: `conv-${id}`, text: title,
      "aria-current": here ? "page" : null }),
    h("span", { class: "muted conv-meta", text: [c.agent_id, status, when].filter(Boolean).join(" · ") }),
    actions);
}

// Reopen a conversation from durable history (another browser, or one cleared here): only one
// this key has on the server (not deleted).
async function openSession(sessionId) {
  try {
    await get(`/conversations/${encodeURIComponent(sessionId)}`);
  } catch (error) {
    const missing = error instanceof ApiError && error.status === 404;
    const cached = conversation(sessionId);
    const pending = cached && cached.messages.some((m) => m.role !== "user" && !m.final);
    if (missing && !pending) {
      forget(sessionId);
      toast(`No stored conversation ${sessionId} for this key`, "error");
      return;
    }
    if (!missing) toast(`Conversation not loaded: ${errorText(error)}`, "error");
  }
  let conv = conversation(sessionId);
  if (!conv) {
    conv = newConversation(null, sessionId);
    ctx.state.conversations[sessionId] = conv;
  }
  ctx.state.current = sessionId;
  await refreshFromHistory(sessionId, { quiet: false });
  if (!conv.agent_id && ctx.agents.length) conv.agent_id = ctx.agents[0].id;
  persistNow();
}

async function refreshFromHistory(sessionId, { quiet }) {
  const conv = conversation(sessionId);
  if (!conv) return;
  try {
    const { entries } = await get(`/history/${encodeURIComponent(sessionId)}`);
    mergeHistory(conv, entries);
    for (const m of conv.messages) {
      if (m.role === "assistant" && m.status === "interrupted") await retriedSince(m);
    }
    persistNow();
    for (const m of conv.messages) {
      if (m.role === "assistant" && !m.final) follow(sessionId, m.run_id);
    }
  } catch (error) {
    if (!quiet && !(error instanceof ApiError && error.status === 404 && conv.messages.length)) {
      toast(error instanceof ApiError && error.status === 404
        ? `No stored conversation ${sessionId} for this key`
        : `History not loaded: ${errorText(error)}`, "error");
    }
  }
  if (visible()) draw();
}

// A run the history shows interrupted may run again since: its same-id retry after a crash,
// here or on another server. Its reply then follows the new attempt from its first event (a
// call the crash cut may wait there for a person: docs/running.md#the-effect-ledger).
async function retriedSince(m) {
  let run;
  try {
    run = await get(`/runs/${encodeURIComponent(m.run_id)}`);
  } catch {
    return; // not visible (any more): the reply stays as the history says
  }
  // Any later attempt: running, suspended waiting for a decision, or already ended (a resumed
  // run may end before it is asked about); its events tell the reply how.
  if (!run || (run.attempt ?? 1) <= (m.attempt || 1)) return;
  Object.assign(m, { status: "running", final: false, attempt: run.attempt, lastEventId: 0 });
}

// -- sending and following ------------------------------------------------------------------

// Send `text` as a new run of the conversation on screen (another agent's: a new conversation).
async function send(text, agentId = ctx.main.querySelector("#chat-agent").value) {
  let conv = current();
  if (!conv || (conv.messages.length && conv.agent_id !== agentId)) conv = startConversation(agentId);
  conv.agent_id = agentId;
  const runId = randomId();
  conv.messages.push({ role: "user", text, run_id: runId });
  const target = pendingReply(runId);
  conv.messages.push(target);
  if (!conv.title) conv.title = titleOf(conv);
  conv.updated = Date.now();
  persistNow();
  draw();
  let response;
  try {
    response = await openStream("POST", "/chat/stream", {
      body: { agent_id: agentId, text, session_id: conv.session_id, run_id: runId },
    });
  } catch {
    response = null; // the request may or may not have reached the server: follow the run id
  }
  if (response && !response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    target.status = "refused";
    target.final = true;
    target.error = (body && body.error) || `HTTP ${response.status}`;
    persistNow();
    drawReply(conv.session_id, runId);
    return;
  }
  if (response) {
    target.accepted = true; // the server holds the run: it can be cancelled from now on
    drawReply(conv.session_id, runId);
  }
  follow(conv.session_id, runId, response);
}

// Retry: the request of a reply's run again, as a new run of the same conversation and agent.
function retry(sessionId, runId) {
  const conv = conversation(sessionId);
  const text = conv && askedBy(conv, runId);
  if (!text || !conv.agent_id) return;
  ctx.state.current = sessionId;
  send(text, conv.agent_id);
  focusById("chat-text");
}

// Edit and resend: the person's message, changed, sent as a new run (the first stays in the
// conversation's history, which is append-only).
function startEdit(runId, text) {
  ctx.editing = { runId, text };
  draw();
  focusById(`edit-${runId}-text`);
}

function closeEdit(runId) {
  ctx.editing = null;
  draw();
  focusById(`edit-${runId}`);
}

function userElement(conv, m) {
  const editing = ctx.editing && ctx.editing.runId === m.run_id;
  if (editing) {
    const box = h("textarea", { id: `edit-${m.run_id}-text`, name: "text", rows: 3, required: true });
    box.value = ctx.editing.text;
    box.addEventListener("input", () => { ctx.editing.text = box.value; });
    const form = h("form", { class: "edit", "aria-label": "Edit your message" },
      h("label", { for: `edit-${m.run_id}-text`, text: "Edit your message" }), box,
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "primary small", id: `edit-${m.run_id}-send`, text: "Ask again" }),
        h("button", { type: "button", class: "small", text: "Cancel", onclick: () => closeEdit(m.run_id) })));
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        closeEdit(m.run_id);
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = box.value.trim();
      if (!value) return;
      ctx.editing = null;
      send(value, conv.agent_id || undefined);
      focusById("chat-text");
    });
    return h("article", { class: "msg user editing", dataset: { runId: m.run_id }, "aria-label": "You" }, form);
  }
  const copyButton = h("button", { type: "button", class: "small link", id: `copy-${m.run_id}-asked`, text: copyLabel(`copy-${m.run_id}-asked`, "Copy"),
    "aria-label": "Copy your message" });
  copyButton.addEventListener("click", () => copy(m.text, copyButton));
  return h("article", { class: "msg user", dataset: { runId: m.run_id }, "aria-label": "You" },
    h("div", { class: "text", text: m.text }),
    h("div", { class: "msg-actions" }, copyButton,
      h("button", { type: "button", class: "small link", id: `edit-${m.run_id}`, text: "Edit",
        "aria-label": "Edit your message and ask again", onclick: () => startEdit(m.run_id, m.text) })));
}

async function follow(sessionId, runId, first = null) {
  if (ctx.following.has(runId)) return;
  ctx.following.add(runId);
  try {
    let response = first;
    let attempt = 0;
    let missing = 0;
    while (true) {
      const conv = conversation(sessionId);
      const target = conv && reply(conv, runId);
      if (!target || target.final) return;
      if (!response) {
        try {
          response = await openStream("GET", `/runs/${encodeURIComponent(runId)}/events`, { lastEventId: target.lastEventId });
        } catch {
          response = null;
        }
      }
      if (response && response.status === 204) {
        await settle(sessionId, runId); // seen its end: the stored record says how it ended
        return;
      }
      if (response && response.status === 404) {
        missing += 1; // not started yet, or not this principal's
        if (missing > 5) {
          target.status = "refused";
          target.final = true;
          target.error = "no such run for this key";
          persistNow();
          drawReply(sessionId, runId);
          return;
        }
      } else if (response && response.ok) {
        missing = 0;
        try {
          for await (const event of readEvents(response)) {
            if (apply(sessionId, runId, event) === "result") return;
          }
        } catch {
          /* the connection dropped: reconnect below */
        }
      } else if (response && (response.status === 401 || response.status === 403)) {
        target.reconnecting = false;
        target.lost = true;
        drawReply(sessionId, runId);
        return;
      }
      response = null;
      attempt += 1;
      if (target.final) return;
      target.reconnecting = true;
      drawReply(sessionId, runId);
      if (attempt > 40) {
        target.reconnecting = false;
        target.lost = true;
        persistNow();
        drawReply(sessionId, runId);
        return;
      }
      await sleep(Math.min(250 * attempt, 3000));
    }
  } finally {
    ctx.following.delete(runId);
  }
}

// One event of a run's stream, applied once (its id past the last one seen).
function apply(sessionId, runId, event) {
  const conv = conversation(sessionId);
  const target = conv && reply(conv, runId);
  if (!target) return null;
  if (event.id !== null && event.id <= target.lastEventId) return event.event;
  const data = event.data || {};
  switch (event.event) {
    case "delta":
      target.text += data.text || "";
      target.streamed = (target.streamed || "") + (data.text || "");
      break;
    case "run.limits":
      target.limits = raisable(data);
      break;
    case "tool.call":
      countTool(target, String(data.name || "(unnamed)"));
      break;
    case "tool.approval":
      applyApproval(conv, runId, data);
      break;
    case "workflow.step":
      target.activity = [...(target.activity || []), `step ${data.step}: ${data.status}`].slice(-20);
      break;
    case "gap":
      target.gap = true;
      break;
    case "run_error":
      target.note = "The HTTP deadline passed; following the run.";
      break;
    case "result":
      applyResult(conv, runId, data);
      break;
    default:
      break;
  }
  if (event.id !== null) target.lastEventId = event.id;
  target.reconnecting = false;
  target.accepted = true;
  if (event.event === "result") {
    persistNow();
    ended();
    if (data.replayed_from_store && !target.text) refreshFromHistory(sessionId, { quiet: true });
  } else {
    persistSoon();
  }
  drawReply(sessionId, runId);
  return event.event;
}

async function settle(sessionId, runId) {
  const conv = conversation(sessionId);
  try {
    const run = await get(`/runs/${encodeURIComponent(runId)}`);
    if (run.status && run.status !== "running") {
      applyResult(conv, runId, run);
      ended();
    }
  } catch {
    /* left as it is */
  }
  persistNow();
  drawReply(sessionId, runId);
}

async function cancel(runId) {
  try {
    await api("POST", "/chat/cancel", { run_id: runId });
  } catch (error) {
    toast(`Not cancelled: ${errorText(error)}`, "error");
  }
}

// A person's decision of a waiting call. The approver is left to the server, which records the
// key's principal (keyless: local): the portal is not told its principal, and a name typed
// here would be no more than a claim. The notice changes when the stream's tool.approval says
// the decision; an answer 409 with the stored request (decided elsewhere) shows that one.
// `result` (a string): the call, cut while it ran, happened and this is its result.
async function decide(sessionId, runId, callId, approved, result = null) {
  const conv = conversation(sessionId);
  const approval = conv && approvalOf(conv, runId, callId);
  if (!approval || approval.status !== "pending" || approval.sending || approval.sent) return;
  approval.sending = result !== null ? "happened" : approved ? "approved" : "denied";
  approval.error = null;
  drawReply(sessionId, runId);
  const body = result !== null ? { run_id: runId, call_id: callId, result } : { run_id: runId, call_id: callId, approved };
  try {
    const answer = await api("POST", "/chat/confirm", body);
    approval.sent = approval.sending;
    const m = reply(conv, runId);
    if (answer && answer.resumed && m && awaitsDecision(m)) { // the decision resumed it: follow
      await retriedSince(m);
      if (!m.final) follow(sessionId, runId);
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 409 && error.body.approval) {
      applyApproval(conv, runId, error.body.approval);
    } else {
      approval.error = errorText(error);
    }
  } finally {
    approval.sending = null;
  }
  persistNow();
  drawReply(sessionId, runId);
}

// -- continuing an incomplete run ------------------------------------------------------------

function openContinue(sessionId, runId) {
  const conv = conversation(sessionId);
  const m = conv && reply(conv, runId);
  if (!m) return;
  ctx.continuing.set(runId, { text: "", values: {}, busy: false, error: null, limits: m.limits || null });
  drawReply(sessionId, runId);
  focusById(`continue-${runId}-text`);
  if (!m.limits) { // limits not seen here (another browser's run): the run's own, for the prefill
    get(`/runs/${encodeURIComponent(runId)}/timeline`).then((run) => {
      const state = ctx.continuing.get(runId);
      if (state && run.limits) {
        state.limits = raisable(run.limits);
        drawReply(sessionId, runId);
      }
    }).catch(() => {});
  }
}

function closeContinue(sessionId, runId) {
  ctx.continuing.delete(runId);
  drawReply(sessionId, runId);
  focusById(`continue-${runId}-open`);
}

async function submitContinue(sessionId, runId, body) {
  const state = ctx.continuing.get(runId);
  if (!state || state.busy) return;
  state.busy = true;
  state.error = null;
  drawReply(sessionId, runId);
  let response;
  try {
    response = await openStream("POST", `/runs/${encodeURIComponent(runId)}/continue/stream`, { body });
  } catch {
    response = null; // it may have reached the server: follow the run id
  }
  if (response && !response.ok) {
    let answer = null;
    try {
      answer = await response.json();
    } catch {
      answer = null;
    }
    state.busy = false;
    state.error = refusalText(response.status, answer);
    drawReply(sessionId, runId);
    focusById(`continue-${runId}-go`);
    if (response.status === 409) { // continued elsewhere, maybe to its end: said where it shows
      toast(state.error, "error");
      refreshFromHistory(sessionId, { quiet: true });
    }
    return;
  }
  ctx.continuing.delete(runId);
  goOn(sessionId, runId, body.text || "", response);
}

// The reply of runId becomes its next attempt's, following `response` (the continue stream):
// the attempt it was is kept above it, with the steering message.
function goOn(sessionId, runId, text, response) {
  const conv = conversation(sessionId);
  const m = conv && reply(conv, runId);
  if (!m) return;
  const attempt = m.attempt || 1;
  m.earlier = [...(m.earlier || []), { attempt, text: m.text, status: m.status, reason: m.reason, steer: text || null }];
  Object.assign(m, {
    attempt: attempt + 1, text: "", streamed: "", status: "running", final: false, accepted: true, lastEventId: 0,
    reason: null, error: null, verification: null, tools: [], activity: [], gap: false, note: null, lost: false,
    reconnecting: false, proof: null, tokens: null, cost_usd: undefined,
  });
  conv.updated = Date.now();
  persistNow();
  drawReply(sessionId, runId);
  focusById(`reply-${runId}`);
  follow(sessionId, runId, response);
}

// A continuation asked for on a run's timeline: the chat opens the run's conversation and its
// reply streams there, under the same run id.
export function continueInChat(sessionId, runId, text, response) {
  ctx.handoff = { sessionId, runId, text, response };
  location.hash = `#/chat?session=${encodeURIComponent(sessionId)}`;
}

function focusById(id) {
  const el = ctx.main && document.getElementById(id);
  if (el && ctx.main.contains(el)) el.focus({ preventScroll: false });
}

// -- drawing --------------------------------------------------------------------------------

function replyElement(m, agentId) {
  const { kind, text, fix } = notice(m);
  const fixLink = fix && agentId
    ? h("a", { href: `#/agents/${encodeURIComponent(agentId)}`, text: "Choose its provider" })
    : null;
  const body = m.text
    ? h("div", { class: "text md" }, renderMarkdown(m.text))
    : h("div", { class: "text" }, m.status === "running" ? "…" : "");
  const details = [];
  if (m.limits && m.limits.max_turns) {
    const t = m.limits.max_turns;
    details.push(`turns: ${t.unlimited ? "unlimited" : t.value} (${t.source})`);
  }
  if (m.proof) details.push(`proof: ${m.proof.receipts} receipt${m.proof.receipts === 1 ? "" : "s"}, ${String(m.proof.sha256).slice(0, 12)}`);
  const usage = usageText(m);
  if (usage) details.push(usage);
  if (m.gap) details.push("some events were dropped by the server; the text is the final reply");
  if (m.note) details.push(m.note);
  if (m.attempt > 1) details.push(`attempt ${m.attempt}`);
  const cancelButton = m.status === "running" && !m.final && m.accepted
    ? h("button", { type: "button", class: "small", text: "Cancel", onclick: () => cancel(m.run_id) })
    : null;
  const going = ctx.continuing.get(m.run_id);
  const sessionId = sessionOf(m.run_id);
  const canGoOn = continuable(m.status) && m.final;
  const continueButton = canGoOn && !going
    ? h("button", { type: "button", class: "small", id: `continue-${m.run_id}-open`, text: "Continue",
      onclick: () => openContinue(sessionId, m.run_id) })
    : null;
  const form = canGoOn && going
    ? continueForm({ runId: m.run_id, state: going, prefix: `continue-${m.run_id}`,
      fields: continueFields(m.reason, going.limits),
      onSubmit: (body) => submitContinue(sessionId, m.run_id, body), onCancel: () => closeContinue(sessionId, m.run_id) })
    : null;
  const approvals = (m.approvals || []).map((a) => approvalElement(m, a));
  const copyButton = m.text && m.final
    ? h("button", { type: "button", class: "small link", id: `copy-${m.run_id}`, text: copyLabel(`copy-${m.run_id}`, "Copy"), "aria-label": "Copy the reply" })
    : null;
  if (copyButton) copyButton.addEventListener("click", () => copy(m.text, copyButton));
  const retryButton = m.final && sessionId && askedBy(conversation(sessionId), m.run_id)
    ? h("button", { type: "button", class: "small link", id: `retry-${m.run_id}`, text: "Retry",
      "aria-label": "Retry: ask the same again, as a new run", onclick: () => retry(sessionId, m.run_id) })
    : null;
  const earlier = (m.earlier || []).map((a) => {
    const said = `Attempt ${a.attempt} · ${notice({ status: a.status, reason: a.reason }).text}`;
    return h("div", { class: "attempt", dataset: { attempt: a.attempt } },
      a.text
        ? h("details", {}, h("summary", { text: said }), h("div", { class: "text md" }, renderMarkdown(a.text)))
        : h("p", { class: "meta", text: said }),
      a.steer ? h("p", { class: "steer" }, h("strong", { text: "You: " }), a.steer) : null);
  });
  return h("article", { class: "msg assistant", id: `reply-${m.run_id}`, tabindex: "-1",
    dataset: { runId: m.run_id, status: m.status, attempt: m.attempt || 1 }, "aria-label": "Reply" },
    earlier.length ? h("div", { class: "attempts" }, earlier) : null,
    approvals.length ? h("div", { class: "approvals" }, approvals) : null,
    body,
    h("p", { class: `notice ${kind}`, dataset: { status: m.status, verification: m.verification || "" } }, text, cancelButton ? " " : "", cancelButton,
      continueButton ? " " : "", continueButton, fixLink ? " · " : "", fixLink),
    form,
    details.length ? h("p", { class: "meta", text: details.join(" · ") }) : null,
    m.tools && m.tools.length
      ? h("p", { class: "meta tools-used", text: `tools: ${m.tools.map(([n, c]) => (c > 1 ? `${n} ×${c}` : n)).join(", ")}` })
      : null,
    m.activity && m.activity.length ? h("p", { class: "meta", text: m.activity.join(" · ") }) : null,
    m.accepted || m.final
      ? h("p", { class: "meta" }, h("a", { href: `#/runs/${encodeURIComponent(m.run_id)}`, text: "Timeline of this run" }))
      : null,
    copyButton || retryButton ? h("div", { class: "msg-actions" }, copyButton, retryButton) : null);
}

// The notice of one call that needs (or needed) approval: the tool, its arguments, why, and
// Approve / Deny while it waits. Each button names the call for screen readers.
function approvalElement(m, a) {
  const ended = Boolean(m.final) && a.status === "pending" && !awaitsDecision(m);
  const state = approvalNotice(a, ended);
  const titleId = uid("approval");
  const whyId = uid("approval-why");
  const reasons = a.reasons && a.reasons.length ? a.reasons : null;
  const waiting = a.status === "pending" && !ended;
  const busy = Boolean(a.sending || a.sent);
  const button = (approved) => h("button", {
    type: "button",
    class: approved ? "primary small" : "small",
    text: approved ? "Approve" : "Deny",
    "aria-label": `${approved ? "Approve" : "Deny"} the call of ${a.tool} (${a.call_id})`,
    "aria-describedby": reasons ? whyId : null,
    disabled: busy,
    onclick: () => decide(sessionOf(m.run_id), m.run_id, a.call_id, approved),
  });
  return h("section", { class: `approval ${state.kind}`, role: "group", "aria-labelledby": titleId, tabindex: "-1",
    dataset: { callId: a.call_id, status: a.status } },
  h("p", { class: "approval-title", id: titleId },
    h("strong", { text: waiting ? "Approval needed: " : "Tool call " }), h("code", { text: a.tool || "(unknown tool)" })),
  h("pre", { class: "approval-args", "aria-label": "Arguments", text: argumentsPreview(a.arguments) }),
  reasons ? h("p", { class: "approval-why", id: whyId, text: `Why: ${reasons.join("; ")}` }) : null,
  h("p", { class: "approval-state", dataset: { status: a.status }, text: state.text }),
  a.status === "happened" && a.result !== null
    ? h("pre", { class: "approval-args", "aria-label": "Its result, as given", text: a.result }) : null,
  waiting ? h("div", { class: "approval-actions" }, button(true), button(false)) : null,
  waiting && isCutCall(a) ? happenedForm(m, a, busy) : null);
}

// For a call cut while it ran: "it happened, here is its result". The model gets the text as
// the call's result and the call is not run again; the draft outlives redraws of the reply.
function happenedForm(m, a, busy) {
  const id = uid("happened");
  const box = h("textarea", { id, name: "result", rows: 2, maxlength: 100000, disabled: busy });
  box.value = a.draft || "";
  const send = h("button", { type: "submit", class: "small", text: "It happened",
    "aria-label": `It happened: send the result of the call of ${a.tool} (${a.call_id})`,
    disabled: busy || !box.value.trim() });
  box.addEventListener("input", () => {
    a.draft = box.value;
    send.disabled = busy || !box.value.trim();
  });
  const form = h("form", { class: "approval-happened", "aria-label": `It happened: ${a.tool} (${a.call_id})` },
    h("label", { for: id, text: "If it happened, its result (the model gets it; the call is not run again)" }),
    box, h("div", { class: "approval-actions" }, send));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!box.value.trim()) return;
    decide(sessionOf(m.run_id), m.run_id, a.call_id, false, box.value);
  });
  return form;
}

// The session holding the reply of runId (a notice's buttons act on their own run only).
function sessionOf(runId) {
  for (const c of Object.values(ctx.state.conversations)) if (reply(c, runId)) return c.session_id;
  return null;
}

function drawReply(sessionId, runId) {
  if (!visible() || ctx.state.current !== sessionId) return;
  const conv = conversation(sessionId);
  const m = conv && reply(conv, runId);
  const old = ctx.main.querySelector(`article.assistant[data-run-id="${CSS.escape(runId)}"]`);
  if (!m || !old) return;
  const active = document.activeElement;
  const focusedCall = active && old.contains(active) ? active.closest("[data-call-id]") : null;
  const focusedId = active && old.contains(active) && active.id ? active.id : null;
  const fresh = replyElement(m, conv.agent_id);
  old.replaceWith(fresh);
  const same = focusedId && document.getElementById(focusedId);
  if (same && fresh.contains(same)) {
    same.focus({ preventScroll: true }); // a field of the Continue form, or the reply itself
  } else if (focusedCall) { // keep the keyboard where it was: on the call's notice, or its button
    const again = [...fresh.querySelectorAll("[data-call-id]")].find((el) => el.dataset.callId === focusedCall.dataset.callId);
    const target = again && (again.querySelector("button:not([disabled])") || again);
    if (target) target.focus({ preventScroll: true });
  }
  const list = ctx.main.querySelector(".messages");
  if (list) list.scrollTop = list.scrollHeight;
}

function draw() {
  const main = ctx.main;
  const conv = current();
  // A redraw replaces every element: the keyboard stays on the control it was on, and a draft
  // being typed stays in the message box of the same conversation.
  const focused = main.contains(document.activeElement) && document.activeElement.id ? document.activeElement.id : null;
  const oldText = main.querySelector("#chat-text");
  const draft = oldText && conv && ctx.drawn === conv.session_id
    ? { value: oldText.value, start: oldText.selectionStart, end: oldText.selectionEnd }
    : null;
  const agentSelect = h("select", { id: "chat-agent", name: "agent" },
    ctx.agents.filter((a) => a.enabled).map((a) => h("option", { value: a.id, text: a.name || a.id })));
  if (conv && conv.agent_id) agentSelect.value = conv.agent_id;
  agentSelect.addEventListener("change", () => {
    const c = current();
    if (c && c.messages.length && c.agent_id !== agentSelect.value) {
      startConversation(agentSelect.value);
      draw();
    } else if (c) {
      c.agent_id = agentSelect.value;
      persistNow();
    }
  });
  const openInput = h("input", { id: "open-session", name: "session", autocomplete: "off", spellcheck: "false" });
  const openForm = h("form", { class: "open" },
    h("label", { for: "open-session", text: "Open a conversation by its session id" }), openInput,
    h("button", { type: "submit", text: "Open" }));
  openForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = openInput.value.trim();
    if (!id) return;
    await openSession(id);
    draw();
  });
  const newButton = h("button", { type: "button", text: "New conversation" });
  newButton.addEventListener("click", () => {
    startConversation(agentSelect.value || (ctx.agents[0] && ctx.agents[0].id));
    draw();
    ctx.main.querySelector("#chat-text").focus();
  });
  const items = listed(conv);
  const list = h("ul", { class: "conversation-list", "aria-labelledby": "conv-title" }, items.map((c) => conversationItem(c, conv)));
  const search = h("input", { id: "conv-search", name: "q", type: "search", autocomplete: "off", spellcheck: "false" });
  search.value = ctx.query;
  let searchTimer = null;
  search.addEventListener("input", () => {
    ctx.query = search.value;
    clearTimeout(searchTimer);
    searchTimer = setTimeout(refreshList, 200);
  });
  const searchForm = h("form", { class: "search", role: "search", "aria-label": "Conversations" },
    h("label", { for: "conv-search", text: "Search conversations" }), search);
  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(searchTimer);
    refreshList();
  });
  const listNote = ctx.listError
    ? h("p", { class: "notice", role: "alert", text: `List not loaded: ${ctx.listError}` })
    : ctx.list && !items.length
      ? h("p", { class: "note", id: "conv-none", text: ctx.query.trim() ? "No conversation matches." : "No conversations yet." })
      : null;
  const messages = h("ol", { class: "messages", "aria-live": "polite", "aria-label": "Messages" },
    conv && conv.messages.length
      ? conv.messages.map((m) => h("li", {}, m.role === "user"
        ? userElement(conv, m)
        : replyElement(m, conv.agent_id)))
      : h("li", { class: "empty" }, h("p", { class: "note", text: ctx.agents.length ? "Say something to start." : "No agents in this workspace." })));
  const text = h("textarea", { id: "chat-text", name: "text", rows: 3, required: true, placeholder: "Message" });
  const sendButton = h("button", { type: "submit", class: "primary", text: "Send" });
  const composer = h("form", { class: "composer" },
    h("label", { for: "chat-text", class: "visually-hidden", text: "Message" }), text, sendButton);
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = text.value.trim();
    if (!value || !agentSelect.value) return;
    text.value = "";
    send(value); // redraws the page before it waits for the server
    const box = ctx.main.querySelector("#chat-text");
    if (box) box.focus({ preventScroll: true }); // the next message is typed where this one was
  });
  main.replaceChildren(h("div", { class: "chat" },
    h("aside", { class: "conversations card", "aria-labelledby": "conv-title" },
      h("h2", { id: "conv-title", text: "Conversations" }), newButton, searchForm, listNote, list, openForm),
    h("section", { class: "thread", "aria-labelledby": "chat-title" },
      h("div", { class: "thread-head" },
        h("h1", { id: "chat-title", text: "Chat" }),
        h("label", { for: "chat-agent", text: "Agent" }), agentSelect,
        conv ? h("span", { class: "muted session", text: `session ${conv.session_id}` }) : null,
        ctx.today ? h("span", { class: "muted budget", id: "chat-budget", text: ctx.today }) : null),
      messages, composer)));
  messages.scrollTop = messages.scrollHeight;
  if (draft) {
    text.value = draft.value;
    text.setSelectionRange(draft.start, draft.end);
  }
  ctx.drawn = conv ? conv.session_id : null;
  const again = focused && document.getElementById(focused);
  if (again && main.contains(again)) again.focus({ preventScroll: true });
}

// -- the Continue form (a reply's and a run timeline's) -----------------------------------------

// The form. `state`: {text, values: {name: text}, busy, error} (kept by the caller, so that a
// redraw keeps what was typed); `prefix`: unique to the run, so that focus survives a
// redraw; `fields`: continueFields(); onSubmit(body), onCancel().
export function continueForm({ runId, state, fields, prefix, onSubmit, onCancel }) {
  const textId = `${prefix}-text`;
  const helpId = `${prefix}-help`;
  const text = h("textarea", { id: textId, name: "text", rows: 2, "aria-describedby": helpId });
  text.value = state.text || "";
  text.addEventListener("input", () => { state.text = text.value; });
  const rows = fields.map((f) => {
    const id = `${prefix}-${f.name}`;
    const input = h("input", {
      id, name: f.name, type: f.duration ? "text" : "number", min: f.duration ? null : "0",
      step: f.duration ? null : "1", autocomplete: "off",
      "aria-describedby": `${id}-now`, dataset: { limit: f.name },
    });
    input.value = state.values[f.name] ?? f.value;
    input.addEventListener("input", () => { state.values[f.name] = input.value; });
    return h("div", { class: "field" }, h("label", { for: id, text: f.label }), input,
      h("p", { class: "help", id: `${id}-now`, text: `${f.now ? `now ${f.now}; ` : ""}${f.duration ? "e.g. 30m, 2h; " : "0: unlimited; "}empty: the agent's own` }));
  });
  const form = h("form", { class: "continue card", "aria-label": `Continue run ${runId.slice(0, 12)}`, dataset: { runId } },
    h("p", { class: "help", id: helpId, text: "The run goes on from where it stopped, as its next attempt. A message is added as yours." }),
    h("div", { class: "field" }, h("label", { for: textId, text: "Message to steer it (optional)" }), text),
    rows,
    state.error ? h("p", { class: "error", role: "alert", text: state.error }) : null,
    h("div", { class: "actions" },
      h("button", { type: "submit", class: "primary small", id: `${prefix}-go`, disabled: Boolean(state.busy), text: state.busy ? "Continuing…" : "Continue the run" }),
      h("button", { type: "button", class: "small", id: `${prefix}-close`, text: "Close", onclick: onCancel })));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.busy) return;
    const values = Object.fromEntries(fields.map((f) => [f.name, form.querySelector(`#${CSS.escape(`${prefix}-${f.name}`)}`).value]));
    onSubmit(continueBody(text.value, values));
  });
  return form;
}
