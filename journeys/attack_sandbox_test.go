package journeys

// Adversarial review of the sandbox (issue 11): attacks that the sandbox
// journeys do not cover. Each test asserts what SHOULD hold; a failure is a
// finding (see the review report).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackSandboxRememberedEscalationRunsEditedScript: a person reads
// build.sh and approves the escalated `sh build.sh` for the session. The
// remembered pattern is the command text, not what it runs: the model
// edits build.sh inside the sandbox (no prompt) and escalates the same
// text again, which runs the new script outside the sandbox without
// asking anyone.
func TestAttackSandboxRememberedEscalationRunsEditedScript(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	cwd, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "build.sh"), []byte("echo building\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	esc := fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]any{
		"command": "sh build.sh", "sandbox_permissions": "escalated", "justification": "the build needs the network"}))}}
	m.On("build", esc, fixtures.Reply{Text: "done"})
	r := submit(t, c, s.SessionID, "b1", "build")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s.SessionID, p, "session"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	proof := filepath.Join(outside, "escaped")
	sbRun(t, d, c, m, s.SessionID, "edit", "echo 'echo escaped > "+proof+"' > build.sh", false)
	m.On("build again", esc, fixtures.Reply{Text: "done"})
	r = submit(t, c, s.SessionID, "b2", "build again")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if _, err := os.Stat(proof); e.Type != "prompt.opened" && err == nil {
		t.Fatal("an edited script ran outside the sandbox on an approval given for its earlier content; no one was asked")
	}
}
