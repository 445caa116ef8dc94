// Package prompts owns approval and clarify prompts bound to an execution
// generation (PROTOCOL.md sections 4 and 5): a turn opens a prompt and waits
// (Ask); a client answers it (Respond) only while the prompt's execution is
// the live one; interrupt, shutdown, timeout and boot recovery close it with
// a prompt.closed event and wake the waiting tool at once. It also keeps the
// approval allowlists ("session" and "always" choices).
//
// It must not know about the FIFO's rules or the wire: the fence of an
// execution is admission.Execution (Check in the prompt's transaction, the
// scheduler's IsLive in memory, which NewManager takes: a manager without
// it refuses every answer to its own prompts with ErrNoLiveCheck), and
// errors are typed for the daemon to map.
package prompts
