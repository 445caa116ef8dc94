// Test harness: the real sessiond and sessiond-fakemodel from ../../bin
// (make build), each in a fresh temporary home, stopped after the test.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync, mkdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "../../..");
// The binaries: $SESSIOND_BIN (the daemon; sessiond-fakemodel next to it),
// else ../../bin (make build). A missing one fails saying how to build it.
const binDir = process.env.SESSIOND_BIN ? dirname(resolve(process.env.SESSIOND_BIN)) : join(root, "bin");
export const bin = (name) => {
  const p = name === "sessiond" && process.env.SESSIOND_BIN ? resolve(process.env.SESSIOND_BIN) : join(binDir, name);
  if (!existsSync(p)) {
    throw new Error(`${p} is missing: run \`make build\` in ${root} (or set SESSIOND_BIN to a built sessiond, with sessiond-fakemodel next to it)`);
  }
  return p;
};

/** Polls fn until it returns a truthy value or the deadline passes. */
export async function eventually(fn, what, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function startFakeModel(t, chunkDelay = "40ms") {
  const p = spawn(bin("sessiond-fakemodel"), ["--listen", "127.0.0.1:0", "--chunk-delay", chunkDelay, "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => p.kill("SIGKILL"));
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  const url = await eventually(() => out.match(/model at (http:\/\/\S+)/)?.[1], "the fake model's URL");
  return url;
}

export class Daemon {
  constructor(t, modelURL) {
    this.home = mkdtempSync(join(tmpdir(), "sessiond-ts-"));
    this.cwd = join(this.home, "work");
    mkdirSync(this.cwd);
    writeFileSync(join(this.home, "config.yaml"), `model: {provider: openai, default: fake-model, base_url: ${modelURL}}\napprovals: {mode: manual}\n`);
    this.stderr = "";
    t.after(() => {
      this.proc?.kill("SIGKILL");
      rmSync(this.home, { recursive: true, force: true });
    });
  }

  async start() {
    const before = this.descriptorOrNull()?.pid;
    this.proc = spawn(bin("sessiond"), ["--home", this.home], { stdio: ["ignore", "ignore", "pipe"] });
    this.proc.stderr.on("data", (d) => (this.stderr += d));
    const p = this.proc;
    await eventually(() => {
      if (p.exitCode !== null) throw new Error(`sessiond exited ${p.exitCode}: ${this.stderr}`);
      const d = this.descriptorOrNull();
      return d && d.pid === p.pid && d.pid !== before;
    }, "daemon.json of the new daemon");
  }

  descriptorOrNull() {
    try {
      return JSON.parse(readFileSync(join(this.home, "daemon.json"), "utf8"));
    } catch {
      return null;
    }
  }

  /** The credentials function a client uses to follow restarts. */
  credentials = () => {
    const d = this.descriptorOrNull();
    if (!d) throw new Error("no daemon.json");
    return { url: d.url, token: d.token };
  };

  async kill() {
    const p = this.proc;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  }
}
