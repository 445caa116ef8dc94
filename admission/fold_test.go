package admission_test

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/transcript"
)

// commits counts the write transactions the store committed while f ran.
func commits(e *env, f func()) int64 {
	_, before := e.db.Stats()
	f()
	_, after := e.db.Stats()
	return after - before
}

// eventTypes lists the types (and admission statuses) of the session's
// events after seq.
func eventTypes(t *testing.T, e *env, sess string, after int64) []string {
	t.Helper()
	var out []string
	for _, ev := range e.events(sess) {
		if ev.Seq <= after {
			continue
		}
		s := ev.Type
		if ev.Type == string(protocol.EventAdmissionUpdated) {
			s += ":" + string(receiptOf(t, ev).Status)
		}
		out = append(out, s)
	}
	return out
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An input to an idle session is admitted and started in one commit
// (issue 28): the receipt is the started one, Start ran once with the
// claimed admission, and the events say queued, started, turn.started in
// that order, with the user message in the transcript.
func TestAdmitStartsAnIdleSessionInOneCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	var got []admission.Admission
	r := req("s", "in-1", "hello")
	r.Take = true
	r.Start = func(a admission.Admission) { got = append(got, a) }
	var res admission.AdmitResult
	n := commits(e, func() {
		var err error
		res, err = e.q.AdmitWith(ctx, r, always(false))
		check(t, err)
	})
	if n != 1 {
		t.Fatalf("admit to an idle session: %d commits, want 1", n)
	}
	rec := res.Receipt
	if !res.Started || rec.Status != admission.StatusStarted || rec.ExecutionGeneration == nil || *rec.ExecutionGeneration != 1 || rec.Reason != "" {
		t.Fatalf("receipt %+v started=%v, want started with generation 1", rec, res.Started)
	}
	if len(got) != 1 || got[0].AdmissionID != rec.AdmissionID || got[0].Generation() != 1 || got[0].LeaseEpoch == 0 {
		t.Fatalf("Start ran with %+v", got)
	}
	if row := e.mustRow(rec.AdmissionID); row.Status != admission.StatusStarted || row.Generation() != 1 || row.Daemon.V != e.epoch {
		t.Fatalf("row %+v", row)
	}
	if g := e.sess("s").Gen; g != 1 {
		t.Fatalf("session generation %d", g)
	}
	want := []string{"admission.updated:queued", "admission.updated:started", "turn.started"}
	if ev := eventTypes(t, e, "s", 0); !sameStrings(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	if ms := e.messages("s"); len(ms) != 1 || ms[0].Role != transcript.RoleUser || ms[0].Content != "hello" {
		t.Fatalf("transcript %+v", ms)
	}
	// The same input again is a duplicate of the started admission; Start
	// does not run again.
	dup, err := e.q.AdmitWith(ctx, r, always(false))
	check(t, err)
	if !dup.Receipt.Duplicate || dup.Started || dup.Receipt.Status != admission.StatusStarted || len(got) != 1 {
		t.Fatalf("duplicate %+v, Start ran %d times", dup, len(got))
	}

	// Busy now: the next input only queues (reason busy), Start does not run.
	r2 := req("s", "in-2", "next")
	r2.Start = func(a admission.Admission) { t.Errorf("Start ran for %s behind a running turn", a.InputID) }
	res2, err := e.q.AdmitWith(ctx, r2, always(false))
	check(t, err)
	if res2.Started || res2.Receipt.Status != admission.StatusQueued || res2.Receipt.Reason != admission.WaitBusy {
		t.Fatalf("behind a running turn: %+v", res2)
	}
}

// Without ownership (another live daemon owns the session) or behind an
// unknown admission, Start never runs and the input stays queued with its
// reason.
func TestAdmitDoesNotStartWhatItMayNot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	noStart := func(a admission.Admission) { t.Errorf("Start ran for %s", a.InputID) }

	// Unowned and not taken: not this daemon's to run.
	r := req("s", "in-1", "hello")
	r.Start = noStart
	res, err := e.q.AdmitWith(ctx, r, always(true))
	check(t, err)
	if res.Started || res.Receipt.Status != admission.StatusQueued || res.Receipt.Reason != admission.WaitCapacity {
		t.Fatalf("unowned: %+v", res)
	}
	// Claimed, then lost in a crash: unknown holds the FIFO.
	e.claim("s")
	e.crash()
	r = req("s", "in-2", "after the crash")
	r.Take, r.Start = true, noStart
	res, err = e.q.AdmitWith(ctx, r, always(false))
	check(t, err)
	if res.Started || res.Receipt.Status != admission.StatusQueued || res.Receipt.Reason != admission.WaitUnknown {
		t.Fatalf("behind unknown: %+v", res)
	}
}

