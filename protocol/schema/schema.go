package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/sessiond/sessiond/protocol"
)

// ID is the document's $id.
const ID = "https://github.com/sessiond/sessiond/docs/schema.json"

// enums maps each string enum type of package protocol to its values.
var enums = map[reflect.Type][]any{
	reflect.TypeFor[protocol.AdmissionStatus](): {protocol.StatusQueued, protocol.StatusStarted, protocol.StatusUnknown, protocol.StatusTerminal},
	reflect.TypeFor[protocol.Outcome]():         {protocol.OutcomeCompleted, protocol.OutcomeInterrupted, protocol.OutcomeFailed, protocol.OutcomeCancelled},
	reflect.TypeFor[protocol.WaitReason]():      {protocol.WaitBusy, protocol.WaitCapacity, protocol.WaitUnknown},
	reflect.TypeFor[protocol.WhenBusy]():        {protocol.WhenBusyQueue, protocol.WhenBusySteer, protocol.WhenBusyInterrupt, protocol.WhenBusyReject},
	reflect.TypeFor[protocol.Delivery]():        {protocol.DeliveryQueue, protocol.DeliverySteer, protocol.DeliveryInterrupt},
	reflect.TypeFor[protocol.PromptKind]():      {protocol.KindApproval, protocol.KindClarify},
	reflect.TypeFor[protocol.Resolution]():      {protocol.ResolutionAnswered, protocol.ResolutionTimedOut, protocol.ResolutionInterrupted, protocol.ResolutionFenced},
	reflect.TypeFor[protocol.Choice]():          {protocol.ChoiceOnce, protocol.ChoiceSession, protocol.ChoiceAlways, protocol.ChoiceDeny},
	reflect.TypeFor[protocol.RespondStatus]():   {protocol.Resolved, protocol.AlreadyResolved},
	reflect.TypeFor[protocol.Role]():            {protocol.RoleUser, protocol.RoleAssistant, protocol.RoleTool, protocol.RoleBoundary},
	reflect.TypeFor[protocol.Risk]():            {protocol.RiskSafe, protocol.RiskDangerous, protocol.RiskHardline},
	reflect.TypeFor[protocol.EventType]():       nil, // filled from protocol.Events
	reflect.TypeFor[protocol.Reason]():          nil, // filled from protocol.Reasons
}

func init() {
	for _, e := range protocol.Events {
		enums[reflect.TypeFor[protocol.EventType]()] = append(enums[reflect.TypeFor[protocol.EventType]()], e.Type)
	}
	for _, r := range protocol.Reasons {
		enums[reflect.TypeFor[protocol.Reason]()] = append(enums[reflect.TypeFor[protocol.Reason]()], r)
	}
}

// durable reports whether events of type t are stored (seq is an integer);
// deltas and mcp.status have seq null.
func durable(t protocol.EventType) bool { return t.Durable() }

func ref(name string) map[string]any { return map[string]any{"$ref": "#/$defs/" + name} }

