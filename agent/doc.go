// Package agent runs one turn: it builds the request from the session's
// transcript, calls the model, streams text as message.delta, runs the tools
// the model calls (terminal behind risk classification and approvals,
// clarify through a prompt), persists every assistant message and tool
// result as it happens, and loops until a final answer or
// agent.max_iterations.
//
// A stored history never makes a request invalid: before each request it is
// repaired, in the request only and logged (a call without a result, name or
// id, duplicate ids, arguments that are not a JSON object, results that
// answer nothing; see Repair). A reply with a call that names no function
// fails the turn with the reason, and nothing of it runs or is stored. Each
// call of a reply runs at most once, keyed by its id.
//
// The approval gate of a terminal command is two parts: Decide, a pure
// function from the approvals mode, the command's classification, the
// sandbox state, the escalation request and the remembered approvals to
// the decision (refuse, run sandboxed, run unsandboxed, ask) and the
// approval card; and Runner.approve, its I/O (the allowlist lookups
// Decide names, the prompt, the answer). The rules the third promise
// rests on are Decide's, table-tested over tools/risk's corpus.
//
// Before every model request the Runner asks its Steering for inputs
// steered into the turn (prompt.submit when_busy steer) and sends them as
// user messages after the turn's tool results.
//
// It must not know about FIFOs, SQLite or the wire: persistence and events
// go through the Journal interface, prompts through Prompter, and the model
// through Model. The daemon supplies them.
package agent
