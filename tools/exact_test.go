package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// decodeExact itself (the defence behind the schema): a case-variant key is
// refused, unknown keys are refused or ignored as asked, exact keys decode.
func TestDecodeExact(t *testing.T) {
	for _, c := range []struct {
		raw, err string
		ignore   bool
	}{
		{`{"command":"ls","Command":"touch pwned"}`, `"Command" is not "command"`, false},
		{`{"COMMAND":"touch pwned"}`, `"COMMAND" is not "command"`, true},
		{`{"command":"ls","Sandbox_Permissions":"escalated"}`, `"Sandbox_Permissions" is not "sandbox_permissions"`, true},
		{`{"command":"ls","extra":1}`, `unknown argument "extra"`, false},
		{`null`, "expected a JSON object", false},
		{`[1]`, "cannot unmarshal", false},
	} {
		var a TerminalArgs
		if err := decodeExact(json.RawMessage(c.raw), &a, c.ignore); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want %q (decoded %+v)", c.raw, err, c.err, a)
		}
	}
	var a TerminalArgs
	if err := decodeExact(json.RawMessage(`{"command":"ls","extra":1}`), &a, true); err != nil || a.Command != "ls" {
		t.Fatalf("ignoring unknown keys: %+v %v", a, err)
	}
	a = TerminalArgs{}
	if err := decodeExact(json.RawMessage(`{"command":"ls","timeout":5,"sandbox_permissions":"escalated","justification":"j"}`), &a, false); err != nil ||
		a != (TerminalArgs{Command: "ls", Timeout: 5, SandboxPermissions: "escalated", Justification: "j"}) {
		t.Fatalf("exact keys: %+v %v", a, err)
	}
}

// Case-variant keys of the terminal tool are refused, whichever field.
func TestParseTerminalArgsCaseVariantKeys(t *testing.T) {
	for _, raw := range []string{
		`{"Command":"touch pwned"}`,
		`{"command":"ls","Command":"touch pwned"}`,
		`{"command":"ls","Timeout":1}`,
		`{"command":"ls","SANDBOX_PERMISSIONS":"escalated","justification":"x"}`,
	} {
		if a, err := ParseTerminalArgs(json.RawMessage(raw)); err == nil || !errors.Is(err, ErrInvalidTerminalArgs) {
			t.Errorf("%s: accepted as %+v (%v)", raw, a, err)
		}
	}
}

// Clarify ignores unknown keys but refuses a case-variant of a known one,
// at the top level and inside questions: what is asked is what is stored.
func TestParseClarifyArgsCaseVariantKeys(t *testing.T) {
	for _, raw := range []string{
		`{"question":"Deploy to staging?","Question":"Deploy to production?"}`,
		`{"question":"Pick","choices":["a"],"Choices":["rm -rf /"]}`,
		`{"questions":[{"question":"x","QUESTION":"y"}]}`,
		`{"Questions":[{"question":"x"}],"question":"y"}`,
	} {
		if qs, err := ParseClarifyArgs(json.RawMessage(raw)); err == nil || !errors.Is(err, ErrInvalidClarify) || !strings.Contains(err.Error(), "case-sensitive") {
			t.Errorf("%s: %+v, %v; want a case-sensitivity error", raw, qs, err)
		}
	}
	if qs, err := ParseClarifyArgs(json.RawMessage(`{"question":"Pick","note":"unknown keys are ignored"}`)); err != nil || len(qs) != 1 {
		t.Fatalf("unknown key: %+v %v", qs, err)
	}
}
