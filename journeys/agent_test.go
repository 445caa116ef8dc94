package journeys

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

func tc(name, args string) fixtures.FakeToolCall {
	return fixtures.FakeToolCall{Name: name, Arguments: args}
}

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// waitPrompt waits for a prompt.opened event on c and returns the prompt.
func waitPrompt(t *testing.T, c *fixtures.Client, admissionID, kind string) prompt {
	t.Helper()
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.Type == "prompt.opened" && e.AdmissionID == admissionID && strings.Contains(string(e.Payload), `"kind":"`+kind+`"`)
	})
	var p struct {
		Prompt prompt `json:"prompt"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Prompt
}

func waitTurn(t *testing.T, c *fixtures.Client, admissionID string) string {
	t.Helper()
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == admissionID })
	var p struct {
		Outcome string `json:"outcome"`
	}
	json.Unmarshal(e.Payload, &p)
	return p.Outcome
}

// toolResults returns the tool messages of the last request for text.
func toolResults(m *fixtures.FakeModel, text string) []string {
	reqs := m.RequestsWithLastUser(text)
	if len(reqs) == 0 {
		return nil
	}
	var out []string
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == "tool" {
			s, _ := msg.Content.(string)
			out = append(out, s)
		}
	}
	return out
}

func TestApprovalOnceRunsAndDenyDoesNot(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.MkdirAll(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "f"), []byte("x"), 0o644)
	m.On("delete it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]string{"command": "rm -rf victim"}))}}, fixtures.Reply{Text: "deleted"})
	hold := fixtures.NewGate() // keeps the execution live after the deny
	m.On("try again", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]string{"command": "rm -rf victim2"}))}}, fixtures.Reply{Text: "ok", Gate: hold})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)

	victim2 := filepath.Join(dir, "victim2")
	os.MkdirAll(victim2, 0o755)
	r := submit(t, c, s.SessionID, "deny-1", "try again")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	var res struct {
		Status string `json:"status"`
	}
	if err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "deny"}, &res); err != nil || res.Status != "resolved" {
		t.Fatalf("respond: %+v %v", res, err)
	}
	if err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "once"}, &res); err != nil || res.Status != "already_resolved" {
		t.Fatalf("second respond: %+v %v", res, err)
	}
	hold.Release()
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if _, err := os.Stat(victim2); err != nil {
		t.Fatal("a denied command ran")
	}
	if got := toolResults(m, "try again"); len(got) != 1 || !strings.Contains(got[0], "denied") {
		t.Fatalf("tool results = %v", got)
	}

	r = submit(t, c, s.SessionID, "once-1", "delete it")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := os.Stat(victim); err != nil {
		t.Fatal("ran before approval")
	}
	if err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "once"}, &res); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Fatal("approved command did not run")
	}
	// Stale: the prompt's execution has ended.
	err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "choice": "once"}, nil)
	wantReason(t, err, -32000, "stale_generation")
}

func TestHardlineRefusedWithApprovalsOff(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("wipe", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", `{"command":"rm -rf /"}`)}}, fixtures.Reply{Text: "refused, fine"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "w", "wipe")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	got := toolResults(m, "wipe")
	if len(got) != 1 || !strings.Contains(got[0], "never run") {
		t.Fatalf("tool results = %v", got)
	}
}

func TestClarifyAnswered(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("pick a color", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("clarify", `{"question":"Which color?","choices":["red","blue"]}`)}}, fixtures.Reply{Text: "blue it is"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "c", "pick a color")
	p := waitPrompt(t, c, r.AdmissionID, "clarify")
	if snap := resume(t, d.Dial(t), s.SessionID); len(snap.Prompts) != 1 || snap.Prompts[0].PromptID != p.PromptID {
		t.Fatalf("snapshot prompts = %+v", snap.Prompts)
	}
	if err := c.Call(ctxT(t), "clarify.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration, "answer": "blue"}, nil); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	got := toolResults(m, "pick a color")
	if len(got) != 1 || !strings.Contains(got[0], `"answer":"blue"`) || !strings.Contains(got[0], `"choices_offered":["red","blue"]`) {
		t.Fatalf("tool results = %v", got)
	}
}
