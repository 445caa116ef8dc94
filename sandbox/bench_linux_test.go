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
		a, u := ms(time.Since(t0)), ms(plainTrue(b, s.Cwd, env))
		on, off, diff = append(on, a), append(off, u), append(diff, a-u)
	}
	b.StopTimer()
	reportCost(b, on, off, diff)
}

// plainTrue runs /bin/sh -c true unsandboxed in dir with env and returns
// how long it took.
func plainTrue(b *testing.B, dir string, env []string) time.Duration {
	t0 := time.Now()
	plain := exec.Command("/bin/sh", "-c", "true")
	plain.Dir, plain.Env = dir, env
	if out, err := plain.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	return time.Since(t0)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reportCost reports the medians of the sandboxed and unsandboxed runs and
// of their pairwise differences (the sandbox's cost per command), in ms.
func reportCost(b *testing.B, on, off, diff []float64) {
	med := func(x []float64) float64 { sort.Float64s(x); return x[len(x)/2] }
	b.ReportMetric(med(on), "sandboxed-p50-ms")
	b.ReportMetric(med(off), "unsandboxed-p50-ms")
	b.ReportMetric(med(diff), "cost-p50-ms")
}

// prestartGap is the time a pre-started helper has between the dispatch
// of one command and the next in BenchmarkSessiondHelperPrestartedTrue.
// In a session two commands are at least one model reply apart (a
// request over the network, or a local model's generation: tens of
// milliseconds to seconds); the helper needs one exec of the image
// (2.3–2.7 ms here).
const prestartGap = 20 * time.Millisecond

// BenchmarkSessiondHelperPrestartedTrue measures the sandbox's cost per
// command as a session's user sees it once its helpers are pre-started
// (tools.Prestarts): the helper is the sessiond binary, pre-started as
// the daemon does once the previous command ended, and given
// prestartGap before its own command comes. Timed: the dispatch of
// "true" (its Spec, command and environment on fd 3) until the helper's
// exit status is read — the mount namespace, the view, Landlock,
// seccomp, the shell's fork and exec, the PID namespace's end; then an
// unsandboxed /bin/sh -c true, the same way. cost-p50-ms is the median
// of the per-iteration differences. The cold path (a session's first command,
// or one after the idle timeout) is BenchmarkSessiondHelperTrue:
//
//	go test -run '^$' -bench 'SessiondHelper' -benchtime 300x ./sandbox/
func BenchmarkSessiondHelperPrestartedTrue(b *testing.B) {
	sessiond := fixtures.BuildBinaries(b)
	l := newLayout(b)
	s := l.spec(ModeWorkspaceWrite, l.work)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + os.Getenv("HOME")}
	type started struct {
		p   *Prestarted
		err error
	}
	next := make(chan started, 1)
	pre := func() { p, err := prestart(sessiond, s.Cwd, true); next <- started{p, err} }
	pre()
	var on, off, diff []float64
	buf := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(prestartGap)
		st := <-next
		if st.err != nil {
			b.Fatal(st.err)
		}
		p := st.p
		b.StartTimer()
		t0 := time.Now()
		if err := p.Dispatch(Dispatch{Spec: s, Command: "true", Env: env}); err != nil {
			b.Fatal(err)
		}
		n, _ := p.Output.Read(buf) // EOF once the helper and the shell exited
		err := p.Cmd.Wait()
		t1 := time.Now()
		p.Output.Close()
		p.Release()
		if i+1 < b.N {
			go pre()
		}
		if err != nil || n > 0 {
			b.Fatalf("%v: %s", err, buf[:n])
		}
		b.StopTimer()
		time.Sleep(prestartGap)
		b.StartTimer()
		a, u := ms(t1.Sub(t0)), ms(plainTrue(b, s.Cwd, env))
		on, off, diff = append(on, a), append(off, u), append(diff, a-u)
	}
	b.StopTimer()
	reportCost(b, on, off, diff)
}
