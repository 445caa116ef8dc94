// Package store owns sessiond's database behind one contract for two
// drivers (Options.Driver):
//
//   - SQLite (default): state.db in the home; the DSN and its
//     per-connection pragmas, one writer connection that runs every write
//     transaction BEGIN IMMEDIATE with group commit, a bounded pool of
//     query-only readers, a periodic passive WAL checkpoint;
//   - PostgreSQL (Options.DSN, github.com/jackc/pgx/v5 under sqlx): a
//     bounded pool (Options.MaxConns) on which every write transaction is
//     one READ COMMITTED transaction with explicit row locks
//     (Tx.LockSessions; docs/scale-out.md audits them), run again on
//     deadlock or serialization failure; one
//     dedicated connection for LISTEN; a periodic write probe in place of
//     the checkpoint.
//
// Both have embedded versioned migrations (migrations/, migrations_pg/) with
// the same table and column names and CHECK constraints, accept '?'
// placeholders in every query method (rebound to $n for PostgreSQL), publish
// a transaction's events and notifications only after it committed, in
// commit order (SetEventSink, Tx.Notify, Listen), and map failures of the
// environment to ErrUnavailable (Classify).
//
// A binary built with -tags faultinject crashes itself before or after the
// Nth durable write transaction (SESSIOND_FAULT; fault.go, fault_on.go);
// Tx.Label names each transaction for it. Without the tag the hooks are
// empty (fault_off.go).
//
// It must not know about sessions' FIFOs, prompts or the wire: callers pass
// SQL, or use the row functions of the tables no room above owns
// (sessions.go: session rows; clients.go: pairing codes and paired
// clients), which read and write rows and decide nothing. Table names and
// columns that operators rely on are fixed by PROTOCOL.md section 9 and
// documented in docs/protocol.md.
package store
