package sandbox

import (
	"strings"
	"testing"
)

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true}, {"/a", "/a", true}, {"/a/", "/a", true}, {"/ab", "/a", false},
		{"/a", "/a/b", false}, {"/x", "/", true}, {"/a/../b", "/a", false},
	} {
		if got := Within(c.path, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.path, c.dir, got)
		}
	}
}

func TestPolicyValidateAndString(t *testing.T) {
	if err := (Policy{Mode: "strict"}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "mode:") {
		t.Errorf("bad mode: %v", err)
	}
	if err := (Policy{Mode: ModeReadOnly, WritableRoots: []string{"rel"}}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "writable_roots[0]:") {
		t.Errorf("relative root: %v", err)
	}
	if s := (Policy{Mode: ModeWorkspaceWrite, WritableRoots: []string{"/a", "/b"}}).String(); s != "workspace-write, network off, writable roots: /a, /b" {
		t.Errorf("String = %q", s)
	}
	if _, err := (Spec{Policy: Policy{Mode: ModeOff}}).Command(t.Context(), "true"); err == nil {
		t.Error("Command with mode off did not fail")
	}
}
