package tools

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/sandbox"
)

func TestAllowedEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "OPENAI_API_KEY=sk-1",
		"DATABASE_URL=postgres://u:p@h/db", "GITHUB_PAT=ghp_x", "AWS_SECRET_ACCESS_KEY=a", "FOO=bar", "GOPATH=/go",
		"TZ=UTC", MarkerEnv + "=m", "HTTP_PROXY=http://u:pw@proxy:8080"}
	got := AllowedEnv(environ, []string{"GOPATH", "GITHUB_*"}, DefaultEnvExclude)
	want := []string{"PATH=/bin", "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "GITHUB_PAT=ghp_x", "GOPATH=/go", "TZ=UTC"}
	if !slices.Equal(got, want) {
		t.Fatalf("AllowedEnv = %q, want %q", got, want)
	}
	if got := AllowedEnv(environ, nil, nil); slices.ContainsFunc(got, func(kv string) bool {
		return strings.Contains(kv, "KEY") || strings.Contains(kv, "DATABASE") || strings.Contains(kv, "FOO")
	}) {
		t.Fatalf("without passthrough, %q leaks", got)
	}
}

func TestParseTerminalArgsSandbox(t *testing.T) {
	for _, c := range []struct {
		raw, err string
	}{
		{`{"command":"ls","sandbox_permissions":"escalated","justification":"needs network"}`, ""},
		{`{"command":"ls","sandbox_permissions":"escalated"}`, "needs a justification"},
		{`{"command":"ls","sandbox_permissions":"escalated","justification":"  "}`, "needs a justification"},
		{`{"command":"ls","sandbox_permissions":"root"}`, `sandbox_permissions: value must be 'escalated'`},
		{`{"command":"ls","justification":"why"}`, "only for sandbox_permissions"},
	} {
		_, err := ParseTerminalArgs([]byte(c.raw))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.raw, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrInvalidTerminalArgs)):
			t.Errorf("%s: err = %v, want %q", c.raw, err, c.err)
		}
	}
}

// A sandboxed RunTerminal: gate, private TMPDIR (removed afterwards),
// writes outside refused and reported as blocked with the escalation note.
func TestRunTerminalSandboxed(t *testing.T) {
	root := t.TempDir()
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	os.Mkdir(home, 0o700)
	os.Mkdir(work, 0o700)
	os.WriteFile(filepath.Join(home, "config.yaml"), []byte("x\n"), 0o600)
	spec := SandboxSpec(sandbox.DefaultPolicy(), home, nil)
	started := false
	res, err := RunTerminal(context.Background(), `echo "$TMPDIR" > tmpdir && echo hi > "$TMPDIR/t" && cat "$TMPDIR/t" && echo ok > here`,
		TerminalOptions{Cwd: work, Sandbox: spec, OnStart: func(int) error { started = true; return nil }})
	if err != nil || res.ExitCode != 0 || !started {
		t.Fatalf("res = %+v, err = %v, started %v", res, err, started)
	}
	if res.Sandbox != "workspace-write, network off" || res.SandboxBlocked {
		t.Errorf("res.Sandbox = %q, blocked %v", res.Sandbox, res.SandboxBlocked)
	}
	b, _ := os.ReadFile(filepath.Join(work, "tmpdir"))
	tmp := strings.TrimSpace(string(b))
	if tmp == "" || strings.HasPrefix(tmp, work) {
		t.Fatalf("TMPDIR = %q", tmp)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the private temp directory %s was not removed: %v", tmp, err)
	}
	res, err = RunTerminal(context.Background(), "echo 'approvals: {mode: off}' >> "+filepath.Join(home, "config.yaml"), TerminalOptions{Cwd: work, Sandbox: spec})
	if err != nil || res.ExitCode == 0 || !res.SandboxBlocked || !strings.Contains(res.Note, `"sandbox_permissions": "escalated"`) {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "config.yaml")); string(b) != "x\n" {
		t.Fatalf("config.yaml changed: %q", b)
	}
	// Mode off (or no spec) runs unconfined.
	res, err = RunTerminal(context.Background(), "echo y >> "+filepath.Join(home, "config.yaml"), TerminalOptions{Cwd: work, Sandbox: SandboxSpec(sandbox.Policy{Mode: sandbox.ModeOff}, home, nil)})
	if err != nil || res.ExitCode != 0 || res.Sandbox != "" {
		t.Fatalf("mode off: res = %+v, err = %v", res, err)
	}
}

