package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// EventPayload is the typed payload of a session.event: one of the types
// registered in [Events] (Receipt for admission.updated, TurnStartedPayload
// for turn.started, …), or [UnknownPayload] for a type this build does not
// know. EventType names the event type it is the payload of.
type EventPayload interface {
	EventType() EventType
}

// EventType methods: each payload names its event type.
func (Receipt) EventType() EventType                 { return EventAdmissionUpdated }
func (TurnStartedPayload) EventType() EventType      { return EventTurnStarted }
func (MessageDeltaPayload) EventType() EventType     { return EventMessageDelta }
func (MessageCompletedPayload) EventType() EventType { return EventMessageCompleted }
func (ToolStartedPayload) EventType() EventType      { return EventToolStarted }
func (ToolOutputPayload) EventType() EventType       { return EventToolOutput }
func (ToolRunningPayload) EventType() EventType      { return EventToolRunning }
func (ToolCompletedPayload) EventType() EventType    { return EventToolCompleted }
func (PromptOpenedPayload) EventType() EventType     { return EventPromptOpened }
func (PromptClosedPayload) EventType() EventType     { return EventPromptClosed }
func (TurnCompletedPayload) EventType() EventType    { return EventTurnCompleted }

// UnknownPayload is the payload of an event type that is not in [Events]
// (a newer daemon's): Type and the payload as sent. Clients skip it; it is
// never an error, so the stream goes on.
type UnknownPayload struct {
	Type    EventType
	Payload json.RawMessage
}

// EventType returns u.Type.
func (u UnknownPayload) EventType() EventType { return u.Type }

// PayloadError is a payload that does not have its event type's shape:
// Type is the event type, Field the JSON path of the member at fault
// ("ok", "prompt.prompt_id"; empty when the payload as a whole is wrong:
// missing, null, not an object, not JSON). Err is the decoder's error.
type PayloadError struct {
	Type  EventType
	Field string
	Err   error
}

func (e *PayloadError) Error() string {
	var te *json.UnmarshalTypeError
	switch {
	case e.Field != "" && errors.As(e.Err, &te):
		return fmt.Sprintf("protocol: %s payload: field %q: a JSON %s where %s was expected", e.Type, e.Field, te.Value, te.Type)
	case e.Field != "":
		return fmt.Sprintf("protocol: %s payload: field %q: %v", e.Type, e.Field, e.Err)
	}
	return fmt.Sprintf("protocol: %s payload: %v", e.Type, e.Err)
}

func (e *PayloadError) Unwrap() error { return e.Err }

var payloadTypes = func() map[EventType]reflect.Type {
	m := make(map[EventType]reflect.Type, len(Events))
	for _, s := range Events {
		m[s.Type] = reflect.TypeOf(s.Payload)
	}
	return m
}()

// DecodeEvent decodes the payload of an event of type t into its
// registered type (see [Events]), returned by value: a Receipt for
// admission.updated, a ToolCompletedPayload for tool.completed, and so on.
// A type not in Events gives an [UnknownPayload] and no error. A payload
// that is missing, null, not a JSON object, or whose member has the wrong
// JSON type is a *[PayloadError] naming t and the member; unknown members
// are ignored and missing ones are zero values (forward compatibility).
func DecodeEvent(t EventType, payload json.RawMessage) (EventPayload, error) {
	rt, ok := payloadTypes[t]
	if !ok {
		return UnknownPayload{Type: t, Payload: payload}, nil
	}
	v := reflect.New(rt)
	if err := decodeObject(t, "", payload, v.Interface()); err != nil {
		return nil, err
	}
	return v.Elem().Interface().(EventPayload), nil
}

// Decode is [DecodeEvent] of e's type and payload.
func (e Event) Decode() (EventPayload, error) { return DecodeEvent(e.Type, e.Payload) }

