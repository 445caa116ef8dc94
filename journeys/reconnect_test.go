package journeys

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

// TestReconnectResumesMissedEvents is journey 4 of issue 5 (first half): a
// client that disconnects mid-turn and comes back with after_seq gets
// every durable event it missed exactly once and in order, as the store's
// events table holds them, then the live ones; also when the daemon was
// restarted (killed, or stopped gracefully) in between.
func TestReconnectResumesMissedEvents(t *testing.T) {
	for _, mode := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(mode, func(t *testing.T) { reconnectJourney(t, mode == "SIGKILL") })
	}
}

// resumeAndCatchUp resumes sessionID on c after `after` and returns the
// snapshot, checking that its events are exactly the store's in
// (after, last_seq].
func resumeAndCatchUp(t *testing.T, db *sqlx.DB, c *fixtures.Client, sessionID string, after int64) snapshot {
	t.Helper()
	snap := resumeAfter(t, c, sessionID, after)
	if snap.SnapshotRequired {
		t.Fatalf("resume after_seq %d: snapshot_required with only a few events missed", after)
	}
	if snap.LastSeq <= after {
		t.Fatalf("resume after_seq %d: last_seq %d, but events were missed", after, snap.LastSeq)
	}
	var want []storedEvent
	for _, e := range storedEventsAfter(t, db, sessionID, after) {
		if e.Seq <= snap.LastSeq {
			want = append(want, e)
		}
	}
	sameEvents(t, "resume's events", snap.Events, want)
	return snap
}

// wantCaughtUp waits until c has received, live after snap, every event
// the store holds for sessionID, then checks that what c got in the
// snapshot and live is exactly the store's events after `after`: each
// once, in order.
func wantCaughtUp(t *testing.T, what string, db *sqlx.DB, c *fixtures.Client, sessionID string, after int64, snap snapshot) {
	t.Helper()
	want := storedEventsAfter(t, db, sessionID, after)
	if len(want) == 0 {
		t.Fatalf("%s: the store holds no events after seq %d", what, after)
	}
	last := want[len(want)-1].Seq
	fixtures.Eventually(t, wait, "the client to receive every event up to the store's last", func() bool {
		return maxSeq(durableEvents(c.Events(), sessionID), snap.LastSeq) >= last
	})
	live := durableEvents(c.Events(), sessionID)
	sameEvents(t, what+" (snapshot events, then live ones)", append(append([]fixtures.Event(nil), snap.Events...), live...), want)
}

func reconnectJourney(t *testing.T, crash bool) {
	m := fixtures.NewFakeModel(t)
	const (
		inspect   = "inspect the workspace"
		migrate   = "run the migration"
		afterward = "after the migration"
	)
	firstCall := fixtures.NewGate()  // holds turn 1's first model call
	finalWords := fixtures.NewGate() // holds turn 1's final answer mid-stream
	m.On(inspect,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", `{"command":"echo inspected"}`)}, Gate: firstCall},
		fixtures.Reply{Text: "The workspace looks fine to me.", StreamGate: finalWords})
	migrating := fixtures.NewGate() // never released: the daemon stops mid-stream
	m.On(migrate, fixtures.Reply{Text: "Migrating the tables now, one by one.", StreamGate: migrating})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)

	// Phase 1: a disconnect mid-turn, on one daemon.
	c1 := d.Dial(t)
	created := createSession(t, c1, map[string]any{})
	sid := created.SessionID
	r1 := submit(t, c1, sid, "inspect-1", inspect)
	waitParked(t, firstCall, "turn 1's first model call")
	c1.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.started" && e.AdmissionID == r1.AdmissionID })
	seen := maxSeq(durableEvents(c1.Events(), sid), created.LastSeq)
	c1.Close()
	// What happens while nobody listens: the tool call, its run, the
	// second model call (held mid-stream).
	firstCall.Release()
	waitParked(t, finalWords, "turn 1's final answer")
	c2 := d.Dial(t)
	snap := resumeAndCatchUp(t, db, c2, sid, seen)
	var types []string
	for _, e := range snap.Events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "message.completed,tool.started,tool.running,tool.completed" {
		t.Fatalf("missed events = %s, want the tool call, its start, its process and its result", got)
	}
	finalWords.Release()
	if out := waitTurn(t, c2, r1.AdmissionID); out != "completed" {
		t.Fatalf("turn 1 outcome %q", out)
	}
	wantCaughtUp(t, "after the reconnect", db, c2, sid, seen, snap)

	// Phase 2: a disconnect mid-turn, then a restart.
	r2 := submit(t, c2, sid, "migrate-1", migrate)
	f2 := submit(t, c2, sid, "after-1", afterward)
	waitParked(t, migrating, "turn 2")
	c2.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.started" && e.AdmissionID == r2.AdmissionID })
	seen = maxSeq(durableEvents(c2.Events(), sid), snap.LastSeq)
	c2.Close()
	if crash {
		d.SIGKILL(t)
	} else if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d", code)
	}
	d.Restart(t)
	c3 := d.Dial(t)
	// Graceful: the follower starts by itself at boot, so the resume
	// races with its events; either way each must arrive exactly once.
	snap = resumeAndCatchUp(t, db, c3, sid, seen)
	if crash {
		if len(snap.Pending) != 2 || snap.Pending[0].AdmissionID != r2.AdmissionID || snap.Pending[0].Status != "unknown" {
			t.Fatalf("pending after the crash = %+v", snap.Pending)
		}
		// The boot's own event (the turn became unknown) was missed too.
		last := snap.Events[len(snap.Events)-1]
		if last.Type != "admission.updated" || last.AdmissionID != r2.AdmissionID || !strings.Contains(string(last.Payload), `"status":"unknown"`) {
			t.Fatalf("last missed event = %s %s, want admission.updated unknown for %s", last.Type, last.Payload, r2.AdmissionID)
		}
		resolveUnknownAdmission(t, c3, sid, r2.AdmissionID, *last.ExecutionGeneration)
	}
	rows := waitAllTerminal(t, db, sid)
	wantRow(t, admissionRow(t, rows, r2.AdmissionID), "terminal", "interrupted")
	wantRow(t, admissionRow(t, rows, f2.AdmissionID), "terminal", "completed")
	wantCaughtUp(t, "after the restart and the reconnect", db, c3, sid, seen, snap)
	// The events span both daemons: the interrupted turn's and the
	// follower's are all there.
	var sawInterrupted, sawFollower bool
	for _, e := range append(snap.Events, durableEvents(c3.Events(), sid)...) {
		sawInterrupted = sawInterrupted || e.Type == "turn.completed" && e.AdmissionID == r2.AdmissionID
		sawFollower = sawFollower || e.Type == "turn.completed" && e.AdmissionID == f2.AdmissionID
	}
	if !sawInterrupted || !sawFollower {
		t.Fatalf("after the restart: turn.completed of the stopped turn %v, of the follower %v", sawInterrupted, sawFollower)
	}
}

