// The web client (web/) in a real browser (Debian's Chromium through
// playwright-core), against a running chatlab. scripts/browser-test.sh
// starts everything and sets:
//
//   CHROMIUM        the browser executable (/usr/bin/chromium)
//   API             chatlab's public base, e.g. http://127.0.0.1:8080
//   ALLOWED_ORIGIN  a static origin serving web/, in CORS_ALLOWED_ORIGINS
//   DENIED_ORIGIN   a static origin serving web/, not in it
//   SECRETS_OUT     where to write what the pages held (tokens, tickets),
//                   one a line, for the script to look for in the log
//   SCREENSHOT      the PNG to write (desktop and phone width side by side)
//
// Two users on two browser contexts of the allowed origin: A (WebSocket)
// creates a chat with B (SSE) by a non-default insert strategy and sees it
// named; each sees the other's message live within LIVE_BOUND_MS; B's
// unread count goes 1 → 0 by marking read; a page of the denied origin is
// refused and says CORS. Then, last, on users and a chat of its own: a page
// of the allowed origin reads /openapi.json and calls every operation in it
// (but the two streams, opened above) with its own fetch, reading each
// status, problem and exposed header; and a preflighted request from the
// denied origin throws. Every wait is bounded. Exits non-zero on a failure.
import { chromium } from "playwright-core";
import { writeFileSync } from "node:fs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run scripts/browser-test.sh)`);
  return value;
};
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const API = env("API");
const ALLOWED = env("ALLOWED_ORIGIN");
const DENIED = env("DENIED_ORIGIN");
const SECRETS_OUT = env("SECRETS_OUT");
const SCREENSHOT = process.env.SCREENSHOT || "";
const STEP_MS = 10_000; // any single wait
const LIVE_BOUND_MS = Number(process.env.LIVE_BOUND_MS || 10_000);
const STRATEGY = process.env.TEST_STRATEGY || "batch"; // the server's default is another (the script sets unnest)
const A_TRANSPORT = process.env.A_TRANSPORT || "ws";
const B_TRANSPORT = process.env.B_TRANSPORT || "sse";

let passed = 0;
let failed = 0;
const log = (s) => process.stderr.write(`browser-test: ${s}\n`);

async function check(name, fn) {
  const t0 = Date.now();
  try {
    const detail = await fn();
    passed++;
    log(`ok   ${name}${detail ? ` (${detail})` : ""} [${Date.now() - t0} ms]`);
  } catch (err) {
    failed++;
    log(`FAIL ${name}: ${String(err && err.message ? err.message : err).split("\n")[0]}`);
    throw err;
  }
}

function pageUrl(origin) {
  return `${origin}/index.html?api=${encodeURIComponent(API)}`;
}

