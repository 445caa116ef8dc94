package protocol

// The results of the built-in tools, as given to the model and carried by
// tool.completed's result (docs/protocol.md Part 2, section C). Package
// tools produces them; clients decode them with
// [ToolCompletedPayload.Outcome].

// The built-in tools' names: a tool call's name, tool.started's and
// tool.completed's name, and the toolsets of session.create.
const (
	ToolTerminal = "terminal"
	ToolClarify  = "clarify"
)

// TerminalResult is the terminal tool's result when its command ran
// (tools.RunTerminal): {exit_code, output, truncated, total_bytes,
// duration_ms, timed_out?, sandbox?, sandbox_blocked?, note?}.
type TerminalResult struct {
	// ExitCode is the shell's exit status; -1 when the command was killed
	// (timeout, interrupt, signal) or failed to start.
	ExitCode int `json:"exit_code"`
	// Output is stdout and stderr interleaved as written, valid UTF-8
	// (invalid bytes become U+FFFD), capped at the configured output limit
	// (terminal.output_limit, bytes) by keeping the head and the tail
	// around a marker "\n… [N bytes omitted] …\n"; notes such as a timeout
	// are appended.
	Output string `json:"output"`
	// Truncated is true when bytes were omitted from Output.
	Truncated bool `json:"truncated"`
	// TotalBytes counts the bytes the command wrote, before any capping.
	TotalBytes int64 `json:"total_bytes"`
	// DurationMS is the wall time from start to the end of the output, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// TimedOut is true when the timeout killed the process group.
	TimedOut bool `json:"timed_out,omitempty"`
	// Sandbox describes the sandbox the command ran in (the policy's
	// String, e.g. "workspace-write, network off"); empty when it ran
	// unsandboxed.
	Sandbox string `json:"sandbox,omitempty"`
	// SandboxBlocked is true when the command failed with an error the
	// sandbox causes (permission denied, read-only file system, operation
	// not permitted, network refused); Note then says how to escalate.
	SandboxBlocked bool `json:"sandbox_blocked,omitempty"`
	// Note is advice for the model, e.g. how to ask for escalation.
	Note string `json:"note,omitempty"`
}

// ToolError is the result of a tool call that did not give its tool's
// result (package agent writes it): {error} when it did not run ("not run:
// the user denied this command", "refused: …", "could not run the
// command: …", an unknown tool, invalid arguments), or, for a terminal
// command interrupted while running, {error: "interrupted while running:
// …", exit_code: -1, output, truncated, duration_ms} with what it printed.
type ToolError struct {
	Error      string `json:"error"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Output     string `json:"output,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// ClarifyResult is the clarify tool's result (PROTOCOL §7):
// {responses: [{question, choices_offered, answer}], timed_out?, note?}.
type ClarifyResult struct {
	// Responses has one entry per question, in question order.
	Responses []ClarifyAnswer `json:"responses"`
	// TimedOut is true when the prompt expired before an answer.
	TimedOut bool `json:"timed_out,omitempty"`
	// Note explains an unusual outcome to the model (e.g. interrupted).
	Note string `json:"note,omitempty"`
}

// ClarifyAnswer is the answer to one question of a clarify result.
type ClarifyAnswer struct {
	// Question is the question's text.
	Question string `json:"question"`
	// ChoicesOffered are the question's choices (empty for free text).
	ChoicesOffered []string `json:"choices_offered"`
	// Answer is a string, or a list of strings for multi-select; nil when
	// no answer came.
	Answer any `json:"answer"`
}
