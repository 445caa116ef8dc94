// Attacks on the ACP bridge (issue 26's attack round), played by an editor
// on the official SDK against `sessionctl acp` and a real daemon: SIGKILL of
// the daemon at varied moments of a prompt (no input may reach the model
// twice), oversized frames, two editors on one session, and session-scoped
// settings.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Daemon, Editor, eventually, methods, sessionctl, startFakeModel, tmp } from "./harness.js";

let model, daemon, editor, ws;
const T = (name, fn) => test(name, { timeout: 120000 }, fn);

before(async () => {
  model = await startFakeModel();
  ws = tmp("acp-attack-ws-");
  daemon = new Daemon(path.join(tmp("acp-attack-"), "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}"}\napprovals: {mode: manual, timeout: 120}\n`);
  await daemon.start();
  editor = new Editor(daemon.home);
  await editor.initialize();
});

after(async () => {
  await editor?.close();
  await daemon?.stop();
  model?.stop();
});

const newSession = async (e = editor) => (await e.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;

T("SIGKILL of the daemon at varied moments of a prompt: no input reaches the model twice, the editor can always go on", async () => {
  const s = await newSession();
  editor.onPermission = async (params) => {
    if (params.options.some((o) => o.optionId === "discard_unknown")) return { outcome: { outcome: "selected", optionId: "discard_unknown" } };
    return { outcome: { outcome: "cancelled" } };
  };
  const texts = [];
  // Delays from before the frame is read to mid-stream (the fake model
  // streams a chunk every 5 ms).
  for (const [i, delay] of [0, 3, 10, 25, 40, 80].entries()) {
    const text = `kill ${i} ${"word ".repeat(20)}`;
    texts.push(text);
    const p = editor.prompt(s, text);
    const settled = p.then((r) => ({ r }), (err) => ({ err }));
    await new Promise((r) => setTimeout(r, delay)); // the attack's moment, not a synchronisation
    await daemon.kill();
    await daemon.start();
    const { r, err } = await settled;
    if (err) assert.equal(err.data?.reason, "unknown_execution", `prompt ${i}: ${err.message}`);
    else assert.equal(r.stopReason, "end_turn", `prompt ${i}`);
  }
  // One more prompt discards whatever the last crash left and runs.
  const r = await editor.prompt(s, "after the kills");
  assert.equal(r.stopReason, "end_turn");
  const inputs = model.inputs();
  for (const t of texts) assert.ok(inputs.filter((x) => x === t).length <= 1, `"${t.slice(0, 8)}" reached the model ${inputs.filter((x) => x === t).length} times`);
  assert.equal(inputs.filter((x) => x === "after the kills").length, 1);
  const pend = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
  assert.equal(pend.pending.length, 0);
});

T("an oversized frame is refused by its id and the bridge goes on serving", async () => {
  const e = new Editor(daemon.home);
  try {
    await e.initialize();
    const s = await newSession(e);
    const big = "x".repeat(10 * 1024 * 1024 + 16);
    await assert.rejects(e.prompt(s, big), (err) => err.code === -32600);
    const r = await e.prompt(s, "after the oversized frame");
    assert.equal(r.stopReason, "end_turn");
    assert.ok(!model.inputs().some((x) => x.length > 1024 * 1024));
  } finally {
    await e.close();
  }
});

T("two editors on one session: one deletes it, the other's resume, load, prompt and set_config_option get not_found; deleting it again too", async () => {
  const other = new Editor(daemon.home);
  try {
    await other.initialize();
    const s = await newSession();
    await other.request(methods.agent.session.resume, { sessionId: s, cwd: ws, mcpServers: [] });
    await editor.request("session/delete", { sessionId: s });
    const notFound = (err) => { assert.equal(err.data?.reason, "not_found", err.message); return true; };
    await assert.rejects(other.request(methods.agent.session.resume, { sessionId: s, cwd: ws, mcpServers: [] }), notFound);
    await assert.rejects(other.request(methods.agent.session.load, { sessionId: s, cwd: ws, mcpServers: [] }), notFound);
    await assert.rejects(other.prompt(s, "to a deleted session"), notFound);
    await assert.rejects(other.request(methods.agent.session.setConfigOption, { sessionId: s, configId: "mode", value: "strict" }), notFound);
    await assert.rejects(other.request("session/delete", { sessionId: s }), notFound);
    assert.ok(!model.inputs().includes("to a deleted session"));
  } finally {
    await other.close();
  }
});
