// Package rpc is JSON-RPC 2.0 over WebSocket for sessiond: one message per
// text frame, the error model (a Code and a machine-readable Reason that
// survive %w wrapping), dispatch of concurrent requests with responses
// matched by id, server notifications through a bounded per-connection send
// queue (a slow reader is closed with status 1008). The vocabulary (method
// names, params and results, event payloads, reasons, *Error) lives in the
// leaf package protocol, which callers name directly (rpc keeps no aliases).
// Bind registers the typed handler func(ctx, *Conn, P) (R, error) of a row
// of protocol.Methods, checking P and R against the row (Decode runs the
// params' Validate); Mux.CheckTable says whether the bound methods are
// exactly the table's; OnReplied runs a hook right after a response.
//
// The client side (Dial, Client) speaks the same wire for sessionctl and
// other Go clients: bearer-token or subprotocol authentication, concurrent
// calls matched by id, errors as *Error so errors.Is works on reasons, and
// notifications through a bounded queue; DialOptions.VisibleStrings makes
// control characters of everything received visible (protocol.VisibleJSON:
// every string, and the strings of JSON held in a string) for clients that
// print it.
//
// It must not know about SQLite, FIFOs or the agent: handlers are plain
// functions registered on a Mux by the daemon.
package rpc
