// Package transcript owns the shape of a session's transcript: its message
// roles, the repair of a turn that did not complete (Close: synthetic
// results for tool calls that never got one, then a boundary), the repair
// of a stored history before it is sent to a model (Repair), and the texts
// the model is told about lost or interrupted work.
//
// It has no SQL and imports nothing of ours: the store keeps the rows,
// admission decides when a turn is closed and writes what Close returns,
// and the agent converts what Repair returns into a model request.
package transcript
