// The Hermes desk: plain JavaScript, no build step, talking only to the service that serves it.
// Signed in by an HttpOnly cookie (POST /v1/desk/login); every POST carries X-CSRF-Token.
// Session events arrive over EventSource; a Follower resumes after the last event it handled
// (Last-Event-ID, or ?after= when it has to open a new stream), so nothing is lost or doubled.
"use strict";

const EVENT_TYPES = [
  "session.created", "session.resumed", "session.archived", "session.summary",
  "turn.queued", "turn.started", "turn.completed", "turn.failed",
  "intent.classified", "memory.recalled", "memory.forgotten", "step.updated",
  "message.delta", "message.completed", "message.received",
  "tool.started", "tool.completed", "approval.requested", "approval.resolved",
  "confirmation.requested", "confirmation.resolved",
  "handoff.requested", "handoff.claimed", "handoff.released", "handoff.expired",
  "suggestion.ready",
];

const $ = (id) => document.getElementById(id);
let csrf = "";
let me = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  return node;
}

function pretty(value) {
  return el("pre", {}, JSON.stringify(value, null, 2));
}

class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "http_error";
  }
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (response.status === 401 && me) signInEnded(new ApiError(response.status, data).message);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// -- following a session's events ----------------------------------------------------------------

class Follower {
  // `url(after)` gives the stream's URL (a promise: it may mint a token first); `handle(event)`
  // gets each event once, in order; `state(text)` is told when the stream is live or not.
  constructor(url, handle, state) {
    this.url = url;
    this.handle = handle;
    this.state = state;
    this.last = 0;
    this.source = null;
    this.stopped = false;
    this.retry = null;
    this.chain = Promise.resolve(); // events are handled one after another, in order
  }

  async start() {
    if (this.stopped) return;
    let url;
    try {
      url = await this.url(this.last);
    } catch (error) { // no token to be had yet (the network is down): try again shortly
      this.state("reconnecting");
      this.retry = setTimeout(() => this.start(), 1000);
      return;
    }
    if (this.stopped) return;
    const source = new EventSource(url);
    this.source = source;
    source.onopen = () => this.state("live");
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error, say an expired token): open a new stream from
        // the last event handled.
        this.state("reconnecting");
        source.close();
        if (!this.stopped && this.source === source) {
          this.retry = setTimeout(() => this.start(), 1000);
        }
      } else {
        this.state("reconnecting"); // the browser retries itself, sending Last-Event-ID
      }
    };
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (message) => this.receive(type, message));
    }
  }

  receive(type, message) {
    const seq = Number(message.lastEventId);
    if (!Number.isFinite(seq) || seq <= this.last) return; // seen already
    this.last = seq;
    const event = { seq, type, data: JSON.parse(message.data) };
    this.chain = this.chain.then(() => this.handle(event)).catch((error) => console.error(error));
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    if (this.source) this.source.close();
  }
}

function badge(node, text) {
  node.textContent = text;
  node.dataset.state = text;
}

// -- sign in -------------------------------------------------------------------------------------

async function signedIn(who) {
  me = who;
  csrf = who.csrf_token;
  $("signin").hidden = true;
  $("whoami").hidden = false;
  $("who").textContent = `${who.tenant_id} · ${who.role}`;
  $("desk").hidden = false;
  refreshLists();
}

$("signin").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("signin-error").textContent = "";
  try {
    const who = await api("POST", "/v1/desk/login", { api_key: $("api-key").value });
    $("api-key").value = "";
    await signedIn(who);
  } catch (error) {
    $("signin-error").textContent = error.message;
  }
});

$("signout").addEventListener("click", async () => {
  try { await api("POST", "/v1/desk/logout"); } finally { me = null; location.reload(); }
});

const ENDED = "hermes-desk-ended";

function signInEnded(reason) {
  // The service ended the sign-in (signed out in another tab, its key revoked, it or its key
  // or token expired): start again from the sign-in form, saying why.
  me = null;
  sessionStorage.setItem(ENDED, reason);
  location.reload();
}

// -- the queue and the sessions ------------------------------------------------------------------

let listTimer = null;

