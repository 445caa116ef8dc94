// Package daemon is the sessiond process lifecycle: configuration, the home
// directory and its lock, boot recovery, the HTTP/WebSocket server and its
// authentication, the descriptor, graceful stop, and the JSON-RPC method
// handlers that wire admission, prompts and agent together (PROTOCOL.md):
// routes binds one typed handler per row of protocol.Methods (rpc.Bind),
// and Start refuses to start when a row has no handler or a handler no row.
// It also owns what operators watch: the audit log (audit.go: one line per
// transition, fed by the committed events and the handlers), the Prometheus
// metrics of GET /metrics (metrics.go), and the coalescing of streamed tool
// output for connections that fall behind (floods.go). pair.go holds the
// paired clients: one-time codes on GET /pair, per-client tokens stored as
// SHA-256 hashes, scopes (the `forbidden` guard every handler is wrapped
// in, which reads the method's scope from its row and fails closed),
// revocation, and the sender recorded with admissions and decisions.
//
// cluster.go is the daemon's part in a cluster of daemons sharing one store
// (docs/protocol.md section K): its lease and heartbeats, the takeover of
// dead daemons' sessions, the self-fence, the hand-over at a graceful stop,
// and the wake-ups (sessiond_sessions) through which any daemon reaches a
// session's owner; hub.go delivers events committed by other daemons
// (sessiond_events) in order and once.
//
// Start order: lock home → open store → new boot epoch → join the cluster
// (lease) → recover (take every session with no live owner: started rows
// become unknown, old prompts close) → listen → write descriptor →
// schedule → heartbeats and wake-ups. Stop order: drain → interrupt and
// settle running turns → hand the sessions over and give the lease up →
// close connections with 1001 → stop the server → close the store → remove
// the descriptor → release the lock.
package daemon
