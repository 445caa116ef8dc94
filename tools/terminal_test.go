package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/fixtures"
)

// groupAlive reports whether process group pgid has a live (non-zombie)
// member. kill(-pgid, 0) failing with ESRCH means the group is gone; when
// it succeeds, the members may only be zombies waiting for an init that
// does not reap them (as in some containers), so /proc is checked.
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ..."; comm may contain spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 {
			continue
		}
		if f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// waitGroupGone polls until process group pgid has no live member.
func waitGroupGone(t *testing.T, pgid int, within time.Duration) {
	t.Helper()
	fixtures.Eventually(t, within, fmt.Sprintf("process group %d to have no live process", pgid), func() bool { return !groupAlive(t, pgid) })
}

func run(t *testing.T, command string, opt TerminalOptions) TerminalResult {
	t.Helper()
	res, err := RunTerminal(context.Background(), command, opt)
	if err != nil {
		t.Fatalf("RunTerminal(%q): %v", command, err)
	}
	return res
}

// The required scenario: a background writer holding a FIFO open and a
// reader blocked on it. The timeout must kill the whole group, return, and
// leave nothing alive.
func TestTerminalTimeoutKillsGroupWithFIFO(t *testing.T) {
	t.Parallel()
	var pgid int
	opt := TerminalOptions{Cwd: t.TempDir(), Timeout: 5 * time.Second, OnStart: func(p int) error { pgid = p; return nil }}
	start := time.Now()
	res := run(t, `mkfifo p; (while true; do echo child; sleep 1; done) > p & cat p`, opt)
	elapsed := time.Since(start)
	if !res.TimedOut || res.ExitCode != -1 {
		t.Errorf("TimedOut=%v ExitCode=%d, want true and -1", res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(res.Output, "child") || !strings.Contains(res.Output, "timed out after 5s") {
		t.Errorf("output %q should hold the child's lines and the timeout note", res.Output)
	}
	if elapsed > 5*time.Second+drainDelay+time.Second {
		t.Errorf("returned after %s", elapsed)
	}
	if pgid == 0 {
		t.Fatal("started hook not called")
	}
	waitGroupGone(t, pgid, 3*time.Second)
}

func TestTerminalExitCodes(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]int{"true": 0, "false": 1, "exit 3": 3, "exit 255": 255, "nonexistent-command-xyz": 127} {
		if res := run(t, cmd, TerminalOptions{}); res.ExitCode != want || res.TimedOut {
			t.Errorf("%q: exit %d (timed out %v), want %d", cmd, res.ExitCode, res.TimedOut, want)
		}
	}
	// Killed by a signal it sent itself: -1 and a note.
	res := run(t, "kill -TERM $$", TerminalOptions{})
	if res.ExitCode != -1 || !strings.Contains(res.Output, "terminated by signal") {
		t.Errorf("self-kill: exit %d output %q", res.ExitCode, res.Output)
	}
}

func TestTerminalStderrCaptured(t *testing.T) {
	t.Parallel()
	res := run(t, "echo out; echo err >&2; echo out2", TerminalOptions{})
	if res.Output != "out\nerr\nout2\n" {
		t.Errorf("output %q", res.Output)
	}
	if res.TotalBytes != int64(len(res.Output)) || res.Truncated {
		t.Errorf("TotalBytes=%d Truncated=%v", res.TotalBytes, res.Truncated)
	}
}

func TestTerminalCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := run(t, "pwd -P", TerminalOptions{Cwd: dir})
	want, _ := filepath.EvalSymlinks(dir)
	if strings.TrimSpace(res.Output) != want {
		t.Errorf("pwd = %q, want %q", res.Output, want)
	}
	_, err := RunTerminal(context.Background(), "true", TerminalOptions{Cwd: filepath.Join(dir, "missing")})
	if err == nil {
		t.Error("missing cwd: want a start error")
	}
}

func TestTerminalEnv(t *testing.T) {
	t.Setenv("PAGER", "less") // overridden
	t.Setenv("SESSIOND_TOOLS_TEST_VAR", "inherited")
	res := run(t, `echo "$GIT_EDITOR|$GIT_TERMINAL_PROMPT|$PAGER|$GIT_PAGER|$DEBIAN_FRONTEND|$SESSIOND_TOOLS_TEST_VAR"`, TerminalOptions{})
	if want := "true|0|cat|cat|noninteractive|inherited\n"; res.Output != want {
		t.Errorf("env = %q, want %q", res.Output, want)
	}
}

