package admission_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// race runs a and b at once (as far as the store lets them).
func race(a, b func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() { <-start; a() })
	wg.Go(func() { <-start; b() })
	close(start)
	wg.Wait()
}

// TestUpdateRacesClaim: prompt.update and the claim of the same admission
// run at once, many times, on both drivers: either the update wins (the
// turn's user message is the new text) or it is refused not_queued (the
// turn ran the original); never an update the turn did not see.
func TestUpdateRacesClaim(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	won, lost := 0, 0
	for i := range 60 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		rec := e.admit(sess, "in", "original")
		var claimed admission.Admission
		var claimErr, upErr error
		race(func() { claimed, claimErr = e.q.Claim(ctx, sess) },
			func() { _, upErr = e.q.Update(ctx, sess, rec.AdmissionID, "updated", nil) })
		if claimErr != nil {
			t.Fatalf("claim: %v", claimErr)
		}
		msgs := e.messages(sess)
		if len(msgs) != 1 || msgs[0].Content != claimed.Text {
			t.Fatalf("run %d: the turn's user message %+v, claimed text %q", i, msgs, claimed.Text)
		}
		row := e.mustRow(rec.AdmissionID)
		switch {
		case upErr == nil:
			won++
			if claimed.Text != "updated" || row.Text != "updated" {
				t.Fatalf("run %d: the update committed but the turn ran %q (row %q): half-applied", i, claimed.Text, row.Text)
			}
		case errors.Is(upErr, admission.ErrNotQueued):
			lost++
			if claimed.Text != "original" || row.Text != "original" {
				t.Fatalf("run %d: the update was refused but the row says %q, the turn ran %q", i, row.Text, claimed.Text)
			}
		default:
			t.Fatalf("run %d: update: %v", i, upErr)
		}
	}
	t.Logf("update won %d, refused %d", won, lost)
}

// TestMoveRacesClaim: moving B before A races the claim of the head A:
// either the move wins (B runs first) or it is refused not_queued (A ran),
// never a reorder that the claim did not follow.
func TestMoveRacesClaim(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	for i := range 60 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		a := e.admit(sess, "a", "A")
		b := e.admit(sess, "b", "B")
		var claimed admission.Admission
		var claimErr, mvErr error
		var order []string
		race(func() { claimed, claimErr = e.q.Claim(ctx, sess) },
			func() { order, mvErr = e.q.Move(ctx, sess, b.AdmissionID, a.AdmissionID) })
		if claimErr != nil {
			t.Fatalf("claim: %v", claimErr)
		}
		switch {
		case mvErr == nil:
			if claimed.AdmissionID != b.AdmissionID || len(order) != 2 {
				t.Fatalf("run %d: the move committed (order %v) but the claim took %s", i, order, claimed.InputID)
			}
		case errors.Is(mvErr, admission.ErrNotQueued):
			if claimed.AdmissionID != a.AdmissionID {
				t.Fatalf("run %d: the move was refused but the claim took %s", i, claimed.InputID)
			}
			if got, _ := admission.Order(e.db.Reads(ctx), sess); len(got) != 1 || got[0] != b.AdmissionID {
				t.Fatalf("run %d: queue %v after a refused move", i, got)
			}
		default:
			t.Fatalf("run %d: move: %v", i, mvErr)
		}
	}
}

// TestTakeSteersRacesSettle: a steer admitted while a turn settles is
// either taken into it (and settles with it) or still queued afterwards
// and claimed next; it never stays started behind a terminal turn.
func TestTakeSteersRacesSettle(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	taken, next := 0, 0
	for i := range 60 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		e.admit(sess, "turn", "turn")
		host := e.claim(sess)
		st, err := e.q.Admit(ctx, admission.AdmitRequest{SessionID: sess, InputID: "steer", Text: "steer", WhenBusy: protocol.WhenBusySteer}, nil)
		if err != nil || st.Delivery != protocol.DeliverySteer {
			t.Fatalf("steer admit %+v: %v", st, err)
		}
		var takeErr error
		race(func() {
			takeErr = e.db.InTx(ctx, func(tx *store.Tx) error {
				if err := host.Execution().Check(tx); err != nil {
					return err
				}
				_, _, err := admission.TakeSteers(tx, host.Execution())
				return err
			})
		}, func() {
			if _, err := e.q.Settle(ctx, host, admission.OutcomeCompleted, "", nil); err != nil {
				t.Errorf("settle: %v", err)
			}
		})
		row := e.mustRow(st.AdmissionID)
		switch {
		case takeErr == nil && row.Status == admission.StatusTerminal:
			taken++
			if row.SteeredInto.String != host.AdmissionID || row.Outcome.String != string(admission.OutcomeCompleted) {
				t.Fatalf("run %d: taken steer %+v", i, row)
			}
		case errors.Is(takeErr, admission.ErrFenced) && row.Status == admission.StatusQueued:
			next++
			if c := e.claim(sess); c.AdmissionID != st.AdmissionID {
				t.Fatalf("run %d: claimed %s after the turn, want the steer", i, c.InputID)
			}
		default:
			t.Fatalf("run %d: take %v, steer %s/%s", i, takeErr, row.Status, row.Outcome.String)
		}
	}
	t.Logf("taken %d, ran next %d", taken, next)
}

