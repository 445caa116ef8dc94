package journeys

// Adversarial regression: answers to an approval or a clarify prompt that
// name another session, a wrong generation, the wrong kind or a forged
// prompt id are refused and leave the prompt open; the command runs only
// after the real answer; a "session" approval does not leak into another
// session.

import (
	"encoding/json"
	"strings"
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
	// No refused answer was remembered as an approval.
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var remembered int
	if err := db.Get(&remembered, `SELECT (SELECT COUNT(*) FROM approval_allowlist) + (SELECT COUNT(*) FROM session_approvals)`); err != nil {
		t.Fatal(err)
	}
	if remembered != 0 {
		t.Fatalf("%d approvals remembered after refused answers only", remembered)
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

// TestAttackCrossSessionClarify: session A's turn asks a clarify question
// and would then run "rm -rf victim" (approvals off: the question is the
// only gate). Answers to A's prompt naming session B (which has a live
// clarify prompt of the same generation), an unknown session, the wrong
// generation, the wrong kind or a forged id are all refused: A's turn stays
// parked, the model is not called again, the victim is intact. A is then
// interrupted, so its prompt closes "interrupted" (no forged answer was
// recorded) and the command never runs; B's own answer reaches B's model
// call and no forged one does.
func TestAttackCrossSessionClarify(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("A asks",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: `{"question":"Delete the victim?","choices":["no","yes"]}`}}},
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf victim")}},
		fixtures.Reply{Text: "done"})
	m.On("B asks",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: `{"question":"Which colour?","choices":["red","blue"]}`}}},
		fixtures.Reply{Text: "ok"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\nagent: {clarify_timeout: 60}")})
	c := d.Dial(t)
	dirA := t.TempDir()
	_, fileA := makeVictim(t, dirA, "victim")
	a := createSession(t, c, map[string]any{"cwd": dirA})
	b := createSession(t, c, map[string]any{})
	resume(t, c, a.SessionID)
	resume(t, c, b.SessionID)
	ra := submit(t, c, a.SessionID, "a-ask", "A asks")
	pa := waitPrompt(t, c, ra.AdmissionID, "clarify")
	rb := submit(t, c, b.SessionID, "b-ask", "B asks")
	pb := waitPrompt(t, c, rb.AdmissionID, "clarify")
	if pa.ExecutionGeneration != pb.ExecutionGeneration {
		t.Logf("generations differ (A %d, B %d): the same-generation case is not exercised", pa.ExecutionGeneration, pb.ExecutionGeneration)
	}

	attacker := d.Dial(t)
	answer := func(sessionID string, p prompt, gen int64, key string, value any) map[string]any {
		return map[string]any{"session_id": sessionID, "prompt_id": p.PromptID, "execution_generation": gen, key: value}
	}
	forged := pa
	forged.PromptID += "x"
	attacks := []struct {
		what, method string
		params       map[string]any
		reason       string
	}{
		{"A's prompt under B's session", "clarify.respond", answer(b.SessionID, pa, pa.ExecutionGeneration, "answer", "yes"), "not_found"},
		{"A's prompt under B's session, a list", "clarify.respond", answer(b.SessionID, pa, pa.ExecutionGeneration, "answer", []string{"yes"}), "not_found"},
		{"B's prompt under A's session", "clarify.respond", answer(a.SessionID, pb, pb.ExecutionGeneration, "answer", "red"), "not_found"},
		{"A's prompt under an unknown session", "clarify.respond", answer("no-such-session", pa, pa.ExecutionGeneration, "answer", "yes"), "not_found"},
		{"an approval answer to A's prompt under B's session", "approval.respond", answer(b.SessionID, pa, pa.ExecutionGeneration, "choice", "always"), "not_found"},
		{"an approval answer to A's prompt", "approval.respond", answer(a.SessionID, pa, pa.ExecutionGeneration, "choice", "once"), "not_found"},
		{"wrong generation", "clarify.respond", answer(a.SessionID, pa, pa.ExecutionGeneration+1, "answer", "yes"), "stale_generation"},
		{"forged prompt id", "clarify.respond", answer(a.SessionID, forged, pa.ExecutionGeneration, "answer", "yes"), "not_found"},
	}
	for _, at := range attacks {
		if err := attacker.Call(ctxT(t), at.method, at.params, nil); fixtures.ErrorReason(err) != at.reason {
			t.Errorf("%s: got %v, want %s", at.what, err, at.reason)
		}
	}
	// Both prompts are still open; A's turn is still parked at its
	// question: the model was not called again and the victim is intact.
	for _, sp := range []struct {
		id string
		p  prompt
	}{{a.SessionID, pa}, {b.SessionID, pb}} {
		if snap := resume(t, d.Dial(t), sp.id); len(snap.Prompts) != 1 || snap.Prompts[0].PromptID != sp.p.PromptID {
			t.Fatalf("prompts of %s after the refused answers: %+v, want %s open", sp.id, snap.Prompts, sp.p.PromptID)
		}
	}
	if n := len(m.RequestsWithLastUser("A asks")); n != 1 {
		t.Fatalf("A's turn called the model %d times after the refused answers, want 1 (still parked at its question)", n)
	}
	wantIntact(t, fileA)

	// B's real answer is the one B's turn gets.
	if res, err := answerClarify(t, c, b.SessionID, pb, "blue"); err != nil || res.Status != "resolved" {
		t.Fatalf("B's own answer: %+v %v, want resolved (a refused answer took the prompt)", res, err)
	}
	if out := waitTurn(t, c, rb.AdmissionID); out != "completed" {
		t.Fatalf("B's turn: %s", out)
	}
	if got := toolResults(m, "B asks"); len(got) != 1 || !strings.Contains(got[0], `"answer":"blue"`) {
		t.Fatalf("B's clarify result %q, want B's own answer \"blue\"", got)
	}

	// A is interrupted, never answered: the command never runs.
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": a.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, ra.AdmissionID); out != "interrupted" {
		t.Fatalf("A's turn: %s, want interrupted", out)
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var resolution string
	if err := db.Get(&resolution, `SELECT COALESCE(resolution, '') FROM prompts WHERE prompt_id = ?`, pa.PromptID); err != nil {
		t.Fatal(err)
	}
	if resolution != "interrupted" {
		t.Fatalf("A's prompt closed %q, want interrupted (a forged answer was recorded)", resolution)
	}
	if n := len(m.RequestsWithLastUser("A asks")); n != 1 {
		t.Fatalf("A's model was called %d times, want 1", n)
	}
	wantIntact(t, fileA)
}
