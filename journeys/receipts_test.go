package journeys

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestDurableReceipts is journey 2 of issue 5: an input_id is a durable
// idempotency key. A resubmission (also after a SIGKILL and a restart)
// returns the original receipt and never runs the input again; a cancelled
// input stays cancelled; other text under the same input_id conflicts; a
// daemon-wide capacity of one turn makes a second session wait with reason
// "capacity"; an interrupted turn settles once and its receipt stays.
func TestDurableReceipts(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	const (
		doneText   = "summarise the readme"
		holdText   = "hold the line"
		cancelText = "this one gets cancelled"
		capText    = "second session waits for capacity"
		streamText = "tell me a long story"
		probeText  = "probe after the restart"
	)
	m.On(doneText, fixtures.Reply{Text: "The readme explains sessiond."})
	hold := fixtures.NewGate()
	m.On(holdText, fixtures.Reply{Text: "held and done", Gate: hold})
	stream := fixtures.NewGate()
	m.On(streamText, fixtures.Reply{Text: "Once upon a time, a daemon kept every receipt.", StreamGate: stream})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "limits: {max_concurrent_turns: 1}")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	c := d.Dial(t)
	s1 := createSession(t, c, map[string]any{}).SessionID
	s2 := createSession(t, c, map[string]any{}).SessionID

	// A completed input.
	done := submit(t, c, s1, "done-1", doneText)
	// The session was idle: admitted and started in one commit (issue 28).
	if done.Status != "started" || done.ExecutionGeneration == nil || *done.ExecutionGeneration != 1 || done.Duplicate || done.Seq != 1 {
		t.Fatalf("first receipt = %+v", done)
	}
	if out := waitTurn(t, c, done.AdmissionID); out != "completed" {
		t.Fatalf("done-1 outcome %q", out)
	}
	wantDuplicate := func(when string, r, orig receipt, status, outcome string) {
		t.Helper()
		if r.AdmissionID != orig.AdmissionID || r.SessionID != orig.SessionID || r.InputID != orig.InputID || r.Seq != orig.Seq ||
			!r.Duplicate || r.Status != status || r.Outcome == nil || *r.Outcome != outcome {
			t.Fatalf("%s: resubmitting %s returned %+v (outcome %v), want the receipt of %s with duplicate:true, %s/%s",
				when, orig.InputID, r, r.Outcome, orig.AdmissionID, status, outcome)
		}
	}
	wantDuplicate("before the restart", submit(t, c, s1, "done-1", doneText), done, "terminal", "completed")

	// Same input_id, other text: a conflict, never a new admission.
	wantConflict := func(when string) {
		t.Helper()
		err := c.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": s1, "input_id": "done-1", "text": doneText + " again"}, nil)
		if err == nil {
			t.Fatalf("%s: other text under input_id done-1 was admitted", when)
		}
		wantReason(t, err, -32000, "admission_conflict")
	}
	wantConflict("before the restart")

	// Cancel a queued input, then resubmit it. The capacity is one turn,
	// so while session 1 holds it, session 2's input waits for capacity.
	held := submit(t, c, s1, "hold-1", holdText)
	waitParked(t, hold, "hold-1")
	cancelled := submit(t, c, s1, "cancel-1", cancelText)
	if cancelled.Status != "queued" || cancelled.Reason != "busy" {
		t.Fatalf("queued receipt = %+v, want queued/busy", cancelled)
	}
	var cr receipt
	if err := c.Call(ctxT(t), "prompt.cancel", map[string]any{"session_id": s1, "admission_id": cancelled.AdmissionID}, &cr); err != nil {
		t.Fatalf("prompt.cancel: %v", err)
	}
	if cr.AdmissionID != cancelled.AdmissionID || cr.Status != "terminal" || cr.Outcome == nil || *cr.Outcome != "cancelled" {
		t.Fatalf("cancel receipt = %+v", cr)
	}
	wantCancelled := func(when string) {
		t.Helper()
		err := c.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": s1, "input_id": "cancel-1", "text": cancelText}, nil)
		if err == nil {
			t.Fatalf("%s: a cancelled input_id was admitted again", when)
		}
		wantReason(t, err, -32000, "cancelled")
	}
	wantCancelled("before the restart")
	err := c.Call(ctxT(t), "prompt.cancel", map[string]any{"session_id": s1, "admission_id": cancelled.AdmissionID}, nil)
	wantReason(t, err, -32000, "not_queued")

	capR := submit(t, c, s2, "cap-1", capText)
	if capR.Status != "queued" || capR.Reason != "capacity" {
		t.Fatalf("second session's receipt = %+v, want queued with reason capacity", capR)
	}
	if p := resume(t, c, s2).Pending; len(p) != 1 || p[0].Status != "queued" || p[0].Reason != "capacity" {
		t.Fatalf("second session's pending = %+v, want one queued with reason capacity", p)
	}
	if n := len(m.RequestsWithLastUser(capText)); n != 0 {
		t.Fatalf("the second session ran beyond the capacity (%d model requests)", n)
	}
	released := time.Now()
	hold.Release()
	if out := waitTurn(t, c, held.AdmissionID); out != "completed" {
		t.Fatalf("hold-1 outcome %q", out)
	}
	if out := waitTurn(t, c, capR.AdmissionID); out != "completed" {
		t.Fatalf("cap-1 outcome %q", out)
	}
	// It ran after the first finished: it started after hold-1 settled,
	// and reached the model only after the held reply was released.
	var times struct {
		HeldSettled string `db:"held_settled"`
		CapStarted  string `db:"cap_started"`
	}
	if err := db.Get(&times, `SELECT
		(SELECT settled_at FROM session_admissions WHERE admission_id = ?) AS held_settled,
		(SELECT started_at FROM session_admissions WHERE admission_id = ?) AS cap_started`,
		held.AdmissionID, capR.AdmissionID); err != nil {
		t.Fatal(err)
	}
	if times.CapStarted < times.HeldSettled {
		t.Fatalf("cap-1 started at %s, before hold-1 settled at %s", times.CapStarted, times.HeldSettled)
	}
	capReqs := m.RequestsWithLastUser(capText)
	if len(capReqs) != 1 || capReqs[0].ReceivedAt.Before(released) {
		t.Fatalf("cap-1 reached the model %d times (first at %v), want once after the release at %v", len(capReqs), capReqs, released)
	}

	// Interrupt a streaming turn: it settles once, interrupted.
	intR := submit(t, c, s1, "interrupt-1", streamText)
	waitParked(t, stream, "interrupt-1")
	started := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.started" && e.AdmissionID == intR.AdmissionID })
	if started.ExecutionGeneration == nil {
		t.Fatal("turn.started has no execution_generation")
	}
	gen := *started.ExecutionGeneration
	for _, stale := range []int64{gen - 1, gen + 1} {
		err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s1, "execution_generation": stale}, nil)
		wantReason(t, err, -32000, "stale_generation")
	}
	var ir struct {
		Interrupted *string `json:"interrupted"`
	}
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s1, "execution_generation": gen}, &ir); err != nil {
		t.Fatalf("session.interrupt: %v", err)
	}
	if ir.Interrupted == nil || *ir.Interrupted != intR.AdmissionID {
		t.Fatalf("session.interrupt = %v, want %s", ir.Interrupted, intR.AdmissionID)
	}
	// session.interrupt answers after the settle: the row is terminal now.
	wantRow(t, admissionRow(t, fixtures.Admissions(t, db, s1), intR.AdmissionID), "terminal", "interrupted")
	ir.Interrupted = nil
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s1}, &ir); err != nil || ir.Interrupted != nil {
		t.Fatalf("second session.interrupt = %v, %v; want {interrupted: null}", ir.Interrupted, err)
	}
	intDup := submit(t, c, s1, "interrupt-1", streamText)
	wantDuplicate("after the interrupt", intDup, intR, "terminal", "interrupted")
	if intDup.ExecutionGeneration == nil || *intDup.ExecutionGeneration != gen {
		t.Fatalf("interrupted receipt generation %v, want %d", intDup.ExecutionGeneration, gen)
	}

	// SIGKILL and restart: every receipt survives.
	d.SIGKILL(t)
	d.Restart(t)
	c = d.Dial(t)
	resume(t, c, s1)
	wantDuplicate("after the restart", submit(t, c, s1, "done-1", doneText), done, "terminal", "completed")
	wantDuplicate("after the restart", submit(t, c, s1, "interrupt-1", streamText), intR, "terminal", "interrupted")
	wantDuplicate("after the restart", submit(t, c, s2, "cap-1", capText), capR, "terminal", "completed")
	wantCancelled("after the restart")
	wantConflict("after the restart")

	// A probe behind them in the same FIFO: once it completed, anything a
	// resubmission had wrongly queued would have run before it.
	probe := submit(t, c, s1, "probe-1", probeText)
	if probe.Duplicate || probe.Seq != intR.Seq+1 {
		t.Fatalf("probe receipt = %+v, want a new admission with seq %d", probe, intR.Seq+1)
	}
	if out := waitTurn(t, c, probe.AdmissionID); out != "completed" {
		t.Fatalf("probe outcome %q", out)
	}
	for text, want := range map[string]int{doneText: 1, cancelText: 0, capText: 1, streamText: 1, holdText: 1, probeText: 1} {
		if n := len(m.RequestsWithLastUser(text)); n != want {
			t.Fatalf("%q reached the model %d times, want %d", text, n, want)
		}
	}
	rows := waitAllTerminal(t, db, s1)
	if len(rows) != 5 {
		t.Fatalf("session 1 has %d admissions, want 5 (no duplicates were admitted): %+v", len(rows), rows)
	}
	for _, r := range rows {
		want := map[string]string{"done-1": "completed", "hold-1": "completed", "cancel-1": "cancelled",
			"interrupt-1": "interrupted", "probe-1": "completed"}[r.InputID]
		wantRow(t, r, "terminal", want)
	}
	if rows := fixtures.Admissions(t, db, s2); len(rows) != 1 {
		t.Fatalf("session 2 has %d admissions, want 1", len(rows))
	}
	// The interrupted turn was settled exactly once.
	var completions []storedEvent
	for _, e := range storedEventsAfter(t, db, s1, 0) {
		if e.Type == "turn.completed" && e.AdmissionID.String == intR.AdmissionID {
			completions = append(completions, e)
		}
	}
	if len(completions) != 1 || completions[0].Generation.Int64 != gen {
		t.Fatalf("turn.completed events of the interrupted turn = %v, want exactly one with generation %d", completions, gen)
	}
	var payload struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(completions[0].Payload), &payload); err != nil || payload.Outcome != "interrupted" {
		t.Fatalf("turn.completed payload %s, want outcome interrupted", completions[0].Payload)
	}
}