async function refreshLists() {
  clearTimeout(listTimer);
  try {
    await Promise.all([refreshQueue(), refreshSessions()]);
  } catch (error) {
    $("queue-note").textContent = `cannot reach Hermes: ${error.message}`;
  } finally {
    listTimer = setTimeout(refreshLists, 2000);
  }
}

function ago(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
}

async function refreshQueue() {
  let items;
  try {
    items = (await api("GET", "/v1/handoffs?status=all&limit=50")).data;
  } catch (error) {
    $("queue-note").textContent = error.status === 404 ? "no handoff queue on this service" : error.message;
    return;
  }
  $("queue-note").textContent = items.length ? "" : "nobody is waiting";
  $("queue").replaceChildren(...items.map((h) => el(
    "li", { class: `handoff ${h.status}`, "data-session": h.session_id, onclick: () => openSession(h.session_id) },
    el("b", {}, h.status), " ", el("code", {}, h.session_id),
    el("div", {}, `${h.reason || "no reason"} · ${h.language || "?"} · waiting ${ago(h.requested_at)}`
      + (h.claimed_by ? ` · held by ${h.claimed_by}` : "")),
    h.summary ? el("div", { class: "note" }, h.summary) : null,
    el("ul", { class: "last" }, ...(h.last_messages || []).map((m) => el("li", {}, `${m.author}: ${m.content}`))),
  )));
}

async function refreshSessions() {
  const page = await api("GET", "/v1/sessions?limit=15");
  $("sessions").replaceChildren(...page.items.map((s) => el(
    "li", { "data-session": s.id, onclick: () => openSession(s.id) },
    el("code", {}, s.id), ` ${s.user_id} · ${s.status}`,
  )));
}

$("open-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const id = $("open-id").value.trim();
  if (id) openSession(id);
});

// -- the live session view -----------------------------------------------------------------------

let view = null; // {id, follower, bubbles: Map turn_id -> node, texts: Map id -> text, cited: Map id -> citations}

function resetPanels() {
  for (const id of ["transcript", "approvals", "intent", "memories", "tools", "steps", "summary", "events", "suggestions"]) {
    $(id).replaceChildren();
  }
  $("agent-error").textContent = "";
}

async function openSession(id) {
  if (view && view.id === id) return;
  if (view) view.follower.stop();
  resetPanels();
  $("session-id").textContent = id;
  view = { id, bubbles: new Map(), texts: new Map(), cited: new Map(), held: false };
  setHandoff(null);
  for (const panel of ["intent", "memories", "summary"]) $(panel).append(el("span", { class: "note" }, "nothing yet"));
  refreshSessions().catch(() => {});
  await loadTexts(view);
  const url = (after) => Promise.resolve(`/v1/sessions/${encodeURIComponent(id)}/events?after=${after}`);
  view.follower = new Follower(url, (event) => onEvent(view, event), (state) => badge($("stream-state"), state));
  badge($("stream-state"), "connecting");
  view.follower.start();
  try {
    setHandoff(await api("GET", `/v1/sessions/${encodeURIComponent(id)}/handoff`));
  } catch (error) { /* no handoff yet */ }
}

async function loadTexts(v) {
  // The customer's words are in the session's messages; turn.started names them by id. So are
  // the sources a reply cited (its metadata), for a message.completed that does not carry them.
  try {
    const page = await api("GET", `/v1/sessions/${encodeURIComponent(v.id)}/messages?limit=500`);
    for (const m of page.items) {
      if (m.role === "user") v.texts.set(m.id, m.content);
      const cited = (m.metadata || {}).citations;
      if (m.role === "assistant" && Array.isArray(cited) && cited.length) v.cited.set(m.id, cited);
    }
  } catch (error) { /* shown as the id */ }
}

function showSources(node, citations) {
  // Under a reply that answered from the knowledge base: each passage it used, as text nodes.
  const old = node.querySelector(".sources");
  if (old) old.remove();
  if (!Array.isArray(citations) || !citations.length) return;
  node.append(el("div", { class: "sources" },
    el("span", { class: "sources-head" }, "Sources"),
    el("ul", {}, ...citations.map((c) => el("li", { class: "source", "data-document": String(c.document_id || ""), "data-chunk": String(c.chunk_id || "") },
      el("b", { class: "title" }, String(c.title || "")),
      c.section ? el("span", { class: "section" }, String(c.section)) : null,
      c.snippet ? el("span", { class: "snippet" }, String(c.snippet)) : null)))));
}