// BenchmarkRunTerminal: one `true` command, unsandboxed and sandboxed
// (helper exec, mount namespace, Landlock, seccomp, private TMPDIR).
//
//	go test -run '^$' -bench BenchmarkRunTerminal -benchtime 200x ./tools/
func BenchmarkRunTerminal(b *testing.B) {
	root := b.TempDir()
	home := filepath.Join(root, "home")
	os.Mkdir(home, 0o700)
	for _, c := range []struct {
		name string
		spec *sandbox.Spec
	}{{"unsandboxed", nil}, {"sandboxed", SandboxSpec(sandbox.DefaultPolicy(), home, nil)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := RunTerminal(context.Background(), "true", TerminalOptions{Cwd: root, Sandbox: c.spec, OnStart: func(int) error { return nil }})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// Another daemon's home, registered and lying in the cwd, is out of reach
// like this daemon's own: its state.db cannot be changed or read.
func TestRunTerminalProtectsRegisteredHomes(t *testing.T) {
	root := t.TempDir()
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	other := filepath.Join(work, "repo", ".home")
	os.Mkdir(home, 0o700)
	os.MkdirAll(other, 0o700)
	os.WriteFile(filepath.Join(other, "state.db"), []byte("DB"), 0o600)
	if err := sandbox.RegisterHome(other); err != nil {
		t.Fatal(err)
	}
	spec := SandboxSpec(sandbox.DefaultPolicy(), home, nil)
	res, err := RunTerminal(context.Background(), "cat repo/.home/state.db; echo x >> repo/.home/state.db; echo ok > repo/fine",
		TerminalOptions{Cwd: work, Sandbox: spec})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "state.db")); string(b) != "DB" || strings.Contains(res.Output, "DB") {
		t.Fatalf("another daemon's state.db was reached: now %q; output %q", b, res.Output)
	}
	if _, err := os.Stat(filepath.Join(work, "repo", "fine")); err != nil {
		t.Fatalf("the rest of the cwd is not writable: %v (%s)", err, res.Output)
	}
}

// The store's PostgreSQL unix socket is out of a sandboxed command's
// reach, in a directory of its own and inside the command's writable cwd:
// a command that could connect to the daemon's database could approve its
// own commands. Without the socket in the spec the same command connects.
func TestRunTerminalProtectsStoreSocket(t *testing.T) {
	root := t.TempDir()
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	os.Mkdir(home, 0o700)
	os.Mkdir(work, 0o700)
	for _, dir := range []string{filepath.Join(root, "pgsock"), filepath.Join(work, "pgsock")} {
		os.Mkdir(dir, 0o755)
		sock := filepath.Join(dir, ".s.PGSQL.5432")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		connect := `python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' ` + sock
		res, err := RunTerminal(context.Background(), connect, TerminalOptions{Cwd: work, Sandbox: SandboxSpec(sandbox.DefaultPolicy(), home, nil)})
		if !sandbox.Within(dir, work) {
			// Outside every location of the view, it is not there at all.
			if err != nil || strings.Contains(res.Output, "CONNECTED") || res.ExitCode == 0 {
				t.Fatalf("%s: a sandboxed command connected to a socket outside its view: %+v %v", dir, res, err)
			}
			continue
		}
		if err != nil || !strings.Contains(res.Output, "CONNECTED") {
			t.Fatalf("%s: without the socket in the spec the command should connect (else this test proves nothing): %+v %v", dir, res, err)
		}
		res, err = RunTerminal(context.Background(), connect, TerminalOptions{Cwd: work, Sandbox: SandboxSpec(sandbox.DefaultPolicy(), home, nil, sock)})
		if err != nil || strings.Contains(res.Output, "CONNECTED") || res.ExitCode == 0 {
			t.Fatalf("%s: a sandboxed command connected to the store's socket: %+v %v", dir, res, err)
		}
	}
}
