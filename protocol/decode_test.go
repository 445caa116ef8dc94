package protocol_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

// eventConstants parses events.go for every constant of type EventType:
// a new event type added there without a registered payload fails
// TestEveryEventTypeHasAPayload.
func eventConstants(t *testing.T) map[string]protocol.EventType {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]protocol.EventType{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "EventType" {
				continue
			}
			for i, n := range v.Names {
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: not a string literal", n.Name)
				}
				s, _ := strconv.Unquote(lit.Value)
				out[n.Name] = protocol.EventType(s)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no EventType constants found in events.go")
	}
	return out
}

// Every EventType constant has exactly one registered payload type, whose
// EventType method names it, and DecodeEvent returns that type.
func TestEveryEventTypeHasAPayload(t *testing.T) {
	specs := map[protocol.EventType]protocol.EventSpec{}
	for _, s := range protocol.Events {
		if _, dup := specs[s.Type]; dup {
			t.Errorf("%s registered twice", s.Type)
		}
		specs[s.Type] = s
	}
	for name, typ := range eventConstants(t) {
		s, ok := specs[typ]
		if !ok {
			t.Errorf("%s (%q) has no payload in protocol.Events", name, typ)
			continue
		}
		if got := s.Payload.EventType(); got != typ {
			t.Errorf("%s: payload %T says it is %q", typ, s.Payload, got)
		}
		got, err := protocol.DecodeEvent(typ, json.RawMessage(`{}`))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if reflect.TypeOf(got) != reflect.TypeOf(s.Payload) {
			t.Errorf("%s decodes to %T, want %T", typ, got, s.Payload)
		}
	}
	if len(specs) != len(eventConstants(t)) {
		t.Errorf("protocol.Events has %d types, events.go declares %d", len(specs), len(eventConstants(t)))
	}
}

// emitters are the calls through which the daemon's rooms emit events,
// with the index of their event type argument.
var emitters = map[string]int{"AppendEvent": 1, "Delta": 1, "publishDelta": 1}

// Every event the code emits names its type by a protocol constant that
// has a payload: no event type is made up where it is sent. It walks the
// module's non-test sources for AppendEvent/Delta/publishDelta calls.
func TestEveryEmittedEventIsTyped(t *testing.T) {
	consts := eventConstants(t)
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := emitters[sel.Sel.Name]
			if !ok || len(call.Args) <= i {
				return true
			}
			found++
			arg := call.Args[i]
			switch a := arg.(type) {
			case *ast.SelectorExpr:
				if x, ok := a.X.(*ast.Ident); ok && x.Name == "protocol" {
					if _, ok := consts[a.Sel.Name]; !ok {
						t.Errorf("%s: %s.%s is not an EventType constant", path, x.Name, a.Sel.Name)
					}
					return true
				}
			case *ast.Ident:
				return true // a parameter passed through (the Delta implementations)
			}
			t.Errorf("%s: %s emits an event type that is not a protocol constant: %T", path, sel.Sel.Name, arg)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 10 {
		t.Fatalf("found only %d emitting calls: the walk is broken", found)
	}
}

