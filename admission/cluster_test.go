package admission_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"
)

// Two daemons (two boot epochs) sharing one store, as two sessiond
// processes on one PostgreSQL database do. Leases are set directly on the
// database's clock: lease(epoch, ms) makes it expire ms from now (a past
// instant when negative).

// daemon records a new daemon (a boot epoch) with a lease of a minute and
// returns its Queue.
func (e *env) daemon(label string) *admission.Queue {
	e.t.Helper()
	var epoch cluster.DaemonID
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		return tx.Get(&epoch, `INSERT INTO boot_epochs (pid, version, started_at, label) VALUES (1, 'test', ?, ?) RETURNING epoch`,
			store.Now(), label)
	}); err != nil {
		e.t.Fatal(err)
	}
	e.lease(epoch, 60_000)
	return &admission.Queue{DB: e.db, Daemon: epoch, Label: label}
}

func (e *env) lease(epoch cluster.DaemonID, ms int64) {
	e.t.Helper()
	if err := e.exec(`UPDATE boot_epochs SET lease_expires_ms = `+cluster.DialectOf(e.db).NowMS()+` + ? WHERE epoch = ?`, ms, epoch); err != nil {
		e.t.Fatal(err)
	}
}

type owner struct {
	Daemon *cluster.DaemonID `db:"owner_daemon"`
	Lease  int64             `db:"lease_epoch"`
}

func (e *env) owner(sess string) owner {
	e.t.Helper()
	var o owner
	if err := e.db.Get(context.Background(), &o, `SELECT owner_daemon, lease_epoch FROM sessions WHERE session_id = ?`, sess); err != nil {
		e.t.Fatal(err)
	}
	return o
}

