package journeys

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// ctlResult is one finished sessionctl run.
type ctlResult struct {
	code           int
	stdout, stderr string
}

func (r ctlResult) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// ctlEnv is the environment sessionctl runs with in the journeys: the
// test's minus SESSIOND_* (every run names --home), a private HOME, and
// the race detector set to stop at the first race.
func ctlEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SESSIOND_") || k == "HOME" || k == "XDG_STATE_HOME" || k == "GORACE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+t.TempDir(), "GORACE=halt_on_error=1 atexit_sleep_ms=0")
}

// ctl runs "sessionctl --home HOME ARGS..." to completion (at most the
// journey deadline) with stdin, and fails the test on a panic or a data
// race in its stderr.
func ctl(t *testing.T, home, stdin string, args ...string) ctlResult {
	t.Helper()
	return ctlCtx(t, context.Background(), home, stdin, args...)
}

func ctlCtx(t *testing.T, ctx context.Context, home, stdin string, args ...string) ctlResult {
	t.Helper()
	bin := fixtures.BuildBinary(t, "./cmd/sessionctl")
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--home", home}, args...)...)
	cmd.Env = ctlEnv(t)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ctlResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("sessionctl %v did not finish within %v; %s", args, wait, r)
	}
	if err != nil && r.code < 0 {
		t.Fatalf("sessionctl %v: %v; %s", args, err, r)
	}
	if strings.Contains(r.stderr, "DATA RACE") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("sessionctl %v crashed or raced:\n%s", args, r.stderr)
	}
	return r
}

// ctlWant asserts the exit code, and that a failure is explained in
// exactly one "sessionctl: ..." line on stderr containing every want, or
// that a success printed every want on stdout.
func ctlWant(t *testing.T, r ctlResult, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; %s", r.code, code, r)
	}
	if code != 0 {
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "sessionctl: ") {
			t.Fatalf("the error is not one \"sessionctl: \" line; %s", r)
		}
		for _, w := range want {
			if !strings.Contains(last, w) {
				t.Fatalf("the error line %q does not mention %q; %s", last, w, r)
			}
		}
		return
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("stdout does not mention %q; %s", w, r)
		}
	}
}

// tmuxPane is one tmux session on a private server (its own socket and no
// user config) running a command in a 120x40 pane that stays around after
// the command exits, so its last screen and exit status can be read.
type ctlTmuxPane struct {
	t      *testing.T
	tmux   string
	sock   string
	status string // file the wrapper shell writes the command's exit status to
}

// startTmux runs argv in a fresh detached tmux session. A missing tmux
// fails the test: .ci/run installs it.
func ctlStartTmux(t *testing.T, env []string, argv ...string) *ctlTmuxPane {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is required for the attach journey (.ci/run installs it; apt-get install tmux): %v", err)
	}
	dir, err := os.MkdirTemp("", "ctl-tmux-") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g history-limit 10000\nset -g status off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &ctlTmuxPane{t: t, tmux: bin, sock: filepath.Join(dir, "s"), status: filepath.Join(dir, "status")}
	// A shell waits for the command and records its exit status: tmux
	// 3.3 sometimes leaves an exited pane process unreaped (a zombie),
	// and then never reports the pane dead.
	full := append([]string{"env"}, env...)
	full = append(full, "sh", "-c", `"$@"; echo "$?" > "$STATUS_FILE"`, "sh")
	full = append(full, argv...)
	args := append([]string{"-S", p.sock, "-f", conf, "new-session", "-d", "-s", "ctl", "-x", "120", "-y", "40", "-e", "STATUS_FILE=" + p.status, "--"}, full...)
	newSession := exec.Command(bin, args...)
	for _, kv := range os.Environ() { // not nested in a tmux the tests may run in
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			newSession.Env = append(newSession.Env, kv)
		}
	}
	if out, err := newSession.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", p.capture())
		}
		exec.Command(bin, "-S", p.sock, "kill-server").Run()
	})
	return p
}

