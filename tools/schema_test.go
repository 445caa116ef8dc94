package tools

import (
	"encoding/json"
	"errors"
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
		`{"command":"ls","note":"x"}`:           0,
		`{"command":"ls","timeout":2147483647}`: MaxTimeoutCeiling,
	} {
		a, err := ParseTerminalArgs(json.RawMessage(in))
		if err != nil || a.Timeout != want || a.Command != "ls" {
			t.Errorf("%s: got %+v, %v; want timeout %d", in, a, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"command":"ls","timeout":0}`:           "timeout: 0 is less than the minimum 1",
		`{"command":"ls","timeout":-5}`:          "timeout: -5 is less than the minimum 1",
		`{"command":"ls","timeout":60.5}`:        "timeout: want integer, got number 60.5",
		`{"command":"ls","timeout":"60"}`:        `timeout: want integer, got string "60"`,
		`{"command":"ls","timeout":18446744074}`: "timeout: 18446744074 is greater than the maximum 2147483647 seconds",
		`{"command":"ls","timeout":1e400}`:       "timeout: 1e400 is out of range",
		`{"command":"ls","timeout":2147483648}`:  "greater than the maximum",
		`{"timeout":5}`:                          "command is required",
		`{"command":5}`:                          "command: want string, got integer 5",
		`[1]`:                                    "arguments: want object, got array",
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
		`{"questions":[{"choices":["x"]}]}`:              "questions[0].question is required",
		`{"question":"a?","multi_select":1}`:             "multi_select: want boolean",
		`{"questions":[{"question":"q","choices":[1]}]}`: "questions[0].choices[0]: want string",
	}
	for in, want := range bad {
		if err := ValidateArgs(clarifySpec.Parameters, json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}
