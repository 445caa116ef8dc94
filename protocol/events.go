package protocol

import "encoding/json"

// EventType is the type of a session.event (PROTOCOL.md section 6).
type EventType string

// The event types. Deltas (message.delta, tool.output) have seq null and
// are not stored; every other type is durable.
const (
	EventAdmissionUpdated EventType = "admission.updated"
	EventTurnStarted      EventType = "turn.started"
	EventMessageDelta     EventType = "message.delta"
	EventMessageCompleted EventType = "message.completed"
	EventToolStarted      EventType = "tool.started"
	EventToolOutput       EventType = "tool.output"
	EventToolRunning      EventType = "tool.running"
	EventToolCompleted    EventType = "tool.completed"
	EventPromptOpened     EventType = "prompt.opened"
	EventPromptClosed     EventType = "prompt.closed"
	EventTurnCompleted    EventType = "turn.completed"
	// EventMCPStatus is mcp.status: an MCP server of the session changed
	// state (payload MCPServerStatus); like the deltas it has seq null and
	// is not stored: session.resume's mcp_servers is the current state.
	EventMCPStatus EventType = "mcp.status"
)

// Durable reports whether events of type t are stored, with an integer
// seq: every type but the deltas (message.delta, tool.output) and
// mcp.status, which have seq null.
func (t EventType) Durable() bool {
	return t != EventMessageDelta && t != EventToolOutput && t != EventMCPStatus
}

// EventSpec pairs an event type with a zero value of its payload struct.
type EventSpec struct {
	Type    EventType
	Payload EventPayload
}

// Events lists every event type with its payload: the schema's event
// variants and [DecodeEvent]'s table. A test fails when an EventType
// constant is missing here.
var Events = []EventSpec{
	{EventAdmissionUpdated, Receipt{}},
	{EventTurnStarted, TurnStartedPayload{}},
	{EventMessageDelta, MessageDeltaPayload{}},
	{EventMessageCompleted, MessageCompletedPayload{}},
	{EventToolStarted, ToolStartedPayload{}},
	{EventToolOutput, ToolOutputPayload{}},
	{EventToolRunning, ToolRunningPayload{}},
	{EventToolCompleted, ToolCompletedPayload{}},
	{EventPromptOpened, PromptOpenedPayload{}},
	{EventPromptClosed, PromptClosedPayload{}},
	{EventTurnCompleted, TurnCompletedPayload{}},
	{EventMCPStatus, MCPServerStatus{}},
}

// TurnStartedPayload is turn.started: the input that starts running.
type TurnStartedPayload struct {
	InputID string `json:"input_id"`
	Text    string `json:"text"`
	// Sender says who submitted the input (absent for admissions from
	// before pairing).
	Sender *Sender `json:"sender,omitempty"`
}

// MessageDeltaPayload is message.delta: a piece of the assistant's text as
// it streams (seq null).
type MessageDeltaPayload struct {
	Text string `json:"text"`
}

// MessageCompletedPayload is message.completed: a stored transcript
// message, as in a snapshot.
type MessageCompletedPayload struct {
	Message Message `json:"message"`
}

// ToolStartedPayload is tool.started: Args is the call's arguments, the JSON
// value the model produced.
type ToolStartedPayload struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Args       json.RawMessage `json:"args"`
}

// ToolOutputPayload is tool.output: a piece of a running command's output
// (seq null). OmittedBytes, on a marker frame, counts the output left out
// for a client that could not keep up.
type ToolOutputPayload struct {
	ToolCallID   string `json:"tool_call_id"`
	Text         string `json:"text"`
	OmittedBytes int64  `json:"omitted_bytes,omitempty"`
}

// ToolRunningPayload is tool.running, durable before a terminal command
// runs: its process group (PID, the leader's pid), the kernel's BootID and
// the leader's StartTicks (clock ticks after boot), Session (the pid of its
// session) and Marker (an environment marker its processes carry). Clients
// may ignore it. For an MCP tool call it is durable before the request is
// sent: MCPServer names the server, and the process fields are zero (the
// server's process is the daemon's child, killed when the daemon dies).
type ToolRunningPayload struct {
	MCPServer  string `json:"mcp_server,omitempty"`
	ToolCallID string `json:"tool_call_id"`
	PID        int    `json:"pid"`
	BootID     string `json:"boot_id"`
	StartTicks uint64 `json:"start_ticks"`
	Session    int    `json:"session"`
	Marker     string `json:"marker"`
}