func TestTerminalStdinClosed(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res := run(t, "cat; echo done", TerminalOptions{Timeout: 10 * time.Second})
	if res.TimedOut || res.ExitCode != 0 || res.Output != "done\n" {
		t.Errorf("cat on closed stdin: %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestTerminalCancelKillsGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	var once sync.Once
	var pgid int
	opt := TerminalOptions{
		Timeout: time.Minute,
		OnStart: func(p int) error { pgid = p; return nil },
		OnOutput: func(s string) {
			if strings.Contains(s, "ready") {
				once.Do(func() { close(ready) })
			}
		},
	}
	type ret struct {
		res TerminalResult
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := RunTerminal(ctx, "sleep 100 & echo ready; sleep 100", opt)
		done <- ret{res, err}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("command never printed ready")
	}
	if !groupAlive(t, pgid) {
		t.Fatal("the group should be alive before cancel")
	}
	cancel()
	cancelled := time.Now()
	var r ret
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunTerminal did not return after cancel")
	}
	if d := time.Since(cancelled); d > time.Second {
		t.Errorf("returned %s after cancel", d)
	}
	if !errors.Is(r.err, context.Canceled) || r.res.ExitCode != -1 || !strings.Contains(r.res.Output, "interrupted") {
		t.Errorf("got %+v, %v", r.res, r.err)
	}
	waitGroupGone(t, pgid, 3*time.Second)

	// An already-cancelled context runs nothing.
	if _, err := RunTerminal(ctx, "echo no", TerminalOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: err %v", err)
	}
}

// Background jobs left by a command that exits normally are killed at once.
func TestTerminalExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	var pgid int
	start := time.Now()
	res := run(t, "sleep 100 & echo started", TerminalOptions{OnStart: func(p int) error { pgid = p; return nil }})
	if res.ExitCode != 0 || res.Output != "started\n" {
		t.Errorf("got %+v", res)
	}
	if d := time.Since(start); d >= drainDelay {
		t.Errorf("took %s: the leftover's pipe should close when it is killed", d)
	}
	waitGroupGone(t, pgid, 3*time.Second)
}

func TestTerminalOutputCap(t *testing.T) {
	t.Parallel()
	// 2000 × "é" (2 bytes) between markers, with an odd limit so that both
	// cuts would fall inside a rune.
	cmd := `printf HEAD; i=0; while [ $i -lt 2000 ]; do printf 'é'; i=$((i+1)); done; printf TAIL`
	var live strings.Builder
	res := run(t, cmd, TerminalOptions{OutputLimit: 101, OnOutput: func(s string) {
		if !utf8.ValidString(s) {
			t.Errorf("OnOutput got invalid UTF-8 %q", s)
		}
		live.WriteString(s)
	}})
	const total = 4 + 2000*2 + 4
	if res.TotalBytes != total || !res.Truncated {
		t.Fatalf("TotalBytes=%d Truncated=%v, want %d true", res.TotalBytes, res.Truncated, total)
	}
	if !utf8.ValidString(res.Output) || strings.ContainsRune(res.Output, utf8.RuneError) {
		t.Errorf("output not clean UTF-8: %q", res.Output)
	}
	head, tail, ok := strings.Cut(res.Output, "\n… [")
	if !ok {
		t.Fatalf("no marker in %q", res.Output)
	}
	n, after, _ := strings.Cut(tail, " bytes omitted] …\n")
	omitted, _ := strconv.Atoi(n)
	if !strings.HasPrefix(head, "HEAD") || !strings.HasSuffix(after, "TAIL") {
		t.Errorf("head %q / tail %q", head, after)
	}
	if len(head) > 50 || len(after) > 51 || len(head) < 48 || len(after) < 49 {
		t.Errorf("kept %d + %d bytes for a limit of 101", len(head), len(after))
	}
	if len(head)+len(after)+omitted != total {
		t.Errorf("kept %d + %d + omitted %d != %d", len(head), len(after), omitted, total)
	}
	if live.Len() != total {
		t.Errorf("OnOutput saw %d bytes, want %d", live.Len(), total)
	}
}

func TestTerminalInvalidUTF8(t *testing.T) {
	t.Parallel()
	res := run(t, `printf 'a\377b\300\n'`, TerminalOptions{})
	if res.Output != "a\uFFFDb\uFFFD\n" {
		t.Errorf("output %q", res.Output)
	}
	if res.TotalBytes != 5 {
		t.Errorf("TotalBytes = %d, want 5 (raw bytes)", res.TotalBytes)
	}
}

