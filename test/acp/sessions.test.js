// ACP 1.0's session methods, configuration, request cancellation,
// restarts, crash recovery from the editor, and protocol hygiene, played by
// an editor on the official SDK against `sessionctl acp` and a real daemon.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { Daemon, Editor, eventually, methods, sessionctl, startFakeModel, tmp, bin } from "./harness.js";

let model, daemon, editor, ws;
const T = (name, fn) => test(name, { timeout: 90000 }, fn);
const allow = (optionId) => async () => ({ outcome: { outcome: "selected", optionId } });

before(async () => {
  model = await startFakeModel();
  ws = tmp("acp-ws2-");
  daemon = new Daemon(path.join(tmp("acp-s-"), "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}", choices: [other-model]}\napprovals: {mode: manual, timeout: 120}\n`);
  await daemon.start();
  editor = new Editor(daemon.home);
  await editor.initialize();
});

after(async () => {
  await editor?.close();
  await daemon?.stop();
  model?.stop();
});

const newSession = async (e = editor, cwd = ws) => (await e.request(methods.agent.session.new, { cwd, mcpServers: [] }));
const option = (opts, id) => opts.find((o) => o.id === id);

T("session/list pages through the daemon's sessions with titles and cwd, and filters by cwd", async () => {
  const sc = (await editor.initialize()).agentCapabilities.sessionCapabilities;
  assert.ok(sc.list && sc.resume && sc.close, `session capabilities advertised: ${JSON.stringify(sc)}`);
  const other = tmp("acp-other-cwd-");
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await newSession()).sessionId);
  const elsewhere = (await newSession(editor, other)).sessionId;
  await sessionctl(daemon.home, "rename", ids[0], "the first one");
  const seen = [];
  let cursor;
  let pages = 0;
  do {
    const r = await editor.request(methods.agent.session.list, cursor ? { cursor } : {});
    seen.push(...r.sessions);
    cursor = r.nextCursor;
    pages++;
  } while (cursor && pages < 100);
  for (const id of [...ids, elsewhere]) assert.ok(seen.some((s) => s.sessionId === id), `${id} listed`);
  const first = seen.find((s) => s.sessionId === ids[0]);
  assert.equal(first.title, "the first one");
  assert.equal(first.cwd, ws);
  const inOther = await editor.request(methods.agent.session.list, { cwd: other });
  assert.deepEqual(inOther.sessions.map((s) => s.sessionId), [elsewhere]);
  await assert.rejects(editor.request(methods.agent.session.list, { cursor: "not-a-cursor" }), (err) => {
    assert.equal(err.data.reason, "invalid_params");
    return true;
  });
});

T("session/new answers configOptions and modes; set_config_option and set_mode apply durably, narrowing the sandbox only", async () => {
  const r = await newSession();
  const s = r.sessionId;
  assert.equal(option(r.configOptions, "mode").currentValue, "manual");
  assert.equal(r.modes.currentModeId, "manual");
  assert.deepEqual(option(r.configOptions, "model").options.map((o) => o.value), ["fake-model", "other-model"]);
  assert.equal(option(r.configOptions, "model").category, "model");
  assert.deepEqual(option(r.configOptions, "sandbox").options.map((o) => o.value), ["workspace-write", "read-only"]);

  const set = await editor.request(methods.agent.session.setConfigOption, { sessionId: s, configId: "model", value: "other-model" });
  assert.equal(option(set.configOptions, "model").currentValue, "other-model");
  await editor.request(methods.agent.session.setConfigOption, { sessionId: s, configId: "sandbox", value: "read-only" });
  await editor.request(methods.agent.session.setMode, { sessionId: s, modeId: "off" });
  // Wider than the session's sandbox, unknown options and values: invalid params, nothing changed.
  for (const bad of [{ configId: "sandbox", value: "workspace-write" }, { configId: "sandbox", value: "off" },
    { configId: "colour", value: "red" }, { configId: "mode", value: "yolo" }]) {
    await assert.rejects(editor.request(methods.agent.session.setConfigOption, { sessionId: s, ...bad }), (err) => {
      assert.equal(err.code, -32602, JSON.stringify(bad));
      return true;
    });
  }
  await assert.rejects(editor.request(methods.agent.session.setMode, { sessionId: s, modeId: "yolo" }), (err) => err.code === -32602);

  // Durable: the daemon restarted, a new bridge loads the session and reads them back.
  await daemon.stop();
  await daemon.start();
  const e2 = new Editor(daemon.home);
  try {
    await e2.initialize();
    const l = await e2.request(methods.agent.session.load, { sessionId: s, cwd: ws, mcpServers: [] });
    assert.equal(option(l.configOptions, "model").currentValue, "other-model");
    assert.equal(option(l.configOptions, "sandbox").currentValue, "read-only");
    assert.deepEqual(option(l.configOptions, "sandbox").options.map((o) => o.value), ["read-only"]);
    assert.equal(option(l.configOptions, "mode").currentValue, "off");
    assert.equal(l.modes.currentModeId, "off");
    // Approvals off: a dangerous command runs without a permission request.
    const np = e2.permissions.length;
    const rp = await e2.prompt(s, "run: rm -rf scratch; echo ok");
    assert.equal(rp.stopReason, "end_turn");
    assert.equal(e2.permissions.length, np, "no permission request with approvals off");
    assert.match(e2.agentText(s), /exited with status 0/);
  } finally {
    await e2.close();
  }
});

T("session/resume reopens a session without replaying it; session/close cancels this bridge's prompts on it", async () => {
  const s = (await newSession()).sessionId;
  assert.equal((await editor.prompt(s, "before resume")).stopReason, "end_turn");
  const e2 = new Editor(daemon.home);
  try {
    await e2.initialize();
    const r = await e2.request(methods.agent.session.resume, { sessionId: s, cwd: ws, mcpServers: [] });
    assert.equal(option(r.configOptions, "mode").currentValue, "manual");
    assert.equal(e2.updatesOf(s).length, 0, "resume replays nothing");
    const from = e2.updates.length;
    const running = e2.prompt(s, "run: sleep 60");
    await eventually("the sleep tool call", () => e2.updatesOf(s, from).some((u) => u.sessionUpdate === "tool_call"));
    e2.onPermission = allow("allow_once");
    await e2.request(methods.agent.session.close, { sessionId: s });
    assert.equal((await running).stopReason, "cancelled");
  } finally {
    await e2.close();
  }
  await assert.rejects(editor.request(methods.agent.session.resume, { sessionId: "ses_nope", cwd: ws, mcpServers: [] }),
    (err) => err.data.reason === "not_found");
  await assert.rejects(editor.request(methods.agent.session.close, { sessionId: "ses_nope" }), (err) => err.data.reason === "not_found");
});

T("session/delete removes the daemon session; busy sessions are refused", async () => {
  const s = (await newSession()).sessionId;
  assert.equal((await editor.prompt(s, "to be deleted")).stopReason, "end_turn");
  const from = editor.updates.length;
  const running = editor.prompt(s, "run: sleep 60");
  await eventually("the sleep tool call", () => editor.updatesOf(s, from).some((u) => u.sessionUpdate === "tool_call"));
  await assert.rejects(editor.request("session/delete", { sessionId: s }), (err) => err.data.reason === "session_busy");
  await editor.notify(methods.agent.session.cancel, { sessionId: s });
  assert.equal((await running).stopReason, "cancelled");
  const r = await editor.request("session/delete", { sessionId: s });
  assert.deepEqual(r ?? {}, {});
  assert.ok(!(await sessionctl(daemon.home, "sessions")).includes(s), "the session is gone");
  await assert.rejects(editor.request("session/delete", { sessionId: s }), (err) => err.data.reason === "not_found");
});

T("$/cancel_request of a prompt withdraws it: the request answers -32800 and the turn is interrupted", async () => {
  const s = (await newSession()).sessionId;
  const e = new RawBridge(daemon.home);
  try {
    await e.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const id = e.send("session/prompt", { sessionId: s, prompt: [{ type: "text", text: "run: sleep 60" }] });
    await eventually("the turn running", async () => {
      const p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
      return p.pending.some((r) => r.status === "started");
    });
    e.notify("$/cancel_request", { requestId: id });
    const resp = await e.response(id);
    assert.equal(resp.error?.code, -32800, JSON.stringify(resp));
    await eventually("the turn interrupted", async () => {
      const p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
      return p.pending.length === 0;
    });
  } finally {
    await e.close();
  }
});

T("a prompt sent while the daemon restarts waits for it and runs once", async () => {
  const s = (await newSession()).sessionId;
  await daemon.stop();
  const from = editor.updates.length;
  const p = editor.prompt(s, "sent during a restart");
  await eventually("the waiting note", () => /waiting up to/.test(editor.agentText(s, from)));
  await daemon.start();
  const r = await p;
  assert.equal(r.stopReason, "end_turn");
  assert.match(editor.agentText(s, from), /You said: sent during a restart/);
  assert.equal(model.inputs().filter((x) => x === "sent during a restart").length, 1);
});

T("a prompt that cannot reach the daemon within --reconnect-timeout fails with a clear error", async () => {
  const home = path.join(tmp("acp-nodaemon-"), "home");
  const d = new Daemon(home, `model: {provider: openai, default: fake-model, base_url: "${model.url}"}\n`);
  await d.start();
  const e = new Editor(home, { args: ["--reconnect-timeout", "1s"] });
  try {
    await e.initialize();
    const s = (await e.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
    await d.stop();
    await assert.rejects(e.prompt(s, "never sent"), (err) => {
      assert.equal(err.data.reason, "daemon_unreachable");
      assert.match(err.message, /could not reconnect within 1s/);
      assert.match(err.message, /nothing was sent/);
      return true;
    });
  } finally {
    await e.close();
  }
});

T("after SIGKILL, the next prompt asks the editor to discard the lost turn: reject ends it refusal, allow resolves and runs it", async () => {
  const s = (await newSession()).sessionId;
  const held = [];
  editor.onPermission = (params, signal) => new Promise((resolve) => {
    held.push(params);
    signal.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }));
  });
  const lost = "run: rm -rf lostdir && echo lost > lost.txt";
  const a = editor.prompt(s, lost);
  a.catch(() => {});
  await eventually("the approval of the first prompt", () => held.length === 1);
  await daemon.kill();
  await daemon.start();
  await assert.rejects(a, (err) => err.data.reason === "unknown_execution");

  // Reject: nothing is sent, the stop reason says why.
  let asked;
  editor.onPermission = async (params) => { asked = params; return { outcome: { outcome: "selected", optionId: "keep_unknown" } }; };
  const r1 = await editor.prompt(s, "kept: not sent");
  assert.equal(r1.stopReason, "refusal");
  assert.equal(r1._meta.sessiond.reason, "unknown_execution");
  assert.match(asked.toolCall.title, /lost in a crash: discard it and continue\?/);
  assert.deepEqual(asked.options.map((o) => o.optionId), ["discard_unknown", "keep_unknown"]);
  let p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
  assert.deepEqual(p.pending.map((r) => r.status), ["unknown"], "the kept turn still holds the session; nothing was queued");

  // Allow: resolved, and the prompt runs.
  editor.onPermission = allow("discard_unknown");
  const from = editor.updates.length;
  const r2 = await editor.prompt(s, "after discarding");
  assert.equal(r2.stopReason, "end_turn");
  assert.match(editor.agentText(s, from), /You said: after discarding/);
  p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
  assert.equal(p.pending.length, 0);
  const inputs = model.inputs();
  assert.equal(inputs.filter((x) => x === lost).length, 1, "the lost turn's input reached the model once, never again");
  assert.ok(!inputs.includes("kept: not sent"));
  assert.ok(!existsSync(path.join(ws, "lost.txt")));
});

// RawBridge speaks newline-delimited JSON-RPC to `sessionctl acp` directly,
// for what the SDK never sends (malformed frames, raw ids).
class RawBridge {
  constructor(home) {
    this.child = spawn(process.env.ACP_SESSIONCTL || bin("sessionctl"), ["--home", home, "acp"], { stdio: ["pipe", "pipe", "pipe"] });
    this.frames = [];
    this.stderr = "";
    this.nextId = 1000;
    let buf = "";
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const l = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (l.trim()) this.frames.push(JSON.parse(l));
      }
    });
    this.child.stderr.on("data", (d) => { this.stderr += d; });
    this.exited = new Promise((r) => this.child.on("exit", (code) => r(code)));
  }
  write(line) { this.child.stdin.write(line + "\n"); }
  send(method, params) {
    const id = this.nextId++;
    this.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return id;
  }
  notify(method, params) { this.write(JSON.stringify({ jsonrpc: "2.0", method, params })); }
  response(id) { return eventually(`the response to ${id}`, () => this.frames.find((f) => f.id === id && !f.method), 60000); }
  async request(method, params) { return (await this.response(this.send(method, params))).result; }
  async close() {
    this.child.stdin.end();
    return this.exited;
  }
}

T("hygiene: malformed JSON gets -32700, a batch -32600, and the bridge goes on", async () => {
  const e = new RawBridge(daemon.home);
  try {
    e.write("{this is not json");
    const parse = await eventually("the parse error", () => e.frames.find((f) => f.error?.code === -32700));
    assert.equal(parse.id, null);
    e.write("[]");
    await eventually("the invalid request", () => e.frames.find((f) => f.error?.code === -32600));
    const init = await e.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    assert.equal(init.protocolVersion, 1);
  } finally {
    await e.close();
  }
});

T("hygiene: authenticate with a method the agent did not advertise is refused", async () => {
  const init = await editor.initialize();
  assert.deepEqual(init.authMethods, []);
  await assert.rejects(editor.request(methods.agent.authenticate, { methodId: "password" }), (err) => {
    assert.equal(err.code, -32602);
    assert.equal(err.data.methodId, "password");
    assert.match(err.data.error, /unknown auth method "password"/);
    return true;
  });
});

T("hygiene: stdin closed with requests in flight: every one is answered before the bridge exits", async () => {
  const s = (await newSession()).sessionId;
  const e = new RawBridge(daemon.home);
  await e.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const prompt = e.send("session/prompt", { sessionId: s, prompt: [{ type: "text", text: "run: sleep 30" }] });
  await eventually("the turn running", async () => {
    const p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
    return p.pending.some((r) => r.status === "started");
  });
  const list = e.send("session/list", {});
  const code = await e.close();
  assert.equal(code, 0);
  const pr = e.frames.find((f) => f.id === prompt);
  assert.ok(pr, `the prompt was answered: ${JSON.stringify(e.frames)}`);
  assert.equal(pr.error?.data?.reason, "bridge_stopped", JSON.stringify(pr));
  assert.ok(e.frames.find((f) => f.id === list), "session/list was answered");
  // The turn goes on in the daemon: stop it.
  await sessionctl(daemon.home, "interrupt", s);
});