async function openPage(browser, origin, who, viewport, url) {
  const context = await browser.newContext({ viewport: viewport || { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  const errors = [];
  page.on("pageerror", (err) => { errors.push(err.message); log(`${who}: page error: ${err.message}`); });
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    errors.push(msg.text());
    log(`${who}: console: ${msg.text()}`);
  });
  await page.goto(url || pageUrl(origin), { timeout: STEP_MS });
  await page.waitForSelector("body[data-ready=true]");
  return { context, page, who, errors };
}

async function signIn(p, name) {
  await p.page.fill("#user-name", name);
  await p.page.click("#sign-in");
  await p.page.waitForSelector("#me:not([hidden])");
  const id = (await p.page.textContent("#user-id")).trim();
  if (!/^[0-9a-f-]{36}$/.test(id)) throw new Error(`${p.who}'s id is ${id}`);
  return id;
}

async function connectLive(p, transport) {
  await p.page.check(`#transport-${transport}`);
  await p.page.click("#live-connect");
  await p.page.waitForSelector("#live-state[data-state=live]");
}

const chatItem = (chatName) => `#chat-list li:has(button:text-is("${chatName}"))`;

async function unreadOf(p, chatName) {
  return p.page.getAttribute(`${chatItem(chatName)} [data-testid=unread]`, "data-unread");
}

async function waitUnread(p, chatName, n) {
  await p.page.waitForSelector(`${chatItem(chatName)} [data-testid=unread][data-unread="${n}"]`);
}

async function sendMessage(p, body) {
  await p.page.fill("#message-body", body);
  await p.page.press("#message-body", "Enter"); // the keyboard, as a person would
}

async function waitMessage(p, body, timeout) {
  await p.page.waitForSelector(`#messages li:has([data-testid=message-body]:text-is("${body}"))`, { timeout });
}

async function held(p) {
  return p.page.evaluate(() => window.chatlabClient.heldSecrets());
}

async function screenshotPair(browser, desktop, phone, path) {
  // Both side by side on one PNG, composed by the browser itself.
  const context = await browser.newContext({ viewport: { width: 1280 + 390 + 48, height: 900 } });
  const page = await context.newPage();
  const src = (buf) => `data:image/png;base64,${buf.toString("base64")}`;
  await page.setContent(`<body style="margin:0;background:#d8dee4;display:flex;gap:16px;padding:16px;align-items:flex-start">
    <img src="${src(desktop)}" style="width:1280px;box-shadow:0 1px 4px #0004">
    <img src="${src(phone)}" style="width:390px;box-shadow:0 1px 4px #0004"></body>`);
  await page.waitForFunction(() => [...document.images].every((i) => i.complete && i.naturalWidth > 0));
  await page.screenshot({ path, fullPage: true });
  await context.close();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  const urlsWithToken = [];
  const pages = [];
  try {
    const a = await openPage(browser, ALLOWED, "A");
    const b = await openPage(browser, ALLOWED, "B");
    pages.push(a, b);
    const suffix = Math.random().toString(36).slice(2, 8);
    const chatName = `lab ${suffix}`;
    let aId;
    let bId;

    await check("A and B sign in as new users on the allowed origin", async () => {
      aId = await signIn(a, `ada-${suffix}`);
      bId = await signIn(b, `bob-${suffix}`);
      return `${aId.slice(-6)}, ${bId.slice(-6)}`;
    });

    // From here on, no request of either page may carry a token in its URL.
    for (const p of [a, b]) {
      const { token } = await held(p);
      p.page.on("request", (r) => { if (token && r.url().includes(token)) urlsWithToken.push(r.url()); });
    }

    await check(`A connects over ${A_TRANSPORT}, B over ${B_TRANSPORT}, both with tickets`, async () => {
      await connectLive(a, A_TRANSPORT);
      await connectLive(b, B_TRANSPORT);
      const [ha, hb] = [await held(a), await held(b)];
      if (!ha.tickets.length || !hb.tickets.length) throw new Error("a page connected without a ticket");
    });

    await check(`A creates a chat with B by ${STRATEGY} and sees ${STRATEGY} named`, async () => {
      await a.page.fill("#chat-name", chatName);
      await a.page.fill("#member-ids", bId);
      await a.page.selectOption("#strategy", STRATEGY);
      await a.page.click("#create-chat");
      await a.page.waitForSelector(`#strategy-used[data-strategy="${STRATEGY}"]`);
      const line = await a.page.textContent('#request-log li:has-text("POST /v1/chats →")');
      if (!line.includes(`POST /v1/chats → 201`) || !line.includes(`strategy ${STRATEGY}`) || !/ms$/.test(line)) {
        throw new Error(`the log line says ${line}`);
      }
      return line;
    });

    await check("B's list shows the new chat live (chat.created), 0 unread", async () => {
      await b.page.waitForSelector(chatItem(chatName), { timeout: LIVE_BOUND_MS });
      await waitUnread(b, chatName, 0);
    });

    await check("both open the chat", async () => {
      await a.page.click(`${chatItem(chatName)} button`);
      await b.page.click(`${chatItem(chatName)} button`);
      await a.page.waitForSelector(`#chat-panel[data-chat-id]:not([hidden])`);
      await b.page.waitForSelector(`#chat-panel[data-chat-id]:not([hidden])`);
    });

    const hello = `hello from ada ${suffix}`;
    await check(`A sends; B sees it over ${B_TRANSPORT} within ${LIVE_BOUND_MS} ms`, async () => {
      const t0 = Date.now();
      await sendMessage(a, hello);
      await waitMessage(a, hello, STEP_MS);
      await waitMessage(b, hello, LIVE_BOUND_MS);
      return `${Date.now() - t0} ms`;
    });

    await check("B's unread count for the chat shows 1", async () => {
      await waitUnread(b, chatName, 1);
      await b.page.waitForSelector("#open-unread:text-is('1')");
    });

    const reply = `hi ada, bob here ${suffix}`;
    await check(`B replies; A sees it over ${A_TRANSPORT} within ${LIVE_BOUND_MS} ms`, async () => {
      const t0 = Date.now();
      await sendMessage(b, reply);
      await waitMessage(a, reply, LIVE_BOUND_MS);
      await waitUnread(a, chatName, 1);
      return `${Date.now() - t0} ms`;
    });

    const readFrames = async (p) => (await p.page.evaluate(() => window.chatlabClient.liveState())).frameTypes["chat.read"] || 0;

    await check("B marks read (by the keyboard): B's count shows 0, and stays 0 once the chat.read frame came", async () => {
      const before = await readFrames(b);
      await b.page.focus("#mark-read");
      await b.page.keyboard.press("Enter");
      await waitUnread(b, chatName, 0);
      await b.page.waitForSelector("#open-unread:text-is('0')");
      // The chat.read frame, on B's own feed, comes after the answer.
      await b.page.waitForFunction((n) => (window.chatlabClient.liveState().frameTypes["chat.read"] || 0) > n,
        before, { timeout: LIVE_BOUND_MS });
      const n = await unreadOf(b, chatName);
      if (n !== "0") throw new Error(`B's count is ${n}`);
    });

    await check("A's marker moved elsewhere (another device): the chat.read frame alone takes A's count 1 → 0", async () => {
      const before = await readFrames(a);
      // The REST call is made outside the page's code (as another device
      // of A's would), so only the live frame can move what A's page shows.
      const status = await a.page.evaluate(async ({ api, chat }) => {
        const { token } = window.chatlabClient.heldSecrets();
        const ids = [...document.querySelectorAll("#messages li[data-message-id]")].map((li) => li.dataset.messageId).sort();
        const res = await fetch(`${api}/v1/chats/${chat}/read`, {
          method: "POST",
          headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
          body: JSON.stringify({ up_to: ids[ids.length - 1] }),
        });
        return res.status;
      }, { api: API, chat: await a.page.getAttribute("#chat-panel", "data-chat-id") });
      if (status !== 200) throw new Error(`POST /read answered ${status}`);
      await waitUnread(a, chatName, 0);
      if ((await readFrames(a)) <= before) throw new Error("the count moved without a chat.read frame");
    });

    await check(`B (${B_TRANSPORT}) resumes with a fresh ticket after a disconnect`, async () => {
      const before = (await held(b)).tickets.length;
      // Disconnect and reconnect as the page does on an error: a new ticket,
      // resuming from the last id seen.
      await b.page.click("#live-disconnect");
      await b.page.waitForSelector("#live-state[data-state=off]");
      const missed = `while bob was away ${suffix}`;
      await sendMessage(a, missed);
      await waitMessage(a, missed, STEP_MS);
      await b.page.click("#live-connect");
      await b.page.waitForSelector("#live-state[data-state=live]");
      await waitMessage(b, missed, LIVE_BOUND_MS);
      const after = (await held(b)).tickets;
      if (after.length <= before) throw new Error("no fresh ticket");
      if (new Set(after).size !== after.length) throw new Error("a ticket was used twice");
      return `${after.length} tickets`;
    });

    await check("the tokens are in memory only: not in the DOM, storage, the log or any URL", async () => {
      for (const p of [a, b]) {
        const leak = await p.page.evaluate(() => {
          const { token } = window.chatlabClient.heldSecrets();
          const where = [];
          if (!token) where.push("no token held");
          if (document.documentElement.outerHTML.includes(token)) where.push("DOM");
          if (location.href.includes(token)) where.push("URL");
          for (const s of [localStorage, sessionStorage]) {
            for (let i = 0; i < s.length; i++) if ((s.getItem(s.key(i)) || "").includes(token)) where.push("storage");
          }
          if (document.cookie.includes(token)) where.push("cookie");
          return where;
        });
        if (leak.length) throw new Error(`${p.who}: ${leak.join(", ")}`);
      }
      if (urlsWithToken.length) throw new Error(`${urlsWithToken.length} request URL(s) carried a token`);
    });

    await check("chatlab's own /web/ (same origin, under its CSP) signs in and goes live over both transports", async () => {
      const o = await openPage(browser, API, "own", undefined, `${API}/web/`);
      pages.push(o);
      const api = await o.page.textContent("#api-base");
      if (api !== API) throw new Error(`the page calls ${api}`);
      await signIn(o, `own-${suffix}`);
      await connectLive(o, "sse");
      // Switching the transport while live reconnects over the other.
      await o.page.check("#transport-ws");
      await o.page.waitForFunction(() => window.chatlabClient.liveState().transport === "ws");
      await o.page.waitForSelector("#live-state[data-state=live]");
      const { tickets } = await held(o);
      if (tickets.length !== 2) throw new Error(`${tickets.length} tickets for two streams`);
      if (o.errors.length) throw new Error(`errors in the page: ${o.errors.join(" | ")}`);
    });

    await check("a page on the denied origin is refused and says CORS", async () => {
      const d = await openPage(browser, DENIED, "denied");
      pages.push(d);
      await d.page.fill("#user-name", `mallory-${suffix}`);
      await d.page.click("#sign-in");
      await d.page.waitForSelector("#status[data-kind=error], #me:not([hidden])");
      if (await d.page.isVisible("#me")) throw new Error("the denied origin's page signed in: the server answered it");
      const text = await d.page.textContent("#status");
      if (!text.includes("the server refused this origin (CORS)")) throw new Error(`the status says ${text}`);
      const { token } = await held(d);
      if (token) throw new Error("the denied page holds a token");
      return text;
    });

    const secrets = [];
    for (const p of pages) {
      const h = await held(p);
      if (h.token) secrets.push(h.token);
      secrets.push(...h.tickets);
    }
    writeFileSync(SECRETS_OUT, secrets.join("\n") + "\n", { mode: 0o600 });
    log(`held by the pages: ${secrets.length} secrets (tokens and tickets), written for the log check`);

    if (SCREENSHOT) {
      await check(`screenshot into ${SCREENSHOT} (desktop and phone width)`, async () => {
        const desktop = await a.page.screenshot();
        const phone = await openPage(browser, ALLOWED, "phone", { width: 390, height: 844 });
        pages.push(phone);
        // A third user on a phone-sized page, with a chat of its own with A.
        await signIn(phone, `phone-${suffix}`);
        await phone.page.fill("#chat-name", "phone chat");
        await phone.page.fill("#member-ids", aId);
        await phone.page.selectOption("#strategy", "single");
        await phone.page.click("#create-chat");
        await phone.page.waitForSelector('#strategy-used[data-strategy="single"]');
        await phone.page.click(`${chatItem("phone chat")} button`);
        await phone.page.waitForSelector(`#chat-panel:not([hidden])`);
        await sendMessage(phone, "hello from a phone");
        await waitMessage(phone, "hello from a phone", STEP_MS);
        const phoneShot = await phone.page.screenshot({ fullPage: false });
        const width = await phone.page.evaluate(() => document.documentElement.scrollWidth);
        if (width > 390) throw new Error(`the page is ${width}px wide on a 390px phone`);
        await screenshotPair(browser, desktop, phoneShot, SCREENSHOT);
        const h = await held(phone);
        writeFileSync(SECRETS_OUT, [h.token, ...h.tickets].filter(Boolean).join("\n") + "\n", { flag: "a" });
      });
    }

    // --- every public endpoint, from a page of the allowed origin ---------
    // Last, on users and a chat of its own (C, a new page, and D, a user it
    // creates), so nothing above is disturbed. The page reads /openapi.json
    // and calls every operation in it with its own fetch, as a client would,
    // so Chromium enforces CORS for real: a refusal throws a TypeError.
    // GET /v1/events and GET /v1/ws are left out: they are streams, opened
    // above through tickets (EventSource and WebSocket) by A, B and /web/.
    const STREAMS = new Set(["GET /v1/events", "GET /v1/ws"]);
    let corsToken = "";
    await check("a page on the allowed origin can use every public endpoint in /openapi.json", async () => {
      const c = await openPage(browser, ALLOWED, "cors");
      pages.push(c);
      const cId = await signIn(c, `cora-${suffix}`);
      corsToken = (await held(c)).token;
      if (!corsToken) throw new Error("the page holds no token");
      const extraSecrets = [corsToken];

      // One fetch from the page; never throws out of the page: what it
      // could read, or what it threw. Bounded by STEP_MS.
      const pageFetch = (url, init) => c.page.evaluate(async ({ url, init, ms }) => {
        try {
          const res = await fetch(url, { ...init, signal: AbortSignal.timeout(ms) });
          const text = await res.text();
          const headers = {};
          res.headers.forEach((value, name) => { headers[name] = value; });
          return { status: res.status, type: res.type, headers, text };
        } catch (err) {
          return { threw: `${err.name}: ${err.message}` };
        }
      }, { url, init, ms: STEP_MS });
      const json = (r, what) => {
        if (r.threw) throw new Error(`${what} threw in the page: ${r.threw}`);
        try { return JSON.parse(r.text); } catch { throw new Error(`${what} → ${r.status}: not JSON: ${r.text.slice(0, 200)}`); }
      };
      const auth = { Authorization: `Bearer ${corsToken}` };
      const post = async (path, body) => {
        const r = await pageFetch(`${API}${path}`, {
          method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify(body),
        });
        const v = json(r, `POST ${path}`);
        if (r.status !== 201) throw new Error(`POST ${path} → ${r.status}: ${r.text.slice(0, 300)}`);
        return v;
      };

      const docRead = await pageFetch(`${API}/openapi.json`, { method: "GET" });
      const doc = json(docRead, "GET /openapi.json");
      if (docRead.status !== 200 || !doc.paths) throw new Error(`GET /openapi.json → ${docRead.status}`);

      // The ids the calls use: C's chat with D, and a message in it.
      const dUser = await post("/v1/users", { name: `dora-${suffix}` });
      extraSecrets.push(dUser.token);
      const chat = await post("/v1/chats", { name: `cors ${suffix}`, member_ids: [dUser.id] });
      const message = await post(`/v1/chats/${chat.id}/messages`, { body: `hello from cora ${suffix}` });
      if (![dUser.id, chat.id, message.id].every((id) => /^[0-9a-f-]{36}$/.test(id || ""))) {
        throw new Error(`the fixtures' ids: ${JSON.stringify([dUser.id, chat.id, message.id])}`);
      }

      const refOf = (schema) => {
        let s = schema || {};
        for (let i = 0; s.$ref && i < 10; i++) s = s.$ref.split("/").slice(1).reduce((o, k) => o[k], doc);
        return s;
      };
      // A small body from the schema: required fields only, ids from what
      // the test has (a random uuid where nothing fits).
      const idFor = { user_id: dUser.id, user_ids: dUser.id, member_ids: dUser.id, sender_id: cId, up_to: message.id };
      const sample = (schema, name) => {
        const s = refOf(schema);
        const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
        if (s.enum) return s.enum[0];
        if (type === "object" || s.properties) {
          const o = {};
          for (const k of s.required || []) o[k] = sample(s.properties[k], k);
          return o;
        }
        if (type === "array") return [sample(s.items, name)];
        if (type === "integer" || type === "number") return s.example ?? s.minimum ?? 1;
        if (type === "boolean") return false;
        if (s.format === "uuid") return idFor[name] || crypto.randomUUID();
        return s.example ?? `x ${suffix}`;
      };
      const pathValue = (path, name) => {
        if (name === "id") return path.startsWith("/v1/users/") ? dUser.id : chat.id;
        if (name === "user_id") return dUser.id;
        return crypto.randomUUID();
      };
      // Header parameters a client sets on writes, with a value they take.
      const headerValue = {
        "idempotency-key": () => `cors-${crypto.randomUUID()}`,
        "x-chatlab-insert-strategy": () => STRATEGY,
      };
      // Response headers a client reads; the server must expose each it sends.
      const exposed = (name) => ["location", "retry-after", "www-authenticate", "idempotent-replayed"].includes(name)
        || name.startsWith("x-chatlab-");

      const ops = [];
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [method, op] of Object.entries(item)) {
          if (!["get", "put", "post", "delete", "patch", "head", "options"].includes(method)) continue;
          ops.push({ method: method.toUpperCase(), path, op, params: [...(item.parameters || []), ...(op.parameters || [])] });
        }
      }
      const expected = ops.filter((o) => !STREAMS.has(`${o.method} ${o.path}`));
      if (ops.length - expected.length !== STREAMS.size) throw new Error(`the document no longer lists ${[...STREAMS].join(" and ")}`);

      const problems = [];
      const seen = [];
      let covered = 0;
      let strategyRead = 0;
      let headersRead = 0;
      for (const { method, path, op, params } of expected) {
        const what = `${method} ${path}`;
        const url = API + path.replace(/\{([^}]+)\}/g, (_, name) => pathValue(path, name));
        const headers = { ...auth };
        for (const p of params) {
          const make = p.in === "header" && headerValue[p.name.toLowerCase()];
          if (make) headers[p.name] = make();
        }
        let body;
        if (op.requestBody) {
          headers["Content-Type"] = "application/json";
          body = JSON.stringify(sample(op.requestBody.content?.["application/json"]?.schema || {}, ""));
        }
        // What the network carried, before CORS hides anything from the page.
        const wire = c.page.waitForResponse((r) => r.url() === url && r.request().method() === method, { timeout: STEP_MS })
          .then((r) => r.allHeaders()).catch(() => null);
        const r = await pageFetch(url, { method, headers, body });
        const fail = (why) => problems.push(`${what} → ${r.status ?? "threw"}: ${why}`);
        if (r.threw) { fail(`the fetch threw: ${r.threw} (request headers: ${Object.keys(headers).join(", ")})`); continue; }
        const sent = await wire;
        if (!Number.isInteger(r.status) || r.status < 100 || r.type !== "cors") { fail(`status ${r.status}, type ${r.type}`); continue; }
        if (r.status >= 500 && !(what === "GET /readyz" && r.status === 503)) fail(`a server error: ${r.text.slice(0, 200)}`);
        if (r.status >= 400) {
          const ct = r.headers["content-type"] || "";
          if (!ct.startsWith("application/problem+json")) fail(`an error answer of type ${ct || "(unreadable)"}`);
          let p = null;
          try { p = JSON.parse(r.text); } catch { /* below */ }
          if (!p || typeof p !== "object" || (p.status !== undefined && p.status !== r.status)) fail(`an unreadable problem: ${r.text.slice(0, 200)}`);
        } else if ((r.headers["content-type"] || "").includes("json")) {
          try { JSON.parse(r.text); } catch { fail(`an unreadable JSON answer: ${r.text.slice(0, 200)}`); }
        }
        if (!sent) fail("the network's view of the answer did not come");
        for (const [name, value] of Object.entries(sent || {})) {
          if (!exposed(name)) continue;
          if (r.headers[name] !== value) fail(`the page cannot read ${name} (sent ${value}, read ${r.headers[name] ?? "nothing"})`);
        }
        if (r.status === 201 && sent && "location" in sent && !r.headers.location) fail("a 201 whose Location the page cannot read");
        if (headers["X-Chatlab-Insert-Strategy"] || headers["x-chatlab-insert-strategy"]) {
          if (r.status < 300 && !r.headers["x-chatlab-insert-strategy"]) fail("a write that names no strategy the page can read");
          if (r.headers["x-chatlab-insert-strategy"]) strategyRead++;
        }
        for (const [name, value] of Object.entries(sent || {})) if (exposed(name)) headersRead++;
        if (r.status < 300) { // tokens (POST /v1/users, /v1/tokens) and tickets, for the log check
          try {
            const v = JSON.parse(r.text);
            for (const k of ["token", "ticket"]) if (typeof v?.[k] === "string") extraSecrets.push(v[k]);
          } catch { /* not JSON: nothing held */ }
        }
        covered++;
        seen.push(`${method} ${path} ${r.status}`);
      }
      writeFileSync(SECRETS_OUT, extraSecrets.filter(Boolean).join("\n") + "\n", { flag: "a" });
      for (const s of seen) log(`       ${s}`);
      if (problems.length) throw new Error(`${problems.length} problem(s): ${problems.join(" | ")}`);
      if (covered < expected.length) throw new Error(`${covered} of ${expected.length} operations covered`);
      if (!strategyRead) throw new Error("no answer named its insert strategy to the page");
      const errors = seen.filter((l) => / [45]\d\d$/.test(l)).length;
      return `${covered} of ${ops.length} operations, the two streams opened above; ${headersRead} exposed headers read, `
        + `${strategyRead} of them insert strategies; ${errors} problem answers read`;
    });

    await check("a preflighted request from the denied origin throws (GET /v1/me/chats with Authorization)", async () => {
      const d = await openPage(browser, DENIED, "denied-fetch");
      pages.push(d);
      const r = await d.page.evaluate(async ({ api, token, ms }) => {
        try {
          const res = await fetch(`${api}/v1/me/chats`, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(ms) });
          return { status: res.status };
        } catch (err) {
          return { threw: err.name, message: err.message };
        }
      }, { api: API, token: corsToken || "none", ms: STEP_MS });
      if (!r.threw) throw new Error(`the page read an answer: ${r.status}`);
      if (r.threw !== "TypeError") throw new Error(`it threw ${r.threw}, not a CORS TypeError: ${r.message}`);
      return `${r.threw}: ${r.message}`;
    });
  } finally {
    for (const p of pages) await p.context.close().catch(() => {});
    await browser.close().catch(() => {});
  }
}

const watchdog = setTimeout(() => {
  log("FAIL the whole test took over 120 s");
  process.exit(1);
}, 120_000);

main().then(
  () => {
    clearTimeout(watchdog);
    console.log(`browser-test: ${passed} passed, ${failed} failed`);
  },
  (err) => {
    clearTimeout(watchdog);
    if (!failed) log(`FAIL ${err && err.stack ? err.stack : err}`);
    console.log(`browser-test: ${passed} passed, ${Math.max(failed, 1)} failed`);
    process.exit(1);
  },
);
