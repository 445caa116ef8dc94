// Package agent runs one turn: it builds the request from the session's
// transcript (repairing any tool call left without a result), calls the
// model, streams text as message.delta, runs the tools the model calls
// (terminal behind risk classification and approvals, clarify through a
// prompt), persists every assistant message and tool result as it happens,
// and loops until a final answer or agent.max_iterations.
//
// It must not know about FIFOs, SQLite or the wire: persistence and events
// go through the Journal interface, prompts through Prompter, and the model
// through Model. The daemon supplies them.
package agent
