// Package daemon is the sessiond process lifecycle: configuration, the home
// directory and its lock, boot recovery, the HTTP/WebSocket server and its
// authentication, the descriptor, graceful stop, and the JSON-RPC method
// handlers that wire admission, prompts and agent together (PROTOCOL.md).
// It also owns what operators watch: the audit log (audit.go: one line per
// transition, fed by the committed events and the handlers), the Prometheus
// metrics of GET /metrics (metrics.go), and the coalescing of streamed tool
// output for connections that fall behind (floods.go).
//
// Start order: lock home → open store → new boot epoch → recover (started
// rows become unknown, old prompts close) → listen → write descriptor →
// schedule. Stop order: drain → interrupt and settle running turns → close
// connections with 1001 → stop the server → close the store → remove the
// descriptor → release the lock.
package daemon
