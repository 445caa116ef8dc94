package sandbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runPrestarted pre-starts a helper in s.Cwd, runs between (the window
// between the pre-start and the dispatch, while the helper waits), then
// dispatches command under s and returns its output and exit status.
func runPrestarted(t *testing.T, s Spec, command string, between func(p *Prestarted)) (string, int) {
	t.Helper()
	p, err := Prestart(s.Cwd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if between != nil {
		between(p)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, p.Output); close(done) }()
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + s.Cwd}
	derr := p.Dispatch(Dispatch{Spec: s, Command: command, Env: env})
	err = p.Cmd.Wait()
	<-done
	p.Output.Close()
	if derr != nil {
		return derr.Error(), -1
	}
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

// viewProbe prints what a command can tell about its sandbox: its view
// (every mount, with options, of its mount namespace), its processes,
// capabilities, no_new_privs, seccomp, IPC objects, oom_score_adj,
// environment and identity, and what it can reach of the daemon's home.
const viewProbe = `cut -d' ' -f4- /proc/self/mountinfo; ls -a / /tmp "$TMPDIR"; ps -e -o comm=; ` +
	`grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; ipcs 2>&1; cat /proc/self/oom_score_adj; env | sort; id; ` +
	`ls -a "$PROTECTED" 2>&1; cat "$PROTECTED/daemon.json" 2>&1; echo x > "$PROTECTED/new" 2>&1; ` +
	`kill -0 "$DAEMON" 2>&1; echo written > here; cat here`

// A pre-started helper gives its command exactly the sandbox a cold one
// gives: the same view (mount by mount, with their options), processes,
// capabilities, seccomp, IPC namespace, oom_score_adj, environment, and
// the daemon's home out of reach.
func TestPrestartedSameSandboxAsCold(t *testing.T) {
	l := newLayout(t)
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeReadOnly} {
		s := l.spec(mode, l.work)
		s.Home = l.root
		cmd := strings.NewReplacer("$PROTECTED", l.home, "$DAEMON", strconv.Itoa(os.Getpid())).Replace(viewProbe)
		cold, coldCode := run(t, s, cmd)
		os.Remove(filepath.Join(l.work, "here"))
		pre, preCode := runPrestarted(t, s, cmd, nil)
		os.Remove(filepath.Join(l.work, "here"))
		if testing.Verbose() {
			t.Logf("%s", pre)
		}
		if cold != pre || coldCode != preCode {
			t.Errorf("%s: a pre-started helper's command sees another sandbox than a cold one's:\ncold (%d):\n%s\npre-started (%d):\n%s", mode, coldCode, cold, preCode, pre)
		}
		for _, leak := range []string{"SECRET-TOKEN", "state.db"} {
			if strings.Contains(pre, leak) {
				t.Errorf("%s: the pre-started command reached %s:\n%s", mode, leak, pre)
			}
		}
	}
}

// The view is built from the mounts as they are at dispatch, not at the
// pre-start: a file system unmounted while the helper waited is not in
// the command's view, and one mounted meanwhile is (its mount namespace
// is made at dispatch; a copy made at the pre-start would keep the
// unmounted one alive for the command).
func TestPrestartedViewHasMountsOfDispatch(t *testing.T) {
	needRoot(t, "mounting")
	l := newLayout(t)
	gone, come := filepath.Join(l.work, "gone"), filepath.Join(l.work, "come")
	for _, d := range []string{gone, come} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", gone, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(gone, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(gone, "unmounted-secret"), []byte("S"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := runPrestarted(t, s, `ls gone come`, func(*Prestarted) {
		if err := unix.Unmount(gone, 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", come, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(come, "mounted-meanwhile"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	defer unix.Unmount(come, unix.MNT_DETACH)
	if code != 0 || strings.Contains(out, "unmounted-secret") || !strings.Contains(out, "mounted-meanwhile") {
		t.Fatalf("the view is not the file system's at dispatch (exit %d):\n%s", code, out)
	}
}

// A pre-started helper whose dispatch never comes runs nothing: Discard
// (the daemon's idle timeout or stop) ends it with its process group.
func TestPrestartedDiscardRunsNothing(t *testing.T) {
	l := newLayout(t)
	p, err := Prestart(l.work)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Waiting() {
		t.Fatal("a fresh pre-started helper does not wait")
	}
	pid := p.Cmd.Process.Pid
	p.Discard()
	if p.Cmd.ProcessState == nil {
		t.Fatal("not reaped")
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("its process group lives on: %v", err)
	}
	// EOF on the dispatch pipe alone (a daemon that closed it) is
	// ExitGateClosed, nothing run.
	p, err = Prestart(l.work)
	if err != nil {
		t.Fatal(err)
	}
	p.line.Close()
	err = p.Cmd.Wait()
	p.Output.Close()
	p.Release()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitGateClosed {
		t.Fatalf("EOF on fd 3: %v, want exit %d", err, ExitGateClosed)
	}
}

// A helper killed while it waits is seen as not waiting, and its dispatch
// fails: the command does not run.
func TestPrestartedKilledWhileWaiting(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := runPrestarted(t, s, `echo ran > ran`, func(p *Prestarted) {
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		deadline := time.Now().Add(10 * time.Second)
		for p.Waiting() {
			if time.Now().After(deadline) {
				t.Fatal("a killed helper still waits")
			}
			time.Sleep(time.Millisecond)
		}
	})
	if code != -1 || !strings.Contains(out, "gone") {
		t.Errorf("dispatch to a killed helper: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(l.work, "ran")); err == nil {
		t.Error("the command ran")
	}
}
