package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestSpecs(t *testing.T) {
	specs, err := Specs([]string{"terminal", "clarify", "terminal"})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "terminal" || specs[1].Name != "clarify" {
		t.Fatalf("specs %+v", specs)
	}
	for _, s := range specs {
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema.Type != "object" || len(schema.Properties) == 0 {
			t.Errorf("%s: bad schema (%v): %s", s.Name, err, s.Parameters)
		}
		if s.Description == "" {
			t.Errorf("%s: no description", s.Name)
		}
	}
	if got, err := Specs(nil); err != nil || len(got) != 0 {
		t.Errorf("Specs(nil) = %v, %v", got, err)
	}
	if _, err := Specs([]string{"terminal", "browser"}); !errors.Is(err, ErrUnknownToolset) {
		t.Errorf("unknown toolset: err %v", err)
	}
	for name, want := range map[string]bool{"terminal": true, "clarify": true, "": false, "Terminal": false, "web": false} {
		if ValidToolset(name) != want {
			t.Errorf("ValidToolset(%q) != %v", name, want)
		}
	}
}

func TestParseTerminalArgs(t *testing.T) {
	a, err := ParseTerminalArgs(json.RawMessage(`{"command":"ls -la","timeout":30}`))
	if err != nil || a != (TerminalArgs{Command: "ls -la", Timeout: 30}) {
		t.Errorf("got %+v, %v", a, err)
	}
	// The published schema says "additionalProperties": false.
	if _, err := ParseTerminalArgs(json.RawMessage(`{"command":"ls","extra":true}`)); err == nil || !strings.Contains(err.Error(), "additional properties 'extra' not allowed") {
		t.Errorf("an unknown field: err %v", err)
	}
	for _, in := range []string{``, `{}`, `{"command":"  "}`, `{"command":1}`, `{"command":"ls","timeout":-1}`, `{"command":"ls","timeout":"5"}`} {
		if _, err := ParseTerminalArgs(json.RawMessage(in)); !errors.Is(err, ErrInvalidTerminalArgs) {
			t.Errorf("%q: err %v", in, err)
		}
	}
}