// TestReconnectTwoClientsShareOneSession is journey 4 of issue 5 (second half): two
// clients on one session both see its events, and when both answer the
// same approval the first answer wins and the second is told
// already_resolved.
func TestReconnectTwoClientsShareOneSession(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	cwd := t.TempDir()
	_, file := makeVictim(t, cwd, "scratch")
	const ask = "clean the scratch directory"
	// The reply after the tool result waits at a gate until both answers
	// are in: a second answer is already_resolved only while the execution
	// is live; once the turn has completed it is stale_generation
	// (protocol.md), and an unheld fake model completes it at once.
	after := fixtures.NewGate()
	t.Cleanup(after.Release)
	m.On(ask, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", `{"command":"rm -rf scratch"}`)}},
		fixtures.Reply{Text: "Fine, I left it alone.", Gate: after})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 600}")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	ca, cb := d.Dial(t), d.Dial(t)
	snapA := createSession(t, ca, map[string]any{"cwd": cwd})
	sid := snapA.SessionID
	snapB := resume(t, cb, sid)

	r := submit(t, ca, sid, "clean-1", ask)
	pa := waitPrompt(t, ca, r.AdmissionID, "approval")
	pb := waitPrompt(t, cb, r.AdmissionID, "approval")
	if pa != pb {
		t.Fatalf("the clients saw different prompts: %+v and %+v", pa, pb)
	}
	res, err := answerApproval(t, ca, sid, pa, "deny")
	if err != nil || res.Status != "resolved" || res.PromptID != pa.PromptID {
		t.Fatalf("first answer: %+v, %v; want resolved", res, err)
	}
	res, err = answerApproval(t, cb, sid, pb, "once")
	if err != nil || res.Status != "already_resolved" || res.PromptID != pb.PromptID {
		t.Fatalf("second answer: %+v, %v; want already_resolved", res, err)
	}
	after.Release()
	for _, c := range []*fixtures.Client{ca, cb} {
		if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
			t.Fatalf("outcome %q", out)
		}
		// Both see the prompt closed with the first (deny) answer.
		e := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "prompt.closed" && e.AdmissionID == r.AdmissionID })
		var closed struct {
			PromptID   string `json:"prompt_id"`
			Resolution string `json:"resolution"`
			Response   struct {
				Choice string `json:"choice"`
			} `json:"response"`
		}
		if err := json.Unmarshal(e.Payload, &closed); err != nil || closed.PromptID != pa.PromptID ||
			closed.Resolution != "answered" || closed.Response.Choice != "deny" {
			t.Fatalf("prompt.closed = %s, want answered with deny", e.Payload)
		}
	}
	// The deny won: the command never ran, and the model was told so.
	wantIntact(t, file)
	if _, err := os.Stat(filepath.Join(cwd, "scratch")); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(m, ask); len(got) != 1 || !strings.Contains(got[0], "denied") {
		t.Fatalf("tool results = %v, want one saying denied", got)
	}
	// Both clients got every event of the session since they subscribed,
	// once each, in order.
	wantCaughtUp(t, "client A", db, ca, sid, snapA.LastSeq, snapshot{LastSeq: snapA.LastSeq})
	wantCaughtUp(t, "client B", db, cb, sid, snapB.LastSeq, snapshot{LastSeq: snapB.LastSeq})
}