// Settling a turn while input waits starts the next one in the same commit
// (issue 28): turn.completed of N before turn.started of N+1, generations
// in order; with nothing queued it is a plain settle.
func TestSettleNextStartsTheQueuedInputInOneCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "in-1", "first")
	a1 := e.claim("s")
	e.admit("s", "in-2", "second")
	last := e.sess("s").LastEvent
	var got []admission.Admission
	var settled, started admission.Admission
	n := commits(e, func() {
		var err error
		settled, started, err = e.q.SettleNext(ctx, a1, admission.OutcomeCompleted, "", nil, func(a admission.Admission) { got = append(got, a) })
		check(t, err)
	})
	if n != 1 {
		t.Fatalf("settle with input queued: %d commits, want 1", n)
	}
	if settled.Status != admission.StatusTerminal || settled.Outcome.String != "completed" {
		t.Fatalf("settled %+v", settled)
	}
	if started.InputID != "in-2" || started.Status != admission.StatusStarted || started.Generation() != 2 {
		t.Fatalf("started %+v", started)
	}
	if len(got) != 1 || got[0].AdmissionID != started.AdmissionID {
		t.Fatalf("next ran with %+v", got)
	}
	want := []string{"admission.updated:terminal", "turn.completed", "admission.updated:started", "turn.started"}
	if ev := eventTypes(t, e, "s", last); !sameStrings(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	if ms := e.messages("s"); len(ms) != 2 || ms[1].Content != "second" {
		t.Fatalf("transcript %+v", ms)
	}
	// Nothing queued: the settle alone.
	got = nil
	_, none, err := e.q.SettleNext(ctx, started, admission.OutcomeCompleted, "", nil, func(a admission.Admission) { got = append(got, a) })
	check(t, err)
	if none.AdmissionID != "" || len(got) != 0 {
		t.Fatalf("nothing queued, yet started %+v (hook %d)", none, len(got))
	}
	if st := e.mustRow(started.AdmissionID); st.Status != admission.StatusTerminal {
		t.Fatalf("second turn %s", st.Status)
	}
}

// A crash right after the folded commit finds turn N terminal and turn N+1
// started: the boot makes N+1 unknown (its effects are uncertain) and
// holds the FIFO; nothing in between exists to recover.
func TestCrashAfterSettleNextLeavesTheNextTurnUnknown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "in-1", "first")
	a1 := e.claim("s")
	e.admit("s", "in-2", "second")
	e.admit("s", "in-3", "third")
	_, a2, err := e.q.SettleNext(ctx, a1, admission.OutcomeCompleted, "", nil, func(admission.Admission) {})
	check(t, err)
	res := e.crash()
	if len(res.Unknown) != 1 || res.Unknown[0].AdmissionID != a2.AdmissionID {
		t.Fatalf("unknown after the crash: %+v", res.Unknown)
	}
	rows := e.rows("s")
	if rows[0].Status != admission.StatusTerminal || rows[1].Status != admission.StatusUnknown || rows[2].Status != admission.StatusQueued {
		t.Fatalf("rows after the crash: %s %s %s", rows[0].Status, rows[1].Status, rows[2].Status)
	}
	if _, err := e.q.Claim(ctx, "s"); errName(err) != "ErrUnknownExecution" {
		t.Fatalf("claim behind unknown: %v", errName(err))
	}
	if _, err := e.q.ResolveUnknown(ctx, "s", a2.AdmissionID, a2.Generation(), nil); err != nil {
		t.Fatal(err)
	}
	if a3 := e.claim("s"); a3.InputID != "in-3" || a3.Generation() != 3 {
		t.Fatalf("after resolve: %+v", a3)
	}
}