// A sample of each payload round-trips through DecodeEvent unchanged.
func TestDecodeEventRoundTrips(t *testing.T) {
	code := 0
	gen := int64(2)
	out := protocol.OutcomeCompleted
	samples := []protocol.EventPayload{
		protocol.Receipt{AdmissionID: "adm_1", SessionID: "s", InputID: "i", Seq: 1, Status: protocol.StatusTerminal, Outcome: &out, ExecutionGeneration: &gen},
		protocol.TurnStartedPayload{InputID: "i", Text: "hi", Sender: &protocol.Sender{ID: "owner"}},
		protocol.MessageDeltaPayload{Text: "he"},
		protocol.MessageCompletedPayload{Message: protocol.Message{ID: 3, Role: protocol.RoleAssistant, Content: "hello"}},
		protocol.ToolStartedPayload{ToolCallID: "c1", Name: "terminal", Args: json.RawMessage(`{"command":"ls"}`)},
		protocol.ToolOutputPayload{ToolCallID: "c1", Text: "a\n", OmittedBytes: 7},
		protocol.ToolRunningPayload{ToolCallID: "c1", PID: 10, BootID: "b", StartTicks: 5, Session: 10, Marker: "m"},
		protocol.ToolCompletedPayload{ToolCallID: "c1", Name: "terminal", OK: true, ExitCode: &code, Result: json.RawMessage(`{"exit_code":0,"output":"a\n","truncated":false,"total_bytes":2,"duration_ms":3}`)},
		protocol.PromptOpenedPayload{Prompt: protocol.Prompt{PromptID: "p", Kind: protocol.KindApproval, Payload: json.RawMessage(`{"command":"rm -r x"}`)}},
		protocol.PromptClosedPayload{PromptID: "p", Resolution: protocol.ResolutionAnswered, Response: json.RawMessage(`{"choice":"once"}`), AnsweredBy: &protocol.AnsweredBy{Conn: "1", Client: "tui", ID: "owner"}},
		protocol.TurnCompletedPayload{Outcome: protocol.OutcomeFailed, Error: "model down"},
		protocol.MCPServerStatus{Name: "fs", Status: protocol.MCPFailed, Error: "exited", Tools: []string{}, Transport: "stdio", Source: "config"},
	}
	seen := map[protocol.EventType]bool{}
	for _, want := range samples {
		typ := want.EventType()
		seen[typ] = true
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		ev := protocol.Event{SessionID: "s", Type: typ, Payload: raw}
		got, err := ev.Decode()
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", typ, got, want)
		}
	}
	for _, s := range protocol.Events {
		if !seen[s.Type] {
			t.Errorf("%s has no sample here", s.Type)
		}
	}
}

// An event type this client does not know decodes to UnknownPayload with
// its type and payload: never an error, so a newer daemon's events do not
// end the stream.
func TestDecodeEventUnknownType(t *testing.T) {
	raw := json.RawMessage(`{"name":"fs","status":"ready","tools":[]}`)
	got, err := protocol.DecodeEvent("mcp.future", raw)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := got.(protocol.UnknownPayload)
	if !ok {
		t.Fatalf("got %T, want UnknownPayload", got)
	}
	if u.Type != "mcp.future" || string(u.Payload) != string(raw) || u.EventType() != "mcp.future" {
		t.Errorf("got %#v", u)
	}
}

// A payload of the wrong shape is an error naming the event type and the
// field (or saying the payload is missing or not an object).
func TestDecodeEventBadPayloadNamesTypeAndField(t *testing.T) {
	cases := []struct {
		typ     protocol.EventType
		payload string
		want    []string
	}{
		{protocol.EventToolCompleted, `{"tool_call_id":"c","ok":"yes"}`, []string{"tool.completed", `"ok"`}},
		{protocol.EventAdmissionUpdated, `{"admission_id":"a","seq":"one"}`, []string{"admission.updated", `"seq"`}},
		{protocol.EventPromptOpened, `{"prompt":{"prompt_id":7}}`, []string{"prompt.opened", `"prompt.prompt_id"`}},
		{protocol.EventTurnCompleted, `"completed"`, []string{"turn.completed", "not an object"}},
		{protocol.EventMessageDelta, ``, []string{"message.delta", "missing"}},
		{protocol.EventMessageDelta, `null`, []string{"message.delta", "missing"}},
		{protocol.EventToolOutput, `{"text":`, []string{"tool.output"}},
	}
	for _, c := range cases {
		_, err := protocol.DecodeEvent(c.typ, json.RawMessage(c.payload))
		if err == nil {
			t.Errorf("%s %s: no error", c.typ, c.payload)
			continue
		}
		var pe *protocol.PayloadError
		if !errors.As(err, &pe) || pe.Type != c.typ {
			t.Errorf("%s %s: %v is not a PayloadError of that type", c.typ, c.payload, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %q does not say %s", c.typ, c.payload, err, w)
			}
		}
	}
}

