package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
		Sandbox: tools.SandboxSpec(sandbox.DefaultPolicy(), home, nil), SandboxUnavailable: unavailable},
		Turn{SessionID: "ses_1", AdmissionID: "adm_1", Generation: 7})
}

// An escalated command is asked about in approvals off too, with its
// justification and "unsandboxed" in the payload, only once and deny as
// choices and no pattern to remember; denied, it does not run.
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
	if pl.Pattern != "" || !slices.Equal(pl.Choices, []protocol.Choice{protocol.ChoiceOnce, protocol.ChoiceDeny}) || pl.Justification != "needs to write the report" ||
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

// An escalation is approved for one run: no remembered approval applies to
// it (not even an "unsandboxed:<command>" entry stored by an earlier
// version), the allowlist is not consulted, and a "session" answer to it
// runs the command once without remembering anything.
func TestEscalationIgnoresRememberedApprovals(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "out.txt")
	cmd := "echo x > " + outside
	h := newHarness(t, "off", calls(escalate("c1", cmd, "report")), says("ok"))
	h.p.allowed = map[string]bool{"unsandboxed:" + cmd: true, "command:" + cmd: true}
	h.p.answer = func(context.Context, prompts.Ask) (prompts.Outcome, error) {
		return answered(`{"choice":"session"}`), nil
	}
	wantCompleted(t, h.runSandboxed(t, ""))
	if n := len(h.p.asked()); n != 1 {
		t.Fatalf("%d prompts for an escalation with remembered approvals, want 1", n)
	}
	if len(h.p.queries) != 0 {
		t.Fatalf("an escalation consulted the allowlist: %v", h.p.queries)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatal("an escalation answered session did not run (it counts as once)")
	}
}

// A pattern remembered for a confined run (session or always while the
// sandbox ran the command) never lets the same kind of command run
// unsandboxed without asking: not when the sandbox is unavailable (fail
// closed), not in a session whose sandbox mode is off. An unqualified
// pattern (approved for an unsandboxed run, or stored by an earlier
// version) still allows both.
func TestSandboxedApprovalScopedToSandbox(t *testing.T) {
	rm := func() func(model.Request) (*model.Response, error) { return calls(term("c1", "rm -rf build")) }
	// 1. Confined, manual: rm -rf asks; the pattern it would remember.
	h := newHarness(t, "manual", rm(), says("ok"))
	wantCompleted(t, h.runSandboxed(t, ""))
	asks := h.p.asked()
	if len(asks) != 1 {
		t.Fatalf("%d prompts, want 1", len(asks))
	}
	remembered := asks[0].Payload.(protocol.ApprovalPayload).Pattern
	if remembered != SandboxedPrefix+"rm-recursive" {
		t.Fatalf("a confined run's pattern is %q, want %q", remembered, SandboxedPrefix+"rm-recursive")
	}
	// 2. That pattern allows the next confined run.
	h = newHarness(t, "manual", rm(), says("ok"))
	h.p.allowed = map[string]bool{remembered: true}
	wantCompleted(t, h.runSandboxed(t, ""))
	if n := len(h.p.asked()); n != 0 {
		t.Fatalf("%d prompts for a confined run with its pattern remembered", n)
	}
	// 3. Sandbox unavailable: it runs unsandboxed, so it asks again, and
	// offers the unqualified pattern.
	h = newHarness(t, "manual", rm(), says("ok"))
	h.p.allowed = map[string]bool{remembered: true}
	wantCompleted(t, h.runSandboxed(t, "Landlock ABI 3 is too old"))
	if asks := h.p.asked(); len(asks) != 1 || asks[0].Payload.(protocol.ApprovalPayload).Pattern != "rm-recursive" {
		t.Fatalf("sandbox unavailable, sandboxed approval remembered: prompts %v, want 1 with pattern rm-recursive", asks)
	}
	// 4. Sandbox mode off: unsandboxed, asks again.
	h = newHarness(t, "manual", rm(), says("ok"))
	h.p.allowed = map[string]bool{remembered: true}
	wantCompleted(t, h.run(t))
	if n := len(h.p.asked()); n != 1 {
		t.Fatalf("sandbox off, sandboxed approval remembered: %d prompts, want 1", n)
	}
	// 5. An unqualified pattern allows a confined run and an unsandboxed one.
	for _, unavailable := range []string{"", "Landlock ABI 3 is too old"} {
		h = newHarness(t, "manual", rm(), says("ok"))
		h.p.allowed = map[string]bool{"rm-recursive": true}
		wantCompleted(t, h.runSandboxed(t, unavailable))
		if n := len(h.p.asked()); n != 0 {
			t.Fatalf("unavailable=%q: %d prompts with the unqualified pattern remembered", unavailable, n)
		}
	}
}