// Document returns docs/schema.json: indented JSON with a final newline,
// the same bytes for the same types.
func Document() ([]byte, error) {
	r := &jsonschema.Reflector{Anonymous: true, DoNotReference: false}
	r.Mapper = func(t reflect.Type) *jsonschema.Schema {
		if _, ok := enums[t]; ok {
			return &jsonschema.Schema{Ref: "#/$defs/" + t.Name()}
		}
		return nil
	}
	defs := map[string]any{}
	add := func(v any) (string, error) {
		t := reflect.TypeOf(v)
		s := r.Reflect(v)
		b, err := json.Marshal(s)
		if err != nil {
			return "", err
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			return "", err
		}
		d, _ := doc["$defs"].(map[string]any)
		for k, v := range d {
			defs[k] = v
		}
		if _, ok := defs[t.Name()]; !ok {
			return "", fmt.Errorf("schema: %s has no definition", t.Name())
		}
		return t.Name(), nil
	}
	for t, vals := range enums {
		defs[t.Name()] = map[string]any{"type": "string", "enum": vals}
	}
	methods := map[string]any{}
	for _, m := range protocol.Methods {
		p, err := add(m.Params)
		if err != nil {
			return nil, err
		}
		res, err := add(m.Result)
		if err != nil {
			return nil, err
		}
		methods[m.Name] = map[string]any{"params": ref(p), "result": ref(res)}
	}
	var variants []any
	for _, e := range protocol.Events {
		name, err := add(e.Payload)
		if err != nil {
			return nil, err
		}
		seq := map[string]any{"type": "null"}
		if durable(e.Type) {
			seq = map[string]any{"type": "integer", "minimum": 1}
		}
		variants = append(variants, map[string]any{
			"title": string(e.Type) + " event",
			"type":  "object",
			"properties": map[string]any{
				"session_id":           map[string]any{"type": "string"},
				"seq":                  seq,
				"type":                 map[string]any{"const": string(e.Type)},
				"admission_id":         map[string]any{"type": "string"},
				"execution_generation": map[string]any{"type": "integer"},
				"payload":              ref(name),
			},
			"required":             []string{"session_id", "seq", "type", "payload"},
			"additionalProperties": false,
		})
	}
	// Shapes inside payloads: a prompt's payload by kind, prompt.closed's
	// response by kind, and tool.completed's result (the terminal and
	// clarify results, the error of a call that gave none).
	for _, v := range []any{protocol.ApprovalPayload{}, protocol.ClarifyPayload{}, protocol.Descriptor{},
		protocol.ApprovalResponse{}, protocol.ClarifyResponse{},
		protocol.TerminalResult{}, protocol.ClarifyResult{}, protocol.ToolError{}} {
		if _, err := add(v); err != nil {
			return nil, err
		}
	}
	// The payload of a prompt is its kind's payload.
	if p, ok := defs["Prompt"].(map[string]any); ok {
		p["properties"].(map[string]any)["payload"] = map[string]any{"oneOf": []any{ref("ApprovalPayload"), ref("ClarifyPayload")}}
	}
	// Snapshot.events are session.event params of durable types.
	if p, ok := defs["Snapshot"].(map[string]any); ok {
		p["properties"].(map[string]any)["events"] = map[string]any{"type": "array", "items": ref("SessionEvent")}
	}
	delete(defs, "Event")
	defs["SessionEvent"] = map[string]any{
		"description": "params of the session.event notification, discriminated by type",
		"oneOf":       variants,
	}
	defs["ErrorObject"] = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code":    map[string]any{"type": "integer", "enum": []int{protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeMethodNotFound, protocol.CodeInvalidParams, protocol.CodeInternal, protocol.CodeRefused}},
			"message": map[string]any{"type": "string"},
			"data": map[string]any{
				"type":       "object",
				"properties": map[string]any{"reason": ref("ErrorReason"), "field": map[string]any{"type": "string"}},
				"required":   []string{"reason"},
			},
		},
		"required":             []string{"code", "message", "data"},
		"additionalProperties": false,
	}
	defs["ErrorReason"] = defs["Reason"]
	delete(defs, "Reason")
	id := map[string]any{"type": []string{"number", "string", "null"}}
	defs["ServerFrame"] = map[string]any{
		"description": "any frame the daemon sends: a result, an error, or a session.event notification",
		"oneOf": []any{
			map[string]any{"title": "result frame", "type": "object", "properties": map[string]any{
				"jsonrpc": map[string]any{"const": "2.0"}, "id": id, "result": true},
				"required": []string{"jsonrpc", "id", "result"}, "additionalProperties": false},
			map[string]any{"title": "error frame", "type": "object", "properties": map[string]any{
				"jsonrpc": map[string]any{"const": "2.0"}, "id": id, "error": ref("ErrorObject")},
				"required": []string{"jsonrpc", "id", "error"}, "additionalProperties": false},
			map[string]any{"title": "notification frame", "type": "object", "properties": map[string]any{
				"jsonrpc": map[string]any{"const": "2.0"}, "method": map[string]any{"const": protocol.NotifySessionEvent},
				"params": ref("SessionEvent")},
				"required": []string{"jsonrpc", "method", "params"}, "additionalProperties": false},
		},
	}
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         ID,
		"title":       fmt.Sprintf("sessiond protocol v%d", protocol.Version),
		"description": "JSON-RPC 2.0 over WebSocket; see docs/protocol.md. Generated by `sessiond schema` from package protocol.",
		"$ref":        "#/$defs/ServerFrame",
		"x-methods":   methods,
		"$defs":       defs,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
