import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { SessiondClient, SessiondError, approvalPayload, clarifyPayload, visible } from "../dist/index.js";
import { Daemon, startFakeModel, eventually } from "./harness.mjs";

async function setup(t, chunkDelay) {
  const model = await startFakeModel(t, chunkDelay);
  const d = new Daemon(t, model);
  await d.start();
  const client = await SessiondClient.connect({ credentials: d.credentials, minBackoffMs: 20, maxBackoffMs: 200, onConnectionError: (e) => process.env.TS_DEBUG && console.error("reconnect:", e) });
  t.after(() => client.close());
  return { d, client };
}

/** Collects a session's events (callback form) for assertions. */
function record(session) {
  const events = [];
  session.on((ev) => events.push(ev));
  return events;
}

test("typed calls, events, an approval and a clarification", async (t) => {
  const { d, client } = await setup(t);
  const info = await client.call("daemon.info", {});
  assert.equal(info.protocol, 1);
  const s = await client.createSession({ cwd: d.cwd });
  const events = record(s);
  const it = s.events();

  s.on("prompt.opened", (ev) => {
    const a = approvalPayload(ev.payload.prompt);
    if (a) s.approve(ev.payload.prompt, "once");
    const c = clarifyPayload(ev.payload.prompt);
    if (c) s.answer(ev.payload.prompt, c.questions[0].choices[1]);
  });
  mkdirSync(join(d.cwd, "victim"));
  const r1 = await s.submit("run: rm -rf victim && echo hi-from-ts");
  assert.equal(r1.duplicate, false);
  const r2 = await s.submit("ask: Which colour? | red | blue");
  await eventually(() => events.filter((e) => e.type === "turn.completed").length === 2, "two turns");
  const tool = events.find((e) => e.type === "tool.completed");
  assert.equal(tool.payload.ok, true);
  assert.match(JSON.stringify(tool.payload.result), /hi-from-ts/);
  const closed = events.filter((e) => e.type === "prompt.closed").map((e) => e.payload.resolution);
  assert.deepEqual(closed, ["answered", "answered"]);
  const last = events.filter((e) => e.type === "message.completed").at(-1);
  assert.match(last.payload.message.content, /blue/);
  // The iterator saw the same events in the same order.
  const first = await it.next();
  assert.deepEqual(first.value, events[0]);
  // The same input_id again is a duplicate, which is success.
  const again = await s.submit("run: rm -rf victim && echo hi-from-ts", { inputId: r1.input_id });
  assert.equal(again.duplicate, true);
  assert.equal(again.admission_id, r1.admission_id);
  // A refusal carries its reason.
  await assert.rejects(s.submit("other text", { inputId: r2.input_id }), (e) => e instanceof SessiondError && e.reason === "admission_conflict");
  await assert.rejects(client.call("session.resume", { session_id: "ses_nope" }), (e) => e instanceof SessiondError && e.reason === "not_found");
});

test("SIGKILL and restart mid-stream: every durable event once, in order; queued inputs and a submit made while down survive", async (t) => {
  // The fake model streams a reply in 3 chunks, here 1 s apart.
  const { d, client } = await setup(t, "1s");
  const s = await client.createSession({ cwd: d.cwd });
  const events = record(s);
  const long = "x".repeat(600);
  const first = await s.submit(long);
  const queued = [await s.submit("second"), await s.submit("third")];
  await eventually(() => events.some((e) => e.type === "message.delta" && e.admission_id === first.admission_id), "the turn streams");
  await d.kill();
  assert.ok(!events.some((e) => e.type === "turn.completed"), "the daemon was killed mid-turn");

  // Submitted while the daemon is down: resent after the reconnect.
  const whileDown = s.submit("fourth, sent while the daemon was down");
  await d.start();
  const r4 = await whileDown;
  assert.equal(r4.status, "queued");
  // The crash left the first admission unknown; the operator resolves it.
  const unknown = await eventually(
    () => events.find((e) => e.type === "admission.updated" && e.payload.admission_id === first.admission_id && e.payload.status === "unknown"),
    "the first admission reported unknown after the restart: " + events.map((e) => `${e.seq} ${e.type} ${e.payload.status ?? ""}`).join(", "),
  );
  await client.call("prompt.resolve_unknown", {
    session_id: s.sessionId,
    admission_id: first.admission_id,
    execution_generation: unknown.payload.execution_generation,
  });
  await eventually(
    () => [queued[0], queued[1], r4].every((r) => events.some((e) => e.type === "turn.completed" && e.admission_id === r.admission_id)),
    "the queued inputs ran",
    30000,
  );
  const seqs = events.filter((e) => e.seq !== null).map((e) => e.seq);
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `durable seqs ${seqs.slice(Math.max(0, i - 3), i + 2)} at ${i}`);
  assert.equal(seqs.at(-1), s.lastSeq);
  const snap = await client.call("session.resume", { session_id: s.sessionId });
  assert.equal(snap.last_seq, s.lastSeq);
  const texts = snap.messages.filter((m) => m.role === "assistant").map((m) => m.content);
  assert.deepEqual(texts, ["You said: second", "You said: third", "You said: fourth, sent while the daemon was down"]);
});

test("visible() shows escape sequences instead of running them", () => {
  assert.equal(visible("a\x1b[2K\rb\u202ec"), "a␛[2K␍b<U+202E>c");
  assert.equal(visible("line\r\nnext\ttab"), "line\nnext\ttab");
  assert.equal(visible("lone \ud800 surrogate"), "lone \ufffd surrogate"); // as invalid UTF-8 in protocol.Visible
});