func TestTakeoverNeedsAnExpiredLeaseAndFencesTheOldOwner(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.daemon(""), e.daemon("")
	e.session("s")
	e.admit("s", "in-1", "one")
	e.admit("s", "in-2", "two")
	run, err := a.Claim(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if o := e.owner("s"); o.Daemon == nil || *o.Daemon != a.Daemon || o.Lease != 1 || run.LeaseEpoch != 1 {
		t.Fatalf("after A's claim: owner %+v, claimed under %d", o, run.LeaseEpoch)
	}
	x := run.Execution()
	check := func() error { return e.db.InTx(ctx, func(tx *store.Tx) error { return x.Check(tx) }) }
	if err := check(); err != nil {
		t.Fatalf("A's own execution: %v", err)
	}

	// A is alive: B may neither take nor claim the session.
	if _, _, err := b.Take(ctx, "s"); !errors.Is(err, admission.ErrNotOwner) {
		t.Fatalf("take from a live owner: %v, want ErrNotOwner", err)
	}
	if _, err := b.Claim(ctx, "s"); !errors.Is(err, admission.ErrNotOwner) {
		t.Fatalf("claim of a live owner's session: %v, want ErrNotOwner", err)
	}
	if taken, err := b.TakeOrphans(ctx, -1); err != nil || len(taken) != 0 {
		t.Fatalf("TakeOrphans with A alive took %+v (%v)", taken, err)
	}

	// A's lease expires on the database's clock: B takes the session with
	// the boot rules (started -> unknown), under a new lease epoch.
	e.lease(a.Daemon, -1)
	taken, err := b.TakeOrphans(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 1 || taken[0].SessionID != "s" || taken[0].From != a.Daemon || taken[0].LeaseEpoch != 2 ||
		len(taken[0].Unknown) != 1 || taken[0].Unknown[0].AdmissionID != run.AdmissionID {
		t.Fatalf("taken = %+v", taken)
	}
	if r := e.mustRow(run.AdmissionID); r.Status != admission.StatusUnknown {
		t.Fatalf("A's turn is %s after the takeover, want unknown", r.Status)
	}
	if o := e.owner("s"); o.Daemon == nil || *o.Daemon != b.Daemon || o.Lease != 2 {
		t.Fatalf("owner after takeover %+v", o)
	}

	// Every write of A is refused now, even with its lease renewed (it was
	// only paused): the fence, its settle, its claims.
	e.lease(a.Daemon, 60_000)
	if err := check(); !errors.Is(err, admission.ErrFenced) || !errors.Is(err, admission.ErrStaleGeneration) {
		t.Fatalf("A's execution after the takeover: %v, want ErrFenced", err)
	}
	if _, err := a.Settle(ctx, run, admission.OutcomeCompleted, "", nil); !errors.Is(err, admission.ErrStaleGeneration) {
		t.Fatalf("A's settle after the takeover: %v, want a stale refusal", err)
	}
	if _, err := a.Claim(ctx, "s"); !errors.Is(err, admission.ErrNotOwner) {
		t.Fatalf("A's claim after the takeover: %v, want ErrNotOwner", err)
	}
	// B runs the queue once the unknown one is resolved; nothing re-runs.
	if _, err := b.Claim(ctx, "s"); !errors.Is(err, admission.ErrUnknownExecution) {
		t.Fatalf("B's claim behind the unknown admission: %v", err)
	}
	if _, err := b.ResolveUnknown(ctx, "s", run.AdmissionID, run.Generation(), nil); err != nil {
		t.Fatal(err)
	}
	next, err := b.Claim(ctx, "s")
	if err != nil || next.InputID != "in-2" || next.LeaseEpoch != 2 {
		t.Fatalf("B's claim: %+v %v", next, err)
	}
}

// A turn whose session changed owner in the middle (taken while its
// daemon was paused) cannot write through the ownership part of the fence
// even before the takeover's boot rules would have caught it: the owner
// epoch it claimed under is gone.
func TestFenceChecksTheLeaseEpoch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.daemon("")
	e.session("s")
	e.admit("s", "in-1", "one")
	run, err := a.Claim(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// The session is released and re-owned by A under a new epoch, its
	// started row untouched (as if by a bug or a hand edit).
	if err := e.exec(`UPDATE sessions SET lease_epoch = lease_epoch + 2 WHERE session_id = 's'`); err != nil {
		t.Fatal(err)
	}
	err = e.db.InTx(ctx, func(tx *store.Tx) error { return run.Execution().Check(tx) })
	var fe *admission.FenceError
	if !errors.As(err, &fe) || !fe.Owner {
		t.Fatalf("Check = %v, want an ownership FenceError", err)
	}
	if _, err := a.Settle(ctx, run, admission.OutcomeCompleted, "", nil); !errors.As(err, &fe) {
		t.Fatalf("Settle = %v, want the fence's refusal", err)
	}
}

func TestTakeOrphansWithinCapacityAndLabels(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.daemon("hostA"), e.daemon("")
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5"} {
		e.session(s)
		e.admit(s, "in-1", "x")
	}
	if _, err := a.Claim(ctx, "s1"); err != nil { // urgent: a started turn
		t.Fatal(err)
	}
	for _, s := range []string{"s2", "s3"} { // queued only
		if _, _, err := a.Take(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.exec(`UPDATE sessions SET pin_label = 'hostA', owner_daemon = ? WHERE session_id = 's4'`, a.Daemon); err != nil {
		t.Fatal(err)
	}
	// s5 is unowned with queued work.
	e.lease(a.Daemon, -1)
	taken, err := b.TakeOrphans(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tk := range taken {
		got[tk.SessionID] = true
	}
	if len(taken) != 3 || !got["s1"] || got["s4"] {
		t.Fatalf("took %v: want s1 (urgent) and two queued ones, never the pinned s4", got)
	}
	more, err := b.TakeOrphans(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range more {
		if tk.SessionID == "s4" {
			t.Fatalf("TakeOrphans took s4, pinned to another label")
		}
	}
	if _, _, err := b.Take(ctx, "s4"); !errors.Is(err, admission.ErrNotOwner) {
		t.Fatalf("take of a session pinned to another label: %v", err)
	}
	// A daemon with the label may take it.
	c := e.daemon("hostA")
	if _, ok, err := c.Take(ctx, "s4"); err != nil || !ok {
		t.Fatalf("take by a daemon of the pinned label: %v %v", ok, err)
	}
}

func TestReleaseHandsOverAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.daemon(""), e.daemon("")
	e.session("s")
	e.admit("s", "in-1", "x")
	if _, _, err := a.Take(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	bus, other := cluster.NewBus(e.db), cluster.NewBus(e.db)
	defer bus.Close()
	defer other.Close()
	a.Bus = bus
	woken := make(chan string, 4)
	stop := other.Listen(cluster.ChannelSessions, func(p string) { woken <- p })
	defer stop()
	ids, err := a.Release(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("Release = %v %v", ids, err)
	}
	select {
	case got := <-woken:
		if got != "s" {
			t.Fatalf("woken %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release woke no daemon (ChannelSessions)")
	}
	if o := e.owner("s"); o.Daemon != nil || o.Lease != 2 {
		t.Fatalf("owner after release %+v", o)
	}
	// A's lease still runs, but the session is free: B claims it now.
	if run, err := b.Claim(ctx, "s"); err != nil || run.LeaseEpoch != 3 {
		t.Fatalf("B's claim after the hand-over: %+v %v", run, err)
	}
}

// An admit wakes other daemons (ChannelSessions) only when the session is
// not its own daemon's: the owner's scheduler is woken by its caller, and
// on PostgreSQL the commits of notifying transactions wait for each other.
// Notifications reach a listener in commit order, so the wake-up of the
// second admit (to a session another daemon owns) arriving first proves
// that the first admit (to the admitting daemon's own session) sent none.
func TestAdmitNotifiesOnlyWhenAnotherDaemonOwns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.daemon(""), e.daemon("")
	e.session("mine")
	e.session("theirs")
	e.session("nobodys")
	if _, _, err := a.Take(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Take(ctx, "theirs"); err != nil {
		t.Fatal(err)
	}
	bus, other := cluster.NewBus(e.db), cluster.NewBus(e.db)
	defer bus.Close()
	defer other.Close()
	a.Bus = bus
	woken := make(chan string, 8)
	stop := other.Listen(cluster.ChannelSessions, func(p string) { woken <- p })
	defer stop()
	for i, s := range []string{"mine", "theirs", "mine", "nobodys"} {
		if _, err := a.Admit(ctx, admission.AdmitRequest{SessionID: s, InputID: fmt.Sprintf("in-%d", i), Text: "x"}, nil); err != nil {
			t.Fatalf("admit to %s: %v", s, err)
		}
	}
	for _, want := range []string{"theirs", "nobodys"} {
		select {
		case got := <-woken:
			if got != want {
				t.Fatalf("woken for %q, want %q (an admit to the admitting daemon's own session notified every daemon)", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %q: an admit to another daemon's or an unowned session must notify", want)
		}
	}
}
