package journeys

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// prestartedHelpers returns the pids of the sandbox helpers pre-started
// by daemon pid (children of it still waiting for a command).
func prestartedHelpers(daemon int) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("__sandbox-exec-prestart")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		st, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(daemon) && f[0] != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func pollHelpers(t *testing.T, daemon int, what string, cond func([]int) bool) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := prestartedHelpers(daemon)
		if cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: helpers %v", what, h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestSandboxPrestartedHelperLeak: a sandboxed command leaves one helper
// pre-started for the session's next command; it runs that command, and
// it dies with the daemon — at a graceful stop (SIGTERM) and at a crash
// (SIGKILL, by Pdeathsig) — leaving no process behind.
func TestSandboxPrestartedHelperLeak(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	cwd := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	if res, _ := sbRun(t, d, c, m, s.SessionID, "first", "echo one > one.txt", false); !strings.Contains(res, `"exit_code":0`) {
		t.Fatalf("first command: %s", res)
	}
	first := pollHelpers(t, d.PID(), "a pre-started helper", func(h []int) bool { return len(h) == 1 })
	if res, _ := sbRun(t, d, c, m, s.SessionID, "second", "echo two > two.txt; ps -e -o comm= | wc -l", false); !strings.Contains(res, `"exit_code":0`) {
		t.Fatalf("second command: %s", res)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "two.txt")); string(b) != "two\n" {
		t.Fatalf("two.txt: %q", b)
	}
	if alive(first[0]) {
		t.Fatalf("the pre-started helper %d was not used (or not ended) by the second command", first[0])
	}
	next := pollHelpers(t, d.PID(), "the next pre-started helper", func(h []int) bool { return len(h) == 1 })
	d.SIGTERM(t)
	if alive(next[0]) {
		t.Fatalf("pre-started helper %d outlives the daemon's graceful stop", next[0])
	}
	d.Restart(t)
	c = d.Dial(t)
	resume(t, c, s.SessionID)
	sbRun(t, d, c, m, s.SessionID, "third", "true", false)
	next = pollHelpers(t, d.PID(), "a pre-started helper after the restart", func(h []int) bool { return len(h) == 1 })
	d.SIGKILL(t)
	deadline := time.Now().Add(20 * time.Second)
	for alive(next[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("pre-started helper %d outlives the daemon's SIGKILL", next[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
