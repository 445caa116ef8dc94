// Package protocol is sessiond's wire vocabulary (PROTOCOL.md and
// docs/protocol.md): the method names, one params and one result struct per
// method (each params struct has Validate, naming the offending field in an
// invalid_params error), the event types with one payload struct each
// (DecodeEvent reads a payload into its type; an unknown type is an
// UnknownPayload, never an error), the built-in tools' results
// (TerminalResult, ClarifyResult, ToolError), the
// shared shapes (Receipt, Prompt, Message, Snapshot, Descriptor), the status
// and outcome enums, the error reasons and the one refusal error type
// (*Error) that carries its reason.
//
// Methods is the one method table: each MethodSpec names a method, its
// Scope (read, write, owner, pairing; no default) and its params and result
// types. Dispatch (rpc.Bind, one typed handler per row), the paired
// clients' scope guard, `sessiond schema`, the TypeScript types, the params
// fuzzer and the method table of docs/protocol.md are derived from it.
// Adding a method is a row here, its handler bound in daemon.routes, and
// its test.
//
// It is a leaf: it imports only the standard library, so every layer (rpc,
// daemon, admission, prompts, agent, sessionctl, tests) speaks the same types,
// and `sessiond schema` derives docs/schema.json from them.
package protocol
