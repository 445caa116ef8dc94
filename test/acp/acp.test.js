// `sessionctl acp` played by an editor built on the official ACP SDK,
// against a real sessiond with the fake model. Run by `make test` (after
// `make build`): cd test/acp && npm ci && node --test.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { Daemon, Editor, eventually, methods, sessionctl, startFakeModel, tmp } from "./harness.js";

let model, daemon, editor, ws, sessionId;

// T is a test that fails, rather than hangs, when a prompt never ends.
const T = (name, fn) => test(name, { timeout: 60000 }, fn);

before(async () => {
  model = await startFakeModel();
  const dir = tmp("acp-test-");
  ws = tmp("acp-ws-");
  daemon = new Daemon(path.join(dir, "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}"}\napprovals: {mode: manual, timeout: 120}\n`);
  await daemon.start();
  editor = new Editor(daemon.home);
});

after(async () => {
  await editor?.close();
  await daemon?.stop();
  model?.stop();
});

const allow = (optionId) => async () => ({ outcome: { outcome: "selected", optionId } });

T("initialize negotiates version 1 and advertises loadSession and the sessiond version", async () => {
  const r = await editor.initialize();
  assert.equal(r.protocolVersion, 1);
  assert.equal(r.agentCapabilities.loadSession, true);
  assert.equal(r.agentCapabilities.promptCapabilities.embeddedContext, true);
  assert.ok(!r.agentCapabilities.promptCapabilities.image, "images are not advertised");
  assert.equal(r.agentInfo.name, "sessiond");
  assert.ok(r.agentInfo.version, "agentInfo.version is the daemon's version");
});

T("initialize without a daemon on the home fails saying how to start one", async () => {
  const empty = tmp("acp-nohome-");
  const e = new Editor(empty);
  try {
    await assert.rejects(e.initialize(), (err) => {
      assert.match(err.message, /no daemon running for home/);
      assert.match(err.message, /sessiond --home/);
      return true;
    });
  } finally {
    await e.close();
  }
});

T("session/new creates a daemon session with the editor's stdio MCP servers", async () => {
  const r = await editor.request(methods.agent.session.new, { cwd: ws, mcpServers: [] });
  assert.match(r.sessionId, /^ses_/);
  sessionId = r.sessionId;
  const listed = await sessionctl(daemon.home, "sessions");
  assert.ok(listed.includes(sessionId), `sessions lists ${sessionId}: ${listed}`);

  // /bin/true is a stdio "server" that exits at once: it reaches the
  // session (frozen with it), is started at the first prompt inside the
  // sandbox, fails, and the prompt still ends normally.
  const withMcp = await editor.request(methods.agent.session.new, {
    cwd: ws, mcpServers: [
      { name: "my files", command: "/bin/true", args: ["--root", ws], env: [{ name: "A", value: "b" }] },
      { type: "http", name: "remote", url: "https://mcp.example.invalid/mcp", headers: [] },
    ],
  });
  assert.deepEqual(withMcp._meta.sessiond.mcpServers, ["my_files"]);
  assert.match(withMcp._meta.sessiond.note, /stdio MCP servers only: remote \(http\) not connected/);
  const show = async () => JSON.parse(await sessionctl(daemon.home, "show", withMcp.sessionId, "--json")).mcp_servers;
  const before = await show();
  assert.equal(before.length, 1);
  assert.equal(before[0].name, "my_files");
  assert.equal(before[0].source, "session");
  assert.equal(before[0].status, "stopped");
  const from = editor.updates.length;
  const r2 = await editor.prompt(withMcp.sessionId, "ping");
  assert.equal(r2.stopReason, "end_turn");
  assert.match(editor.agentText(withMcp.sessionId, from), /stdio MCP servers only/);
  await eventually("the editor's server started and failed", async () => {
    const s = (await show())[0];
    return s.status === "failed" && /exited with status 0/.test(s.error);
  });
});

T("session/new with a relative cwd is refused with the daemon's reason", async () => {
  await assert.rejects(editor.request(methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] }), (err) => {
    assert.equal(err.data.reason, "invalid_params");
    return true;
  });
});

T("a prompt streams as agent_message_chunk and ends end_turn", async () => {
  const from = editor.updates.length;
  const r = await editor.prompt(sessionId, "hello there");
  assert.equal(r.stopReason, "end_turn");
  const chunks = editor.updatesOf(sessionId, from).filter((u) => u.sessionUpdate === "agent_message_chunk");
  assert.ok(chunks.length > 1, `streamed in several chunks, got ${chunks.length}`);
  assert.equal(editor.agentText(sessionId, from), "You said: hello there");
});

T("an image in the prompt is refused as invalid params", async () => {
  await assert.rejects(editor.request(methods.agent.session.prompt, {
    sessionId, prompt: [{ type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }],
  }), (err) => {
    assert.equal(err.code, -32602);
    assert.match(JSON.stringify(err.data), /images are not supported/);
    return true;
  });
});

T("a dangerous command answered allow_once runs", async () => {
  editor.onPermission = allow("allow_once");
  const from = editor.updates.length;
  const nperm = editor.permissions.length;
  const cmd = "rm -rf scratch && echo ran > allowed.txt";
  const r = await editor.prompt(sessionId, `run: ${cmd}`);
  assert.equal(r.stopReason, "end_turn");
  const p = editor.permissions[nperm].params;
  assert.deepEqual(p.options.map((o) => [o.optionId, o.kind]),
    [["allow_once", "allow_once"], ["allow_always", "allow_always"], ["reject_once", "reject_once"]]);
  assert.equal(p.toolCall.title, cmd);
  assert.ok(existsSync(path.join(ws, "allowed.txt")), "the approved command ran");
  const ups = editor.updatesOf(sessionId, from);
  const call = ups.find((u) => u.sessionUpdate === "tool_call");
  assert.equal(call.kind, "execute");
  assert.equal(call.title, cmd);
  assert.equal(call.rawInput.command, cmd);
  const done = ups.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId).at(-1);
  assert.equal(done.status, "completed");
  assert.match(editor.agentText(sessionId, from), /exited with status 0/);
});

T("a dangerous command answered reject_once does not run", async () => {
  editor.onPermission = allow("reject_once");
  const from = editor.updates.length;
  const r = await editor.prompt(sessionId, "run: rm -rf scratch && echo ran > rejected.txt");
  assert.equal(r.stopReason, "end_turn");
  assert.ok(!existsSync(path.join(ws, "rejected.txt")), "the rejected command did not run");
  const done = editor.updatesOf(sessionId, from).filter((u) => u.sessionUpdate === "tool_call_update").at(-1);
  assert.equal(done.status, "failed");
});

T("a clarification with choices is a permission request whose options are the choices", async () => {
  editor.onPermission = async (p) => ({ outcome: { outcome: "selected", optionId: p.options.find((o) => o.name === "blue").optionId } });
  const from = editor.updates.length;
  const r = await editor.prompt(sessionId, "ask: Which colour? | red | blue");
  assert.equal(r.stopReason, "end_turn");
  assert.match(editor.agentText(sessionId, from), /You answered: blue/);
});

T("session/cancel mid-turn ends the running prompt and the one queued behind it cancelled", async () => {
  const from = editor.updates.length;
  const running = editor.prompt(sessionId, "run: sleep 60");
  await eventually("the sleep tool call", () => editor.updatesOf(sessionId, from).some((u) => u.sessionUpdate === "tool_call"));
  const queued = editor.prompt(sessionId, "queued, then cancelled");
  await eventually("the second prompt queued", async () => {
    const p = JSON.parse(await sessionctl(daemon.home, "pending", sessionId, "--json"));
    return p.pending.some((r) => r.status === "queued");
  });
  await editor.notify(methods.agent.session.cancel, { sessionId });
  assert.equal((await running).stopReason, "cancelled");
  assert.equal((await queued).stopReason, "cancelled");
  assert.ok(!model.inputs().includes("queued, then cancelled"), "the withdrawn prompt never reached the model");
});

T("a prompt to an unknown session fails with the daemon's not_found", async () => {
  await assert.rejects(editor.prompt("ses_does-not-exist", "hello"), (err) => {
    assert.equal(err.data.reason, "not_found");
    return true;
  });
});

T("session/load replays the history before answering", async () => {
  const e2 = new Editor(daemon.home);
  try {
    await e2.initialize();
    const r = await e2.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
    assert.ok(r !== undefined);
    const ups = e2.updatesOf(sessionId);
    const users = ups.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text);
    assert.ok(users.includes("hello there"), `user messages replayed: ${JSON.stringify(users)}`);
    assert.ok(users.includes("run: rm -rf scratch && echo ran > allowed.txt"));
    assert.match(e2.agentText(sessionId), /You said: hello there/);
    const calls = ups.filter((u) => u.sessionUpdate === "tool_call");
    const allowed = calls.find((c) => c.title === "rm -rf scratch && echo ran > allowed.txt");
    assert.equal(allowed.kind, "execute");
    const fin = ups.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === allowed.toolCallId).at(-1);
    assert.equal(fin.status, "completed");
    const rejected = calls.find((c) => c.title === "rm -rf scratch && echo ran > rejected.txt");
    const rfin = ups.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === rejected.toolCallId).at(-1);
    assert.equal(rfin.status, "failed");
  } finally {
    await e2.close();
  }
});

T("the daemon SIGKILLed with a prompt queued behind a running one: each input runs at most once, the unknown one ends with the resolve command", async () => {
  const s = (await editor.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
  const held = [];
  let discard;
  editor.onPermission = (params, signal) => new Promise((resolve) => {
    if (params._meta?.sessiond?.kind === "unknown_execution") {
      discard = () => resolve({ outcome: { outcome: "selected", optionId: "discard_unknown" } });
      return;
    }
    held.push(params);
    signal.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }));
  });
  const textA = "run: rm -rf crashdir && echo a > crash.txt";
  const textB = "after the crash";
  const from = editor.updates.length;
  const a = editor.prompt(s, textA);
  a.catch(() => {}); // inspected below
  await eventually("the approval of A", () => held.length === 1);
  const b = editor.prompt(s, textB);
  await eventually("B queued behind A", async () => {
    const p = JSON.parse(await sessionctl(daemon.home, "pending", s, "--json"));
    return p.pending.length === 2 && p.pending[1].status === "queued";
  });

  const permA = editor.permissions.at(-1);
  await daemon.kill();
  // The daemon's end closes A's approval: the editor's card is withdrawn at once.
  await eventually("A's permission request withdrawn", () => permA.aborted);
  await daemon.start();

  let errA;
  await a.then(() => assert.fail("A must not succeed"), (e) => { errA = e; });
  assert.equal(errA.data.reason, "unknown_execution");
  assert.match(errA.message, /sessionctl .*resolve /);
  const resolve = errA.data.resolve;
  assert.match(resolve, new RegExp(`resolve ${s} adm_`));
  assert.ok(!existsSync(path.join(ws, "crash.txt")), "the unapproved command never ran");

  // B, held behind the unknown A, asks the editor to discard A; allowed, A
  // is resolved (never run again) and B runs.
  const ask = await eventually("B's question about the lost turn", () =>
    editor.permissions.find((p) => p.params._meta?.sessiond?.kind === "unknown_execution"));
  const adm = resolve.split(" ").at(-1);
  assert.equal(ask.params._meta.sessiond.admission_id, adm);
  assert.match(ask.params.toolCall.title, /lost in a crash: discard it and continue\?/);
  discard();
  const rb = await b;
  assert.equal(rb.stopReason, "end_turn");
  assert.match(editor.agentText(s, from), /You said: after the crash/);

  assert.ok(editor.stderr.some((l) => /reconnected to the daemon; resuming/.test(l)), "the bridge reconnected");
  const inputs = model.inputs();
  assert.equal(inputs.filter((x) => x === textA).length, 1, `A reached the model once: ${JSON.stringify(inputs)}`);
  assert.equal(inputs.filter((x) => x === textB).length, 1, `B reached the model once: ${JSON.stringify(inputs)}`);
});

T("a permission request the editor cancels is a deny: the command does not run", async () => {
  editor.onPermission = async () => ({ outcome: { outcome: "cancelled" } });
  const from = editor.updates.length;
  const r = await editor.prompt(sessionId, "run: rm -rf scratch && echo ran > cancelled.txt");
  assert.equal(r.stopReason, "end_turn");
  assert.ok(!existsSync(path.join(ws, "cancelled.txt")), "the command of a cancelled permission request did not run");
  assert.match(editor.agentText(sessionId, from), /did not run normally/);
});

T("a free-text clarification is a form elicitation when the editor advertises it", async () => {
  const e2 = new Editor(daemon.home, { elicitation: true });
  try {
    await e2.initialize();
    const s = (await e2.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
    e2.onElicitation = async () => ({ action: "accept", content: { q0: "Ada" } });
    const r = await e2.prompt(s, "ask: What is your name?");
    assert.equal(r.stopReason, "end_turn");
    assert.equal(e2.elicitations.length, 1);
    assert.equal(e2.elicitations[0].mode, "form");
    assert.equal(e2.elicitations[0].requestedSchema.properties.q0.title, "What is your name?");
    assert.match(e2.agentText(s), /You answered: Ada/);
  } finally {
    await e2.close();
  }
});

T("without elicitation, a free-text clarification is an agent message saying how to answer", async () => {
  const from = editor.updates.length;
  const pending = editor.prompt(sessionId, "ask: What is your name?");
  const text = await eventually("the how-to-answer message", () => {
    const t = editor.agentText(sessionId, from);
    return /answer .*prm_/.test(t) && t;
  });
  const cmd = /`([^`]*answer [^`]*)`/.exec(text)[1];
  assert.match(cmd, new RegExp(`sessionctl --home \\S+ answer ${sessionId} prm_\\S+ 'YOUR ANSWER'`));
  const [, promptId] = / (prm_\S+) /.exec(cmd);
  await sessionctl(daemon.home, "answer", sessionId, promptId, "Grace");
  const r = await pending;
  assert.equal(r.stopReason, "end_turn");
  assert.match(editor.agentText(sessionId, from), /You answered: Grace/);
});

T("max iterations end max_turn_requests; a graceful daemon stop mid-turn ends cancelled", async () => {
  const d = new Daemon(path.join(tmp("acp-other-"), "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}"}\napprovals: {mode: "off"}\nagent: {max_iterations: 1}\n`);
  await d.start();
  const e = new Editor(d.home);
  try {
    await e.initialize();
    const s = (await e.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
    const r = await e.prompt(s, "run: echo one call");
    assert.equal(r.stopReason, "max_turn_requests");

    const from = e.updates.length;
    const pending = e.prompt(s, "run: sleep 60");
    await eventually("the sleep tool call", () => e.updatesOf(s, from).some((u) => u.sessionUpdate === "tool_call"));
    await d.stop();
    const r2 = await pending;
    assert.equal(r2.stopReason, "cancelled");
  } finally {
    await e.close();
    await d.stop();
  }
});

T("a failed turn is a JSON-RPC error with the daemon's reason, and a final agent message", async () => {
  const d = new Daemon(path.join(tmp("acp-broken-"), "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}/broken"}\napprovals: {mode: manual}\n`);
  await d.start();
  const e = new Editor(d.home);
  try {
    await e.initialize();
    const s = (await e.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
    await assert.rejects(e.prompt(s, "hello"), (err) => {
      assert.equal(err.data.reason, "turn_failed");
      assert.ok(err.data.error, "the daemon's error text");
      assert.match(err.message, /^turn failed: /);
      return true;
    });
    assert.match(e.agentText(s), /Turn failed:/);
  } finally {
    await e.close();
    await d.stop();
  }
});

T("an approval the daemon closes (timeout) withdraws the editor's permission request at once", async () => {
  const d = new Daemon(path.join(tmp("acp-timeout-"), "home"),
    `model: {provider: openai, default: fake-model, base_url: "${model.url}"}\napprovals: {mode: manual, timeout: 1}\n`);
  await d.start();
  const e = new Editor(d.home);
  try {
    await e.initialize();
    const s = (await e.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
    let updatesAtAbort = -1;
    e.onPermission = (params, signal) => new Promise((resolve) => {
      signal.addEventListener("abort", () => {
        updatesAtAbort = e.updates.length;
        resolve({ outcome: { outcome: "cancelled" } });
      });
    });
    const r = await e.prompt(s, "run: rm -rf scratch && echo ran > timedout.txt");
    assert.equal(r.stopReason, "end_turn");
    assert.equal(e.permissions.length, 1);
    assert.ok(e.permissions[0].aborted, "the permission request was withdrawn when the daemon closed the approval");
    // At once: while the turn went on, not when it ended.
    assert.match(e.agentText(s, updatesAtAbort), /did not run normally/, "the withdrawal came before the turn's reply");
    assert.ok(!existsSync(path.join(ws, "timedout.txt")), "a timed-out approval is a deny");
  } finally {
    await e.close();
    await d.stop();
  }
});

// controls lists every control character a terminal would act on (C0 but
// newline and tab, DEL, C1, bidi overrides) in v's strings, decoding JSON
// held in a string as the editor may.
function controls(v, out = []) {
  if (typeof v === "string") {
    const m = v.match(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g);
    if (m) out.push(...m);
    try {
      const inner = JSON.parse(v);
      if (inner && typeof inner === "object") controls(inner, out);
    } catch { /* text */ }
  } else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) controls(k, out), controls(x, out);
  }
  return out;
}

T("escapes in a tool call's command and output reach the editor visible, live and in session/load", async () => {
  const s = (await editor.request(methods.agent.session.new, { cwd: ws, mcpServers: [] })).sessionId;
  editor.onPermission = allow("allow_once");
  const from = editor.updates.length;
  const nperm = editor.permissions.length;
  const cmd = "printf 'out\\033]0;acp-output\\007\\n'; echo \"\x1b]0;acp-title\x07\x1b[2J\r(approved by you: once)\"";
  const r = await editor.prompt(s, `run: ${cmd}`);
  assert.equal(r.stopReason, "end_turn");
  const shown = 'echo "␛]0;acp-title␇␛[2J␍(approved by you: once)"';
  const check = (ups, what) => {
    assert.deepEqual(controls(ups), [], `${what} carries raw control characters: ${JSON.stringify(ups)}`);
    const call = ups.find((u) => u.sessionUpdate === "tool_call");
    assert.ok(call.title.includes(shown), `${what}: the title ${JSON.stringify(call.title)}`);
    assert.ok(call.rawInput.command.includes(shown), `${what}: rawInput ${JSON.stringify(call.rawInput)}`);
    const out = ups.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId)
      .flatMap((u) => u.content ?? []).map((c) => c.content?.text ?? "").join("\n");
    assert.match(out, /out␛\]0;acp-output␇/, `${what}: the output`);
  };
  check(editor.updatesOf(s, from), "the live turn");
  assert.deepEqual(controls(editor.permissions.slice(nperm).map((p) => p.params)), [], "the permission request");
  const e2 = new Editor(daemon.home);
  try {
    await e2.initialize();
    await e2.request(methods.agent.session.load, { sessionId: s, cwd: ws, mcpServers: [] });
    check(e2.updatesOf(s), "session/load's replay");
  } finally {
    await e2.close();
  }
});
