package store

// Fault injection (PROTOCOL.md section 10.4): a binary built with
// -tags faultinject SIGKILLs itself before or after the Nth durable write
// transaction of the process (SESSIOND_FAULT=crash-before-commit:N or
// crash-after-commit:N), naming it on stderr by its label. The hooks are
// faultBefore and faultAfter: fault_on.go has them with the tag,
// fault_off.go has empty ones without it, so a release build carries no
// trace of the mechanism (TestFaultVariableIgnoredWithoutTag).
//
// What counts, on both drivers: every InTx whose function returned nil
// (on SQLite each transaction of a group commit, not each batch; on
// PostgreSQL each committed attempt, a re-run after a deadlock or
// serialization failure being numbered again when its COMMIT is sent), the migrations, and ExecReserved on
// PostgreSQL (an autocommit statement outside InTx; on SQLite it is an
// InTx). "Before" is after the transaction's statements ran (its
// savepoint released) and before COMMIT; "after" is once COMMIT returned,
// before the transaction's OnCommit hooks (its events are not yet fanned
// out and its caller not yet answered).

// Label names the transaction (`admit`, `claim`, `tool.running`,
// `settle`, ...) for fault injection: the line a faultinject build prints
// when it crashes at this transaction. A transaction without a label is
// named by the function that called InTx.
func (t *Tx) Label(name string) { t.label = name }
