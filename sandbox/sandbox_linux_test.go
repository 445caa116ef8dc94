package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// layout is a daemon-like home beside a workspace, under one temp root.
type layout struct {
	root, home, work, tmp string
}

func newLayout(t testing.TB) layout {
	t.Helper()
	root := t.TempDir()
	l := layout{root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work"), tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{l.home, l.work, l.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"state.db": "DB", "config.yaml": "approvals: {mode: manual}\n", "daemon.json": `{"token":"SECRET-TOKEN"}`} {
		if err := os.WriteFile(filepath.Join(l.home, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l layout) spec(mode Mode, cwd string) Spec {
	return Spec{Policy: Policy{Mode: mode}, Cwd: cwd, TempDir: l.tmp, Protected: []string{l.home},
		CoveredFiles: []string{"state.db", "state.db-wal", "state.db-shm", "config.yaml", "daemon.json", "daemon.lock"}}
}

// run runs command under s and returns its combined output and exit code.
func run(t *testing.T, s Spec, command string, extra ...*os.File) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := testCommand(ctx, s, command)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = s.Cwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + s.Cwd}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = extra
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		if ee.ExitCode() == ExitSetupFailed {
			t.Fatalf("sandbox setup failed: %s", out.String())
		}
		return out.String(), ee.ExitCode()
	default:
		t.Fatalf("run %q: %v", command, err)
		return "", -1
	}
}

func mustFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if string(b) != want {
		t.Fatalf("%s = %q, want %q", path, b, want)
	}
}

func TestProbe(t *testing.T) {
	if err := Probe(); err != nil {
		t.Fatalf("Probe: %v (CI runs on kernels with Landlock ABI >= %d)", err, MinLandlockABI)
	}
}

func TestWorkspaceWriteWritesOnlyInWritableLocations(t *testing.T) {
	l := newLayout(t)
	other := filepath.Join(l.root, "other")
	os.Mkdir(other, 0o700)
	s := l.spec(ModeWorkspaceWrite, l.work)
	if out, code := run(t, s, `echo a > in-cwd && mkdir -p sub && echo b > sub/f && mv sub/f g && echo c > "$TMPDIR/t" && echo x > /dev/null`); code != 0 {
		t.Fatalf("writes in the workspace failed (%d): %s", code, out)
	}
	mustFile(t, filepath.Join(l.work, "g"), "b\n")
	out, code := run(t, s, `echo x > "`+filepath.Join(other, "f")+`"`)
	if code == 0 {
		t.Fatalf("a write outside the workspace succeeded: %s", out)
	}
	if _, err := os.Stat(filepath.Join(other, "f")); err == nil {
		t.Fatal("file outside the workspace was created")
	}
	// A directory outside the writable locations is not in the view.
	if !strings.Contains(out, "nonexistent") {
		t.Errorf("output %q does not say the directory does not exist", out)
	}
}

func TestWritableRoots(t *testing.T) {
	l := newLayout(t)
	extra := filepath.Join(l.root, "cache")
	os.Mkdir(extra, 0o700)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Policy.WritableRoots = []string{extra, filepath.Join(l.root, "missing")}
	if out, code := run(t, s, `echo c > "`+extra+`/f"`); code != 0 {
		t.Fatalf("write in a writable root failed (%d): %s", code, out)
	}
	s.Policy.Mode = ModeReadOnly
	if out, code := run(t, s, `echo c > "`+extra+`/g"`); code == 0 {
		t.Fatalf("read-only mode wrote in a writable root: %s", out)
	}
}

func TestReadOnlyWritesOnlyTempDir(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeReadOnly, l.work)
	if out, code := run(t, s, `cat /etc/os-release >/dev/null && echo t > "$TMPDIR/t"`); code != 0 {
		t.Fatalf("read or temp write failed (%d): %s", code, out)
	}
	if out, code := run(t, s, `echo x > f`); code == 0 {
		t.Fatalf("write in cwd succeeded in read-only mode: %s", out)
	}
}

// The home must be out of reach from a cwd beside it, from a cwd that is
// the home, from one beneath it and from one that contains it.
func TestHomeOutOfReach(t *testing.T) {
	l := newLayout(t)
	inner := filepath.Join(l.home, "work")
	os.Mkdir(inner, 0o700)
	outerHome := filepath.Join(l.work, "nested", ".home")
	os.MkdirAll(outerHome, 0o700)
	os.WriteFile(filepath.Join(outerHome, "config.yaml"), []byte("c\n"), 0o600)
	attacks := func(home string) []string {
		h := `"` + home + `"`
		return []string{
			"echo 'approvals: {mode: off}' >> " + h + "/config.yaml",
			"rm " + h + "/daemon.json",
			"echo x > " + h + "/state.db",
			"mv " + h + "/config.yaml " + h + "/c2",
			"touch " + h + "/new",
			"grep -q SECRET-TOKEN " + h + "/daemon.json",
			"grep -q DB " + h + "/state.db",
		}
	}
	cases := []struct {
		name, cwd, home string
		extra           []string
	}{
		{"beside", l.work, l.home, nil},
		{"cwd is home", l.home, l.home, nil},
		{"cwd in home", inner, l.home, []string{`echo ok > "` + inner + `/allowed"`}},
		{"home in cwd", l.work, outerHome, []string{"mv nested nested2", "rm -rf nested"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := l.spec(ModeWorkspaceWrite, c.cwd)
			s.Protected = []string{c.home}
			for _, a := range append(attacks(c.home), c.extra...) {
				out, code := run(t, s, a)
				if strings.HasPrefix(a, "echo ok") {
					if code != 0 {
						t.Errorf("%q: a write in the cwd beneath the home failed: %s", a, out)
					}
					continue
				}
				if code == 0 {
					t.Errorf("%q succeeded: %s", a, out)
				}
			}
		})
	}
	mustFile(t, filepath.Join(l.home, "config.yaml"), "approvals: {mode: manual}\n")
	mustFile(t, filepath.Join(l.home, "daemon.json"), `{"token":"SECRET-TOKEN"}`)
	mustFile(t, filepath.Join(l.home, "state.db"), "DB")
	mustFile(t, filepath.Join(outerHome, "config.yaml"), "c\n")
	if _, err := os.Stat(filepath.Join(l.home, "new")); err == nil {
		t.Error("a file was created in the home")
	}
}

func TestNetworkOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	l := newLayout(t)
	connect := fmt.Sprintf(`python3 -c 'import socket; s=socket.create_connection(("127.0.0.1", %d), timeout=5); print(s.recv(6))'`, port)
	udp := `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'`
	unix := `python3 -c 'import socket; a,b=socket.socketpair(); s=socket.socket(socket.AF_UNIX); print("unix ok")'`
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, c := range []string{connect, udp} {
		if out, code := run(t, s, c); code == 0 {
			t.Errorf("%s succeeded with the network off: %s", c, out)
		}
	}
	if out, code := run(t, s, unix); code != 0 {
		t.Errorf("Unix sockets refused: %s", out)
	}
	s.Policy.Network = true
	if out, code := run(t, s, connect); code != 0 || !strings.Contains(out, "hello") {
		t.Errorf("connect with the network on failed (%d): %s", code, out)
	}
}

func TestSignalsStayInside(t *testing.T) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, sig := range []string{"-9", "-STOP"} {
		if out, code := run(t, s, fmt.Sprintf("kill %s %d", sig, victim.Process.Pid)); code == 0 {
			t.Errorf("kill %s of an outside process succeeded: %s", sig, out)
		}
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("victim gone: %v", err)
	}
	if out, code := run(t, s, "sleep 30 & kill -9 $! && wait"); code == 0 || strings.Contains(out, "not permitted") {
		// kill of its own child must work; wait then reports 137
	}
	if out, code := run(t, s, "sleep 30 & kill $!; wait $!; echo rc=$?"); code != 0 || !strings.Contains(out, "rc=143") {
		t.Errorf("a command could not signal its own child (%d): %s", code, out)
	}
}

// A non-dumpable process's environment (the daemon's) stays unreadable:
// as root only the dropped capabilities stand in the way.
func TestEnvironOfNonDumpableProcessUnreadable(t *testing.T) {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		t.Fatal(e)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0)
	os.Setenv("SANDBOX_TEST_SECRET", "s3cr3t-value")
	defer os.Unsetenv("SANDBOX_TEST_SECRET")
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, _ := run(t, s, fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ; tr '\\0' '\\n' < /proc/$PPID/environ; grep Cap /proc/self/status", os.Getpid()))
	if strings.Contains(out, "s3cr3t-value") {
		t.Fatalf("the environment of a non-dumpable process was read: %s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Cap") && !strings.HasSuffix(line, "0000000000000000") {
			t.Errorf("capability left: %s", line)
		}
	}
}

func TestInheritedDescriptorsClosed(t *testing.T) {
	l := newLayout(t)
	path := filepath.Join(l.root, "outside")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_WRONLY, 0o600) // no O_CLOEXEC, as a careless parent leaves it
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, fmt.Sprintf("echo leaked >&%d", fd))
	if code == 0 {
		t.Errorf("wrote through inherited descriptor %d: %s", fd, out)
	}
	mustFile(t, path, "")
}

func TestGateEOFRunsNothing(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Gate = true
	r, w, _ := os.Pipe()
	w.Close()
	defer r.Close()
	ctx := context.Background()
	cmd, _ := testCommand(ctx, s, "touch ran")
	cmd.Dir = l.work
	cmd.ExtraFiles = []*os.File{r}
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitGateClosed {
		t.Fatalf("err = %v, want exit %d", err, ExitGateClosed)
	}
	if _, err := os.Stat(filepath.Join(l.work, "ran")); err == nil {
		t.Fatal("the command ran although the gate closed")
	}
}

// The helper is this running image, not a path: the command's program is
// /proc/self/exe, and the running binary cannot be rewritten in place
// (ETXTBSY), so neither a rename over its path nor a write into it changes
// what the next command starts as the helper.
func TestHelperIsTheRunningImage(t *testing.T) {
	l := newLayout(t)
	cmd, err := l.spec(ModeWorkspaceWrite, l.work).Command(context.Background(), "true")
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/proc/self/exe" {
		t.Fatalf("helper started as %q, want /proc/self/exe", cmd.Path)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(exe, os.O_WRONLY, 0)
	if err == nil {
		f.Close()
		t.Fatal("the running executable opened for writing")
	}
	if !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("open for writing: %v, want ETXTBSY", err)
	}
}

// needRoot skips a root-only test on a developer's run as another user;
// under CI (CI set: it runs as root) it fails instead, since a skip there
// would hide the missing capability.
func needRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: needs root, and CI runs as root", why)
	}
	t.Skipf("%s: needs root (CI runs it)", why)
}
