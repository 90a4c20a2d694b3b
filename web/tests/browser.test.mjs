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
// refused and says CORS. Every wait is bounded. Exits non-zero on a failure.
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
