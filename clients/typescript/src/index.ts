// @sessiond/client — a client for sessiond's JSON-RPC 2.0 over WebSocket
// (docs/protocol.md; the types come from docs/schema.json).
//
// In Node (20+) the token goes in an Authorization header (the `ws`
// package); in browsers, which cannot set headers, as the subprotocol
// `sessiond.token.<token>` next to `sessiond.v1`.
import type {
  ApprovalPayload,
  Choice,
  ClarifyPayload,
  ErrorReason,
  Message,
  Methods,
  Prompt,
  Receipt,
  SessionEvent,
  Snapshot,
} from "./protocol.js";

export * from "./protocol.js";
export { connectLocal, readDescriptor, defaultHome } from "./local.js";
export type { LocalOptions, Descriptor } from "./local.js";

/** The WebSocket subprotocol of protocol v1. */
export const SUBPROTOCOL = "sessiond.v1";
/** Prefix of the token subprotocol browsers send. */
export const TOKEN_SUBPROTOCOL_PREFIX = "sessiond.token.";

/** Where the daemon is: its URL (ws://127.0.0.1:PORT/rpc) and token, as in HOME/daemon.json. */
export interface Credentials {
  url: string;
  token: string;
}

export interface ClientOptions {
  /** The daemon's URL and token; or `credentials`, read again before every reconnect. */
  url?: string;
  token?: string;
  /**
   * Returns the current URL and token. A daemon gets a new port and token
   * at every start; pass this (e.g. `() => readDescriptor(home)`) to follow it
   * across restarts.
   */
  credentials?: () => Promise<Credentials> | Credentials;
  /** Reconnect after the connection drops (default true). */
  reconnect?: boolean;
  /** First and largest pause between reconnect attempts, in ms (defaults 100 and 5000). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** The client's name and version, sent with initialize. */
  clientInfo?: { name: string; version: string };
  /** Called with each connection error before a retry (for logs). */
  onConnectionError?: (err: unknown) => void;
}

/** A JSON-RPC error response: `reason` is error.data.reason. */
export class SessiondError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly reason: ErrorReason,
    readonly data: Record<string, unknown>,
  ) {
    super(message);
    this.name = "SessiondError";
  }
}

/** The connection ended before the call's response came; the call may or may not have run. */
export class ConnectionLostError extends Error {
  constructor(message = "connection to sessiond lost") {
    super(message);
    this.name = "ConnectionLostError";
  }
}

/** The client was closed. */
export class ClosedError extends Error {
  constructor() {
    super("sessiond client closed");
    this.name = "ClosedError";
  }
}

type Socket = {
  readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
};

interface PendingCall {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

const isNode = typeof process !== "undefined" && !!process.versions?.node && typeof window === "undefined";

async function openSocket(c: Credentials): Promise<Socket> {
  if (isNode) {
    const { default: WS } = await import("ws");
    return new WS(c.url, [SUBPROTOCOL], { headers: { Authorization: `Bearer ${c.token}` } }) as unknown as Socket;
  }
  const W = (globalThis as unknown as { WebSocket: new (u: string, p: string[]) => Socket }).WebSocket;
  return new W(c.url, [SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX + c.token]);
}

/** A signal that aborts with signal, or after timeoutMs (a TimeoutError). */
function deadline(signal?: AbortSignal, timeoutMs?: number): AbortSignal | undefined {
  const ss = [signal, timeoutMs !== undefined ? AbortSignal.timeout(timeoutMs) : undefined].filter((x): x is AbortSignal => !!x);
  return ss.length === 0 ? undefined : ss.length === 1 ? ss[0] : AbortSignal.any(ss);
}

/** p, or a rejection with signal's reason once it aborts. */
function abortable<T>(signal: AbortSignal | undefined, p: Promise<T>): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function randomId(): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * A connection to sessiond that reconnects by itself. Calls made while it is
 * reconnecting wait for the connection; a call whose connection drops before
 * its response rejects with ConnectionLostError. Sessions opened with
 * `session()` are resumed after every reconnect with their last seq, so
 * their listeners see each durable event exactly once, in order.
 */
export class SessiondClient {
  private ws: Socket | null = null;
  private nextId = 1;
  private pending = new Map<number, PendingCall>();
  private sessions = new Map<string, Session>();
  private closed = false;
  private connected: Promise<void>;
  private markConnected!: () => void;
  private connectedNow = false;
  private readonly opts: ClientOptions;
  private connectionListeners = new Set<(up: boolean) => void>();

