import { test } from "node:test";
import assert from "node:assert/strict";
import { connectLocal, readDescriptor } from "../dist/index.js";
import { Daemon, startFakeModel, eventually } from "./harness.mjs";

test("connectLocal reads the home's descriptor; turn resolves with the outcome; submit honours a signal and a timeout", async (t) => {
  const d = new Daemon(t, await startFakeModel(t));
  await d.start();
  assert.equal((await readDescriptor(d.home)).pid, d.proc.pid);
  const client = await connectLocal({ home: d.home, minBackoffMs: 20, maxBackoffMs: 200 });
  t.after(() => client.close());
  const s = await client.createSession({ cwd: d.cwd });
  const r = await s.turn("hello", { inputId: "turn-1", timeoutMs: 30000 });
  assert.equal(r.status, "terminal");
  assert.equal(r.outcome, "completed");
  assert.equal(r.text, "You said: hello");
  const again = await s.turn("hello", { inputId: "turn-1" });
  assert.equal(again.receipt.duplicate, true, "the same input id is the same input");
  assert.equal(again.text, "You said: hello");

  const ac = new AbortController();
  ac.abort(new Error("stop"));
  await assert.rejects(s.submit("never", { signal: ac.signal }), /stop/);
  // A turn that outlasts its timeout rejects with TimeoutError (the turn goes on: interrupt it).
  await assert.rejects(s.turn("run: sleep 30", { timeoutMs: 300 }), (e) => e.name === "TimeoutError");
  await s.interrupt();

  await assert.rejects(connectLocal({ home: d.home + "-none" }), /no daemon running for home .*sessiond --home/);
});

test("after SIGKILL the turn resolves unknown; resolveUnknown settles it and the next turn runs", async (t) => {
  const d = new Daemon(t, await startFakeModel(t));
  await d.start();
  const client = await connectLocal({ home: d.home, minBackoffMs: 20, maxBackoffMs: 200 });
  t.after(() => client.close());
  const s = await client.createSession({ cwd: d.cwd });
  const pending = s.turn("run: sleep 30");
  await eventually(() => s.snapshot.running || s.lastSeq > 2 && s.snapshot, "the turn running");
  await eventually(async () => (await client.call("session.resume", { session_id: s.sessionId })).running, "the turn started");
  d.proc.kill("SIGKILL");
  await new Promise((r) => d.proc.once("exit", r));
  await d.start();
  const r = await pending;
  assert.equal(r.status, "unknown");
  const settled = await s.resolveUnknown(r.receipt.admission_id, r.receipt.execution_generation);
  assert.equal(settled.outcome, "interrupted");
  const next = await s.turn("after the crash", { timeoutMs: 30000 });
  assert.equal(next.outcome, "completed");
});
