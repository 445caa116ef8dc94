package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runSetup runs command under s and returns its output and exit code,
// a setup failure (126) included.
func runSetup(t *testing.T, s Spec, dir, command string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := testCommand(ctx, s, command)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatal(err)
	return "", -1
}

// A cwd (or a writable root) that a command swapped for a symlink since
// the session was created is refused: exit 126, the reason on stderr, and
// nothing written in the symlink's target.
func TestSymlinkSwappedWritableRefused(t *testing.T) {
	for _, which := range []string{"cwd", "writable root", "parent of the cwd"} {
		t.Run(which, func(t *testing.T) {
			l := newLayout(t)
			target := filepath.Join(l.root, "target")
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			s := l.spec(ModeWorkspaceWrite, filepath.Join(l.work, "app"))
			dir := s.Cwd
			var write string
			switch which {
			case "cwd":
				if err := os.Symlink(target, s.Cwd); err != nil {
					t.Fatal(err)
				}
				write = "echo pwned > escaped"
			case "writable root":
				if err := os.Mkdir(s.Cwd, 0o755); err != nil {
					t.Fatal(err)
				}
				root := filepath.Join(l.work, "root")
				if err := os.Symlink(target, root); err != nil {
					t.Fatal(err)
				}
				s.Policy.WritableRoots = []string{root}
				write = "echo pwned > " + filepath.Join(root, "escaped")
			case "parent of the cwd":
				if err := os.MkdirAll(filepath.Join(target, "app"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(l.work); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, l.work); err != nil {
					t.Fatal(err)
				}
				write = "echo pwned > escaped"
			}
			out, code := runSetup(t, s, dir, write)
			if code != ExitSetupFailed || !strings.Contains(out, "symlink") || !strings.Contains(out, "nothing was run") {
				t.Fatalf("exit %d, output %q; want %d and the reason", code, out, ExitSetupFailed)
			}
			for _, p := range []string{filepath.Join(target, "escaped"), filepath.Join(target, "app", "escaped")} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("%s was written through the symlink", p)
				}
			}
		})
	}
}

// Narrow compares and returns real paths: a root inside a configured root
// reached through a symlink that stays inside is kept as its real path.
func TestNarrowStoresRealPaths(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "real"), filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	p, err := Policy{Mode: ModeWorkspaceWrite, WritableRoots: []string{out}}.Narrow("", nil, []string{filepath.Join(out, "link")})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.WritableRoots) != 1 || p.WritableRoots[0] != filepath.Join(out, "real") {
		t.Fatalf("roots %v, want the real path", p.WritableRoots)
	}
}
