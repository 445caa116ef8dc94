// Package rpc is JSON-RPC 2.0 over WebSocket for sessiond: one message per
// text frame, the error model (a Code and a machine-readable Reason that
// survive %w wrapping), dispatch of concurrent requests with responses
// matched by id, server notifications through a bounded per-connection send
// queue (a slow reader is closed with status 1008), and the protocol's
// parameter and result types (PROTOCOL.md sections 3, 4 and 6).
//
// The client side (Dial, Client) speaks the same wire for sessionctl and
// other Go clients: bearer-token or subprotocol authentication, concurrent
// calls matched by id, errors as *Error so errors.Is works on reasons, and
// notifications through a bounded queue.
//
// It must not know about SQLite, FIFOs or the agent: handlers are plain
// functions registered on a Mux by the daemon.
package rpc
