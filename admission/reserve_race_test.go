package admission_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/store"
)

// A scheduling pass that is claiming a session holds the slot it checked:
// prompt.submit's Reserve for another idle session, arriving while that
// claim is in flight, must not get the same slot (max_concurrent_turns
// would be exceeded by the admit+claim that follows). The claim is
// caught in flight deterministically: the session is unowned, so the
// claim takes it first, and OnTake (in that take's transaction) asks for
// the reservation as a concurrent prompt.submit would.
func TestReserveDuringAClaimOfTheSchedulerKeepsTheCapacity(t *testing.T) {
	e := newEnv(t)
	e.session("b")
	e.session("t")
	var (
		mu    sync.Mutex
		s     *admission.Scheduler
		asked bool
		r     *admission.Reservation
	)
	e.q.OnTake = func(tx *store.Tx, sessionID string) error {
		mu.Lock()
		defer mu.Unlock()
		if sessionID == "b" && !asked {
			asked = true
			r = s.Reserve("t")
		}
		return nil
	}
	se := newSched(t, e, 1, nil)
	f := se.f
	mu.Lock()
	s = se.s
	mu.Unlock()
	ctx := context.Background()
	_, err := e.q.Admit(ctx, req("b", "b1", "x"), s.AtCapacity)
	check(t, err)
	s.Wake("b")
	f.next("b1")
	mu.Lock()
	res, raced := r, asked
	mu.Unlock()
	if !raced {
		t.Fatal("the scheduler's claim of b never took it (OnTake): the reservation did not race the claim")
	}
	if res == nil {
		return
	}
	// The admit+claim that a granted reservation allows: two turns run.
	tr := req("t", "t1", "y")
	tr.Take, tr.Start = true, res.Start
	out, err := e.q.AdmitWith(ctx, tr, s.AtCapacity)
	res.Release()
	check(t, err)
	if out.Started {
		f.next("t1")
	}
	t.Fatalf("Reserve granted the only slot while the scheduler's claim held it: t1 started=%v, %d turns run with max_concurrent_turns=1",
		out.Started, s.RunningCount())
}

// A turn that an admit+claim starts after the daemon self-fenced (its
// lease could not be renewed while the admit was committing) is stopped
// like the turns that ran at the fence: its ctx is cancelled with
// ErrLeaseLost, so that its tools stop before another daemon may take the
// session.
func TestReservedTurnStartedAfterTheFenceIsStopped(t *testing.T) {
	e := newEnv(t)
	e.session("a")
	se := newSched(t, e, 2, nil)
	f, s := se.f, se.s
	r := s.Reserve("a")
	if r == nil {
		t.Fatal("no reservation on an idle scheduler")
	}
	s.Fence() // the lease was lost while the admit was on its way
	ar := req("a", "a1", "x")
	ar.Take, ar.Start = true, r.Start
	res, err := e.q.AdmitWith(context.Background(), ar, s.AtCapacity)
	r.Release()
	check(t, err)
	if !res.Started {
		t.Fatalf("admit did not start: %+v", res)
	}
	f.next("a1")
	waitFor(t, waitLong, "the turn started after the fence to be cancelled with ErrLeaseLost", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return errors.Is(f.cause["a1"], admission.ErrLeaseLost)
	})
}

// The receipt of an input that cannot start says why while another
// session's admit+claim holds the only slot (its reservation): capacity,
// as when a turn runs there. Its own reservation does not count against
// it (Reservation.AtCapacity).
func TestReceiptReasonCountsTheReservedSlots(t *testing.T) {
	e := newEnv(t)
	e.session("a")
	e.session("b")
	se := newSched(t, e, 1, nil)
	f, s := se.f, se.s
	ctx := context.Background()
	ra := s.Reserve("a") // a's admit+claim is on its way
	if ra == nil {
		t.Fatal("no reservation on an idle scheduler")
	}
	released := false
	defer func() {
		if !released {
			ra.Release() // a failure below: Stop waits for it
		}
	}()
	if !s.AtCapacity() || s.FreeSlots() != 0 || ra.AtCapacity() {
		t.Fatalf("with the only slot reserved: AtCapacity %v, FreeSlots %d, the reservation's own AtCapacity %v",
			s.AtCapacity(), s.FreeSlots(), ra.AtCapacity())
	}
	rec, err := e.q.Admit(ctx, req("b", "b1", "x"), s.AtCapacity)
	check(t, err)
	if rec.Status != admission.StatusQueued || rec.Reason != admission.WaitCapacity {
		t.Fatalf("receipt while the only slot is reserved: %s reason %q, want queued/capacity", rec.Status, rec.Reason)
	}
	ar := req("a", "a1", "y")
	ar.Take, ar.Start = true, ra.Start
	res, err := e.q.AdmitWith(ctx, ar, ra.AtCapacity)
	ra.Release()
	released = true
	check(t, err)
	if !res.Started {
		t.Fatalf("a1 did not start on its reservation: %+v", res)
	}
	f.next("a1")
}
