// Package cluster lets several sessiond daemons share one store (issue 17):
// each daemon's membership (a heartbeat that renews a lease on the
// database's clock, self-fencing when it cannot), the SQL fragments that
// ask "is this owner alive" on that clock for both dialects, and the
// wake-ups between daemons (Bus: NOTIFY/LISTEN on PostgreSQL, in-process
// on SQLite) on the channels ChannelEvents and ChannelSessions, and the
// streamed deltas of turns on ChannelDeltas (Bus.Send, in order).
//
// Session ownership itself (owner_daemon, lease_epoch, takeover with the
// boot rules, release) is admission's, since taking a session changes its
// FIFO; this package knows nothing of sessions' contents and imports only
// store. It names the two numbers of ownership as types, DaemonID and
// LeaseEpoch, so that they cannot be mixed up.
package cluster
