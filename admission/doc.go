// Package admission owns the durable per-session admission FIFO of
// PROTOCOL.md section 5: admit (idempotent by input_id), claim (lowest seq,
// one started per session, bumps the execution generation), settle, cancel,
// resolve_unknown, boot recovery, and the Scheduler that runs claimed
// admissions through an Executor within a daemon-wide capacity.
//
// The execution (Execution: session, admission, generation, the daemon
// that runs it and the session's lease epoch)
// is the one home of the fence: Execution.Check is the transactional check
// every write of a turn runs first (transcript rows, tool events, prompts,
// the settle), and Scheduler.IsLive the in-memory half (the turn runs here
// and was not asked to stop). A turn that did not complete is closed with
// package transcript's repair.
//
// Ownership (ownership.go): each session is owned by at most one daemon
// of a cluster sharing the store (a cluster.DaemonID), under a lease epoch
// (a cluster.LeaseEpoch, sessions.lease_epoch) that increases at
// every change of owner; only the owner claims and runs its turns, and
// taking a session whose owner's lease expired applies the boot rules to
// it (Take, TakeOrphans, Release; leases are package cluster's).
//
// Input delivery and queue edits (delivery.go, PROTOCOL.md 10.2 and
// 10.3): the FIFO runs by queue_order; when_busy steer, interrupt and
// reject at admit; prompt.update and prompt.move; TakeSteers, which the
// agent's model-request boundary runs in the turn's fenced transaction, so
// that a steer shares its turn's status and fate (settle, crash, resolve).
// session.fork copies terminal turns into a new session (fork.go).
//
// Every transition is one guarded UPDATE … WHERE status = … RETURNING;
// zero rows is a lost race or an illegal move and comes back as a typed
// error. Each change appends its session events in the same transaction.
//
// It must not know about WebSockets, the model or tools: the agent turn runs
// behind the Executor interface, and prompt cleanup behind a settle hook.
package admission