// decodeObject decodes the JSON object raw into v; prefix is the path of
// raw within t's payload ("" for the payload itself).
func decodeObject(t EventType, prefix string, raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return &PayloadError{Type: t, Field: prefix, Err: errors.New("missing")}
	case raw[0] != '{':
		return &PayloadError{Type: t, Field: prefix, Err: errors.New("not an object")}
	}
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	field := prefix
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field = join(prefix, te.Field)
	}
	return &PayloadError{Type: t, Field: field, Err: err}
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// ToolOutcome is a tool.completed result decoded by
// [ToolCompletedPayload.Outcome]: at most one member is set. Error when
// the call did not give its tool's result (the result has an error
// member), else Terminal for the terminal tool and Clarify for clarify;
// none for other tools (MCP) or a result that is not a JSON object.
type ToolOutcome struct {
	Terminal *TerminalResult
	Clarify  *ClarifyResult
	Error    *ToolError
}

// Outcome decodes p.Result (the tool message given to the model; a JSON
// string holding a JSON object is read as that object). A result member
// of the wrong JSON type is a *[PayloadError] of tool.completed naming
// "result.<member>".
func (p ToolCompletedPayload) Outcome() (ToolOutcome, error) {
	res := bytes.TrimSpace(p.Result)
	var s string
	if len(res) > 0 && res[0] == '"' && json.Unmarshal(res, &s) == nil {
		res = bytes.TrimSpace([]byte(s))
	}
	if len(res) == 0 || res[0] != '{' || !json.Valid(res) {
		return ToolOutcome{}, nil
	}
	var probe struct {
		Error any `json:"error"`
	}
	json.Unmarshal(res, &probe)
	var out ToolOutcome
	var v any
	switch {
	case probe.Error != nil && probe.Error != "":
		out.Error = &ToolError{}
		v = out.Error
	case p.Name == ToolTerminal:
		out.Terminal = &TerminalResult{}
		v = out.Terminal
	case p.Name == ToolClarify:
		out.Clarify = &ClarifyResult{}
		v = out.Clarify
	default:
		return ToolOutcome{}, nil
	}
	if err := decodeObject(EventToolCompleted, "result", res, v); err != nil {
		return ToolOutcome{}, err
	}
	return out, nil
}

// Approval decodes the payload of an approval prompt. It fails when p is
// not an approval prompt, and with a *[PayloadError] of prompt.opened
// naming "prompt.payload.<member>" when a member has the wrong type.
func (p Prompt) Approval() (ApprovalPayload, error) {
	var a ApprovalPayload
	if p.Kind != KindApproval {
		return a, fmt.Errorf("protocol: prompt %s is a %s prompt, not an approval", p.PromptID, p.Kind)
	}
	return a, decodeObject(EventPromptOpened, "prompt.payload", p.Payload, &a)
}

// Clarify decodes the payload of a clarify prompt, failing as
// [Prompt.Approval] does.
func (p Prompt) Clarify() (ClarifyPayload, error) {
	var c ClarifyPayload
	if p.Kind != KindClarify {
		return c, fmt.Errorf("protocol: prompt %s is a %s prompt, not a clarify prompt", p.PromptID, p.Kind)
	}
	return c, decodeObject(EventPromptOpened, "prompt.payload", p.Payload, &c)
}

// Choice returns the choice of an answered approval prompt (prompt.closed's
// response {choice}), "" when there is none.
func (p PromptClosedPayload) Choice() Choice {
	var r ApprovalResponse
	json.Unmarshal(p.Response, &r)
	return r.Choice
}

// Answer returns the answer of an answered clarify prompt (prompt.closed's
// response {answer}: a string, or a list for multi-select), nil when there
// is none.
func (p PromptClosedPayload) Answer() any {
	var r ClarifyResponse
	json.Unmarshal(p.Response, &r)
	return r.Answer
}

// Command returns the command of a terminal call's arguments ({command,
// …}, or a JSON string holding that object), "" for other arguments.
func (p ToolStartedPayload) Command() string {
	raw := []byte(p.Args)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var a struct {
		Command string `json:"command"`
	}
	json.Unmarshal(raw, &a)
	return a.Command
}
