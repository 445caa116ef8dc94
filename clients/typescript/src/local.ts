// Finding and connecting to the daemon of a local home (Node.js only):
// the descriptor daemon.json holds its URL and token, renewed at every
// start, so connectLocal reads it again before every reconnect.
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { SessiondClient, type ClientOptions, type Credentials } from "./index.js";

/** daemon.json: `{pid, url, token, protocol, version, boot_epoch, started_at}` (PROTOCOL.md section 1). */
export interface Descriptor extends Credentials {
  pid: number;
  protocol: number;
  version: string;
  boot_epoch: number;
  started_at: string;
}

/** The home sessiond uses: $SESSIOND_HOME, else $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond. */
export function defaultHome(): string {
  const env = process.env;
  if (env.SESSIOND_HOME) return env.SESSIOND_HOME;
  return join(env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "sessiond");
}

/**
 * Reads home's daemon.json (default: defaultHome()). Rejects with an Error
 * saying how to start the daemon when there is none.
 */
export async function readDescriptor(home: string = defaultHome()): Promise<Descriptor> {
  const file = join(home, "daemon.json");
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error(`sessiond: no daemon running for home ${home} (no ${file}); start one with \`sessiond --home ${home}\``);
    }
    throw err;
  }
  const d = JSON.parse(text) as Descriptor;
  if (!d.url || !d.token) throw new Error(`sessiond: ${file} has no url or token`);
  return d;
}

/** The options of connectLocal: ClientOptions but the credentials, and the home. */
export interface LocalOptions extends Omit<ClientOptions, "url" | "token" | "credentials"> {
  /** The daemon's home (default: defaultHome()). */
  home?: string;
}

/**
 * Connects to the daemon of a local home, reading its descriptor before
 * every (re)connect so that the client follows the daemon across restarts
 * (new port, new token).
 */
export function connectLocal(opts: LocalOptions = {}): Promise<SessiondClient> {
  const { home, ...rest } = opts;
  return SessiondClient.connect({ ...rest, credentials: () => readDescriptor(home) });
}
