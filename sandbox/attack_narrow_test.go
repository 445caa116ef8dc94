package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAttackNarrowThroughSymlink (adversarial review): Narrow decides
// "inside a configured writable root" on the lexical path, the helper then
// resolves symlinks (resolved) and grants the target. A symlink that a
// sandboxed command placed in a configured root (out/sub -> /anywhere)
// turns a later session's narrowed root "out/sub" into a grant outside
// every configured root: session.create widened the sandbox.
func TestAttackNarrowThroughSymlink(t *testing.T) {
	out, elsewhere := t.TempDir(), t.TempDir()
	link := filepath.Join(out, "sub")
	if err := os.Symlink(elsewhere, link); err != nil { // what a command in "out" can do
		t.Fatal(err)
	}
	base := Policy{Mode: ModeWorkspaceWrite, WritableRoots: []string{out}}
	p, err := base.Narrow("", nil, []string{link})
	if err != nil {
		return // refused: holds
	}
	granted := resolved(Spec{Policy: p}).Policy.WritableRoots
	for _, g := range granted {
		if !Within(g, out) {
			t.Errorf("narrowing to %s was accepted and the helper grants %s, outside the configured root %s", link, g, out)
		}
	}
}