function say(list, who, text, attrs) {
  const node = el("li", { class: `bubble ${who}`, ...(attrs || {}) }, el("span", { class: "who" }, labelOf(who)), el("span", { class: "text" }, text || ""));
  list.append(node);
  list.scrollTop = list.scrollHeight;
  return node;
}

function labelOf(who) {
  return { customer: "Customer", bot: "Hermes", agent: "Agent (human)", note: "·" }[who] || who;
}

function botBubble(v, turnId) {
  let node = v.bubbles.get(turnId);
  if (!node) {
    node = say($("transcript"), "bot", "", { "data-turn": turnId });
    node.classList.add("streaming");
    v.bubbles.set(turnId, node);
  }
  return node;
}

function upsert(list, key, node) {
  const old = list.querySelector(`[data-key="${CSS.escape(key)}"]`);
  node.dataset.key = key;
  if (old) old.replaceWith(node); else list.append(node);
}

async function onEvent(v, event) {
  if (v !== view) return;
  const d = event.data;
  $("events").append(el("li", { "data-seq": String(event.seq), "data-type": event.type }, `${event.seq} ${event.type}`));
  switch (event.type) {
    case "turn.started": {
      if (!v.texts.has(d.user_message_id)) await loadTexts(v);
      say($("transcript"), "customer", v.texts.get(d.user_message_id) || `(message ${d.user_message_id})`, { "data-message": d.user_message_id });
      break;
    }
    case "message.received":
      say($("transcript"), "customer", d.text, { "data-message": d.message_id });
      break;
    case "message.delta": {
      const text = botBubble(v, d.turn_id).querySelector(".text");
      text.textContent += d.text;
      break;
    }
    case "message.completed": {
      if (d.author === "agent" || (d.author === "bot" && !d.turn_id)) {
        say($("transcript"), d.author, d.text, { "data-message": d.message_id });
      } else {
        const node = botBubble(v, d.turn_id);
        node.querySelector(".text").textContent = d.text;
        node.classList.remove("streaming");
        node.dataset.message = d.message_id;
        showSources(node, d.citations || v.cited.get(d.message_id));
        v.bubbles.delete(d.turn_id); // a follow-up message of the same turn gets its own bubble
      }
      break;
    }
    case "turn.completed":
    case "turn.failed": {
      const node = v.bubbles.get(d.turn_id);
      if (node) node.classList.remove("streaming");
      if (event.type === "turn.failed") say($("transcript"), "note", `turn failed: ${d.code}`);
      break;
    }
    case "intent.classified":
      $("intent").replaceChildren(
        el("div", {}, el("b", { class: "intent-name" }, d.intent || "?"), ` ${Math.round((d.confidence || 0) * 100)} %`),
        el("ul", { class: "slots" }, ...(d.slots || []).map((slot) => el("li", {}, el("code", {}, slot.name), ` = ${slot.value}`))),
      );
      break;
    case "memory.recalled":
    case "memory.forgotten":
      $("memories").replaceChildren(pretty(d));
      break;
    case "step.updated":
      upsert($("steps"), d.step_id, el("li", { class: d.status },
        // a step's last state is whole; states stored shrunk ({step_id, status}) by an older Hermes
        `${d.action_type ?? "step"} ${d.name ?? d.step_id}: ${d.status}`,
        d.finished_at && d.started_at ? ` (${Math.round((d.finished_at - d.started_at) * 1000)} ms)` : "",
        d.error ? ` ${d.error.code || ""}` : ""));
      break;
    case "tool.started":
    case "tool.completed":
      upsert($("tools"), d.call_id, el("li", { class: `tool ${d.status}` },
        el("b", {}, d.tool), ` ${d.status}`, d.result ? pretty(d.result) : null));
      break;
    case "approval.requested":
      showApproval(v, d);
      break;
    case "approval.resolved": {
      const card = $("approvals").querySelector(`[data-key="${CSS.escape(d.approval_id)}"]`);
      if (card) {
        card.querySelector(".status").textContent = d.status;
        card.dataset.status = d.status;
        for (const button of card.querySelectorAll("button")) button.disabled = true;
      }
      break;
    }
    case "confirmation.requested":
      say($("transcript"), "note", `asked the customer to confirm ${d.tool}`);
      break;
    case "handoff.requested":
      say($("transcript"), "note", `handoff requested (${d.reason || "no reason"}), position ${d.position}`);
      setHandoff({ status: "waiting" });
      break;
    case "handoff.claimed":
      say($("transcript"), "note", `taken over by ${d.agent}`);
      setHandoff({ status: "claimed", claimed_by: d.agent });
      break;
    case "handoff.released":
      say($("transcript"), "note", `handed back to Hermes by ${d.agent}`);
      setHandoff({ status: d.status || "released" });
      break;
    case "handoff.expired":
      say($("transcript"), "note", `nobody came: ticket ${d.ticket_id}`);
      setHandoff({ status: "expired" });
      break;
    case "suggestion.ready":
      showSuggestion(d);
      break;
    case "session.summary":
      $("summary").replaceChildren(el("p", {}, d.text || ""), pretty({ disposition: d.disposition, intents: d.intents, open_items: d.open_items }));
      break;
    default:
      break;
  }
}

