package tools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/sandbox"
)

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitingPid returns the pid of the helper pre-started for spec and cwd,
// once there is one.
func waitingPid(t *testing.T, ps *Prestarts, spec *sandbox.Spec, cwd string) int {
	t.Helper()
	key := prestartKey(spec, cwd)
	pid := 0
	waitFor(t, "a pre-started helper", func() bool {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		if w := ps.waiting[key]; w != nil {
			pid = w.p.Cmd.Process.Pid
		}
		return pid != 0
	})
	return pid
}

// mustBeRemoved fails t when the temp directory a command printed
// first is still there.
func mustBeRemoved(t *testing.T, output string) {
	t.Helper()
	tmp, _, _ := strings.Cut(output, "\n")
	if !strings.Contains(tmp, sandbox.TempDirPrefix) {
		t.Fatalf("no temp directory in %q", output)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the temp directory %s is left: %v", tmp, err)
	}
}

func prestartLayout(t *testing.T) (home, work string, spec *sandbox.Spec) {
	root := t.TempDir()
	home, work = filepath.Join(root, "home"), filepath.Join(root, "work")
	os.Mkdir(home, 0o700)
	os.Mkdir(work, 0o700)
	os.WriteFile(filepath.Join(home, "daemon.json"), []byte(`{"token":"SECRET-TOKEN"}`), 0o600)
	return home, work, SandboxSpec(sandbox.DefaultPolicy(), home, nil)
}

// The second command of a spec runs on the helper pre-started after the
// first started: same sandbox, a private TMPDIR of its own (removed), its
// marker, its own process group recorded by OnStart; Close leaves no
// helper, thread or temp directory behind.
func TestRunTerminalPrestarted(t *testing.T) {
	home, work, spec := prestartLayout(t)
	ps := NewPrestarts(time.Minute, 0)
	defer ps.Close()
	cmd := `echo "$TMPDIR"; echo "$` + MarkerEnv + `"; cat ` + home + `/daemon.json; echo x > here && echo wrote; ps -e -o comm=`
	first, err := RunTerminal(context.Background(), cmd, TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps})
	if err != nil || first.ExitCode != 0 {
		t.Fatalf("cold: %+v %v", first, err)
	}
	pid := waitingPid(t, ps, spec, work)
	var recorded int
	second, err := RunTerminal(context.Background(), cmd, TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps, Marker: "m2",
		OnStart: func(pgid int) error { recorded = pgid; return nil }})
	if err != nil || second.ExitCode != 0 {
		t.Fatalf("pre-started: %+v %v", second, err)
	}
	if recorded != pid {
		t.Fatalf("the command ran in group %d, not on the pre-started helper %d", recorded, pid)
	}
	f, s := strings.Split(first.Output, "\n"), strings.Split(second.Output, "\n")
	if f[0] == s[0] || !strings.HasPrefix(s[0], os.TempDir()) || s[1] != "m2" {
		t.Errorf("TMPDIR %q after %q, marker %q", s[0], f[0], s[1])
	}
	if strings.Join(f[2:], "\n") != strings.Join(s[2:], "\n") || strings.Contains(second.Output, "SECRET") || second.Sandbox != first.Sandbox {
		t.Errorf("cold:\n%s\npre-started:\n%s", first.Output, second.Output)
	}
	mustBeRemoved(t, first.Output)
	mustBeRemoved(t, second.Output)
	next := waitingPid(t, ps, spec, work)
	ps.Close()
	if err := syscall.Kill(next, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the helper pre-started after the second command outlives Close: %v", err)
	}
	if ps.Waiting() != 0 {
		t.Errorf("after Close: %d waiting", ps.Waiting())
	}
}

// A home registered after the helper was pre-started (another daemon
// started in this cwd meanwhile) is out of the command's reach: the
// registry is read at dispatch.
func TestRunTerminalPrestartedProtectsHomeRegisteredMeanwhile(t *testing.T) {
	_, work, spec := prestartLayout(t)
	ps := NewPrestarts(time.Minute, 0)
	defer ps.Close()
	if _, err := RunTerminal(context.Background(), "true", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps}); err != nil {
		t.Fatal(err)
	}
	pid := waitingPid(t, ps, spec, work)
	other := filepath.Join(work, "repo", ".home")
	os.MkdirAll(other, 0o700)
	os.WriteFile(filepath.Join(other, "state.db"), []byte("OTHER-DB"), 0o600)
	if err := sandbox.RegisterHome(other); err != nil {
		t.Fatal(err)
	}
	var recorded int
	res, err := RunTerminal(context.Background(), "cat repo/.home/state.db; echo x >> repo/.home/state.db",
		TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps, OnStart: func(pgid int) error { recorded = pgid; return nil }})
	if err != nil || recorded != pid {
		t.Fatalf("%v; ran in group %d, pre-started %d", err, recorded, pid)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "state.db")); string(b) != "OTHER-DB" || strings.Contains(res.Output, "OTHER-DB") {
		t.Fatalf("a home registered after the pre-start was reached: now %q; output %q", b, res.Output)
	}
}