// ToolCompletedPayload is tool.completed: Result is the tool message given
// to the model, decoded when it is JSON, else the raw string; ExitCode is
// set for terminal commands that ran.
type ToolCompletedPayload struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	OK         bool            `json:"ok"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Result     json.RawMessage `json:"result"`
}

// ToolResult returns the result member for a tool message: the message
// itself when it is JSON, else the message as a JSON string.
func ToolResult(message string) json.RawMessage {
	if json.Valid([]byte(message)) {
		return json.RawMessage(message)
	}
	b, _ := json.Marshal(message)
	return b
}

// PromptOpenedPayload is prompt.opened.
type PromptOpenedPayload struct {
	Prompt Prompt `json:"prompt"`
}

// PromptClosedPayload is prompt.closed: Response is the answer given
// ({choice} or {answer}) when Resolution is answered, AnsweredBy who gave it.
type PromptClosedPayload struct {
	PromptID   string          `json:"prompt_id"`
	Resolution Resolution      `json:"resolution"`
	Response   json.RawMessage `json:"response,omitempty"`
	AnsweredBy *AnsweredBy     `json:"answered_by,omitempty"`
}

// AnsweredBy says who answered a prompt: the daemon's connection number
// and the client's name/version from initialize ("(no initialize)" when it
// sent none), plus the sender: ID "owner" or the paired client_id, the
// paired client's Label and the client's Version (both omitted when empty).
type AnsweredBy struct {
	Conn    string `json:"conn"`
	Client  string `json:"client"`
	ID      string `json:"id"`
	Label   string `json:"label,omitempty"`
	Version string `json:"version,omitempty"`
}

// TurnCompletedPayload is turn.completed.
type TurnCompletedPayload struct {
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

// ApprovalPayload is an approval prompt's payload: the command, the
// working directory, the gate's rating (Risk, Reason, Pattern: the key an
// answer of session or always remembers), the choices and the sandbox the
// command would run in. SandboxPermissions and Justification are set when
// the model asked to run it outside the sandbox.
//
// An MCP tool call's card (PROTOCOL.md 10.1) has Kind "mcp", the Server,
// the Tool (as the server names it) and the call's Arguments (the JSON
// object the model gave; clients show it through VisibleJSON); Command is
// then the model-facing tool name "mcp__<server>__<tool>", Pattern
// "mcp:<server>/<tool>" and Sandbox the sandbox the server runs in. A
// terminal command's card has no Kind.
type ApprovalPayload struct {
	Kind               string          `json:"kind,omitempty"`
	Server             string          `json:"server,omitempty"`
	Tool               string          `json:"tool,omitempty"`
	Arguments          json.RawMessage `json:"arguments,omitempty"`
	ToolCallID         string          `json:"tool_call_id"`
	Command            string          `json:"command"`
	Cwd                string          `json:"cwd"`
	Risk               Risk            `json:"risk"`
	Reason             string          `json:"reason"`
	Pattern            string          `json:"pattern"`
	Choices            []Choice        `json:"choices"`
	Sandbox            ApprovalSandbox `json:"sandbox"`
	SandboxPermissions string          `json:"sandbox_permissions,omitempty"`
	Justification      string          `json:"justification,omitempty"`
}

// ApprovalSandbox is an approval payload's sandbox: the session's sandbox
// and whether this command would run outside it (Unsandboxed); Unavailable
// says why the sandbox cannot be enforced, when it cannot.
type ApprovalSandbox struct {
	Mode          string   `json:"mode"`
	Network       bool     `json:"network"`
	WritableRoots []string `json:"writable_roots"`
	Unsandboxed   bool     `json:"unsandboxed"`
	Unavailable   string   `json:"unavailable,omitempty"`
}

// ClarifyPayload is a clarify prompt's payload.
type ClarifyPayload struct {
	ToolCallID string            `json:"tool_call_id"`
	Questions  []ClarifyQuestion `json:"questions"`
}

// ClarifyQuestion is one question of a clarify prompt: Choices, when
// given, are the answers to pick from (several when MultiSelect).
type ClarifyQuestion struct {
	ID          string   `json:"id"`
	Question    string   `json:"question"`
	Choices     []string `json:"choices,omitempty"`
	MultiSelect bool     `json:"multi_select,omitempty"`
}

// ApprovalResponse is the response of an answered approval prompt
// (prompt.closed's response).
type ApprovalResponse struct {
	Choice Choice `json:"choice"`
}

// ClarifyResponse is the response of an answered clarify prompt: Answer is
// a string, or a list of strings for a multi-select question.
type ClarifyResponse struct {
	Answer any `json:"answer"`
}
