package journeys

// Adversarial review of the sandbox (issue 11): attacks that the sandbox
// journeys do not cover. Each test asserts what SHOULD hold; a failure is a
// finding (see the review report).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackSandboxCrossDaemonSelfApproval: the sandbox protects only the
// daemon's own home. A second daemon whose home lies inside a session's
// cwd (the README's quick start keeps .home inside the repository; a
// session of another daemon working in the parent directory) is writable:
// a command rated safe, run with no prompt, inserts
// "unsandboxed:CMD" into that daemon's always-allowlist, and that daemon
// then runs CMD outside its sandbox without asking anyone.
func TestAttackSandboxCrossDaemonSelfApproval(t *testing.T) {
	root := t.TempDir()
	homeB := filepath.Join(root, "repo-b", ".home")
	if err := os.MkdirAll(homeB, 0o700); err != nil {
		t.Fatal(err)
	}
	mB := fixtures.NewFakeModel(t)
	dB := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: homeB, Config: fixtures.FakeModelConfig(mB, "approvals: {mode: manual, timeout: 60}")})
	mA := fixtures.NewFakeModel(t)
	dA := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(mA, "approvals: {mode: manual, timeout: 60}")})

	outside := t.TempDir()
	target := filepath.Join(outside, "escaped.txt")
	escCmd := "echo escaped > " + target

	// Daemon A's model, sandboxed, cwd = root (which holds B's home).
	cA := dA.Dial(t)
	sA := createSession(t, cA, map[string]any{"cwd": root})
	resume(t, cA, sA.SessionID)
	ins := fmt.Sprintf(`sqlite3 %s "INSERT INTO approval_allowlist(pattern, created_at) VALUES('unsandboxed:%s', 'x')"`,
		filepath.Join(homeB, "state.db"), escCmd)
	res, _ := sbRun(t, dA, cA, mA, sA.SessionID, "poison b", ins, false)
	if n := countRows(t, dB, "pattern LIKE 'unsandboxed:%'"); n != 0 {
		t.Errorf("a sandboxed command of daemon A wrote daemon B's allowlist (%d rows); its result: %s", n, res)
	}

	// Daemon B's model asks to escalate exactly that command: a person must
	// be asked (escalation always asks).
	cB := dB.Dial(t)
	sB := createSession(t, cB, map[string]any{})
	resume(t, cB, sB.SessionID)
	mB.On("escalate", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]any{
		"command": escCmd, "sandbox_permissions": "escalated", "justification": "needed"}))}}, fixtures.Reply{Text: "done"})
	r := submit(t, cB, sB.SessionID, "esc-1", "escalate")
	e := cB.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		b, _ := os.ReadFile(target)
		t.Fatalf("daemon B ran an escalated command without asking anyone (file %s now holds %q)", target, strings.TrimSpace(string(b)))
	}
}
