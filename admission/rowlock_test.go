package admission_test

// Races that READ COMMITTED with explicit row locks must survive on
// PostgreSQL (docs/scale-out.md, "Transaction audit"): each test runs two
// daemons' (or two goroutines') transactions on one session at once, many
// times, on both drivers. On SQLite the single writer serialises them; on
// PostgreSQL the session row's FOR UPDATE (Tx.LockSessions, Execution.Check)
// or FOR UPDATE SKIP LOCKED does. Each was seen failing on PostgreSQL with
// the lock it names removed.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// TestAdmitSameInputIDRace: four daemons admit the same input_id with the
// same text into one session at once: one admission row, every caller
// gets its receipt, all but one of them as a duplicate, and none an
// error. Depends on admit's LockSessions: without it the admits miss each
// other's row and the later INSERTs fail the UNIQUE (session, request_id)
// constraint.
func TestAdmitSameInputIDRace(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	qs := []*admission.Queue{e.daemon(""), e.daemon(""), e.daemon(""), e.daemon("")}
	for i := range 60 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		req := admission.AdmitRequest{SessionID: sess, InputID: "same", Text: "same text"}
		recs := make([]admission.Receipt, len(qs))
		errs := make([]error, len(qs))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, q := range qs {
			wg.Go(func() { <-start; recs[j], errs[j] = q.Admit(ctx, req, nil) })
		}
		close(start)
		wg.Wait()
		dups := 0
		for j := range qs {
			if errs[j] != nil {
				t.Fatalf("run %d: admit %d of one input_id at once: %v, want a receipt", i, j, errs[j])
			}
			if recs[j].AdmissionID != recs[0].AdmissionID {
				t.Fatalf("run %d: receipts name %s and %s, want one admission", i, recs[0].AdmissionID, recs[j].AdmissionID)
			}
			if recs[j].Duplicate {
				dups++
			}
		}
		if dups != len(qs)-1 {
			t.Fatalf("run %d: %d duplicates among %d receipts, want %d", i, dups, len(qs), len(qs)-1)
		}
		if rows := e.rows(sess); len(rows) != 1 {
			t.Fatalf("run %d: %d admission rows, want 1", i, len(rows))
		}
	}
}

// TestTakeOrphansRace: two daemons take the orphans of a dead one at once:
// every session is taken exactly once (one lease_epoch bump), neither
// TakeOrphans fails, and the started admissions become unknown once.
// Depends on takeOrphans' FOR UPDATE SKIP LOCKED: without it both pick the
// same sessions and the loser's guarded take fails its whole transaction
// (ErrNotOwner).
func TestTakeOrphansRace(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	dead := e.daemon("")
	const n = 12
	for round := range 4 {
		var started []string
		for i := range n {
			sess := fmt.Sprintf("r%d-s%d", round, i)
			e.session(sess)
			if _, err := dead.Admit(ctx, admission.AdmitRequest{SessionID: sess, InputID: "in", Text: "x"}, nil); err != nil {
				t.Fatal(err)
			}
			run, err := dead.Claim(ctx, sess)
			if err != nil {
				t.Fatal(err)
			}
			started = append(started, run.AdmissionID)
		}
		e.lease(dead.Daemon, -1)
		a, b := e.daemon(""), e.daemon("")
		var ta, tb []admission.Taken
		var ea, eb error
		race(func() { ta, ea = a.TakeOrphans(ctx, -1) }, func() { tb, eb = b.TakeOrphans(ctx, -1) })
		if ea != nil || eb != nil {
			t.Fatalf("round %d: TakeOrphans at once: %v / %v", round, ea, eb)
		}
		seen := map[string]cluster.DaemonID{}
		unknown := 0
		for _, x := range []struct {
			q     *admission.Queue
			taken []admission.Taken
		}{{a, ta}, {b, tb}} {
			for _, tk := range x.taken {
				if prev, dup := seen[tk.SessionID]; dup {
					t.Fatalf("round %d: %s taken by daemons %d and %d", round, tk.SessionID, prev, x.q.Daemon)
				}
				seen[tk.SessionID] = x.q.Daemon
				unknown += len(tk.Unknown)
				if o := e.owner(tk.SessionID); o.Daemon == nil || *o.Daemon != x.q.Daemon || o.Lease != 2 {
					t.Fatalf("round %d: %s owned %+v, want daemon %d under lease epoch 2", round, tk.SessionID, o, x.q.Daemon)
				}
			}
		}
		if len(seen) != n || unknown != n {
			t.Fatalf("round %d: %d sessions taken, %d turns made unknown; want %d each", round, len(seen), unknown, n)
		}
		for _, id := range started {
			if r := e.mustRow(id); r.Status != admission.StatusUnknown {
				t.Fatalf("round %d: %s is %s, want unknown", round, id, r.Status)
			}
		}
		// The takers die too, for the next round's dead daemon.
		e.lease(a.Daemon, -1)
		e.lease(b.Daemon, -1)
		dead = e.daemon("")
	}
}