// capture is exercised directly with writes that split runes.
func TestCaptureSplitsAndCaps(t *testing.T) {
	var chunks []string
	c := newCapture(10, func(s string) { chunks = append(chunks, s) })
	c.write([]byte("ab\xe2\x82")) // € split across writes
	c.write([]byte("\xaccd"))
	c.readFrom(bytes.NewReader(nil)) // flush
	if got := strings.Join(chunks, ""); got != "ab€cd" {
		t.Errorf("chunks %q", chunks)
	}
	for _, ch := range chunks {
		if !utf8.ValidString(ch) {
			t.Errorf("invalid chunk %q", ch)
		}
	}
	if out, trunc := c.result(); out != "ab€cd" || trunc {
		t.Errorf("result %q %v", out, trunc)
	}

	c = newCapture(10, nil)
	c.write([]byte(strings.Repeat("€", 10))) // 30 bytes, limit 10
	out, trunc := c.result()
	if !trunc || !utf8.ValidString(out) || strings.ContainsRune(out, utf8.RuneError) {
		t.Fatalf("result %q %v", out, trunc)
	}
	if want := "€\n… [24 bytes omitted] …\n€"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}

	// A trailing incomplete rune at EOF becomes U+FFFD.
	c = newCapture(100, nil)
	c.write([]byte("x\xe2\x82"))
	c.readFrom(bytes.NewReader(nil))
	if out, _ := c.result(); out != "x\uFFFD" {
		t.Errorf("got %q", out)
	}
}

func TestCaptureMemoryBounded(t *testing.T) {
	c := newCapture(1000, nil)
	line := []byte(strings.Repeat("x", 99) + "\n")
	for i := 0; i < 10000; i++ {
		c.write(line)
	}
	if cap(c.head) > 500 || len(c.tail) != 500 {
		t.Errorf("buffers grew: head cap %d tail %d", cap(c.head), len(c.tail))
	}
	out, trunc := c.result()
	if !trunc || c.total != 1000000 || !strings.Contains(out, fmt.Sprintf("[%d bytes omitted]", 1000000-1000)) {
		t.Errorf("total %d trunc %v out %q", c.total, trunc, out)
	}
}

// A process that escaped the group (setsid) and still holds the output
// pipe cannot hang the call: reading stops a short while after the shell
// exits.
func TestTerminalEscapedChildDoesNotHang(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		if _, err := os.Stat("/bin/setsid"); err != nil {
			t.Skip("setsid not installed")
		}
	}
	start := time.Now()
	// The shell waits for the child to have left the group before exiting.
	res := run(t, `setsid sh -c 'echo escaped $$; touch ready; exec sleep 100' & while [ ! -e ready ]; do :; done; echo parent`,
		TerminalOptions{Cwd: t.TempDir(), Timeout: 20 * time.Second})
	elapsed := time.Since(start)
	var pid int
	for _, line := range strings.Split(res.Output, "\n") {
		if v, ok := strings.CutPrefix(line, "escaped "); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid > 0 {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "parent") || pid == 0 {
		t.Errorf("got %+v", res)
	}
	if elapsed > drainDelay+3*time.Second {
		t.Errorf("took %s, want about %s", elapsed, drainDelay)
	}
}

// TestOnStartGatesTheCommand: the command does not run before OnStart
// returned (its side effect is absent while OnStart runs), and does not
// run at all when OnStart fails: RunTerminal then reports ErrNotStarted.
func TestOnStartGatesTheCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	cmd := "touch '" + mark + "'; echo done" // quoted: t.TempDir() follows TMPDIR, which may hold spaces
	var seenEarly bool
	res, err := RunTerminal(context.Background(), cmd, TerminalOptions{Cwd: dir, OnStart: func(pgid int) error {
		time.Sleep(50 * time.Millisecond) // would let an ungated command run meanwhile
		_, statErr := os.Stat(mark)
		seenEarly = statErr == nil
		return nil
	}})
	if err != nil || res.ExitCode != 0 || res.Output != "done\n" {
		t.Fatalf("gated run: %+v %v", res, err)
	}
	if seenEarly {
		t.Fatal("the command ran before OnStart returned")
	}
	os.Remove(mark)
	res, err = RunTerminal(context.Background(), cmd, TerminalOptions{Cwd: dir, OnStart: func(int) error {
		return errors.New("the store is full")
	}})
	if !errors.Is(err, ErrNotStarted) || !strings.Contains(err.Error(), "the store is full") || res.ExitCode != -1 {
		t.Fatalf("OnStart failed: %+v %v, want ErrNotStarted", res, err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the command ran although OnStart failed")
	}
}

// TestGatedCommandSemantics: behind the gate the command still sees $0,
// its exit status and a closed fd 3.
func TestGatedCommandSemantics(t *testing.T) {
	t.Parallel()
	gate := TerminalOptions{OnStart: func(int) error { return nil }}
	res, err := RunTerminal(context.Background(), `echo "$0"; [ -e /dev/fd/3 ] && echo fd3-open; exit 7`, gate)
	if err != nil || res.ExitCode != 7 || res.Output != "/bin/sh\n" {
		t.Fatalf("gated: %+v %v", res, err)
	}
}
