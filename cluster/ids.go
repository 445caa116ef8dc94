package cluster

// DaemonID is a daemon's id: its boot_epochs.epoch, the descriptor's
// boot_epoch. It is what sessions.owner_daemon holds, and what the
// owner_epoch columns of session_admissions (PROTOCOL.md section 9) and
// prompts hold: the daemon that started the admission or opened the
// prompt. 0 means none.
type DaemonID int64

// LeaseEpoch is a session's fencing token, sessions.lease_epoch: it
// increases by one at every change of the session's owner (take, release),
// so a write made under an older epoch is refused (admission.Execution).
// 0 in a check means "any epoch" (the caller does not know it).
type LeaseEpoch int64