// rawControl is the first control character a terminal would act on, or "".
const rawControl = (s) => /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.exec(s)?.[0] ?? "";

test("visible() decodes JSON inside a string and makes its strings visible too", () => {
  // Tool-call arguments: JSON text whose strings hold escapes as \u001b.
  const args = JSON.stringify({ command: "echo \x1b]0;title\x07\r(approved)", n: 12345678901234567890n.toString(), big: 1 });
  const v = visible(args);
  assert.equal(rawControl(JSON.parse(v).command), "");
  assert.equal(JSON.parse(v).command, "echo ␛]0;title␇␍(approved)");
  // Only the strings change: member order, numbers and spacing stay.
  assert.equal(visible('{"b": 12345678901234567890, "a": "\\u001b[2J"}'), '{"b": 12345678901234567890, "a": "␛[2J"}');
  // Nested again (a tool result holding JSON in a string), arrays, names.
  const nested = JSON.stringify({ result: JSON.stringify({ output: "x\x1b[31m\u202e" }), list: ["\x07", { "k\x1b": "v" }] });
  const n = JSON.parse(visible(nested));
  assert.equal(JSON.parse(n.result).output, "x␛[31m<U+202E>");
  assert.deepEqual(n.list, ["␇", { "k␛": "v" }]);
  // A JSON string literal as the whole text, and whitespace CRs.
  assert.equal(visible('"\\u001b[2J"'), '"␛[2J"');
  assert.equal(rawControl(visible('{\r"a":1}')), "");
  // Clean JSON and text that only looks like JSON are left as they are.
  assert.equal(visible('{"a":"\\u00e9","b":[1,2]}'), '{"a":"\\u00e9","b":[1,2]}');
  assert.equal(visible('{"a":"\\u001b" broken'), '{"a":"\\u001b" broken');
});

test("a command's escapes in the transcript are visible after visible() of the arguments and the result", async (t) => {
  const { d, client } = await setup(t);
  const s = await client.createSession({ cwd: d.cwd });
  const events = record(s);
  s.on("prompt.opened", (ev) => approvalPayload(ev.payload.prompt) && s.approve(ev.payload.prompt, "once"));
  await s.submit("run: printf 'out\\033]0;by-output\\007'; echo \"\x1b]0;by-args\x07\r(approved by you: once)\"");
  await eventually(() => events.some((e) => e.type === "turn.completed"), "the turn to end");
  const snap = await client.call("session.resume", { session_id: s.sessionId });
  const call = snap.messages.flatMap((m) => m.tool_calls ?? [])[0];
  const result = snap.messages.find((m) => m.role === "tool");
  assert.ok(call && result, `a tool call and its result in ${JSON.stringify(snap.messages)}`);
  const args = visible(call.arguments);
  assert.equal(rawControl(args), "");
  assert.match(JSON.parse(args).command, /echo "␛\]0;by-args␇␍\(approved by you: once\)"/);
  const out = visible(result.content);
  assert.equal(rawControl(out), "");
  assert.match(JSON.parse(out).output, /out␛\]0;by-output␇/);
});

test("when_busy, queue edits and fork through the typed methods", async (t) => {
  const { d, client } = await setup(t);
  const s = await client.createSession({ cwd: d.cwd });
  const events = record(s);
  mkdirSync(join(d.cwd, "victim2"));
  let approval;
  s.on("prompt.opened", (ev) => (approval = ev.payload.prompt));
  const running = await s.submit("run: rm -rf victim2 && echo gone");
  await eventually(() => approval, "the approval of the running turn");
  const steer = await s.submit("and report the disk usage", { whenBusy: "steer" });
  assert.equal(steer.delivery, "steer");
  await assert.rejects(s.submit("not now", { whenBusy: "reject" }), (e) => e instanceof SessiondError && e.reason === "session_busy");
  const q1 = await s.submit("first queued");
  const q2 = await s.submit("second queued");
  const up = await s.update(q1.admission_id, "first queued, edited");
  assert.equal(up.text, "first queued, edited");
  const moved = await s.move(q2.admission_id, q1.admission_id);
  assert.deepEqual(moved.order, [steer.admission_id, q2.admission_id, q1.admission_id]);
  await s.cancel(q2.admission_id);
  await assert.rejects(s.update(running.admission_id, "x"), (e) => e instanceof SessiondError && e.reason === "not_queued");
  s.approve(approval, "once");
  const settled = (id) => events.some((e) => e.type === "admission.updated" && e.payload.admission_id === id && e.payload.status === "terminal");
  await eventually(() => settled(q1.admission_id) && settled(steer.admission_id), "the queue to drain");
  const st = events.filter((e) => e.type === "admission.updated" && e.payload.admission_id === steer.admission_id).at(-1).payload;
  assert.equal(st.steered_into, running.admission_id);
  assert.equal(st.outcome, "completed");
  await assert.rejects(s.fork("adm_nope"), (e) => e instanceof SessiondError && e.reason === "not_found");
  const f = await s.fork(running.admission_id);
  const fs = await client.session(f.session_id);
  assert.deepEqual(fs.snapshot.pending, []);
  assert.ok(fs.snapshot.messages.some((m) => m.role === "user" && m.content === "and report the disk usage"));
  assert.ok(!fs.snapshot.messages.some((m) => m.content === "first queued, edited"));
});
