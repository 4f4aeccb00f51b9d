// The portal's client of /api/v1: the same API every client uses, with a bearer key when the
// server has keys (kept in this tab's sessionStorage, or localStorage when asked to remember).
// Streams are read with fetch, so that Authorization and Last-Event-ID are sent as headers.

export const BASE = "/api/v1";
const KEY = "soulacy-key";

export function apiKey() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
}

export function setApiKey(value, remember) {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
  if (value) (remember ? localStorage : sessionStorage).setItem(KEY, value);
  window.dispatchEvent(new CustomEvent("soulacy:key"));
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
    this.fields = (body && body.fields) || {};
  }
}

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const key = apiKey();
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

export async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(BASE + path, init);
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    if (response.status === 401) window.dispatchEvent(new CustomEvent("soulacy:unauthorized"));
    throw new ApiError(response.status, data);
  }
  return data;
}

export const get = (path) => api("GET", path);

// A file answer (the support bundle) saved by the browser.
export async function download(path) {
  const response = await fetch(BASE + path, { headers: headers() });
  if (!response.ok) {
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    throw new ApiError(response.status, data);
  }
  const blob = await response.blob();
  const disposition = response.headers.get("content-disposition") || "";
  const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || "download.json";
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  return { name, size: blob.size, text: await blob.text() };
}

// POST /chat/stream or GET /runs/{id}/events: the Response, for readEvents().
export async function openStream(method, path, { body, lastEventId, signal } = {}) {
  const extra = { Accept: "text/event-stream" };
  if (body !== undefined) extra["Content-Type"] = "application/json";
  if (lastEventId) extra["Last-Event-ID"] = String(lastEventId);
  const response = await fetch(BASE + path, {
    method,
    headers: headers(extra),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: "no-store",
  });
  if (response.status === 401) window.dispatchEvent(new CustomEvent("soulacy:unauthorized"));
  return response;
}

// The events of an SSE response body, as {id, event, data} (data parsed as JSON).
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = parseBlock(block);
        if (event) yield event;
      }
    }
  } finally {
    reader.cancel().catch(() => {}); // a reader left early (after the result) lets go
  }
}

function parseBlock(block) {
  const fields = {};
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    fields[name] = name === "data" && fields.data !== undefined ? `${fields.data}\n${value}` : value;
  }
  if (!fields.event && fields.data === undefined) return null;
  let data = fields.data;
  try {
    data = JSON.parse(fields.data);
  } catch {
    /* not JSON: kept as text */
  }
  return { id: fields.id === undefined ? null : Number(fields.id), event: fields.event || "message", data };
}

export function randomId() {
  if (crypto.randomUUID) return crypto.randomUUID().replaceAll("-", "");
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
