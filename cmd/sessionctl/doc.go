// Command sessionctl is the terminal client and operator CLI of sessiond.
//
// It owns the verbs (status, sessions, new, attach, send, pending, resolve,
// cancel, interrupt, approve, answer, rename, rm, show, approvals,
// completion, acp), their exit codes and one-line error
// messages, and the interactive terminal UI of attach. It finds the daemon
// through HOME/daemon.json (--home, $SESSIOND_HOME, else
// $XDG_STATE_HOME/sessiond, default ~/.local/state/sessiond), authenticates
// with the descriptor's token and speaks only the public protocol
// (docs/protocol.md) through rpc.Client, with package protocol's params,
// results, errors and typed event payloads (protocol.DecodeEvent).
//
// Files: root.go (cobra wiring, global flags), errors.go (exit codes),
// connect.go (home, descriptor, dialing and explaining failures), verbs.go
// (one-shot verbs), reduce.go (the one reader of the event stream that
// attach and send share: a pure sessionView × event → sessionView and
// what changed), send.go (submit, follow, reconnect), attach.go (the
// link that keeps attach connected and resumes with after_seq), tui.go
// (the bubbletea model), render.go (one-line summaries of protocol's
// payloads),
// lifecycle.go (rename, rm, show, approvals), completion.go (shell
// completion, session ids from the daemon), acp.go (the Agent Client
// Protocol bridge for editors: an ACP agent on stdio, built on
// github.com/coder/acp-go-sdk, that follows each prompt over reconnects like
// send does), acp_session.go (ACP's session/list, resume, close, delete
// and the session's config options and modes, stored by session.update),
// acp_frames.go (its JSON-RPC framing around the SDK: -32700/-32600,
// session/delete routing, $/cancel_request of prompts, every request
// answered before exit) and acp_map.go (its pure mappings: stop reasons,
// permission options, prompt content, history replay).
//
// What it must not do: import the daemon or anything below it (store,
// admission, prompts, agent, tools) — it is a client like any other and
// must work against any daemon that keeps the protocol. It never re-runs
// work on its own: a retry re-submits with the same input_id, which the
// daemon deduplicates, and an unknown admission is only resolved when a
// person says so (sessionctl resolve, or the editor's answer to the ACP
// bridge's "discard the lost turn?").
package main
