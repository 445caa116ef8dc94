// An IDE-style use of @sessiond/client: open (or create) a session for the
// workspace, show the conversation as it streams, ask the user about
// approvals and clarifications, and submit what they type. Run with
//   npx tsx examples/ide.ts /path/to/workspace   (daemon started with `make run`)
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline/promises";
import { SessiondClient, approvalPayload, clarifyPayload, visible, type Prompt } from "@sessiond/client";

const home = process.env.SESSIOND_HOME ?? join(process.env.XDG_STATE_HOME ?? join(homedir(), ".local/state"), "sessiond");
// The daemon gets a new port and token at every start: read them at every (re)connect.
const credentials = () => JSON.parse(readFileSync(join(home, "daemon.json"), "utf8"));

const workspace = process.argv[2] ?? process.cwd();
const ui = createInterface({ input: process.stdin, output: process.stdout });
const client = await SessiondClient.connect({ credentials, clientInfo: { name: "example-ide", version: "0.1.0" } });
client.onConnection((up) => console.log(up ? "[connected]" : "[daemon unreachable, reconnecting…]"));

// Reuse the newest session of this workspace, else create one.
const { sessions } = await client.call("session.list", { limit: 50 });
const existing = sessions.find((s) => s.cwd === workspace);
const session = existing ? await client.session(existing.session_id) : await client.createSession({ cwd: workspace, title: "IDE" });

// Draw the history once; older messages page in with session.olderMessages().
// visible() also makes the strings inside JSON text visible: a tool call's
// arguments, a tool message's result.
for (const m of session.snapshot.messages) {
  console.log(`${m.role}: ${visible(m.content)}`);
  for (const c of (m.tool_calls ?? []) as { name: string; arguments: string }[]) console.log(`  [${visible(c.name)}] ${visible(c.arguments)}`);
}
session.onSnapshotRequired((snap) => console.log(`[resynced: ${snap.messages.length} messages]`));

async function handlePrompt(p: Prompt) {
  const a = approvalPayload(p);
  if (a) {
    const yes = await ui.question(`Run \`${visible(a.command)}\` (${a.risk}: ${visible(a.reason)})? [y/N] `);
    await session.approve(p, yes.trim().toLowerCase() === "y" ? "once" : "deny");
    return;
  }
  const c = clarifyPayload(p);
  if (c) {
    const q = c.questions[0];
    const choices = q.choices?.length ? ` [${q.choices.map(visible).join("/")}]` : "";
    await session.answer(p, await ui.question(`${visible(q.question)}${choices} `));
  }
}
for (const p of session.snapshot.prompts) void handlePrompt(p);

// Events: every durable one exactly once, across reconnects and restarts.
(async () => {
  for await (const ev of session.events()) {
    switch (ev.type) {
      case "message.delta": process.stdout.write(visible(ev.payload.text)); break;
      case "message.completed": process.stdout.write("\n"); break;
      case "tool.started": console.log(`[${visible(ev.payload.name)}] ${visible(JSON.stringify(ev.payload.args))}`); break;
      case "tool.output": process.stdout.write(visible(ev.payload.text)); break;
      case "prompt.opened": void handlePrompt(ev.payload.prompt); break;
      case "turn.completed": console.log(`[turn ${ev.payload.outcome}${ev.payload.error ? `: ${visible(ev.payload.error)}` : ""}]`); break;
    }
  }
})();

// Each line typed is submitted durably: resent after a reconnect until a receipt comes.
for await (const line of ui) {
  if (line.trim()) await session.submit(line);
}
client.close();
