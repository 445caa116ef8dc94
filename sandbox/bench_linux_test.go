package sandbox

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
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

// BenchmarkSessiondHelperTrue measures the sandbox's cost per command as
// the daemon pays it: the helper is the sessiond binary (built by
// fixtures), started exactly as Spec.Command starts it, rather than this
// test binary, whose image and package inits are heavier. Each iteration
// runs a sandboxed "true" and an unsandboxed /bin/sh -c true back to back;
// cost-p50-ms is the median of the per-iteration differences, which the
// noise of a shared machine moves less than either figure:
//
//	go test -run '^$' -bench SessiondHelperTrue -benchtime 300x ./sandbox/
func BenchmarkSessiondHelperTrue(b *testing.B) {
	sessiond := fixtures.BuildBinaries(b)
	l := newLayout(b)
	s := l.spec(ModeWorkspaceWrite, l.work)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + os.Getenv("HOME")}
	var on, off, diff []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd, err := s.Command(context.Background(), "true")
		if err != nil {
			b.Fatal(err)
		}
		cmd.Path, cmd.Args[0] = sessiond, sessiond
		cmd.Dir, cmd.Env = s.Cwd, env
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		t1 := time.Now()
		plain := exec.Command("/bin/sh", "-c", "true")
		plain.Dir, plain.Env = s.Cwd, env
		if out, err := plain.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		t2 := time.Now()
		a, u := float64(t1.Sub(t0).Microseconds())/1000, float64(t2.Sub(t1).Microseconds())/1000
		on, off, diff = append(on, a), append(off, u), append(diff, a-u)
	}
	b.StopTimer()
	med := func(x []float64) float64 { sort.Float64s(x); return x[len(x)/2] }
	b.ReportMetric(med(on), "sandboxed-p50-ms")
	b.ReportMetric(med(off), "unsandboxed-p50-ms")
	b.ReportMetric(med(diff), "cost-p50-ms")
}
