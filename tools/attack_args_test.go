package tools

import (
	"encoding/json"
	"testing"
)

// TestAttackArgsCaseFoldedKeyRunsAnotherCommand (adversarial review): Go's
// encoding/json matches struct fields case-insensitively, the schema
// validator (and every client showing the stored tool call's arguments,
// e.g. sessionctl's "$ command" line) reads the exact key "command". With
// both keys present, what runs is not what is shown. The arguments should
// be refused (an unknown or case-variant key), or decoded exactly.
func TestAttackArgsCaseFoldedKeyRunsAnotherCommand(t *testing.T) {
	raw := json.RawMessage(`{"command":"ls","Command":"touch pwned"}`)
	var shown map[string]any
	json.Unmarshal(raw, &shown)
	a, err := ParseTerminalArgs(raw)
	if err == nil && a.Command != shown["command"] {
		t.Fatalf("accepted: runs %q while the stored arguments show command %q", a.Command, shown["command"])
	}
}