// TestForkCopiesTerminalTurns: session.fork copies the transcript through
// a turn (a steer counts as its turn), leaves out turns not terminal,
// closes a copied turn left with an unanswered call, and refuses an
// admission that is not terminal or not in the session.
func TestForkCopiesTerminalTurns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("src")
	e.admit("src", "one", "one")
	one := e.claim("src")
	if err := e.exec(`INSERT INTO messages (session_id, admission_id, role, content, tool_calls, created_at) VALUES (?, ?, 'assistant', '', ?, ?)`,
		"src", one.AdmissionID, `[{"id":"c1","name":"terminal","arguments":"{}"}]`, store.Now()); err != nil {
		t.Fatal(err)
	}
	st, _ := e.q.Admit(ctx, admission.AdmitRequest{SessionID: "src", InputID: "steer", Text: "steered", WhenBusy: protocol.WhenBusySteer}, nil)
	if err := e.db.InTx(ctx, func(tx *store.Tx) error { _, _, err := admission.TakeSteers(tx, one.Execution()); return err }); err != nil {
		t.Fatal(err)
	}
	// The turn completes without a result for c1 (an older build's
	// leftover): the fork must still be valid.
	if _, err := e.q.Settle(ctx, one, admission.OutcomeCompleted, "", nil); err != nil {
		t.Fatal(err)
	}
	e.admit("src", "two", "two")
	two := e.claim("src")

	_, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "src", Through: two.AdmissionID})
	if !errors.Is(err, admission.ErrNotTerminal) {
		t.Fatalf("fork through a started admission: %v", err)
	}
	if _, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "src", Through: "adm_nope"}); !errors.Is(err, admission.ErrNotFound) {
		t.Fatalf("fork through a missing admission: %v", err)
	}
	if _, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "nope"}); !errors.Is(err, admission.ErrSessionNotFound) {
		t.Fatalf("fork of a missing session: %v", err)
	}
	for _, through := range []string{st.AdmissionID, ""} {
		id, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "src", Through: through})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range e.messages(id) {
			got = append(got, m.Role+":"+m.Content)
			if m.AdmissionID.Valid {
				t.Fatalf("copied row with admission_id %s", m.AdmissionID.String)
			}
		}
		want := "user:one,assistant:,user:steered,tool:" + transcript.SyntheticInterrupted + ",boundary:[turn interrupted before it finished]"
		if strings.Join(got, ",") != want {
			t.Fatalf("fork through %q: transcript %v, want %s", through, got, want)
		}
		if n := e.count(`SELECT count(*) FROM session_admissions WHERE target_session_id = ?`, id); n != 0 {
			t.Fatalf("fork has %d admissions", n)
		}
	}
	if n := len(e.messages("src")); n != 4 {
		t.Fatalf("the source has %d messages, want its 4 unchanged", n)
	}
}

