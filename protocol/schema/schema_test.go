package schema_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/protocol/schema"
)

// docs/schema.json is what `sessiond schema` prints; regenerate it with
// `go run ./cmd/sessiond schema > docs/schema.json`.
func TestCommittedSchemaIsCurrent(t *testing.T) {
	want, err := schema.Document()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/schema.json is stale: run `go run ./cmd/sessiond schema > docs/schema.json`")
	}
}

func compile(t *testing.T, ref string) *jsonschema.Schema {
	t.Helper()
	doc, err := schema.Document()
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ID, v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schema.ID + ref)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, frame string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v)
}

// The schema accepts what the daemon sends and refuses what it must not:
// a durable event with seq null, a payload of another type, a receipt
// without outcome, an unknown reason, an extra member.
func TestSchemaValidatesFrames(t *testing.T) {
	s := compile(t, "#/$defs/ServerFrame")
	gen := int64(1)
	rec, _ := json.Marshal(protocol.Receipt{AdmissionID: "adm_1", SessionID: "ses_1", InputID: "i1", Seq: 1,
		Status: protocol.StatusQueued, Reason: protocol.WaitBusy})
	good := []string{
		`{"jsonrpc":"2.0","id":1,"result":` + string(rec) + `}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no","data":{"reason":"not_found"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":3,"type":"turn.completed","admission_id":"a","execution_generation":1,"payload":{"outcome":"completed"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":null,"type":"message.delta","payload":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":4,"type":"admission.updated","payload":` + string(rec) + `}}`,
	}
	_ = gen
	for _, f := range good {
		if err := validate(t, s, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad := []string{
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":null,"type":"turn.completed","payload":{"outcome":"completed"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":3,"type":"turn.completed","payload":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":3,"type":"turn.completed","payload":{"outcome":"exploded"}}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no","data":{"reason":"nope"}}}`,
		`{"jsonrpc":"2.0","method":"session.event","params":{"session_id":"s","seq":3,"type":"turn.completed","payload":{"outcome":"completed"},"extra":1}}`,
	}
	for _, f := range bad {
		if err := validate(t, s, f); err == nil {
			t.Errorf("accepted %s", f)
		}
	}
	r := compile(t, "#/$defs/Receipt")
	if err := validate(t, r, `{"admission_id":"a","session_id":"s","input_id":"i","seq":1,"status":"queued","execution_generation":null,"duplicate":false}`); err == nil {
		t.Error("a receipt without outcome validated")
	}
	if err := validate(t, r, string(rec)); err != nil {
		t.Errorf("receipt: %v", err)
	}
}

// Every method has params and result definitions in x-methods.
func TestSchemaNamesEveryMethod(t *testing.T) {
	doc, _ := schema.Document()
	var d struct {
		Methods map[string]struct {
			Params map[string]string `json:"params"`
			Result map[string]string `json:"result"`
		} `json:"x-methods"`
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, m := range protocol.Methods {
		got, ok := d.Methods[m.Name]
		if !ok {
			t.Fatalf("%s missing", m.Name)
		}
		for _, r := range []string{got.Params["$ref"], got.Result["$ref"]} {
			if _, ok := d.Defs[strings.TrimPrefix(r, "#/$defs/")]; !ok {
				t.Errorf("%s: %s is not defined", m.Name, r)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite the method table of docs/protocol.md")

// docs/protocol.md carries the method table of protocol.Methods (name,
// scope, params, result); -update rewrites it.
func TestDocsMethodTable(t *testing.T) {
	const path = "../../docs/protocol.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	begin := strings.Index(text, schema.MethodTableBegin)
	end := strings.Index(text, schema.MethodTableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no method table between %q and %q", path, schema.MethodTableBegin, schema.MethodTableEnd)
	}
	end += len(schema.MethodTableEnd) + 1
	want := schema.MethodTable()
	if text[begin:end] == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:begin]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the method table of %s is stale: run `go test ./protocol/schema -run TestDocsMethodTable -update`; want\n%s", path, want)
}

// The shapes inside payloads have definitions that accept what the daemon
// puts there: tool.completed's terminal and clarify results and the error
// of a call that did not run, prompt.closed's responses.
func TestSchemaDefinesToolResults(t *testing.T) {
	cases := []struct{ def, good, bad string }{
		{"TerminalResult", `{"exit_code":0,"output":"a\n","truncated":false,"total_bytes":2,"duration_ms":3,"sandbox":"workspace-write, network off"}`, `{"exit_code":0,"output":"a"}`},
		{"ToolError", `{"error":"interrupted while running: x","exit_code":-1,"output":"o","truncated":false,"duration_ms":5}`, `{"exit_code":-1}`},
		{"ClarifyResult", `{"responses":[{"question":"q","choices_offered":[],"answer":["a","b"]}],"timed_out":false}`, `{"responses":[{"question":"q"}]}`},
		{"ApprovalResponse", `{"choice":"once"}`, `{"choice":"maybe"}`},
		{"ClarifyResponse", `{"answer":"yes"}`, `{}`},
	}
	for _, c := range cases {
		s := compile(t, "#/$defs/"+c.def)
		if err := validate(t, s, c.good); err != nil {
			t.Errorf("%s refused %s: %v", c.def, c.good, err)
		}
		if err := validate(t, s, c.bad); err == nil {
			t.Errorf("%s accepted %s", c.def, c.bad)
		}
	}
}
