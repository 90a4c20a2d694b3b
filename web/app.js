// chatlab's web client: plain JavaScript, no framework, nothing fetched
// but the chatlab API. The bearer token lives in `secrets` (memory only):
// never in a URL, in storage, in the DOM or in the request log. Live
// streams authenticate with one-use tickets (POST /v1/live/tickets), the
// only credential that travels in a URL, valid once for 30 s.
"use strict";

(function () {
  const STRATEGY_HEADER = "X-Chatlab-Insert-Strategy";
  const LIVE_TYPES = ["message.sent", "chat.read", "chat.created", "members.added",
    "member.removed", "chat.owner_changed", "reset", "overflow", "closing", "heartbeat"];

  // The API's base: `?api=http://host:port` when the page is served from
  // another origin, else the page's own origin (chatlab serves it at /web/).
  function apiBase() {
    const given = new URLSearchParams(location.search).get("api");
    if (given) {
      try {
        const url = new URL(given);
        if (url.protocol === "http:" || url.protocol === "https:") return url.origin;
      } catch (_) { /* fall through */ }
      setStatus("ignoring ?api=: not an http(s) URL", "error");
    }
    return location.origin;
  }

  const secrets = { token: null, tickets: [] };
  const state = {
    api: "",
    me: null, // {id, name}
    chats: new Map(), // chat_id -> {name, unread, last}
    openChat: null,
    newest: null, // newest message id of the open chat
    shown: new Set(), // message ids shown in the open chat
    names: new Map(),
    live: null, // {transport, stop()}
    lastEventId: null,
    frames: 0,
    frameTypes: {}, // type -> how many arrived
    seenEvents: new Set(), // event ids handled, so a resumed range counts once
  };

  const $ = (id) => document.getElementById(id);

  // ---------- status and request log ----------
  function setStatus(text, kind) {
    const el = $("status");
    el.textContent = text;
    el.className = "status" + (kind ? " " + kind : "");
    el.dataset.kind = kind || "info";
  }

  function logRequest(line, bad) {
    const li = document.createElement("li");
    li.textContent = line;
    if (bad) li.className = "bad";
    const log = $("request-log");
    log.prepend(li);
    while (log.children.length > 50) log.lastChild.remove();
  }

  class ApiError extends Error {
    constructor(message, status, problem) {
      super(message);
      this.status = status;
      this.problem = problem;
    }
  }

  function describeProblem(status, problem) {
    if (!problem || typeof problem !== "object") return "HTTP " + status;
    let text = (problem.title || "HTTP " + status) + (problem.detail ? ": " + problem.detail : "");
    if (Array.isArray(problem.errors) && problem.errors.length) {
      text += " (" + problem.errors.map((e) => e.field + ": " + e.message).join("; ") + ")";
    }
    if (Array.isArray(problem.unknown_user_ids)) text += " unknown: " + problem.unknown_user_ids.join(", ");
    return text + " [" + status + "]";
  }

  // One API call: timed with performance.now() from before fetch to the
  // body read, logged as one line (method, path, status, strategy, ms).
  async function api(method, path, opts) {
    opts = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
    if (opts.auth !== false && secrets.token) headers.Authorization = "Bearer " + secrets.token;
    const init = { method, headers, mode: "cors", credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" };
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    const t0 = performance.now();
    let res;
    let body = null;
    try {
      res = await fetch(state.api + path, init);
      const text = await res.text();
      if (text) {
        try { body = JSON.parse(text); } catch (_) { body = null; }
      }
    } catch (err) {
      const ms = (performance.now() - t0).toFixed(1);
      logRequest(method + " " + path + " → failed (network/CORS) · " + ms + " ms", true);
      if (err instanceof TypeError) {
        throw new ApiError("the server refused this origin (CORS), or could not be reached: " +
          location.origin + " → " + state.api, 0, null);
      }
      throw err;
    }
    const ms = performance.now() - t0;
    const strategy = res.headers.get(STRATEGY_HEADER);
    const publish = res.headers.get("X-Chatlab-Publish-Mode");
    const fanout = res.headers.get("X-Chatlab-Message-Fanout");
    let line = method + " " + path + " → " + res.status;
    if (strategy) line += " · strategy " + strategy;
    if (publish) line += " · publish " + publish;
    if (fanout) line += " · fanout " + fanout;
    line += " · " + ms.toFixed(1) + " ms";
    logRequest(line, !res.ok);
    if (!res.ok) throw new ApiError(describeProblem(res.status, body), res.status, body);
    return { status: res.status, headers: res.headers, body, ms, strategy };
  }

  function fail(err) {
    setStatus(err instanceof ApiError ? err.message : "error: " + (err && err.message ? err.message : err), "error");
  }

  // ---------- sign in ----------
  async function signIn(ev) {
    ev.preventDefault();
    const name = $("user-name").value.trim();
    if (!name) return setStatus("type a name first", "error");
    stopLive();
    try {
      const r = await api("POST", "/v1/users", { body: { name }, auth: false });
      secrets.token = r.body.token; // memory only
      secrets.tickets = [];
      state.me = { id: r.body.id, name: r.body.name };
      state.names.set(r.body.id, r.body.name);
      state.chats.clear();
      state.openChat = null;
      state.lastEventId = null;
      state.seenEvents.clear();
      $("me-name").textContent = r.body.name;
      $("user-id").textContent = r.body.id;
      $("me").hidden = false;
      $("signin-form").hidden = true;
      $("chat-panel").hidden = true;
      for (const id of ["create-chat", "refresh-chats", "live-connect"]) $(id).disabled = false;
      document.body.dataset.signedIn = "true";
      setStatus("signed in as " + r.body.name, "ok");
      renderChats();
      await refreshChats();
    } catch (err) { fail(err); }
  }

  async function copyId() {
    const id = state.me && state.me.id;
    if (!id) return;
    try {
      await navigator.clipboard.writeText(id);
      setStatus("your id is copied", "ok");
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents($("user-id"));
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      setStatus("the clipboard is not available here: your id is selected, copy it with Ctrl+C", "info");
    }
  }

  // ---------- chats ----------
  async function createChat(ev) {
    ev.preventDefault();
    const name = $("chat-name").value.trim();
    const memberIds = $("member-ids").value.split(/[\s,;]+/).filter(Boolean);
    const strategy = $("strategy").value;
    const headers = {};
    if (strategy) headers[STRATEGY_HEADER] = strategy;
    try {
      const r = await api("POST", "/v1/chats", { body: { name, member_ids: memberIds }, headers });
      const used = r.strategy || "(not named by the server)";
      $("strategy-used").textContent = used;
      $("strategy-used").dataset.strategy = r.strategy || "";
      setStatus("chat " + r.body.name + " created with " + r.body.member_count + " members by " + used +
        " in " + r.ms.toFixed(1) + " ms", "ok");
      state.chats.set(r.body.id, state.chats.get(r.body.id) || { name: r.body.name, unread: 0 });
      renderChats();
      await refreshChats();
    } catch (err) { fail(err); }
  }

  async function refreshChats() {
    if (!secrets.token) return;
    try {
      const r = await api("GET", "/v1/me/chats?limit=100");
      const fresh = new Map();
      for (const c of r.body.items) fresh.set(c.chat_id, { name: c.name, unread: c.unread_count, last: c.last_message });
      state.chats = fresh;
      renderChats();
    } catch (err) { fail(err); }
  }

  let refreshTimer = null;
  function refreshSoon() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshChats, 200);
  }

  function renderChats() {
    const list = $("chat-list");
    list.replaceChildren();
    if (!state.chats.size) {
      const li = document.createElement("li");
      li.textContent = secrets.token ? "no chats yet" : "sign in to see your chats";
      list.append(li);
    }
    for (const [id, chat] of state.chats) {
      const li = document.createElement("li");
      li.dataset.chatId = id;
      li.dataset.testid = "chat-item";
      if (id === state.openChat) li.className = "open";
      const open = document.createElement("button");
      open.type = "button";
      open.className = "link";
      open.textContent = chat.name;
      open.dataset.testid = "open-chat";
      open.setAttribute("aria-label", "open chat " + chat.name + ", " + chat.unread + " unread");
      open.addEventListener("click", () => openChat(id));
      const badge = document.createElement("span");
      badge.className = "badge" + (chat.unread > 0 ? " some" : "");
      badge.dataset.testid = "unread";
      badge.dataset.unread = String(chat.unread);
      badge.textContent = String(chat.unread);
      badge.title = chat.unread + " unread";
      li.append(open, badge);
      list.append(li);
    }
    const open = state.openChat && state.chats.get(state.openChat);
    $("open-unread").textContent = open ? String(open.unread) : "0";
  }

  function setUnread(chatId, n) {
    const chat = state.chats.get(chatId);
    if (!chat) return refreshSoon();
    chat.unread = Math.max(0, n);
    renderChats();
  }

  // ---------- messages ----------
  async function openChat(id) {
    try {
      const r = await api("GET", "/v1/chats/" + encodeURIComponent(id) + "/messages?limit=50");
      state.openChat = id;
      state.shown = new Set();
      state.newest = null;
      const chat = state.chats.get(id);
      $("chat-title").textContent = chat ? chat.name : "Chat";
      // Loaded history is not announced; live additions are (aria-live).
      $("messages").setAttribute("aria-busy", "true");
      $("messages").replaceChildren();
      $("chat-panel").hidden = false;
      $("chat-panel").dataset.chatId = id;
      for (const m of r.body.items.slice().reverse()) {
        showMessage({ id: m.id, sender: m.sender_id, body: m.body, at: m.created_at, kind: m.kind });
      }
      $("messages").setAttribute("aria-busy", "false");
      renderChats();
      if (matchMedia("(max-width: 600px)").matches) $("chat-panel").scrollIntoView({ block: "start" });
      $("message-body").focus({ preventScroll: true });
    } catch (err) { fail(err); }
  }

  function showMessage(m) {
    if (!m.id || state.shown.has(m.id)) return;
    state.shown.add(m.id);
    if (!state.newest || m.id > state.newest) state.newest = m.id; // UUIDv7: text order is time order
    const li = document.createElement("li");
    li.dataset.messageId = m.id;
    li.dataset.testid = "message";
    if (m.kind && m.kind !== "talk") li.classList.add("system");
    const mine = state.me && m.sender === state.me.id;
    if (mine) li.classList.add("mine");
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = mine ? "you" : nameOf(m.sender, who);
    const body = document.createElement("span");
    body.className = "body";
    body.dataset.testid = "message-body";
    body.textContent = m.body !== undefined && m.body !== null ? m.body : "(" + (m.length || "?") + " characters)";
    li.append(who, body);
    if (m.at) {
      const t = document.createElement("time");
      t.dateTime = m.at;
      t.textContent = new Date(m.at).toLocaleTimeString();
      li.append(t);
    }
    // Keep id order even when a live frame and a response race.
    const list = $("messages");
    let after = null;
    for (const other of list.children) {
      if (other.dataset.messageId > m.id) { after = other; break; }
    }
    list.insertBefore(li, after);
    list.scrollTop = list.scrollHeight;
  }

  // A sender's name, looked up once (GET /v1/users/{id}); until then the
  // end of the id.
  function nameOf(userId, el) {
    if (!userId) return "chatlab";
    el.dataset.user = userId;
    if (state.names.has(userId)) return state.names.get(userId);
    state.names.set(userId, userId.slice(-6));
    api("GET", "/v1/users/" + encodeURIComponent(userId)).then((r) => {
      state.names.set(userId, r.body.name);
      for (const m of document.querySelectorAll(".who")) if (m.dataset.user === userId) m.textContent = r.body.name;
    }).catch(() => {});
    return userId.slice(-6);
  }

  async function send(ev) {
    ev.preventDefault();
    const input = $("message-body");
    const body = input.value;
    if (!state.openChat || !body.trim()) return;
    try {
      const r = await api("POST", "/v1/chats/" + encodeURIComponent(state.openChat) + "/messages", { body: { body } });
      input.value = "";
      const m = r.body;
      showMessage({ id: m.id, sender: m.sender_id || state.me.id, body: m.body, at: m.created_at, kind: m.kind });
      setStatus("sent in " + r.ms.toFixed(1) + " ms", "ok");
    } catch (err) { fail(err); }
  }

  async function markRead() {
    if (!state.openChat || !state.newest) return;
    try {
      const chatId = state.openChat;
      const r = await api("POST", "/v1/chats/" + encodeURIComponent(chatId) + "/read", { body: { up_to: state.newest } });
      setUnread(chatId, r.body.unread_count);
      setStatus("read up to the newest message; " + r.body.unread_count + " unread", "ok");
    } catch (err) { fail(err); }
  }

  // ---------- live feed ----------
  function setLive(text, st) {
    $("live-state").textContent = text;
    $("live-state").dataset.state = st;
    $("live-connect").disabled = !secrets.token || st === "live" || st === "connecting";
    $("live-disconnect").disabled = st === "off";
  }

  function onFrame(type, data, id) {
    if (id) state.lastEventId = id;
    if (data && data.event_id) {
      if (state.seenEvents.has(data.event_id)) return;
      state.seenEvents.add(data.event_id);
      if (state.seenEvents.size > 4096) state.seenEvents.delete(state.seenEvents.values().next().value);
    }
    state.frames++;
    state.frameTypes[type] = (state.frameTypes[type] || 0) + 1;
    switch (type) {
      case "message.sent": {
        const mine = state.me && data.sender_id === state.me.id;
        if (data.chat_id === state.openChat) {
          showMessage({ id: data.message_id, sender: data.sender_id, body: data.body, length: data.body_length, at: data.occurred_at, kind: "talk" });
        }
        const chat = state.chats.get(data.chat_id);
        if (!chat) refreshSoon();
        else if (!mine) setUnread(data.chat_id, chat.unread + 1);
        break;
      }
      case "chat.read":
        setUnread(data.chat_id, data.unread_count);
        break;
      case "chat.created":
      case "members.added":
      case "member.removed":
      case "chat.owner_changed":
        refreshSoon();
        break;
      case "reset":
        setStatus("the live feed started again; reloading", "info");
        refreshSoon();
        if (state.openChat) openChat(state.openChat);
        break;
      default:
        break;
    }
  }

  async function getTicket() {
    const r = await api("POST", "/v1/live/tickets");
    secrets.tickets.push(r.body.ticket);
    if (secrets.tickets.length > 20) secrets.tickets.shift();
    return r.body.ticket;
  }

  function liveUrl(path, ticket) {
    let url = state.api + path + "?ticket=" + encodeURIComponent(ticket);
    if (state.lastEventId) url += "&last_event_id=" + encodeURIComponent(state.lastEventId);
    return url;
  }

  function stopLive() {
    if (state.live) state.live.stop();
    state.live = null;
    setLive("off", "off");
  }

  // Runs one transport until stopped: every (re)connection takes a fresh
  // ticket and resumes from the last id seen; waits grow to 10 s.
  function startLive() {
    stopLive();
    const transport = document.querySelector("input[name=transport]:checked").value;
    const session = { transport, stopped: false, close: null, timer: null, failures: 0 };
    session.stop = () => {
      session.stopped = true;
      clearTimeout(session.timer);
      if (session.close) session.close();
    };
    state.live = session;
    const label = transport === "ws" ? "WebSocket" : "SSE";

    const retry = (why) => {
      if (session.stopped) return;
      if (session.close) session.close();
      session.close = null;
      session.failures++;
      const wait = Math.min(10000, 500 * 2 ** Math.min(session.failures, 5));
      setLive("reconnecting (" + why + ")", "reconnecting");
      session.timer = setTimeout(connect, wait);
    };

    const connect = async () => {
      if (session.stopped) return;
      setLive("connecting", "connecting");
      let ticket;
      try {
        ticket = await getTicket();
      } catch (err) {
        fail(err);
        if (err instanceof ApiError && err.status === 401) {
          session.stop();
          return setLive("off (the token was refused: sign in again)", "off");
        }
        return retry("no ticket");
      }
      if (session.stopped) return;
      const t0 = performance.now();
      const path = transport === "ws" ? "/v1/ws" : "/v1/events";
      const opened = () => {
        session.failures = 0;
        logRequest("GET " + path + " (" + label + ", ticket) → open · " + (performance.now() - t0).toFixed(1) + " ms");
        setLive("live (" + label + ")", "live");
      };
      if (transport === "ws") {
        const ws = new WebSocket(liveUrl(path, ticket).replace(/^http/, "ws"));
        session.close = () => { ws.onclose = null; ws.close(); };
        ws.onopen = opened;
        ws.onmessage = (e) => {
          let f;
          try { f = JSON.parse(e.data); } catch (_) { return; }
          onFrame(f.type, f.data || {}, f.id);
        };
        ws.onclose = () => { logRequest("GET " + path + " (WebSocket) closed", true); retry("closed"); };
      } else {
        const es = new EventSource(liveUrl(path, ticket));
        session.close = () => es.close();
        es.onopen = opened;
        for (const type of LIVE_TYPES) {
          es.addEventListener(type, (e) => {
            let data = {};
            try { data = JSON.parse(e.data); } catch (_) { /* heartbeat */ }
            onFrame(type, data, e.lastEventId);
          });
        }
        // The browser would reconnect to the same URL, whose ticket is
        // spent: close it and connect anew with a fresh ticket.
        es.onerror = () => { logRequest("GET " + path + " (SSE) error/closed", true); retry("stream ended"); };
      }
    };
    connect();
  }

  // ---------- wiring ----------
  // The insert strategies the server takes, as its OpenAPI document lists
  // them (declared once, in the server's InsertStrategy): no name is
  // written in this page. Without the document the select offers the
  // server's default alone, and says why.
  async function loadStrategies() {
    const select = $("strategy");
    try {
      const res = await fetch(state.api + "/openapi.json");
      if (!res.ok) throw new Error("HTTP " + res.status);
      const spec = await res.json();
      const schema = ((spec.components || {}).schemas || {}).StrategyName || {};
      const names = Array.isArray(schema.enum) ? schema.enum : [];
      if (names.length === 0) throw new Error("no StrategyName in the document");
      for (const name of names) {
        const option = document.createElement("option");
        option.value = name;
        option.textContent = name;
        select.appendChild(option);
      }
    } catch (e) {
      setStatus("insert strategies not listed (" + e.message + "): the server's default is used", "error");
    }
  }

  function init() {
    state.api = apiBase();
    $("api-base").textContent = state.api;
    $("signin-form").addEventListener("submit", signIn);
    $("copy-id").addEventListener("click", copyId);
    $("new-user").addEventListener("click", () => {
      $("signin-form").hidden = false;
      $("user-name").select();
      $("user-name").focus();
    });
    $("chat-form").addEventListener("submit", createChat);
    $("refresh-chats").addEventListener("click", refreshChats);
    $("send-form").addEventListener("submit", send);
    $("mark-read").addEventListener("click", markRead);
    $("live-connect").addEventListener("click", startLive);
    $("live-disconnect").addEventListener("click", stopLive);
    // Switching the transport while connected reconnects over the other.
    for (const radio of document.querySelectorAll("input[name=transport]")) {
      radio.addEventListener("change", () => { if (state.live) startLive(); });
    }
    renderChats();
    setStatus("sign in with a name to start", "info");
    loadStrategies().finally(() => { document.body.dataset.ready = "true"; });
  }

  // For the browser test (page.evaluate): what the page holds in memory,
  // so the test can check that none of it reached the server's log.
  window.chatlabClient = Object.freeze({
    heldSecrets: () => ({ token: secrets.token, tickets: secrets.tickets.slice() }),
    liveState: () => ({ transport: state.live && state.live.transport, lastEventId: state.lastEventId,
      frames: state.frames, frameTypes: Object.assign({}, state.frameTypes) }),
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