// TestForkKeepsTheSessionsSettings: a fork has the source's settings
// (PROTOCOL.md 10.3 "the same settings"): cwd, model, toolsets, its
// sandbox, its own approvals mode (session.update) and its frozen MCP
// servers, not the configuration's defaults.
func TestForkKeepsTheSessionsSettings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("src")
	if err := e.exec(`UPDATE sessions SET model = 'm2', toolsets = '["terminal"]', source = 'ide',
		sandbox = '{"mode":"read-only","network":false}', approval_mode = 'strict',
		mcp_servers = '[{"name":"fx","command":"/bin/fx"}]' WHERE session_id = 'src'`); err != nil {
		t.Fatal(err)
	}
	id, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "src"})
	if err != nil {
		t.Fatal(err)
	}
	const settings = `SELECT count(*) FROM sessions a JOIN sessions b ON b.session_id = 'src'
		WHERE a.session_id = ? AND a.cwd = b.cwd AND a.model = b.model AND a.provider = b.provider AND a.base_url = b.base_url
		AND a.toolsets = b.toolsets AND a.source = b.source AND a.sandbox = b.sandbox
		AND a.approval_mode = b.approval_mode AND a.mcp_servers = b.mcp_servers`
	if n := e.count(settings, id); n != 1 {
		var got []store.Session
		if err := e.db.Select(ctx, &got, `SELECT sandbox, approval_mode, mcp_servers FROM sessions WHERE session_id IN ('src', ?)`, id); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("the fork's settings differ from its source's: %+v", got)
	}
}

// TestForkThroughACancelledAdmissionIsRefused: an admission cancelled
// while queued never ran, so it has no turn to fork through. Fork used to
// answer with a new session holding an empty transcript (the cut was the
// admission's own rows, none), silently dropping the turns that ran before
// it; it must refuse with ErrNoTurn and create nothing.
func TestForkThroughACancelledAdmissionIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("src")
	e.admit("src", "one", "one")
	one := e.claim("src")
	if _, err := e.q.Settle(ctx, one, admission.OutcomeCompleted, "", nil); err != nil {
		t.Fatal(err)
	}
	c := e.admit("src", "two", "two")
	if _, err := e.q.Cancel(ctx, "src", c.AdmissionID); err != nil {
		t.Fatal(err)
	}
	id, err := e.q.Fork(ctx, admission.ForkRequest{SessionID: "src", Through: c.AdmissionID})
	if !errors.Is(err, admission.ErrNoTurn) {
		t.Fatalf("fork through a cancelled admission: session %q (%d messages), err %v; want ErrNoTurn", id, len(e.messages(id)), err)
	}
	if n := e.count(`SELECT count(*) FROM sessions`); n != 1 {
		t.Fatalf("%d sessions after a refused fork, want the source only", n)
	}
}

// TestSteerIsNotTakenIntoATurnAskedToStop: once a when_busy interrupt (or
// session.interrupt on another daemon) has durably asked the running turn
// to stop, that turn is condemned: a steer submitted meanwhile must not be
// taken into it at its next model request (it would settle interrupted
// with it and never be answered); it stays queued and runs after the
// interrupting input.
func TestSteerIsNotTakenIntoATurnAskedToStop(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "turn", "turn")
	host := e.claim("s")
	res, err := e.q.AdmitWith(ctx, admission.AdmitRequest{SessionID: "s", InputID: "stop", Text: "stop", WhenBusy: protocol.WhenBusyInterrupt}, nil)
	if err != nil || res.Interrupt != host.Generation() {
		t.Fatalf("interrupt admit %+v: %v", res, err)
	}
	st, err := e.q.Admit(ctx, admission.AdmitRequest{SessionID: "s", InputID: "steer", Text: "also this", WhenBusy: protocol.WhenBusySteer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The turn reaches a model request boundary before the interrupt
	// reached it.
	var taken []admission.Admission
	if err := e.db.InTx(ctx, func(tx *store.Tx) error {
		if err := host.Execution().Check(tx); err != nil {
			return err
		}
		taken, _, err = admission.TakeSteers(tx, host.Execution())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(taken) != 0 {
		t.Fatalf("the steer was taken into the turn asked to stop: %+v", taken)
	}
	if _, err := e.q.Settle(ctx, host, admission.OutcomeInterrupted, "", nil); err != nil {
		t.Fatal(err)
	}
	if row := e.mustRow(st.AdmissionID); row.Status != admission.StatusQueued {
		t.Fatalf("steer after the interrupted turn: %s/%s, want queued", row.Status, row.Outcome.String)
	}
	if c := e.claim("s"); c.AdmissionID != res.Receipt.AdmissionID {
		t.Fatalf("claimed %s after the interrupt, want the interrupting input", c.InputID)
	}
}
