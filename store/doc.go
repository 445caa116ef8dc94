// Package store owns sessiond's SQLite database (state.db): the DSN and its
// per-connection pragmas, the embedded versioned migrations, one writer
// connection that runs every write transaction BEGIN IMMEDIATE with group
// commit, a bounded pool of query-only readers, and the mapping of SQLite
// failures to ErrUnavailable.
//
// It must not know about sessions' FIFOs, prompts or the wire: callers pass
// SQL. Table names and columns that operators rely on are fixed by PROTOCOL.md
// section 9 and documented in docs/protocol.md.
package store