// TestClaimRacesCancelOfHead: the claim of a session's FIFO and the
// cancel of its head run at once: the claim starts either the head
// (and the cancel is refused not_queued) or the input behind it; it never
// answers "nothing queued" while an input waits. Depends on the
// LockSessions of claim and cancel: without them the claim picks the head,
// waits for the cancel's row lock, re-checks it as cancelled and matches
// nothing.
func TestClaimRacesCancelOfHead(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	for i := range 60 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		head := e.admit(sess, "head", "head")
		next := e.admit(sess, "next", "next")
		var claimed admission.Admission
		var claimErr, cancelErr error
		race(func() { claimed, claimErr = e.q.Claim(ctx, sess) },
			func() { _, cancelErr = e.q.Cancel(ctx, sess, head.AdmissionID) })
		switch {
		case claimErr != nil:
			t.Fatalf("run %d: claim: %v (cancel: %v); %s still waits", i, claimErr, cancelErr, next.AdmissionID)
		case claimed.AdmissionID == head.AdmissionID && errors.Is(cancelErr, admission.ErrNotQueued):
		case claimed.AdmissionID == next.AdmissionID && cancelErr == nil:
		default:
			t.Fatalf("run %d: claimed %s, cancel %v", i, claimed.InputID, cancelErr)
		}
	}
}

// TestFencedWriteRacesTakeover: a turn's write (Execution.Check, then a
// transcript row and an event, as every journal write) and another
// daemon's takeover of the session run at once. Either the write commits
// first (and the takeover then makes the turn unknown) or it is fenced;
// a write of the old owner never commits after the takeover. The write's
// transaction pauses after its check until the takeover has returned or
// is waiting for a lock. Depends on Check's LockSessions: without it the
// takeover commits during the pause and the old owner's write lands after
// it. PostgreSQL only: SQLite's single writer cannot interleave them.
func TestFencedWriteRacesTakeover(t *testing.T) {
	storetest.Only(t, store.Postgres)
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	a, b := e.daemon(""), e.daemon("")
	pool, err := sql.Open("pgx", e.opt.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 10 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		if _, err := a.Admit(ctx, admission.AdmitRequest{SessionID: sess, InputID: "in", Text: "x"}, nil); err != nil {
			t.Fatal(err)
		}
		run, err := a.Claim(ctx, sess)
		if err != nil {
			t.Fatal(err)
		}
		e.lease(a.Daemon, -1) // A is paused: B may take its sessions
		took := make(chan error, 1)
		writeErr := e.db.InTx(ctx, func(tx *store.Tx) error {
			if err := run.Execution().Check(tx); err != nil {
				return err
			}
			go func() {
				_, _, err := b.Take(ctx, sess)
				took <- err
			}()
			// Pause until the takeover returned or waits for a lock.
			deadline := time.Now().Add(30 * time.Second)
			for {
				select {
				case err := <-took:
					took <- err
					goto write
				default:
				}
				var waiting int
				if err := pool.QueryRow(`SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
					return err
				}
				if waiting > 0 {
					break
				}
				if time.Now().After(deadline) {
					return errors.New("the takeover neither returned nor waited for a lock")
				}
				time.Sleep(time.Millisecond) // a poll with a deadline, not a synchronisation
			}
		write:
			if _, err := tx.AppendMessage(sess, run.AdmissionID, transcript.RoleAssistant, "late", nil, "", ""); err != nil {
				return err
			}
			_, err := tx.AppendEvent(sess, "message.completed", run.AdmissionID, run.Generation(), map[string]string{"content": "late"})
			return err
		})
		if err := <-took; err != nil {
			t.Fatalf("run %d: takeover: %v", i, err)
		}
		if writeErr != nil && !errors.Is(writeErr, admission.ErrFenced) {
			t.Fatalf("run %d: write: %v", i, writeErr)
		}
		// The old owner's event, if any, comes before the takeover's.
		var events []struct {
			Seq     int64  `db:"seq"`
			Type    string `db:"type"`
			Payload string `db:"payload"`
		}
		if err := e.db.Select(ctx, &events, `SELECT seq, type, payload FROM events WHERE session_id = ? ORDER BY seq`, sess); err != nil {
			t.Fatal(err)
		}
		unknownAt := int64(-1)
		for _, ev := range events {
			switch {
			case ev.Type == "admission.updated" && unknownAt < 0 && strings.Contains(ev.Payload, `"status":"unknown"`):
				unknownAt = ev.Seq
			case ev.Type == "message.completed" && unknownAt >= 0:
				t.Fatalf("run %d: the old owner's write (event %d) committed after the takeover (event %d)", i, ev.Seq, unknownAt)
			}
		}
		if unknownAt < 0 {
			t.Fatalf("run %d: no takeover event in %+v", i, events)
		}
		e.lease(a.Daemon, 60_000) // A runs the next session
	}
}