  private constructor(opts: ClientOptions) {
    this.opts = opts;
    this.connected = new Promise((r) => (this.markConnected = r));
  }

  /** Connects (the first attempt's failure rejects) and calls initialize. */
  static async connect(opts: ClientOptions): Promise<SessiondClient> {
    if (!opts.credentials && (!opts.url || !opts.token)) throw new TypeError("sessiond: url and token, or credentials, are required");
    const c = new SessiondClient(opts);
    await c.dial();
    return c;
  }

  private async creds(): Promise<Credentials> {
    if (this.opts.credentials) return await this.opts.credentials();
    return { url: this.opts.url!, token: this.opts.token! };
  }

  private async dial(): Promise<void> {
    const ws = await openSocket(await this.creds());
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = (e) => reject((e as { error?: unknown }).error ?? new Error("sessiond: WebSocket error"));
      ws.onclose = () => reject(new ConnectionLostError("sessiond: connection closed during the upgrade"));
    });
    this.ws = ws;
    ws.onmessage = (ev) => this.onFrame(typeof ev.data === "string" ? ev.data : String(ev.data));
    ws.onerror = () => {};
    ws.onclose = () => this.onClose(ws);
    this.connectedNow = true;
    this.markConnected();
    await this.send("initialize", {
      client: this.opts.clientInfo ?? { name: "@sessiond/client", version: "0.1.0" },
      protocol: 1,
    } as Methods["initialize"]["params"]);
    for (const s of this.sessions.values()) await s.resync();
    for (const l of this.connectionListeners) l(true);
  }

  private onClose(ws: Socket) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.connectedNow = false;
    this.connected = new Promise((r) => (this.markConnected = r));
    const err = this.closed ? new ClosedError() : new ConnectionLostError();
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    for (const l of this.connectionListeners) l(false);
    if (!this.closed && this.opts.reconnect !== false) void this.reconnectLoop();
  }

  private async reconnectLoop() {
    let pause = this.opts.minBackoffMs ?? 100;
    while (!this.closed) {
      await sleep(pause);
      if (this.closed) return;
      try {
        await this.dial();
        return;
      } catch (err) {
        this.ws?.close();
        this.opts.onConnectionError?.(err);
        pause = Math.min(pause * 2, this.opts.maxBackoffMs ?? 5000);
      }
    }
  }

  /** Listens for connection changes (true: connected and sessions resumed). Returns the unsubscribe function. */
  onConnection(cb: (up: boolean) => void): () => void {
    this.connectionListeners.add(cb);
    return () => this.connectionListeners.delete(cb);
  }

  /** Whether the socket is open now. */
  get isConnected(): boolean {
    return this.connectedNow;
  }

  private onFrame(text: string) {
    let msg: { id?: number; method?: string; params?: unknown; result?: unknown; error?: { code: number; message: string; data?: Record<string, unknown> } };
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.method === "session.event") {
      const ev = msg.params as SessionEvent;
      this.sessions.get(ev.session_id)?.deliver(ev);
      return;
    }
    if (typeof msg.id !== "number") return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) {
      const data = msg.error.data ?? {};
      p.reject(new SessiondError(msg.error.message, msg.error.code, (data.reason as ErrorReason) ?? "internal", data));
    } else p.resolve(msg.result);
  }

  private send<M extends keyof Methods>(method: M, params: Methods[M]["params"]): Promise<Methods[M]["result"]> {
    const ws = this.ws;
    if (!ws) return Promise.reject(new ConnectionLostError());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      try {
        ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      } catch (err) {
        this.pending.delete(id);
        reject(new ConnectionLostError(String(err)));
      }
    });
  }

  /**
   * Calls a method, waiting for the connection first. Rejects with
   * SessiondError (error responses), ConnectionLostError or ClosedError.
   */
  async call<M extends keyof Methods>(method: M, params: Methods[M]["params"]): Promise<Methods[M]["result"]> {
    if (this.closed) throw new ClosedError();
    while (!this.ws) {
      await this.connected;
      if (this.closed) throw new ClosedError();
    }
    return this.send(method, params);
  }

  /**
   * Opens (resumes) a session: the returned Session holds the snapshot and
   * delivers every later event. After a reconnect it resumes from its last
   * seq by itself.
   */
  async session(sessionId: string): Promise<Session> {
    let s = this.sessions.get(sessionId);
    if (s) return s;
    s = new Session(this, sessionId);
    this.sessions.set(sessionId, s);
    try {
      await s.resync();
    } catch (err) {
      this.sessions.delete(sessionId);
      throw err;
    }
    return s;
  }

  /** Creates a session and opens it. */
  async createSession(params: Methods["session.create"]["params"]): Promise<Session> {
    const snap = await this.call("session.create", params);
    const s = new Session(this, snap.session_id);
    this.sessions.set(snap.session_id, s);
    s.applySnapshot(snap);
    return s;
  }

  /** @internal */
  forget(sessionId: string) {
    this.sessions.delete(sessionId);
  }

  /** Closes the connection for good; pending calls reject with ClosedError. */
  close() {
    this.closed = true;
    this.markConnected();
    this.ws?.close(1000, "client closed");
    for (const s of this.sessions.values()) s.end();
  }
}

