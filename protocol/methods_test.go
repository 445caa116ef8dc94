package protocol_test

import (
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

// Every row of the method table has a name used once, one of the four
// scopes (there is no default), and params and result that are structs.
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range protocol.Methods {
		if m.Name == "" || seen[m.Name] {
			t.Errorf("method %q: empty or listed twice", m.Name)
		}
		seen[m.Name] = true
		if !m.Scope.Valid() {
			t.Errorf("%s: scope %q is not read, write, owner or pairing", m.Name, m.Scope)
		}
		for what, v := range map[string]any{"params": m.Params, "result": m.Result} {
			if tv := reflect.TypeOf(v); tv == nil || tv.Kind() != reflect.Struct || tv.Name() == "" {
				t.Errorf("%s: %s %T is not a named struct", m.Name, what, v)
			}
		}
		if got, ok := protocol.Method(m.Name); !ok || got.Name != m.Name {
			t.Errorf("Method(%q) = %v, %v", m.Name, got, ok)
		}
	}
	if _, ok := protocol.Method("no.such"); ok {
		t.Error("Method found a method that is not in the table")
	}
}

// SessionReach reads the session_id member of the params: required,
// optional or absent.
func TestSessionReach(t *testing.T) {
	for name, want := range map[string]protocol.Reach{
		protocol.MethodSessionList:     protocol.ReachDaemon,
		protocol.MethodSessionCreate:   protocol.ReachDaemon,
		protocol.MethodPromptSubmit:    protocol.ReachSession,
		protocol.MethodApprovalsList:   protocol.ReachSessionOrDaemon,
		protocol.MethodApprovalsRevoke: protocol.ReachSessionOrDaemon,
	} {
		m, _ := protocol.Method(name)
		if got := m.SessionReach(); got != want {
			t.Errorf("%s: reach %d, want %d", name, got, want)
		}
	}
}