func (p *ctlTmuxPane) run(args ...string) string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, append([]string{"-S", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// capture returns the pane's text, scrollback included, wrapped lines
// joined.
func (p *ctlTmuxPane) capture() string {
	out, _ := exec.Command(p.tmux, "-S", p.sock, "capture-pane", "-p", "-J", "-S", "-", "-t", "ctl").CombinedOutput()
	return string(out)
}

// screen returns only the visible 40 lines.
func (p *ctlTmuxPane) screen() string {
	return p.run("capture-pane", "-p", "-J", "-t", "ctl")
}

// typeText types text literally; key names (Enter, C-c) go through keys.
func (p *ctlTmuxPane) typeText(text string) { p.run("send-keys", "-t", "ctl", "-l", text) }
func (p *ctlTmuxPane) keys(keys ...string) {
	p.run(append([]string{"send-keys", "-t", "ctl"}, keys...)...)
}

// waitFor polls the pane until cond holds for its text, and fails with
// the screen when the journey deadline passes.
func (p *ctlTmuxPane) waitFor(what string, cond func(text string) bool) string {
	p.t.Helper()
	var text string
	if !fixtures.Poll(wait, func() bool { text = p.capture(); return cond(text) }) {
		p.t.Fatalf("timed out after %v waiting for the screen to show %s; screen:\n%s", wait, what, text)
	}
	return text
}

// waitText waits until the pane shows every one of texts.
func (p *ctlTmuxPane) waitText(texts ...string) string {
	p.t.Helper()
	return p.waitFor(strings.Join(texts, " + "), func(s string) bool {
		for _, x := range texts {
			if !strings.Contains(s, x) {
				return false
			}
		}
		return true
	})
}

// waitScreen waits until the visible screen (not the scrollback) shows
// text.
func (p *ctlTmuxPane) waitScreen(text string) {
	p.t.Helper()
	var screen string
	if !fixtures.Poll(wait, func() bool { screen = p.screen(); return strings.Contains(screen, text) }) {
		p.t.Fatalf("timed out after %v waiting for the visible screen to show %q; screen:\n%s", wait, text, screen)
	}
}

// exited waits for the pane's command to exit and returns its status.
func (p *ctlTmuxPane) exited() int {
	p.t.Helper()
	code := -1
	p.waitFor("the attach process to exit", func(string) bool {
		b, err := os.ReadFile(p.status)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		code, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return code
}

// ctlProc is a sessionctl running in the background.
type ctlProc struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

// ctlStart starts "sessionctl --home HOME ARGS..." without waiting; it is
// killed at cleanup if still running.
func ctlStart(t *testing.T, home string, args ...string) *ctlProc {
	t.Helper()
	p := &ctlProc{done: make(chan struct{})}
	p.cmd = exec.Command(fixtures.BuildBinary(t, "./cmd/sessionctl"), append([]string{"--home", home}, args...)...)
	p.cmd.Env = ctlEnv(t)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits (at most the journey deadline) for the process to exit.
func (p *ctlProc) wait(t *testing.T) ctlResult {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Fatalf("sessionctl %v did not exit within %v; stderr so far:\n%s", p.cmd.Args, wait, p.err.String())
	}
	r := ctlResult{code: p.cmd.ProcessState.ExitCode(), stdout: p.out.String(), stderr: p.err.String()}
	if strings.Contains(r.stderr, "DATA RACE") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("sessionctl %v crashed or raced:\n%s", p.cmd.Args, r.stderr)
	}
	return r
}

// ctlQuote shell-quotes s as sessionctl's hints do: as is when it holds
// only [A-Za-z0-9/._-+,:@%=], else in single quotes.
func ctlQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ctlCmd is the command line a sessionctl hint prints for args, as ctl
// runs it: the binary by its path, with --home home.
func ctlCmd(t *testing.T, home string, args ...string) string {
	t.Helper()
	bin := fixtures.BuildBinary(t, "./cmd/sessionctl")
	return strings.Join(append([]string{ctlQuote(bin), "--home", ctlQuote(home)}, args...), " ")
}