/** The options of Session.submit. */
export interface SubmitOptions {
  /** The input's id (1-128 of [A-Za-z0-9._:-]); made by the client when omitted. */
  inputId?: string;
  attachments?: unknown[];
  /** While a turn runs: "queue" (default), "steer" (into the running turn), "interrupt" (stop it, run this next) or "reject" (refused with session_busy). */
  whenBusy?: Methods["prompt.submit"]["params"]["when_busy"];
  /**
   * Stops resending: submit rejects with the signal's reason (an
   * AbortError). The input may still have been admitted by an earlier
   * attempt: resubmit with the same inputId to learn its receipt.
   */
  signal?: AbortSignal;
  /** Gives up after this many ms (rejects with a TimeoutError); default: no limit. */
  timeoutMs?: number;
}

/** The options of Session.turn: SubmitOptions, the signal and timeout covering the whole turn. */
export type TurnOptions = SubmitOptions;

/**
 * How a turn ended: `status` "terminal" with its `outcome` (completed,
 * interrupted, failed, cancelled; `error` for a failed one), or "unknown"
 * when the daemon died while it ran (resolve it with resolveUnknown).
 * `text` is the assistant's final reply when it completed.
 */
export interface TurnResult {
  receipt: Receipt;
  status: "terminal" | "unknown";
  outcome: string | null;
  error?: string;
  text: string;
}

type Listener = (ev: SessionEvent) => void;

/**
 * One session's live view: `snapshot` (replaced on snapshot_required),
 * `lastSeq`, events by callback (`on`) or async iterator (`events()`).
 * Durable events (integer seq) are delivered exactly once, in seq order,
 * across reconnects and daemon restarts; deltas (seq null) are delivered as
 * they come and may be lost with a connection.
 */
export class Session {
  snapshot!: Snapshot;
  lastSeq = 0;
  private listeners = new Set<Listener>();
  private typed = new Map<string, Set<Listener>>();
  private snapshotListeners = new Set<(s: Snapshot) => void>();
  private iterators = new Set<{ push: (ev: SessionEvent | null) => void }>();
  private ready = false;
  private held: SessionEvent[] = [];

  constructor(
    private readonly client: SessiondClient,
    readonly sessionId: string,
  ) {}

  /** @internal Resumes after (re)connecting: the snapshot, or the missed events. */
  async resync() {
    this.ready = false;
    const first = this.snapshot === undefined;
    const snap = await this.client.call("session.resume", first ? { session_id: this.sessionId } : { session_id: this.sessionId, after_seq: this.lastSeq });
    if (first) {
      this.applySnapshot(snap);
      return;
    }
    if (snap.snapshot_required) {
      this.applySnapshot(snap);
      for (const l of this.snapshotListeners) l(snap);
      return;
    }
    this.snapshot = { ...snap, events: undefined };
    for (const ev of snap.events ?? []) this.emit(ev);
    this.lastSeq = Math.max(this.lastSeq, snap.last_seq);
    this.release();
  }

