package sandbox

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkCommandTrue measures one sandboxed "true": the helper's two (as
// root) or three (not root) execs, the namespaces, the view, Landlock and
// seccomp. Compare with BenchmarkUnsandboxedTrue for the sandbox's cost per
// command:
//
//	go test -run '^$' -bench 'True$' -benchtime 300x -count 5 ./sandbox/
func BenchmarkCommandTrue(b *testing.B) {
	l := newLayout(b)
	s := l.spec(ModeWorkspaceWrite, l.work)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd, err := s.Command(context.Background(), "true")
		if err != nil {
			b.Fatal(err)
		}
		cmd.Dir = s.Cwd
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + os.Getenv("HOME")}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkUnsandboxedTrue is /bin/sh -c true without the sandbox.
func BenchmarkUnsandboxedTrue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if out, err := exec.Command("/bin/sh", "-c", "true").CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}