async function showApproval(v, d) {
  const card = el("div", { class: "approval", "data-key": d.approval_id, "data-status": "pending" },
    el("div", {}, el("b", {}, d.tool), " ", el("span", { class: "status" }, "pending")),
    el("div", { class: "note" }, d.reason || ""),
    el("div", {}, "Masked:"), pretty(d.arguments));
  const full = el("div", { class: "full" });
  const reason = el("input", { placeholder: "reason (optional)", class: "reason" });
  const decide = (decision) => async () => {
    try {
      const done = await api("POST", `/v1/sessions/${encodeURIComponent(v.id)}/approvals/${encodeURIComponent(d.approval_id)}`,
        { decision, reason: reason.value || null });
      card.querySelector(".status").textContent = done.status;
    } catch (error) {
      card.querySelector(".status").textContent = error.message;
    }
  };
  card.append(full, reason,
    el("button", { type: "button", class: "approve", onclick: decide("approve") }, "Approve"),
    el("button", { type: "button", class: "reject", onclick: decide("reject") }, "Reject"));
  $("approvals").append(card);
  try {
    const approval = await api("GET", `/v1/sessions/${encodeURIComponent(v.id)}/approvals/${encodeURIComponent(d.approval_id)}`);
    if (approval.arguments_full) full.replaceChildren(el("div", {}, "Full arguments (audited):"), pretty(approval.arguments_full));
    if (approval.status !== "pending") {
      card.querySelector(".status").textContent = approval.status;
      card.dataset.status = approval.status;
      for (const button of card.querySelectorAll("button")) button.disabled = true;
    }
  } catch (error) { full.textContent = error.message; }
}

function showSuggestion(d) {
  const use = el("button", { type: "button", class: "use" }, "Use");
  const edit = el("button", { type: "button", class: "edit" }, "Edit");
  const node = el("div", { class: "suggestion", "data-key": d.suggestion_id }, el("span", { class: "text" }, d.text), use, edit);
  use.onclick = () => sendAsAgent(d.text, d.suggestion_id);
  edit.onclick = () => { $("agent-text").value = d.text; $("agent-suggestion").value = d.suggestion_id; $("agent-text").focus(); };
  $("suggestions").append(node);
}

function setHandoff(h) {
  const status = h ? h.status : "";
  const mine = h && h.status === "claimed" && me && h.claimed_by === me.subject;
  view.held = status === "claimed";
  badge($("handoff-state"), status ? `handoff ${status}${h.claimed_by ? " · " + h.claimed_by : ""}` : "with Hermes");
  $("claim").disabled = status !== "waiting" && status !== "released" && status !== "expired" && status !== "";
  $("release").disabled = !mine;
  $("agent-send").disabled = !mine;
  $("suggest").disabled = !mine;
}