  /** @internal */
  applySnapshot(snap: Snapshot) {
    this.snapshot = snap;
    this.lastSeq = snap.last_seq;
    this.release();
  }

  private release() {
    this.ready = true;
    const held = this.held;
    this.held = [];
    for (const ev of held) this.deliver(ev);
  }

  /** @internal */
  deliver(ev: SessionEvent) {
    if (!this.ready) {
      this.held.push(ev);
      return;
    }
    this.emit(ev);
  }

  private emit(ev: SessionEvent) {
    if (ev.seq !== null) {
      if (ev.seq <= this.lastSeq) return; // seen before a reconnect
      this.lastSeq = ev.seq;
    }
    for (const l of this.listeners) l(ev);
    for (const l of this.typed.get(ev.type) ?? []) l(ev);
    for (const it of this.iterators) it.push(ev);
  }

  /** Calls cb for every event; with a type, only for that type. Returns the unsubscribe function. */
  on<T extends SessionEvent["type"]>(type: T, cb: (ev: Extract<SessionEvent, { type: T }>) => void): () => void;
  on(cb: Listener): () => void;
  on(a: string | Listener, b?: unknown): () => void {
    if (typeof a === "function") {
      this.listeners.add(a);
      return () => this.listeners.delete(a);
    }
    const cb = b as Listener;
    let set = this.typed.get(a);
    if (!set) this.typed.set(a, (set = new Set()));
    set.add(cb);
    return () => set!.delete(cb);
  }

  /**
   * Calls cb when a resume found events pruned (snapshot_required): the
   * application must redraw from the new snapshot; events continue after it.
   */
  onSnapshotRequired(cb: (snap: Snapshot) => void): () => void {
    this.snapshotListeners.add(cb);
    return () => this.snapshotListeners.delete(cb);
  }

