package tools

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseTerminalArgsFollowsTheSchema: the published schema says
// "timeout" is an integer of at least 1; JSON Schema counts 60.0 and 6e1 as
// integers. Out-of-range values are refused with the field named, never
// rounded, wrapped or clamped.
func TestParseTerminalArgsFollowsTheSchema(t *testing.T) {
	for in, want := range map[string]int{
		`{"command":"ls","timeout":60.0}`:       60,
		`{"command":"ls","timeout":6e1}`:        60,
		`{"command":"ls","timeout":60}`:         60,
		`{"command":"ls","timeout":1}`:          1,
		`{"command":"ls"}`:                      0,
		`{"command":"ls","timeout":2147483647}`: MaxTimeoutCeiling,
	} {
		a, err := ParseTerminalArgs(json.RawMessage(in))
		if err != nil || a.Timeout != want || a.Command != "ls" {
			t.Errorf("%s: got %+v, %v; want timeout %d", in, a, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"command":"ls","note":"x"}`:            "arguments: additional properties 'note' not allowed",
		`{"command":"ls","timeout":0}`:           "timeout: minimum: got 0, want 1",
		`{"command":"ls","timeout":-5}`:          "timeout: minimum: got -5, want 1",
		`{"command":"ls","timeout":60.5}`:        "timeout: got number, want integer",
		`{"command":"ls","timeout":"60"}`:        "timeout: got string, want integer",
		`{"command":"ls","timeout":18446744074}`: "timeout: 18446744074 is greater than the maximum 2147483647 seconds",
		`{"command":"ls","timeout":1e400}`:       "timeout: 1e400 is greater than the maximum",
		`{"command":"ls","timeout":2147483648}`:  "greater than the maximum",
		`{"timeout":5}`:                          "arguments: missing property 'command'",
		`{"command":5}`:                          "command: got number, want string",
		`[1]`:                                    "arguments: got array, want object",
		`{"command":"ls"} {"command":"rm"}`:      "not one JSON value",
		`not json`:                               "arguments are not JSON",
	} {
		_, err := ParseTerminalArgs(json.RawMessage(in))
		if !errors.Is(err, ErrInvalidTerminalArgs) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

func TestValidateArgsClarifySchema(t *testing.T) {
	ok := []string{`{"question":"a?"}`, `{"questions":[{"question":"a?","choices":["x","y"]}]}`}
	for _, in := range ok {
		if err := ValidateArgs(clarifySpec.Parameters, json.RawMessage(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	bad := map[string]string{
		`{"questions":[{"choices":["x"]}]}`:              "questions[0]: missing property 'question'",
		`{"question":"a?","multi_select":1}`:             "multi_select: got number, want boolean",
		`{"questions":[{"question":"q","choices":[1]}]}`: "questions[0].choices[0]: got number, want string",
	}
	for in, want := range bad {
		if err := ValidateArgs(clarifySpec.Parameters, json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

// A tool schema (an MCP server's: untrusted) is compiled without loading
// anything: a $ref or $schema naming a file or a URL is refused, never
// read by the daemon (which would read its own home for a sandboxed
// server, or hang on /dev/zero).
func TestValidateArgsNeverLoadsReferences(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"object","properties":{"x":{"const":"SECRET-VALUE"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{
		`{"$ref":"file://` + secret + `"}`,
		`{"type":"object","properties":{"x":{"$ref":"file://` + secret + `#/properties/x"}}}`,
		`{"$schema":"file://` + secret + `","type":"object"}`,
		`{"$ref":"http://127.0.0.1:1/schema.json"}`,
	} {
		err := ValidateArgs(json.RawMessage(schema), json.RawMessage(`{"x":"y"}`))
		if err == nil {
			t.Errorf("%s: accepted; want the reference refused", schema)
			continue
		}
		if strings.Contains(err.Error(), "SECRET-VALUE") || !strings.Contains(err.Error(), "not loaded") {
			t.Errorf("%s: %v; want the reference refused unread", schema, err)
		}
	}
}
