// Command sessionctl is the terminal client and operator CLI of sessiond.
//
// It owns the verbs (status, sessions, new, attach, send, pending, resolve,
// cancel, interrupt, approve, answer, rename, rm, show, approvals,
// completion), their exit codes and one-line error
// messages, and the interactive terminal UI of attach. It finds the daemon
// through HOME/daemon.json (--home, $SESSIOND_HOME, else
// $XDG_STATE_HOME/sessiond, default ~/.local/state/sessiond), authenticates
// with the descriptor's token and speaks only the public protocol
// (docs/protocol.md) through rpc.Client, reusing the rpc package's
// parameter, result and error types.
//
// Files: root.go (cobra wiring, global flags), errors.go (exit codes),
// connect.go (home, descriptor, dialing and explaining failures), verbs.go
// (one-shot verbs), send.go (submit, follow, reconnect), attach.go (the
// link that keeps attach connected and resumes with after_seq), tui.go
// (the bubbletea model), render.go (payload shapes and one-line summaries),
// lifecycle.go (rename, rm, show, approvals), completion.go (shell
// completion, session ids from the daemon).
//
// What it must not do: import the daemon or anything below it (store,
// admission, prompts, agent, tools) — it is a client like any other and
// must work against any daemon that keeps the protocol. It never re-runs
// work on its own: a retry re-submits with the same input_id, which the
// daemon deduplicates, and an unknown admission is only resolved when an
// operator says so.
package main
