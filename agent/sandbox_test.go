package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
)

func escalate(id, command, why string) model.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": command, "sandbox_permissions": "escalated", "justification": why})
	return model.ToolCall{ID: id, Name: "terminal", Arguments: string(b)}
}

func (h *harness) runSandboxed(t *testing.T, unavailable string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := filepath.Join(t.TempDir(), "home")
	os.Mkdir(home, 0o700)
	return h.r.Run(ctx, Session{ID: "ses_1", Cwd: h.cwd, Model: "m", BaseURL: "http://127.0.0.1:1/v1", Toolsets: []string{"terminal"},
		Sandbox: tools.SandboxSpec(sandbox.DefaultPolicy(), home), SandboxUnavailable: unavailable},
		Turn{SessionID: "ses_1", AdmissionID: "adm_1", Generation: 7})
}

// An escalated command is asked about in approvals off too, with its
// justification and "unsandboxed" in the payload and the exact command as
// its pattern; denied, it does not run.
func TestEscalationAlwaysAsks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "out.txt")
	h := newHarness(t, "off", calls(escalate("c1", "echo x > "+outside, "needs to write the report")), says("ok"))
	h.p.answer = func(context.Context, prompts.Ask) (prompts.Outcome, error) { return answered(`{"choice":"deny"}`), nil }
	wantCompleted(t, h.runSandboxed(t, ""))
	asks := h.p.asked()
	if len(asks) != 1 {
		t.Fatalf("%d prompts, want 1", len(asks))
	}
	pl := asks[0].Payload.(protocol.ApprovalPayload)
	if pl.Pattern != "unsandboxed:echo x > "+outside || pl.Justification != "needs to write the report" ||
		!pl.Sandbox.Unsandboxed || !strings.Contains(pl.Reason, "OUTSIDE the sandbox") {
		t.Fatalf("payload = %+v", pl)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a denied escalated command ran")
	}
	// Approved once, it runs outside the sandbox.
	h = newHarness(t, "off", calls(escalate("c1", "echo x > "+outside, "needs to write the report")), says("ok"))
	wantCompleted(t, h.runSandboxed(t, ""))
	if _, err := os.Stat(outside); err != nil {
		t.Fatal("the approved escalated command did not run unsandboxed")
	}
	if _, res := h.resultOf(t, "c1"); res["sandbox"] != nil {
		t.Fatalf("an escalated result claims a sandbox: %v", res)
	}
}

// Without a usable sandbox every command asks (manual mode, a safe
// command), and the prompt says it runs unsandboxed and why.
func TestSandboxUnavailableAsksForEverything(t *testing.T) {
	h := newHarness(t, "manual", calls(term("c1", "echo hi")), says("ok"))
	wantCompleted(t, h.runSandboxed(t, "Landlock ABI 3 is too old"))
	asks := h.p.asked()
	if len(asks) != 1 {
		t.Fatalf("%d prompts, want 1", len(asks))
	}
	pl := asks[0].Payload.(protocol.ApprovalPayload)
	if sb := pl.Sandbox; !sb.Unsandboxed || sb.Unavailable != "Landlock ABI 3 is too old" {
		t.Fatalf("payload = %+v", pl)
	}
	// The same session with a working sandbox runs a safe command unasked,
	// confined.
	h = newHarness(t, "manual", calls(term("c1", "echo hi")), says("ok"))
	wantCompleted(t, h.runSandboxed(t, ""))
	if n := len(h.p.asked()); n != 0 {
		t.Fatalf("%d prompts for a safe sandboxed command", n)
	}
	if _, res := h.resultOf(t, "c1"); res["sandbox"] != "workspace-write, network off" {
		t.Fatalf("result = %v", res)
	}
}