// A pre-started helper killed while it waited (the OOM killer takes it
// first: oom_score_adj 1000) is discarded: the command runs cold.
func TestRunTerminalPrestartedKilledRunsCold(t *testing.T) {
	_, work, spec := prestartLayout(t)
	ps := NewPrestarts(time.Minute, 0)
	defer ps.Close()
	if _, err := RunTerminal(context.Background(), "true", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps}); err != nil {
		t.Fatal(err)
	}
	pid := waitingPid(t, ps, spec, work)
	syscall.Kill(-pid, syscall.SIGKILL)
	ps.mu.Lock()
	p := ps.waiting[prestartKey(spec, work)].p
	ps.mu.Unlock()
	waitFor(t, "the helper's death", func() bool { return !p.Waiting() })
	var recorded int
	res, err := RunTerminal(context.Background(), "echo ran", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps,
		OnStart: func(pgid int) error { recorded = pgid; return nil }})
	if err != nil || res.ExitCode != 0 || res.Output != "ran\n" || recorded == pid {
		t.Fatalf("after the helper was killed: %+v %v (group %d, killed %d)", res, err, recorded, pid)
	}
}

// Pre-started helpers not taken within the idle time are discarded; one
// whose OnStart fails runs nothing; the timeout kills a pre-started
// helper's command like a cold one's.
func TestRunTerminalPrestartedIdleOnStartTimeout(t *testing.T) {
	_, work, spec := prestartLayout(t)
	ps := NewPrestarts(100*time.Millisecond, 0)
	defer ps.Close()
	if _, err := RunTerminal(context.Background(), "true", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps}); err != nil {
		t.Fatal(err)
	}
	pid := waitingPid(t, ps, spec, work)
	waitFor(t, "the idle helper's end", func() bool { return ps.Waiting() == 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })

	ps = NewPrestarts(time.Minute, 0)
	defer ps.Close()
	RunTerminal(context.Background(), "true", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps})
	pid = waitingPid(t, ps, spec, work)
	_, err := RunTerminal(context.Background(), "echo ran > ran", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps,
		OnStart: func(int) error { return errors.New("journal down") }})
	if !errors.Is(err, ErrNotStarted) {
		t.Fatalf("OnStart failed: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "ran")); err == nil {
		t.Fatal("the command ran although OnStart failed")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("helper %d not reaped: %v", pid, err)
	}
	// Nothing was pre-started after the failed start: one cold command
	// pre-starts the helper the timed-out command runs on.
	RunTerminal(context.Background(), "true", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps})
	pid = waitingPid(t, ps, spec, work)
	var recorded int
	res, err := RunTerminal(context.Background(), `echo "$TMPDIR"; sleep 30`, TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps, Timeout: 300 * time.Millisecond,
		OnStart: func(pgid int) error { recorded = pgid; return nil }})
	if err != nil || !res.TimedOut || recorded != pid {
		t.Fatalf("timeout on a pre-started helper: %+v %v (group %d, pre-started %d)", res, err, recorded, pid)
	}
	mustBeRemoved(t, res.Output)
	ps.Close()
}

// A daemon running as root without CAP_SYS_CHROOT (a container that drops
// it) cannot pre-start: a pre-started helper leaves the daemon's mounts
// with chroot at dispatch, which would fail every such command. Its
// commands run cold, every one of them. The test runs itself again under
// setpriv with CAP_SYS_CHROOT out of the bounding and inheritable sets;
// not root, it first becomes root of a user namespace of its own, with a
// private /run (unshare --map-root-user --mount), where the helper takes
// the root path too.
func TestRunTerminalWithoutChrootCapabilityRunsCold(t *testing.T) {
	if os.Getenv("SESSIOND_TEST_NO_CHROOT_CHILD") == "" {
		util := func(name string) string { // util-linux
			path, err := exec.LookPath(name)
			if err != nil {
				t.Fatalf("%s (util-linux) is needed to drop CAP_SYS_CHROOT: %v", name, err)
			}
			return path
		}
		var argv []string
		if os.Geteuid() != 0 {
			// Its own /run too: the real /run/sessiond-0 is not this
			// namespace's root's, and the registry fails closed on it.
			argv = append(argv, util("unshare"), "--user", "--map-root-user", "--mount", "--",
				"/bin/sh", "-c", `mount -t tmpfs tmpfs /run && exec "$@"`, "sh")
		}
		argv = append(argv, util("setpriv"), "--bounding-set", "-sys_chroot", "--inh-caps", "-sys_chroot", "--")
		argv = append(argv, os.Args[0], "-test.run", "^TestRunTerminalWithoutChrootCapabilityRunsCold$", "-test.v", "-test.count", "1")
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "SESSIOND_TEST_NO_CHROOT_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("the run without CAP_SYS_CHROOT: %v\n%s", err, out)
		}
		return
	}
	if c, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_CHROOT, 0, 0, 0); err != nil || c != 0 {
		t.Fatalf("CAP_SYS_CHROOT is still in the bounding set (%d, %v)", c, err)
	}
	home, work, spec := prestartLayout(t)
	if err := sandbox.RegisterHome(home); err != nil { // as its daemon does at start
		t.Fatal(err)
	}
	ps := NewPrestarts(time.Minute, 0)
	defer ps.Close()
	for i := range 3 {
		res, err := RunTerminal(context.Background(), "echo ran-$(( 40 + 2 ))", TerminalOptions{Cwd: work, Sandbox: spec, Prestarts: ps})
		if err != nil || res.ExitCode != 0 || res.Output != "ran-42\n" {
			t.Fatalf("command %d: %+v %v", i, res, err)
		}
		// Nothing is pre-started for the next one.
		waitFor(t, "no pre-start in flight", func() bool {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			return len(ps.starting) == 0
		})
		if n := ps.Waiting(); n != 0 {
			t.Fatalf("after command %d: %d helpers pre-started", i, n)
		}
	}
}