async function handoffAction(action) {
  const id = view.id;
  $("agent-error").textContent = "";
  try {
    if (action === "claim") {
      try { await api("GET", `/v1/sessions/${encodeURIComponent(id)}/handoff`); } catch (error) {
        if (error.status !== 404) throw error;
        await api("POST", `/v1/sessions/${encodeURIComponent(id)}/handoff`, { reason: "taken over from the desk" });
      }
    }
    setHandoff(await api("POST", `/v1/sessions/${encodeURIComponent(id)}/handoff/${action}`));
    refreshQueue();
  } catch (error) {
    $("agent-error").textContent = error.message;
  }
}

$("claim").addEventListener("click", () => handoffAction("claim"));
$("release").addEventListener("click", () => handoffAction("release"));
$("suggest").addEventListener("click", async () => {
  try { await api("POST", `/v1/sessions/${encodeURIComponent(view.id)}/handoff/suggestions`); } catch (error) { $("agent-error").textContent = error.message; }
});

async function sendAsAgent(text, suggestionId) {
  $("agent-error").textContent = "";
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(view.id)}/messages`,
      { content: text, author: "agent", suggestion_id: suggestionId || null });
    $("agent-text").value = "";
    $("agent-suggestion").value = "";
  } catch (error) {
    $("agent-error").textContent = error.message;
  }
}

$("agent-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("agent-text").value.trim();
  if (text) sendAsAgent(text, $("agent-suggestion").value);
});

// -- the customer test chat ----------------------------------------------------------------------

let chat = null; // {id, follower, bubbles}

$("chat-start").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (chat) chat.follower.stop();
  $("chat").replaceChildren();
  const session = await api("POST", "/v1/sessions", { user_id: $("chat-user").value.trim() || "cust_0001", metadata: { channel: "desk test chat" } });
  chat = { id: session.id, bubbles: new Map() };
  const current = chat;
  const url = async (after) => {
    // A customer's page holds no key: it follows with a short-lived token for its session.
    const minted = await api("POST", "/v1/stream-tokens", { session_id: current.id });
    return `${minted.events_url}&after=${after}`;
  };
  chat.follower = new Follower(url, (e) => onChatEvent(current, e), (state) => badge($("chat-state"), state));
  await chat.follower.start();
  $("chat").dataset.session = chat.id;
  for (const id of ["chat-send", "chat-handoff", "chat-open"]) $(id).disabled = false;
});

$("chat-open").addEventListener("click", () => chat && openSession(chat.id));

function onChatEvent(c, event) {
  if (c !== chat) return;
  const d = event.data;
  const list = $("chat");
  if (event.type === "message.delta") {
    let node = c.bubbles.get(d.turn_id);
    if (!node) {
      node = say(list, "bot", "", { "data-turn": d.turn_id });
      c.bubbles.set(d.turn_id, node);
    }
    node.querySelector(".text").textContent += d.text;
  } else if (event.type === "message.completed") {
    if (d.author === "agent" || !c.bubbles.has(d.turn_id)) {
      say(list, d.author === "agent" ? "agent" : "bot", d.text, { "data-message": d.message_id });
    } else {
      c.bubbles.get(d.turn_id).querySelector(".text").textContent = d.text;
      c.bubbles.delete(d.turn_id);
    }
  }
}

$("chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("chat-text").value.trim();
  if (!text || !chat) return;
  $("chat-text").value = "";
  say($("chat"), "customer", text);
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(chat.id)}/messages`, { content: text });
  } catch (error) {
    say($("chat"), "note", error.message);
  }
});

$("chat-handoff").addEventListener("click", async () => {
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(chat.id)}/handoff`, { reason: "customer asked for a person" });
  } catch (error) {
    say($("chat"), "note", error.message);
  }
});

// -- start ---------------------------------------------------------------------------------------

(async () => {
  const ended = sessionStorage.getItem(ENDED);
  sessionStorage.removeItem(ENDED);
  try {
    await signedIn(await api("GET", "/v1/desk/session"));
  } catch (error) { // not signed in: the form is shown
    if (ended) $("signin-error").textContent = `signed out: ${ended}`;
  }
})();
