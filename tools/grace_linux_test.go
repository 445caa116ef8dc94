package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTerminalShellHelpersFinishAfterExit: a tee behind a process
// substitution is still writing when the shell exits; it gets to finish
// (t5.log holds "hi" when RunTerminal returns) instead of being killed the
// instant the shell is gone.
func TestTerminalShellHelpersFinishAfterExit(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatal("bash is required (CI has it): ", err)
	}
	dir := t.TempDir()
	for i := 0; i < 5; i++ { // the old kill lost the race every time; repeat to be sure
		log := filepath.Join(dir, "t5.log")
		os.Remove(log)
		res := run(t, `bash -c 'exec > >(tee -a t5.log) 2>&1; echo hi'`, TerminalOptions{Cwd: dir})
		b, err := os.ReadFile(log)
		if err != nil || string(b) != "hi\n" || res.ExitCode != 0 || !strings.Contains(res.Output, "hi") {
			t.Fatalf("run %d: t5.log = %q (%v), exit %d, output %q", i, b, err, res.ExitCode, res.Output)
		}
	}
	// A pipeline whose last writer outlives the shell by a moment.
	res := run(t, `(sleep 0.2; echo late) & echo early`, TerminalOptions{Cwd: dir})
	if res.Output != "early\nlate\n" {
		t.Fatalf("output %q, want the background writer's line too", res.Output)
	}
}

// TestTerminalBackgroundJobStillKilled: a background job that keeps
// running, holding the output pipe or not, is killed once the grace is
// over: the call returns within a couple of seconds, and the group is gone.
func TestTerminalBackgroundJobStillKilled(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{`sleep 60 & echo started`, `sleep 60 >/dev/null 2>&1 & echo started`} {
		var pgid int
		start := time.Now()
		res := run(t, cmd, TerminalOptions{Cwd: t.TempDir(), OnStart: func(p int) error { pgid = p; return nil }})
		if elapsed := time.Since(start); elapsed > 20*time.Second {
			t.Fatalf("%q returned after %s: the background job was waited for", cmd, elapsed)
		}
		if res.ExitCode != 0 || res.Output != "started\n" {
			t.Fatalf("%q: exit %d output %q", cmd, res.ExitCode, res.Output)
		}
		waitGroupGone(t, pgid, 3*time.Second)
	}
}

// TestTerminalInterruptDuringGrace: an interrupt while the leftovers have
// their grace ends it at once.
func TestTerminalInterruptDuringGrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var pgid int
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTerminal(ctx, `sleep 60 & echo started`, TerminalOptions{Cwd: t.TempDir(),
			OnStart:  func(p int) error { pgid = p; return nil },
			OnOutput: func(string) { cancel() }})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("RunTerminal did not return after the interrupt")
	}
	waitGroupGone(t, pgid, 3*time.Second)
}
