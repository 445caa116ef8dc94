package journeys

// Adversarial regression: answers to an approval that name another session,
// a wrong generation, the wrong kind or a forged prompt id are refused and
// leave the prompt open; the command runs only after the real answer; a
// "session" approval does not leak into another session.

import (
	"encoding/json"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

func TestAttackCrossSessionApproval(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("A deletes", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf victim")}}, fixtures.Reply{Text: "done"})
	m.On("B deletes", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf victim")}}, fixtures.Reply{Text: "done"})
	hold := fixtures.NewGate()
	m.On("B holds", fixtures.Reply{Text: "held", Gate: hold})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	_, fileA := makeVictim(t, dirA, "victim")
	_, fileB := makeVictim(t, dirB, "victim")
	a := createSession(t, c, map[string]any{"cwd": dirA})
	b := createSession(t, c, map[string]any{"cwd": dirB})
	resume(t, c, a.SessionID)
	resume(t, c, b.SessionID)
	// B runs a turn too, so it has a live execution with the same
	// generation number as A's.
	rb := submit(t, c, b.SessionID, "b-hold", "B holds")
	waitParked(t, hold, "B holds")
	ra := submit(t, c, a.SessionID, "a-del", "A deletes")
	p := waitPrompt(t, c, ra.AdmissionID, "approval")
	if snapB := resume(t, d.Dial(t), b.SessionID); snapB.Running == nil || *snapB.Running != rb.AdmissionID {
		t.Fatalf("B is not running its turn: %+v", snapB.Running)
	}

	attacker := d.Dial(t)
	attacks := []struct {
		what, method string
		params       map[string]any
		reason       string
	}{
		{"A's prompt under B's session", "approval.respond", map[string]any{"session_id": b.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "once"}, "not_found"},
		{"A's prompt under B's session, always", "approval.respond", map[string]any{"session_id": b.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "always"}, "not_found"},
		{"wrong generation", "approval.respond", map[string]any{"session_id": a.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration + 1, "choice": "once"}, "stale_generation"},
		{"clarify answer to an approval", "clarify.respond", map[string]any{"session_id": a.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "answer": "once"}, "not_found"},
		{"unknown choice", "approval.respond", map[string]any{"session_id": a.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "ONCE"}, "invalid_params"},
		{"forged prompt id", "approval.respond", map[string]any{"session_id": a.SessionID, "prompt_id": p.PromptID + "' OR '1'='1", "execution_generation": p.ExecutionGeneration, "choice": "once"}, "not_found"},
	}
	for _, at := range attacks {
		if err := attacker.Call(ctxT(t), at.method, at.params, nil); fixtures.ErrorReason(err) != at.reason {
			t.Errorf("%s: got %v, want %s", at.what, err, at.reason)
		}
	}
	// The prompt is still open and unanswered: the real answer is the
	// first one. Until then the command cannot have run.
	snapA := resume(t, d.Dial(t), a.SessionID)
	if len(snapA.Prompts) != 1 || snapA.Prompts[0].PromptID != p.PromptID {
		t.Fatalf("A's prompts after the refused answers: %+v", snapA.Prompts)
	}
	wantIntact(t, fileA)
	if res, err := answerApproval(t, c, a.SessionID, p, "session"); err != nil || res.Status != "resolved" {
		t.Fatalf("the real answer: %+v %v, want resolved (a refused answer took the prompt)", res, err)
	}
	if out := waitTurn(t, c, ra.AdmissionID); out != "completed" {
		t.Fatalf("A's turn: %s", out)
	}
	// The command ran once, after the real answer; B's victim is untouched.
	if got := toolResults(m, "A deletes"); len(got) != 1 || trExists(fileA) {
		t.Fatalf("A's command did not run after its approval: results %v", got)
	}
	wantIntact(t, fileB)

	hold.Release()
	if out := waitTurn(t, c, rb.AdmissionID); out != "completed" {
		t.Fatalf("B's held turn: %s", out)
	}
	// A's "session" approval does not cover B: B is asked.
	rb2 := submit(t, c, b.SessionID, "b-del", "B deletes")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == rb2.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		t.Fatalf("A's session approval let B's rm -rf run without a prompt")
	}
	var pb struct {
		Prompt prompt `json:"prompt"`
	}
	if err := json.Unmarshal(e.Payload, &pb); err != nil {
		t.Fatal(err)
	}
	// A's session id with B's prompt is refused the same way.
	if _, err := answerApproval(t, attacker, a.SessionID, pb.Prompt, "once"); fixtures.ErrorReason(err) != "not_found" {
		t.Errorf("B's prompt under A's session: %v, want not_found", err)
	}
	if res, err := answerApproval(t, c, b.SessionID, pb.Prompt, "deny"); err != nil || res.Status != "resolved" {
		t.Fatalf("deny: %+v %v", res, err)
	}
	if out := waitTurn(t, c, rb2.AdmissionID); out != "completed" {
		t.Fatalf("B's turn: %s", out)
	}
	wantIntact(t, fileB)
}
