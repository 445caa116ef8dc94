package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// A read-only client changes no setting, not even to tighten one.
	ro := dialPaired(t, d, map[string]any{"label": "viewer", "session_id": sid, "read_only": true})
	for _, p := range []map[string]any{{"approval_mode": "strict"}, {"model": "other-model"}, {"sandbox": map[string]any{"mode": "read-only"}}} {
		p["session_id"] = sid
		if err := ro.Call(ctx, protocol.MethodSessionUpdate, p, nil); !forbidden(err) {
			t.Errorf("read-only client's session.update %v: %v; want forbidden", p, err)
		}
	}
	// A daemon-wide paired client is a full write client: it may, as the
	// owner may (it can answer "always" too).
	wide := dialPaired(t, d, map[string]any{"label": "laptop"})
	if err := update(wide, "off"); err != nil {
		t.Errorf("daemon-wide paired client's approval_mode off: %v", err)
	}
}

// TestAttackACPDeleteDropsAQueuedInput: with limits.max_concurrent_turns
// reached, an editor's prompt waits queued in session B (acknowledged: it
// has its receipt, and the bridge or session.turn waits for its turn);
// another client deletes B. session.delete refused only a started or
// unknown admission, so it removed B with the queued input: the input was
// lost without an outcome, and its submitter, subscribed to B, waited for
// an event that never comes (the bridge's session/prompt never answered).
// What should hold: session_busy while an input is queued; once it is
// withdrawn (prompt.cancel) the delete passes.
func TestAttackACPDeleteDropsAQueuedInput(t *testing.T) {
	d := startTest(t, "limits: {max_concurrent_turns: 1}\n")
	ctx := context.Background()
	c := fixtures.Dial(t, d.desc.URL, d.token)
	var a, b protocol.Snapshot
	for _, s := range []*protocol.Snapshot{&a, &b} {
		if err := c.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir()}, s); err != nil {
			t.Fatal(err)
		}
	}
	submit(t, c, a.SessionID, "a-1", "hold the only turn slot")
	c.WaitEvent(t, scopeWait, func(ev fixtures.Event) bool { return ev.SessionID == a.SessionID && ev.Type == "turn.started" })
	r := submit(t, c, b.SessionID, "b-1", "wait for a slot")
	if r.Status != "queued" {
		t.Fatalf("b-1 is %s, want queued behind max_concurrent_turns", r.Status)
	}
	err := c.Call(ctx, protocol.MethodSessionDelete, map[string]any{"session_id": b.SessionID}, nil)
	var re *fixtures.RPCError
	if !errors.As(err, &re) || re.Reason() != string(protocol.ReasonSessionBusy) {
		t.Errorf("session.delete with a queued input: %v; want session_busy", err)
	}
	var receipt protocol.Receipt
	if err := c.Call(ctx, protocol.MethodPromptCancel, map[string]any{"session_id": b.SessionID, "admission_id": r.AdmissionID}, &receipt); err != nil {
		t.Fatalf("prompt.cancel of the queued input after the delete: %v (the acknowledged input is gone)", err)
	}
	if receipt.Outcome == nil || *receipt.Outcome != "cancelled" {
		t.Errorf("the withdrawn input: %+v, want outcome cancelled", receipt)
	}
	if err := c.Call(ctx, protocol.MethodSessionDelete, map[string]any{"session_id": b.SessionID}, nil); err != nil {
		t.Errorf("session.delete once the queued input is withdrawn: %v", err)
	}
}

// TestAttackACPSandboxWidenedThroughRoots: session.update's sandbox tries
// to widen the writable roots through every field combination: "/", a ".."
// out of the configured root, a symlink inside it that points outside
// (with a missing path beneath it, or dangling), a relative path, and a
// narrower mode carrying a wider root. Found: root/escape/deeper (escape
// → outside, deeper missing) and root/dangling were accepted, because
// sandbox.RealPath resolved symlinks only of a path that exists; the
// session then showed a writable root "inside" the configured one that
// is outside it, and every later command failed with a misleading
// "symlink now stands in its path" (the helper's RESOLVE_NO_SYMLINKS held
// the line). What should hold: each is invalid_params and the session's
// sandbox stays as it was; a root inside the configured one narrows.
func TestAttackACPSandboxWidenedThroughRoots(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "not-yet"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startTest(t, fmt.Sprintf("sandbox: {mode: workspace-write, network: false, writable_roots: [%q]}\n", root))
	sid := mustSession(t, d)
	before, err := d.snapshot(sid, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range []map[string]any{
		{"writable_roots": []string{"/"}},
		{"writable_roots": []string{root + "/../" + filepath.Base(outside)}},
		{"writable_roots": []string{filepath.Join(root, "escape")}},
		{"writable_roots": []string{filepath.Join(root, "escape", "deeper")}},
		{"writable_roots": []string{filepath.Join(root, "dangling")}},
		{"writable_roots": []string{filepath.Join(root, "dangling", "deeper")}},
		{"writable_roots": []string{"sub"}},
		{"mode": "read-only", "writable_roots": []string{"/"}},
		{"mode": "workspace-write", "network": true},
		{"writable_roots": []string{filepath.Join(root, "sub"), "/etc"}},
	} {
		res, err := call(t, d.sessionUpdate, map[string]any{"session_id": sid, "sandbox": sb})
		if err == nil {
			t.Logf("sandbox %v accepted: %+v", sb, res)
		}
		wantWire(t, err, protocol.ReasonInvalidParams)
		after, err := d.snapshot(sid, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(after.Sandbox) != fmt.Sprint(before.Sandbox) {
			t.Errorf("sandbox %v changed the session's sandbox from %+v to %+v", sb, before.Sandbox, after.Sandbox)
		}
	}
	if _, err := call(t, d.sessionUpdate, map[string]any{"session_id": sid, "sandbox": map[string]any{"writable_roots": []string{filepath.Join(root, "sub")}}}); err != nil {
		t.Errorf("narrowing to a root inside the configured one: %v", err)
	}
}