// A tool.completed result decodes by its tool: the terminal result, the
// clarify result, or the error a call that did not run (or was
// interrupted) gives; a string holding JSON is read as that JSON.
func TestToolCompletedOutcome(t *testing.T) {
	cases := []struct {
		name, result string
		want         protocol.ToolOutcome
	}{
		{"terminal", `{"exit_code":2,"output":"x","truncated":true,"total_bytes":9,"duration_ms":4,"timed_out":true}`,
			protocol.ToolOutcome{Terminal: &protocol.TerminalResult{ExitCode: 2, Output: "x", Truncated: true, TotalBytes: 9, DurationMS: 4, TimedOut: true}}},
		{"terminal", `"{\"exit_code\":0,\"output\":\"\",\"truncated\":false,\"total_bytes\":0,\"duration_ms\":1}"`,
			protocol.ToolOutcome{Terminal: &protocol.TerminalResult{DurationMS: 1}}},
		{"terminal", `{"error":"not run: the user denied this command"}`,
			protocol.ToolOutcome{Error: &protocol.ToolError{Error: "not run: the user denied this command"}}},
		{"terminal", `{"error":"interrupted while running: x","exit_code":-1,"output":"o","truncated":false,"duration_ms":5}`,
			protocol.ToolOutcome{Error: &protocol.ToolError{Error: "interrupted while running: x", ExitCode: new(-1), Output: "o", DurationMS: 5}}},
		{"clarify", `{"responses":[{"question":"q","choices_offered":["a"],"answer":"a"}]}`,
			protocol.ToolOutcome{Clarify: &protocol.ClarifyResult{Responses: []protocol.ClarifyAnswer{{Question: "q", ChoicesOffered: []string{"a"}, Answer: "a"}}}}},
		{"clarify", `{"responses":[],"timed_out":true}`,
			protocol.ToolOutcome{Clarify: &protocol.ClarifyResult{Responses: []protocol.ClarifyAnswer{}, TimedOut: true}}},
		{"mcp__x__y", `{"anything":1}`, protocol.ToolOutcome{}},
		{"terminal", `"not json"`, protocol.ToolOutcome{}},
	}
	for _, c := range cases {
		p := protocol.ToolCompletedPayload{Name: c.name, Result: json.RawMessage(c.result)}
		got, err := p.Outcome()
		if err != nil {
			t.Errorf("%s %s: %v", c.name, c.result, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s:\n got %#v\nwant %#v", c.name, c.result, got, c.want)
		}
	}
	_, err := protocol.ToolCompletedPayload{Name: "terminal", Result: json.RawMessage(`{"exit_code":"zero"}`)}.Outcome()
	if err == nil || !strings.Contains(err.Error(), "exit_code") || !strings.Contains(err.Error(), "tool.completed") {
		t.Errorf("bad terminal result: %v", err)
	}
}

// A prompt's payload decodes by its kind.
func TestPromptPayloads(t *testing.T) {
	p := protocol.Prompt{Kind: protocol.KindApproval, Payload: json.RawMessage(`{"tool_call_id":"c","command":"rm -r x","risk":"dangerous","choices":["once","deny"],"sandbox":{"mode":"off","network":true,"writable_roots":[],"unsandboxed":true}}`)}
	a, err := p.Approval()
	if err != nil || a.Command != "rm -r x" || a.Risk != protocol.RiskDangerous || !a.Sandbox.Unsandboxed || len(a.Choices) != 2 {
		t.Errorf("approval: %#v %v", a, err)
	}
	if _, err := p.Clarify(); err == nil {
		t.Error("an approval prompt read as clarify")
	}
	q := protocol.Prompt{Kind: protocol.KindClarify, Payload: json.RawMessage(`{"tool_call_id":"c","questions":[{"id":"q1","question":"which?","choices":["a","b"],"multi_select":true}]}`)}
	c, err := q.Clarify()
	if err != nil || len(c.Questions) != 1 || !c.Questions[0].MultiSelect {
		t.Errorf("clarify: %#v %v", c, err)
	}
	if _, err := (protocol.Prompt{Kind: protocol.KindClarify, Payload: json.RawMessage(`{"questions":"x"}`)}).Clarify(); err == nil || !strings.Contains(err.Error(), "questions") {
		t.Errorf("bad clarify payload: %v", err)
	}
}
