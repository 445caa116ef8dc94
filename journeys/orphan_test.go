//go:build linux

package journeys

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// groupAlive reports whether process group pgid has a member that is not a
// zombie (the test's init may not reap orphans, so "gone" means no live
// member left).
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:]) // f[0] state, f[2] pgrp
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			return true
		}
	}
	return false
}

// TestCrashKillsOrphanedCommand: the daemon dies (SIGKILL) while a
// command runs. The command outlives it, orphaned; the next start kills
// its whole process group, and once the operator resolves the turn the
// model is told the command was interrupted while running, effects unknown
// — not that it never ran. Two cases: the group's leader (the command's
// shell) still runs at the restart, so it is the very process recorded in
// tool.running; or the leader exited when the daemon died, leaving a
// background job that carries the command's marker (tools.MarkerEnv).
func TestCrashKillsOrphanedCommand(t *testing.T) {
	for _, tc := range []struct{ name, command string }{
		{"leader runs", ": > started; sleep 300 & sleep 300; echo finished"},
		// Unsandboxed (mode off): a sandboxed command's group leader is the
		// init of its PID namespace, and nothing of the command outlives
		// it (TestAttackSandboxSurvivorReadsNewToken).
		{"leader exited", ": > started; sleep 300 & while [ -d /proc/$PPID ]; do sleep 0.05; done"},
	} {
		t.Run(tc.name, func(t *testing.T) { crashKillsOrphan(t, tc.command, tc.name == "leader exited") })
	}
}

func crashKillsOrphan(t *testing.T, command string, leaderExits bool) {
	m := fixtures.NewFakeModel(t)
	m.On("run the long job",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("long1", command)}},
		fixtures.Reply{Text: "never reached"})
	m.On("what happened?", fixtures.Reply{Text: "it was interrupted"})
	cfg := "approvals: {mode: \"off\"}"
	if leaderExits {
		cfg += "\nsandbox: {mode: \"off\"}"
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg)})
	c := d.Dial(t)
	cwd := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "long", "run the long job")
	ev := c.WaitEvent(t, 20*time.Second, func(e fixtures.Event) bool {
		return e.Type == "tool.running" && e.AdmissionID == r.AdmissionID
	})
	var running struct {
		ToolCallID string `json:"tool_call_id"`
		PID        int    `json:"pid"`
		BootID     string `json:"boot_id"`
		StartTicks uint64 `json:"start_ticks"`
		Marker     string `json:"marker"`
	}
	if err := json.Unmarshal(ev.Payload, &running); err != nil || running.ToolCallID != "long1" || running.PID <= 1 ||
		running.BootID == "" || running.StartTicks == 0 || len(running.Marker) != 32 {
		t.Fatalf("tool.running payload %s (%v)", ev.Payload, err)
	}
	gen := *ev.ExecutionGeneration
	// tool.running is committed (and published) before the daemon opens
	// the command's gate: killed in between, the command never runs (the
	// gate reads EOF). This test needs it running: wait for its first step.
	fixtures.Eventually(t, wait, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(cwd, "started"))
		return err == nil
	})
	d.SIGKILL(t)
	if !groupAlive(t, running.PID) {
		t.Fatalf("process group %d died with the daemon; this test needs it orphaned", running.PID)
	}
	t.Cleanup(func() { _ = killGroupQuietly(running.PID) })
	if leaderExits {
		fixtures.Eventually(t, 20*time.Second, fmt.Sprintf("the group's leader %d to exit", running.PID), func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", running.PID))
			return err != nil || strings.Contains(string(b), ") Z ")
		})
		if !groupAlive(t, running.PID) {
			t.Fatalf("the background job of group %d died with its leader; this test needs it orphaned", running.PID)
		}
	}

	d.Restart(t)
	fixtures.Eventually(t, 20*time.Second, fmt.Sprintf("process group %d to be killed at boot", running.PID),
		func() bool { return !groupAlive(t, running.PID) })
	if !strings.Contains(d.Stderr(), "killed a command left running by an earlier daemon") {
		t.Fatalf("the kill is not logged:\n%s", d.Stderr())
	}
	c = d.Dial(t)
	var res receipt
	if err := c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s.SessionID,
		"admission_id": r.AdmissionID, "execution_generation": gen}, &res); err != nil {
		t.Fatal(err)
	}
	resume(t, c, s.SessionID)
	next := submit(t, c, s.SessionID, "after", "what happened?")
	if out, errText := trTurnEnd(t, c, next.AdmissionID); out != "completed" {
		t.Fatalf("next turn: %s (%s)", out, errText)
	}
	reqs := m.RequestsWithLastUser("what happened?")
	if len(reqs) != 1 {
		t.Fatalf("model asked %d times, want 1", len(reqs))
	}
	trValid(t, reqs[0])
	var result string
	for _, msg := range reqs[0].Messages {
		if msg.Role == "tool" && msg.ToolCallID == "long1" {
			result, _ = msg.Content.(string)
		}
	}
	if !strings.HasPrefix(result, "interrupted while running") || !strings.Contains(result, "effects are unknown") {
		t.Fatalf("the model was told %q about the command the crash interrupted, want interrupted while running, effects unknown", result)
	}
	if n := len(m.RequestsWithLastUser("run the long job")); n != 1 {
		t.Fatalf("the crashed input reached the model %d times, want 1", n)
	}
}

// killGroupQuietly is the test's own cleanup, should the daemon not have
// killed the group.
func killGroupQuietly(pgid int) error {
	if pgid <= 1 {
		return nil
	}
	return syscall.Kill(-pgid, syscall.SIGKILL)
}