// The scheduler settles a finished turn and starts the session's queued
// input in one commit, and the next turn is the running one at once.
func TestSchedulerSettleStartsTheNextTurnInOneCommit(t *testing.T) {
	e := newEnv(t)
	e.session("a")
	se := newSched(t, e, 4, nil)
	a1 := se.submit("a", "a1")
	se.f.next("a1")
	se.submit("a", "a2")
	var a2 admission.Admission
	n := commits(e, func() {
		se.f.finish("a1", admission.Result{Outcome: admission.OutcomeCompleted})
		a2 = se.f.next("a2")
	})
	if n != 1 {
		t.Fatalf("settle of a1 and start of a2: %d commits, want 1", n)
	}
	se.waitStatus(a1.AdmissionID, admission.StatusTerminal, "completed")
	if r, ok := se.s.Running("a"); !ok || r.AdmissionID != a2.AdmissionID || a2.Generation() != 2 {
		t.Fatalf("running %+v %v, started %+v", r, ok, a2)
	}
	// The next turn is live: an interrupt stops it.
	got, ok, err := se.s.Interrupt(context.Background(), "a", a2.Generation())
	if err != nil || !ok || got.Outcome.String != "interrupted" {
		t.Fatalf("interrupt a2: %+v %v %v", got, ok, err)
	}
	waitFor(t, waitLong, "idle", func() bool { return se.s.RunningCount() == 0 })
	se.f.check()
}

// A reserved slot lets the admit start the input in its own commit; the
// scheduler refuses a reservation where a turn could not start now.
func TestSchedulerReserveStartsTheInputInTheAdmit(t *testing.T) {
	e := newEnv(t)
	e.session("a")
	e.session("b")
	se := newSched(t, e, 1, nil)
	ctx := context.Background()
	r := se.s.Reserve("a")
	if r == nil {
		t.Fatal("no reservation in an idle scheduler")
	}
	if se.s.Reserve("b") != nil {
		t.Fatal("a second reservation beyond max_concurrent_turns 1")
	}
	rq := req("a", "a1", "text of a1")
	rq.Take, rq.Start = true, r.Start
	var res admission.AdmitResult
	n := commits(e, func() {
		var err error
		res, err = se.q.AdmitWith(ctx, rq, se.s.AtCapacity)
		check(t, err)
	})
	r.Release()
	if n != 1 || !res.Started {
		t.Fatalf("admit with a reservation: %d commits, started %v", n, res.Started)
	}
	se.f.next("a1")
	if se.s.Reserve("a") != nil || se.s.Reserve("b") != nil {
		t.Fatal("a reservation while the only slot runs a turn")
	}
	se.f.finish("a1", admission.Result{Outcome: admission.OutcomeCompleted})
	se.waitStatus(res.Receipt.AdmissionID, admission.StatusTerminal, "completed")
	waitFor(t, waitLong, "idle", func() bool { return se.s.RunningCount() == 0 })
	// A released reservation that started nothing frees its slot.
	r = se.s.Reserve("b")
	r.Release()
	if r = se.s.Reserve("b"); r == nil {
		t.Fatal("the slot of a released reservation stayed taken")
	}
	r.Release()
	stopCtx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	check(t, se.s.Stop(stopCtx))
	if se.s.Reserve("a") != nil {
		t.Fatal("a reservation after Stop")
	}
	se.f.check()
}
