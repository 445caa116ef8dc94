package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
)

// Attacks on session.update's settings (the ACP bridge's mode, model and
// sandbox pickers) by paired clients (attack round on issue 26).

// TestAttackACPSessionClientCannotLoosenApprovals: a client paired for one
// session sets its session's approval_mode to "off" (the editor's "Don't
// ask") or from "strict" down to "manual". Either lets the model run
// commands the owner's mode would have asked about, with nobody asked: a
// widening of what the owner allowed, like answering "always", which is
// already refused to it. What should hold: forbidden, the session's mode
// unchanged; tightening (manual → strict) and the owner loosening pass.
func TestAttackACPSessionClientCannotLoosenApprovals(t *testing.T) {
	d := startTest(t, "")
	ctx := context.Background()
	owner := fixtures.Dial(t, d.desc.URL, d.token)
	var snap protocol.Snapshot
	if err := owner.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir()}, &snap); err != nil {
		t.Fatal(err)
	}
	sid := snap.SessionID
	scoped := dialPaired(t, d, map[string]any{"label": "phone", "session_id": sid})
	mode := func() string {
		t.Helper()
		var s protocol.Snapshot
		if err := owner.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": sid}, &s); err != nil {
			t.Fatal(err)
		}
		return s.ApprovalMode
	}
	update := func(c *fixtures.Client, m string) error {
		return c.Call(ctx, protocol.MethodSessionUpdate, map[string]any{"session_id": sid, "approval_mode": m}, nil)
	}
	forbidden := func(err error) bool {
		var re *fixtures.RPCError
		return errors.As(err, &re) && re.Reason() == string(protocol.ReasonForbidden)
	}
	if err := update(scoped, "off"); !forbidden(err) {
		t.Errorf("session-scoped approval_mode off: %v; want forbidden", err)
	}
	if got := mode(); got != "manual" {
		t.Errorf("after the refused off the session's mode is %q, want manual", got)
	}
	if err := update(scoped, "strict"); err != nil {
		t.Fatalf("session-scoped tightening manual → strict: %v", err)
	}
	if err := update(scoped, "manual"); !forbidden(err) {
		t.Errorf("session-scoped approval_mode strict → manual: %v; want forbidden", err)
	}
	if got := mode(); got != "strict" {
		t.Errorf("after the refused manual the session's mode is %q, want strict", got)
	}
	if err := update(scoped, "strict"); err != nil {
		t.Errorf("session-scoped strict → strict (no change): %v", err)
	}
	if err := update(owner, "off"); err != nil {
		t.Errorf("the owner's approval_mode off: %v", err)
	}
	if err := update(scoped, "manual"); err != nil {
		t.Errorf("session-scoped tightening off → manual: %v", err)
	}
	// A daemon-wide paired client is a full write client: it may, as the
	// owner may (it can answer "always" too).
	wide := dialPaired(t, d, map[string]any{"label": "laptop"})
	if err := update(wide, "off"); err != nil {
		t.Errorf("daemon-wide paired client's approval_mode off: %v", err)
	}
}
