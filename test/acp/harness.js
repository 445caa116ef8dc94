// Test harness for the ACP bridge: the built binaries in bin/ (make build),
// a fake model, a daemon on a temporary home, and `sessionctl acp` driven by
// the official ACP TypeScript SDK playing the editor.
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, "..", "..");
export const bin = (name) => path.join(root, "bin", name);
// The bridge under test: $ACP_SESSIONCTL (make test-acp passes a -race
// build), else bin/sessionctl.
const bridgeBin = process.env.ACP_SESSIONCTL || bin("sessionctl");

// eventually polls cond (sync or async) until it returns a truthy value or
// the deadline passes; it never sleeps as a synchronisation, it re-checks.
export async function eventually(what, cond, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ": " + last.message : ""}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

// tmp makes a temporary directory removed at exit.
export function tmp(prefix) {
  const d = mkdtempSync(path.join(tmpdir(), prefix));
  process.on("exit", () => rmSync(d, { recursive: true, force: true }));
  return d;
}

// children are killed when the test process exits.
const children = new Set();
process.on("exit", () => {
  for (const c of children) {
    try { c.kill("SIGKILL"); } catch { /* gone */ }
  }
});

function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}

function lines(stream, onLine) {
  let buf = "";
  stream.setEncoding("utf8");
  stream.on("data", (s) => {
    buf += s;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
}

// startFakeModel runs bin/sessiond-fakemodel on an ephemeral loopback port.
// inputs() lists the user inputs it was sent (each request whose last
// message is a user message), from its request log.
export async function startFakeModel() {
  const child = track(spawn(bin("sessiond-fakemodel"), ["--listen", "127.0.0.1:0", "--chunk-delay", "5ms"], { stdio: ["ignore", "pipe", "pipe"] }));
  const log = [];
  let url;
  lines(child.stdout, (l) => {
    const m = /a fake OpenAI-compatible model at (\S+)/.exec(l);
    if (m) url = m[1];
  });
  lines(child.stderr, (l) => log.push(l));
  await eventually("the fake model's URL", () => url, 15000);
  return {
    url,
    log,
    inputs() {
      const out = [];
      for (const l of log) {
        const m = /^sessiond-fakemodel: "(.*)" → /.exec(l);
        if (m) out.push(JSON.parse(`"${m[1]}"`));
      }
      return out;
    },
    stop() { child.kill("SIGTERM"); },
  };
}

// Daemon runs bin/sessiond on a home; start() waits for its descriptor.
export class Daemon {
  constructor(home, config) {
    this.home = home;
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(path.join(home, "config.yaml"), config, { mode: 0o600 });
    this.stderr = [];
  }

  async start() {
    const child = track(spawn(bin("sessiond"), ["--home", this.home], { stdio: ["ignore", "ignore", "pipe"] }));
    this.child = child;
    this.exited = new Promise((r) => child.on("exit", (code, sig) => r({ code, sig })));
    lines(child.stderr, (l) => this.stderr.push(l));
    await eventually("the daemon's descriptor", () => {
      const d = JSON.parse(readFileSync(path.join(this.home, "daemon.json"), "utf8"));
      return d.pid === child.pid && d.url;
    }, 30000);
  }

  async kill() {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  async stop() {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGTERM");
    await this.exited;
  }
}

// sessionctl runs bin/sessionctl --home HOME ARGS and returns its stdout.
export async function sessionctl(home, ...args) {
  const { stdout } = await promisify(execFile)(bin("sessionctl"), ["--home", home, ...args], { timeout: 30000 });
  return stdout;
}

// Editor spawns `sessionctl acp` and connects the SDK's client to its
// stdio. It records every session/update and answers permission requests
// through onPermission (a function of the request params and the abort
// signal; default: cancelled).
export class Editor {
  constructor(home, { elicitation = false, args = [] } = {}) {
    this.elicitation = elicitation;
    this.elicitations = [];
    this.onElicitation = async () => ({ action: "cancel" });
    this.home = home;
    this.updates = [];
    this.permissions = [];
    this.stdout = [];
    this.stderr = [];
    this.onPermission = async () => ({ outcome: { outcome: "cancelled" } });
    const child = track(spawn(bridgeBin, ["--home", home, "acp", ...args], { stdio: ["pipe", "pipe", "pipe"] }));
    this.child = child;
    this.exited = new Promise((r) => child.on("exit", (code) => r(code)));
    lines(child.stderr, (l) => this.stderr.push(l));
    const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    const app = client({ name: "sessiond-acp-test" })
      .onNotification(methods.client.session.update, ({ params }) => {
        this.updates.push(params);
      })
      .onRequest(methods.client.session.requestPermission, async ({ params, signal }) => {
        const entry = { params, signal, answered: false, aborted: false };
        this.permissions.push(entry);
        signal.addEventListener("abort", () => { entry.aborted = true; });
        const res = await this.onPermission(params, signal);
        entry.answered = true;
        return res;
      });
    if (elicitation) {
      app.onRequest(methods.client.elicitation.create, async ({ params }) => {
        this.elicitations.push(params);
        return this.onElicitation(params);
      });
    }
    this.conn = app.connect(stream);
    this.agent = this.conn.agent;
  }

  request(method, params) { return this.agent.request(method, params); }
  notify(method, params) { return this.agent.notify(method, params); }

  initialize() {
    return this.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: {
        fs: { readTextFile: false, writeTextFile: false }, terminal: false,
        ...(this.elicitation ? { elicitation: { form: {} } } : {}),
      },
      clientInfo: { name: "sessiond-acp-test", version: "1" },
    });
  }

  // prompt sends text and returns the response promise; updates of the
  // session from now on are in this.updates.
  prompt(sessionId, text) {
    return this.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  }

  // updatesOf returns the session's updates from index `from` on.
  updatesOf(sessionId, from = 0) {
    return this.updates.slice(from).filter((u) => u.sessionId === sessionId).map((u) => u.update);
  }

  // agentText joins the agent_message_chunk texts of the session from `from`.
  agentText(sessionId, from = 0) {
    return this.updatesOf(sessionId, from)
      .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
      .map((u) => u.content.text).join("");
  }

  async close() {
    this.conn.close();
    this.child.stdin.end();
    this.child.kill("SIGTERM");
    await this.exited;
    // A bridge built with -race (go build -race -o bin/ ./cmd/sessionctl)
    // reports data races on stderr.
    const race = this.stderr.findIndex((l) => l.includes("DATA RACE"));
    if (race >= 0) throw new Error("sessionctl acp reported a data race:\n" + this.stderr.slice(race, race + 40).join("\n"));
  }
}

export { methods };
