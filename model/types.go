package model

import "encoding/json"

// Roles accepted in [Message.Role].
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in OpenAI Chat Completions shape.
//
// Role is one of "system", "developer", "user", "assistant" or "tool".
// Content is plain text and always goes on the wire as a JSON string. An
// assistant message may carry ToolCalls (its Content may then be empty and is
// omitted from the request); a "tool" message answers one of them and must set
// ToolCallID to that call's [ToolCall.ID].
//
// The JSON tags describe sessiond's own (stored/protocol) shape, not the wire
// shape sent to the model, which nests name and arguments under "function".
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one function call requested by the model.
//
// ID is the server's call id (or a generated "call_<hex>" when the server sent
// none); Name is the function name; Arguments is the raw JSON text of the
// arguments exactly as the model produced it (it is not validated and may be
// malformed JSON; an empty argument string is reported as "{}").
// On the wire it is sent as {"id","type":"function","function":{"name","arguments"}}.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
//
// Parameters is a JSON Schema object describing the arguments; empty means
// the tool takes no parameters (sent without a "parameters" key). Any other
// value that is not a JSON object makes [Client.Stream] fail with
// [KindInvalidRequest]. On the wire a Tool is sent as
// {"type":"function","function":{"name","description","parameters"}}.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Request is one chat-completion call.
//
// Model is the model name sent as "model" (required by most servers, passed
// through verbatim). Messages is the transcript in order. Tools may be empty.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
}

// Usage is the token accounting the server reported for one call, in tokens.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
}

// Response is the accumulated result of one streamed call.
//
// Content is the concatenation of every text fragment (the same fragments
// passed to onDelta, in order); reasoning is never part of it. Content, FinishReason and every ToolCall
// field are valid UTF-8: invalid bytes the server sent inside a JSON string
// are replaced with U+FFFD. ToolCalls are the complete tool calls in the
// order the server started them; callers should decide "tool turn or final
// answer" from len(ToolCalls), because some servers report finish_reason
// "stop" together with tool calls.
//
// FinishReason is the last finish_reason the server sent ("stop", "length",
// "tool_calls", "content_filter", ...). When the stream ended with [DONE] but
// no finish_reason, it is inferred: "tool_calls" if there are tool calls,
// else "stop".
//
// Usage is nil when the server reported none.
type Response struct {
	Content      string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        *Usage
}
