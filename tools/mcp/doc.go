// Package mcp owns the Model Context Protocol servers of one session
// (PROTOCOL.md section 10.1): it starts each server, keeps an MCP client
// session with it through the official SDK
// (github.com/modelcontextprotocol/go-sdk; no framing of ours), turns its
// tool list into model tools, calls a tool with cancellation, reports each
// server's status, and restarts a server that failed, with backoff.
//
//   - A [Set] is a session's servers ([Server]: config.yaml's and the
//     session's own, frozen at creation). [Set.Acquire] starts them (at a
//     turn's start) and [Set.Release] lets them stop after the idle
//     timeout; [Set.Stop] stops them (graceful stop, session deletion).
//   - A stdio server is a process started like a terminal command: through
//     the sandbox's exec helper (package sandbox) with the session's
//     policy, the network only when its config entry says network: true,
//     the daemon's home out of reach, an allowlisted environment plus the
//     server's own env, its own process group (killed whole at stop), stdin
//     and stdout the MCP stream. A streamable HTTP server is reached with
//     the SDK's client transport.
//   - A server that cannot start, exits, hangs in initialize (longer than
//     Options.StartTimeout), sends what the SDK cannot parse or a frame
//     larger than Options.MaxMessageBytes, is marked failed: its tools are
//     withdrawn from [Set.Tools], [Set.Notes] tells the model, and it is
//     started again after a backoff (1 s doubling to Options.MaxBackoff)
//     while the set is in use. It never fails the session or the daemon.
//   - [Set.Call] sends tools/call only after its BeforeSend hook returned
//     nil (the agent makes tool.running durable there); cancelling the
//     context sends notifications/cancelled (the SDK does) and returns at
//     once. An elicitation request received during a call goes to that
//     call's Elicit hook (the agent opens a clarify prompt); outside a call
//     it is declined. Sampling is not offered: the SDK answers a server's
//     sampling/createMessage with an MCP error (method not found, or "client
//     does not support CreateMessage").
//   - [FormatResult] renders a tools/call result (text, structured content,
//     images) for the model, capped like terminal output.
//
// What it must not do: it knows nothing of sessions' FIFOs, prompts,
// approvals or the store. It does not decide whether a call may run (the
// agent does, through agent.Decide) nor validate the model's arguments (the
// agent does, against the schema [Tool] carries). It imports sandbox and
// protocol of ours, and the SDK.
package mcp
