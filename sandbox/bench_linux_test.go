package sandbox

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkCommandTrue measures one sandboxed "true": the helper's exec
// (one as root, two not root), the namespaces, the view, Landlock,
// seccomp, the shell's fork and exec and the namespace's end. Compare with BenchmarkUnsandboxedTrue for the sandbox's cost per
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