  /** Every event from now on, as an async iterator (ends when the client closes or the loop breaks). */
  events(): AsyncIterableIterator<SessionEvent> {
    const queue: (SessionEvent | null)[] = [];
    let wake: (() => void) | null = null;
    const it = {
      push: (ev: SessionEvent | null) => {
        queue.push(ev);
        wake?.();
      },
    };
    this.iterators.add(it);
    const iterators = this.iterators;
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next(): Promise<IteratorResult<SessionEvent>> {
        while (queue.length === 0) await new Promise<void>((r) => (wake = r));
        wake = null;
        const ev = queue.shift()!;
        if (ev === null) {
          iterators.delete(it);
          return { value: undefined, done: true };
        }
        return { value: ev, done: false };
      },
      async return(): Promise<IteratorResult<SessionEvent>> {
        iterators.delete(it);
        return { value: undefined, done: true };
      },
    };
  }

  /** @internal Ends the iterators. */
  end() {
    for (const it of this.iterators) it.push(null);
  }

  /**
   * Submits an input durably: the client makes the input_id (unless given)
   * and resends it after a lost connection until it holds a receipt; a
   * duplicate receipt (the daemon had it already) is success. Refusals
   * (SessiondError) reject.
   */
  async submit(text: string, opts: SubmitOptions = {}): Promise<Receipt> {
    const input_id = opts.inputId ?? `in-${randomId()}`;
    const signal = deadline(opts.signal, opts.timeoutMs);
    for (;;) {
      signal?.throwIfAborted();
      try {
        return await abortable(signal, this.client.call("prompt.submit", {
          session_id: this.sessionId,
          input_id,
          text,
          ...(opts.attachments ? { attachments: opts.attachments } : {}),
          ...(opts.whenBusy ? { when_busy: opts.whenBusy } : {}),
        } as Methods["prompt.submit"]["params"]));
      } catch (err) {
        if (err instanceof ConnectionLostError) continue; // resend the same input_id
        if (err instanceof SessiondError && (err.reason === "draining" || err.reason === "storage_unavailable" || err.reason === "overloaded")) {
          await abortable(signal, sleep(200));
          continue;
        }
        throw err;
      }
    }
  }

  /**
   * Submits text (durably, as submit) and resolves when its admission
   * settles: terminal (completed, interrupted, failed, cancelled) or
   * unknown (the daemon died mid-turn). It follows the session's durable
   * events, which reach it exactly once across reconnects and restarts.
   * `signal`/`timeoutMs` bound the whole wait; aborting does not stop the
   * turn (use interrupt or cancel).
   */
  async turn(text: string, opts: TurnOptions = {}): Promise<TurnResult> {
    const signal = deadline(opts.signal, opts.timeoutMs);
    let admission: string | undefined;
    let settled: ((r: TurnResult) => void) | undefined;
    let reply = "";
    const early: SessionEvent[] = [];
    const done = new Promise<TurnResult>((r) => (settled = r));
    const check = (ev: SessionEvent) => {
      if (admission === undefined) {
        early.push(ev);
        return;
      }
      if (ev.type === "message.completed" && ev.admission_id === admission) {
        const m = (ev.payload as { message?: Message }).message;
        if (m?.role === "assistant" && typeof m.content === "string" && m.content) reply = m.content;
      }
      if (ev.type !== "admission.updated") return;
      const r = ev.payload as Receipt;
      if (r.admission_id !== admission) return;
      if (r.status === "terminal" || r.status === "unknown") {
        settled!({ receipt: r, status: r.status, outcome: r.outcome ?? null, ...(r.error ? { error: r.error } : {}), text: reply });
      }
    };
    const off = this.on(check);
    try {
      const receipt = await this.submit(text, { ...opts, signal });
      admission = receipt.admission_id;
      for (const ev of early.splice(0)) check(ev);
      const r = receipt.status === "terminal" || receipt.status === "unknown"
        ? { receipt, status: receipt.status, outcome: receipt.outcome ?? null, ...(receipt.error ? { error: receipt.error } : {}), text: "" } as TurnResult
        : await abortable(signal, done);
      if (!r.text && r.outcome === "completed") r.text = await this.replyOf(r.receipt.admission_id); // settled before its message event came
      return r;
    } finally {
      off();
    }
  }

  /** The last assistant message of an admission, from the newest transcript page ("" if none). */
  private async replyOf(admissionId: string): Promise<string> {
    const page = await this.client.call("session.messages", { session_id: this.sessionId, limit: 50 } as Methods["session.messages"]["params"]);
    const m = [...page.messages].reverse().find((x) => x.admission_id === admissionId && x.role === "assistant");
    return typeof m?.content === "string" ? m.content : "";
  }

  /** Withdraws a queued input (prompt.cancel); not_queued once it started. */
  cancel(admissionId: string) {
    return this.client.call("prompt.cancel", { session_id: this.sessionId, admission_id: admissionId });
  }

  /**
   * Settles an admission a crash left unknown as interrupted
   * (prompt.resolve_unknown): it is never run again and the session's
   * queue moves on. `executionGeneration` is the receipt's.
   */
  resolveUnknown(admissionId: string, executionGeneration: number) {
    return this.client.call("prompt.resolve_unknown", {
      session_id: this.sessionId, admission_id: admissionId, execution_generation: executionGeneration,
    } as Methods["prompt.resolve_unknown"]["params"]);
  }

  /** Answers an approval prompt. */
  approve(prompt: Prompt, choice: Choice) {
    return this.client.call("approval.respond", {
      session_id: this.sessionId,
      prompt_id: prompt.prompt_id,
      execution_generation: prompt.execution_generation,
      choice,
    });
  }

  /** Answers a clarify prompt: a string, or a list of strings for multi-select. */
  answer(prompt: Prompt, answer: string | string[]) {
    return this.client.call("clarify.respond", {
      session_id: this.sessionId,
      prompt_id: prompt.prompt_id,
      execution_generation: prompt.execution_generation,
      answer,
    } as Methods["clarify.respond"]["params"]);
  }

  /** Interrupts the running turn; with a generation, only if it is still the live one (else stale_generation). */
  interrupt(executionGeneration?: number) {
    return this.client.call("session.interrupt", {
      session_id: this.sessionId, ...(executionGeneration !== undefined ? { execution_generation: executionGeneration } : {}),
    } as Methods["session.interrupt"]["params"]);
  }

  /** Replaces the text (and attachments) of a queued input; refused with not_queued once it started. */
  update(admissionId: string, text: string, attachments?: unknown[]) {
    return this.client.call("prompt.update", {
      session_id: this.sessionId,
      admission_id: admissionId,
      text,
      ...(attachments ? { attachments } : {}),
    } as Methods["prompt.update"]["params"]);
  }

  /** Moves a queued input before another queued one (to the front without `before`); resolves to the new order. */
  move(admissionId: string, before?: string) {
    return this.client.call("prompt.move", { session_id: this.sessionId, admission_id: admissionId, ...(before ? { before } : {}) });
  }

  /** Forks this session through a terminal admission (default: every terminal one); resolves to the new session's id. */
  fork(throughAdmissionId?: string) {
    return this.client.call("session.fork", {
      session_id: this.sessionId,
      ...(throughAdmissionId ? { through_admission_id: throughAdmissionId } : {}),
    });
  }

  /** Older transcript messages than beforeId (default: the snapshot's oldest), newest last. */
  async olderMessages(beforeId?: number, limit?: number): Promise<{ messages: Message[]; has_more: boolean }> {
    const before = beforeId ?? this.snapshot.messages[0]?.id;
    return this.client.call("session.messages", {
      session_id: this.sessionId,
      ...(before !== undefined ? { before_id: before } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
  }

  /** Stops delivering this session's events through this client. */
  close() {
    this.end();
    this.client.forget(this.sessionId);
  }
}

/** The payload of an approval prompt, typed. */
export function approvalPayload(p: Prompt): ApprovalPayload | undefined {
  return p.kind === "approval" ? (p.payload as ApprovalPayload) : undefined;
}

/** The payload of a clarify prompt, typed. */
export function clarifyPayload(p: Prompt): ClarifyPayload | undefined {
  return p.kind === "clarify" ? (p.payload as ClarifyPayload) : undefined;
}

/**
 * Shows s safely on a terminal or in a text view: control characters and
 * escape sequences made visible, as sessiond's protocol.Visible and
 * VisibleJSON do. C0 controls (but newline and tab) and DEL become control
 * pictures ("\x1b" is "␛", a lone "\r" is "␍", "\r\n" is "\n"); C1 controls,
 * bidi overrides and isolates and zero-width characters become "<U+XXXX>";
 * a lone surrogate becomes U+FFFD. When s is JSON text (an object, an
 * array or a string literal, such as a tool call's `arguments` or a tool
 * message's `content`), it stays JSON: the strings inside it, and JSON held
 * in those strings at any depth, are made visible and re-encoded, while
 * member order, numbers and spacing stay (a "\r" between tokens becomes a
 * space); so `JSON.parse(visible(call.arguments)).command` is safe to show.
 * Model-controlled strings (commands, arguments, output, questions,
 * messages) need it.
 */
export function visible(s: string): string {
  const t = s.trimStart();
  if (t[0] === "{" || t[0] === "[" || t[0] === '"') {
    try {
      JSON.parse(s);
      return visibleJSONText(s);
    } catch {
      // not JSON: text
    }
  }
  return visibleText(s);
}

function visibleText(s: string): string {
  return s
    .replace(/\r\n/g, "\n")
    .replace(/[\u0000-\u0008\u000b-\u001f]/g, (c) => String.fromCharCode(0x2400 + c.charCodeAt(0)))
    .replace(/\u007f/g, "\u2421")
    .replace(/[\u0080-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`)
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

// visibleJSONText rewrites the string literals of the valid JSON text s
// whose text visible() changes, and its "\r" whitespace.
function visibleJSONText(s: string): string {
  return s.replace(/"(?:[^"\\]|\\.)*"|\r/g, (lit) => {
    if (lit === "\r") return " ";
    const text = JSON.parse(lit) as string;
    const v = visible(text);
    return v === text ? lit : JSON.stringify(v);
  });
}
