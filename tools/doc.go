// Package tools owns the tools the model may call and what they need to
// run safely (PROTOCOL §7):
//
//   - the tool registry: [Specs] gives the model-facing definitions (name,
//     description, JSON Schema) of the "terminal" and "clarify" toolsets,
//     [ValidToolset] checks a toolset name;
//   - terminal: [RunTerminal] runs "/bin/sh -c command" in its own process
//     group with stdin closed and a non-interactive environment, kills the
//     whole group on timeout, interrupt or exit, and caps the output by
//     keeping its head and tail in valid UTF-8 with bounded memory;
//     [ParseTerminalArgs] checks the model's arguments;
//   - clarify: [ParseClarifyArgs] normalizes the clarify tool's arguments
//     into questions; [ClarifyResult] is the shape of its result.
//
// The results' shapes ([TerminalResult], [ClarifyResult]) are package
// protocol's, which clients decode them with; besides protocol (a leaf of
// types) it imports only tools/risk and sandbox.
//
// What it must not do: it knows nothing of sessions, prompts, approvals or
// the store, and of the wire only the shapes of its results. It does
// not rate commands: package tools/risk does, and the agent asks it before
// it calls RunTerminal. It does not decide whether a dangerous command may
// run (the agent does, using the approval mode and the session's allowed
// patterns) and it does not open prompts (the prompts package does). It
// never runs a command that the caller did not pass to RunTerminal, and it
// leaves no process of its own behind.
package tools
