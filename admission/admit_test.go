package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

func req(sess, input, text string) admission.AdmitRequest {
	return admission.AdmitRequest{SessionID: sess, InputID: input, Text: text}
}

func always(v bool) func() bool { return func() bool { return v } }

// lastEvent checks that the session's newest event is an admission.updated
// carrying rec, at sessions.last_event_seq.
func lastEvent(t *testing.T, e *env, sess string) store.Event {
	t.Helper()
	evs := e.events(sess)
	if len(evs) == 0 {
		t.Fatalf("session %s has no events", sess)
	}
	ev := evs[len(evs)-1]
	if last := e.sess(sess).LastEvent; ev.Seq != last || int64(len(evs)) != last {
		t.Fatalf("events of %s: %d rows, newest seq %d, last_event_seq %d", sess, len(evs), ev.Seq, last)
	}
	return ev
}

func receiptOf(t *testing.T, ev store.Event) admission.Receipt {
	t.Helper()
	var r admission.Receipt
	if err := json.Unmarshal(ev.Payload, &r); err != nil {
		t.Fatalf("event %d payload %s: %v", ev.Seq, ev.Payload, err)
	}
	return r
}

func TestAdmitIdempotentByInputID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.session("t")

	rec, err := e.q.Admit(ctx, req("s", "in-1", "hello"), nil)
	check(t, err)
	if rec.Duplicate || rec.Seq != 1 || rec.Status != admission.StatusQueued || rec.Outcome != nil ||
		rec.ExecutionGeneration != nil || rec.Reason != "" || rec.SessionID != "s" || rec.InputID != "in-1" ||
		!strings.HasPrefix(rec.AdmissionID, "adm_") {
		t.Fatalf("first receipt %+v", rec)
	}
	ev := lastEvent(t, e, "s")
	if ev.Type != "admission.updated" || ev.AdmissionID == nil || *ev.AdmissionID != rec.AdmissionID || ev.ExecutionGeneration != nil {
		t.Fatalf("event %+v", ev)
	}
	// The event is the receipt plus the input's text.
	withText := rec
	withText.Text = "hello"
	if got := receiptOf(t, ev); !reflect.DeepEqual(got, withText) {
		t.Fatalf("event receipt %+v, returned %+v", got, rec)
	}
	row := e.mustRow(rec.AdmissionID)
	if row.Text != "hello" || row.Status != admission.StatusQueued || row.PayloadDigest != admission.Digest("hello", nil) || row.Attachments.Valid {
		t.Fatalf("row %+v", row)
	}

	before := e.sess("s")
	for range 3 {
		dup, err := e.q.Admit(ctx, req("s", "in-1", "hello"), nil)
		check(t, err)
		want := rec
		want.Duplicate = true
		if !reflect.DeepEqual(dup, want) {
			t.Fatalf("duplicate receipt %+v, want %+v", dup, want)
		}
	}
	if _, err := e.q.Admit(ctx, req("s", "in-1", "hello, edited"), nil); !errors.Is(err, admission.ErrConflict) {
		t.Fatalf("other text: %s, want ErrConflict", errName(err))
	}
	if _, err := e.q.Admit(ctx, admission.AdmitRequest{SessionID: "s", InputID: "in-1", Text: "hello",
		Attachments: json.RawMessage(`[{"type":"file","path":"/x"}]`)}, nil); !errors.Is(err, admission.ErrConflict) {
		t.Fatalf("same text other attachments: %s, want ErrConflict", errName(err))
	}
	if after := e.sess("s"); after != before {
		t.Fatalf("duplicates and conflicts moved the session: %+v → %+v", before, after)
	}
	if n := e.count(`SELECT COUNT(*) FROM session_admissions`); n != 1 {
		t.Fatalf("%d rows after duplicates", n)
	}
	if n := e.count(`SELECT COUNT(*) FROM events`); n != 1 {
		t.Fatalf("%d events after duplicates", n)
	}

	// Idempotency is per session: the same input_id elsewhere is new.
	other := e.admit("t", "in-1", "hello")
	if other.Duplicate || other.AdmissionID == rec.AdmissionID || other.Seq != 1 {
		t.Fatalf("same input_id in another session: %+v", other)
	}

	// Attachments are part of the payload.
	att := json.RawMessage(`["a.png"]`)
	ra, err := e.q.Admit(ctx, admission.AdmitRequest{SessionID: "s", InputID: "in-att", Text: "look", Attachments: att}, nil)
	check(t, err)
	rb, err := e.q.Admit(ctx, admission.AdmitRequest{SessionID: "s", InputID: "in-att", Text: "look", Attachments: att}, nil)
	check(t, err)
	if !rb.Duplicate || rb.AdmissionID != ra.AdmissionID {
		t.Fatalf("same attachments: %+v vs %+v", rb, ra)
	}
	if _, err := e.q.Admit(ctx, req("s", "in-att", "look"), nil); !errors.Is(err, admission.ErrConflict) {
		t.Fatalf("attachments dropped: %s, want ErrConflict", errName(err))
	}
	if r := e.mustRow(ra.AdmissionID); r.Attachments.String != string(att) {
		t.Fatalf("attachments stored as %v", r.Attachments)
	}

	// A duplicate of a started or terminal admission reports its state.
	a := e.claim("s")
	dup, err := e.q.Admit(ctx, req("s", "in-1", "hello"), always(true))
	check(t, err)
	if !dup.Duplicate || dup.Status != admission.StatusStarted || dup.ExecutionGeneration == nil || *dup.ExecutionGeneration != 1 || dup.Reason != "" {
		t.Fatalf("duplicate of a started admission: %+v", dup)
	}
	_, err = e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil)
	check(t, err)
	dup, err = e.q.Admit(ctx, req("s", "in-1", "hello"), nil)
	check(t, err)
	if !dup.Duplicate || dup.Status != admission.StatusTerminal || dup.Outcome == nil || *dup.Outcome != "completed" {
		t.Fatalf("duplicate of a completed admission: %+v", dup)
	}
	if n := e.count(`SELECT COUNT(*) FROM messages WHERE role = 'user'`); n != 1 {
		t.Fatalf("duplicates ran again: %d user messages", n)
	}
}

func TestAdmitCancelledAndMissing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	rec := e.admit("s", "in-1", "hello")
	_, err := e.q.Cancel(ctx, "s", rec.AdmissionID)
	check(t, err)
	before := e.sess("s")
	if _, err := e.q.Admit(ctx, req("s", "in-1", "hello"), nil); !errors.Is(err, admission.ErrCancelled) {
		t.Fatalf("resubmitting a cancelled input: %s, want ErrCancelled", errName(err))
	}
	// Another payload under a cancelled input_id is a conflict first.
	if _, err := e.q.Admit(ctx, req("s", "in-1", "other"), nil); !errors.Is(err, admission.ErrConflict) {
		t.Fatalf("other text on a cancelled input: %s, want ErrConflict", errName(err))
	}
	if after := e.sess("s"); after != before {
		t.Fatalf("refused admits moved the session %+v → %+v", before, after)
	}

	if _, err := e.q.Admit(ctx, req("nope", "in-1", "hello"), nil); !errors.Is(err, admission.ErrSessionNotFound) {
		t.Fatalf("missing session: %s, want ErrSessionNotFound", errName(err))
	}
	if n := e.count(`SELECT COUNT(*) FROM session_admissions WHERE target_session_id = 'nope'`); n != 0 {
		t.Fatal("admission stored for a missing session")
	}
	if n := e.count(`SELECT COUNT(*) FROM events WHERE session_id = 'nope'`); n != 0 {
		t.Fatal("event stored for a missing session")
	}
}

func TestAdmitSeqPerSession(t *testing.T) {
	e := newEnv(t)
	e.session("a")
	e.session("b")
	plan := []string{"a", "b", "a", "a", "b", "a", "b", "b", "b", "a"}
	next := map[string]int64{"a": 1, "b": 1}
	for i, s := range plan {
		rec := e.admit(s, fmt.Sprintf("in-%d", i), "x")
		if rec.Seq != next[s] {
			t.Fatalf("admit %d in %s: seq %d, want %d", i, s, rec.Seq, next[s])
		}
		next[s]++
	}
	for s, n := range next {
		if got := e.sess(s).NextSeq; got != n {
			t.Fatalf("%s next_admission_seq %d, want %d", s, got, n)
		}
	}
	// Cancelled and claimed rows keep their seq; new ones continue after.
	_, err := e.q.Cancel(context.Background(), "a", e.rows("a")[0].AdmissionID)
	check(t, err)
	e.claim("a")
	if rec := e.admit("a", "later", "x"); rec.Seq != next["a"] {
		t.Fatalf("seq after cancel and claim: %d, want %d", rec.Seq, next["a"])
	}
}

func TestAdmitWaitReasons(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admit := func(sess, in string, atCap func() bool) admission.Receipt {
		t.Helper()
		rec, err := e.q.Admit(ctx, req(sess, in, "x"), atCap)
		check(t, err)
		withText := rec
		withText.Text = "x"
		if ev := receiptOf(t, lastEvent(t, e, sess)); !reflect.DeepEqual(ev, withText) {
			t.Fatalf("event receipt %+v, returned %+v", ev, rec)
		}
		return rec
	}
	expect := func(what string, rec admission.Receipt, want protocol.WaitReason) {
		t.Helper()
		if rec.Reason != want {
			t.Errorf("%s: reason %q, want %q", what, rec.Reason, want)
		}
	}
	// Empty session.
	e.session("idle")
	expect("first in an idle session", admit("idle", "1", nil), "")
	e.session("idle2")
	expect("first, capacity free", admit("idle2", "1", always(false)), "")
	e.session("full")
	expect("first, daemon at capacity", admit("full", "1", always(true)), admission.WaitCapacity)
	// Queued ahead.
	expect("behind a queued one", admit("idle", "2", always(false)), admission.WaitBusy)
	expect("behind a queued one at capacity", admit("idle", "3", always(true)), admission.WaitCapacity)
	// Started ahead: busy wins over capacity.
	e.session("busy")
	admit("busy", "1", nil)
	e.claim("busy")
	expect("behind a started one", admit("busy", "2", nil), admission.WaitBusy)
	expect("behind a started one at capacity", admit("busy", "3", always(true)), admission.WaitBusy)
	// Duplicates recompute the reason of a queued admission.
	dup, err := e.q.Admit(ctx, req("idle", "1", "x"), always(true))
	check(t, err)
	expect("duplicate of the head at capacity", dup, admission.WaitCapacity)
	// Unknown ahead wins over everything.
	e.session("lost")
	admit("lost", "1", nil)
	e.claim("lost")
	admit("lost", "2", nil)
	e.crash() // also makes "busy"'s started row unknown
	expect("behind an unknown one", admit("lost", "3", always(true)), admission.WaitUnknown)
	expect("behind an unknown one, capacity free", admit("lost", "4", always(false)), admission.WaitUnknown)
	dup, err = e.q.Admit(ctx, req("lost", "2", "x"), nil)
	check(t, err)
	expect("duplicate behind an unknown one", dup, admission.WaitUnknown)
	dup, err = e.q.Admit(ctx, req("lost", "1", "x"), always(true))
	check(t, err)
	if dup.Status != admission.StatusUnknown || dup.Reason != "" {
		t.Errorf("duplicate of the unknown admission: %+v", dup)
	}
	// WaitReasons (the snapshot's pure variant) agrees with the receipts.
	for _, sess := range []string{"idle", "full", "busy", "lost"} {
		for _, atCap := range []bool{false, true} {
			var recs []admission.Receipt
			pending, err := admission.Pending(e.db.Reads(context.Background()), sess)
			check(t, err)
			for _, p := range pending {
				recs = append(recs, p.Receipt())
			}
			admission.WaitReasons(recs, atCap)
			for _, r := range recs {
				if r.Status != admission.StatusQueued {
					continue
				}
				d, err := e.q.Admit(ctx, req(sess, r.InputID, "x"), always(atCap))
				check(t, err)
				if d.Reason != r.Reason {
					t.Errorf("%s seq %d at capacity %v: WaitReasons says %q, Admit says %q", sess, r.Seq, atCap, r.Reason, d.Reason)
				}
			}
		}
	}
}

// TestAdmitEventInSameTransaction makes the event insert fail and shows
// that the admission is not committed either.
func TestAdmitEventInSameTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	if e.opt.Driver == store.Postgres {
		check(t, e.exec(`CREATE FUNCTION no_events() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no events today'; END $$`))
		check(t, e.exec(`CREATE TRIGGER fail_events BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION no_events()`))
	} else {
		check(t, e.exec(`CREATE TRIGGER fail_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no events today'); END`))
	}
	_, err := e.q.Admit(ctx, req("s", "in-1", "hello"), nil)
	if err == nil || !strings.Contains(err.Error(), "no events today") {
		t.Fatalf("Admit with a failing event insert: %v", err)
	}
	if n := e.count(`SELECT COUNT(*) FROM session_admissions`); n != 0 {
		t.Fatalf("admission committed without its event")
	}
	if s := e.sess("s"); s.NextSeq != 1 || s.LastEvent != 0 {
		t.Fatalf("session moved: %+v", s)
	}
	if e.opt.Driver == store.Postgres {
		check(t, e.exec(`DROP TRIGGER fail_events ON events`))
	} else {
		check(t, e.exec(`DROP TRIGGER fail_events`))
	}
	rec := e.admit("s", "in-1", "hello")
	if rec.Seq != 1 || rec.Duplicate {
		t.Fatalf("after the trigger went: %+v", rec)
	}
}

func TestValidInputIDAndDigest(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "in-1": true, "A.b_c:d-9": true, strings.Repeat("x", 128): true,
		"": false, strings.Repeat("x", 129): false, "a b": false, "a/b": false, "é": false, "a\n": false,
	} {
		if admission.ValidInputID(id) != ok {
			t.Errorf("ValidInputID(%q) = %v", id, !ok)
		}
	}
	if admission.Digest("ab", nil) == admission.Digest("a", json.RawMessage("b")) {
		t.Error("digest does not separate text and attachments")
	}
	if admission.Digest("x", nil) != admission.Digest("x", json.RawMessage{}) {
		t.Error("empty attachments differ from none")
	}
	if admission.Digest("x", nil) == admission.Digest("x", json.RawMessage("[]")) {
		t.Error("[] attachments equal none")
	}
}

func TestClaim(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.session("t")
	var recs []admission.Receipt
	for i := range 5 {
		recs = append(recs, e.admit("s", fmt.Sprintf("in-%d", i), fmt.Sprintf("text %d", i)))
	}
	// t's activity must not move s's generation.
	e.admit("t", "t-1", "x")
	e.claim("t")

	var gens []int64
	claimOne := func(wantSeq int64) admission.Admission {
		t.Helper()
		before := e.sess("s")
		msgs := e.messages("s")
		a := e.claim("s")
		if a.Seq != wantSeq {
			t.Fatalf("claimed seq %d, want %d", a.Seq, wantSeq)
		}
		after := e.sess("s")
		if after.Gen != before.Gen+1 || a.Generation() != after.Gen || a.Daemon.V != e.epoch ||
			a.Status != admission.StatusStarted || !a.StartedAt.Valid {
			t.Fatalf("claim: row %+v, session gen %d→%d", a, before.Gen, after.Gen)
		}
		if a.LeaseEpoch < 1 {
			t.Fatalf("claim under lease epoch %d", a.LeaseEpoch)
		}
		if row, ret := e.mustRow(a.AdmissionID), a; func() bool { ret.LeaseEpoch = 0; return row != ret }() {
			t.Fatalf("returned %+v, stored %+v", a, row)
		}
		if len(gens) > 0 && a.Generation() <= gens[len(gens)-1] {
			t.Fatalf("generation %d after %d", a.Generation(), gens[len(gens)-1])
		}
		gens = append(gens, a.Generation())
		// The user message, in the same transaction.
		ms := e.messages("s")
		if len(ms) != len(msgs)+1 {
			t.Fatalf("claim appended %d messages", len(ms)-len(msgs))
		}
		m := ms[len(ms)-1]
		if m.Role != transcript.RoleUser || m.Content != a.Text || m.AdmissionID.String != a.AdmissionID || m.ToolCalls.Valid || m.Kind.Valid {
			t.Fatalf("user message %+v", m)
		}
		// admission.updated then turn.started.
		evs := e.events("s")
		if int64(len(evs)) != after.LastEvent || after.LastEvent != before.LastEvent+2 {
			t.Fatalf("events: %d rows, last_event_seq %d→%d", len(evs), before.LastEvent, after.LastEvent)
		}
		up, ts := evs[len(evs)-2], evs[len(evs)-1]
		if up.Type != "admission.updated" || ts.Type != "turn.started" {
			t.Fatalf("event types %s, %s", up.Type, ts.Type)
		}
		for _, ev := range []store.Event{up, ts} {
			if ev.AdmissionID == nil || *ev.AdmissionID != a.AdmissionID || ev.ExecutionGeneration == nil || *ev.ExecutionGeneration != a.Generation() {
				t.Fatalf("event %+v", ev)
			}
		}
		if r := receiptOf(t, up); r.Status != admission.StatusStarted || r.ExecutionGeneration == nil || *r.ExecutionGeneration != a.Generation() {
			t.Fatalf("admission.updated payload %s", up.Payload)
		}
		var started map[string]string
		check(t, json.Unmarshal(ts.Payload, &started))
		if started["input_id"] != a.InputID || started["text"] != a.Text {
			t.Fatalf("turn.started payload %s", ts.Payload)
		}
		return a
	}
	a := claimOne(1)
	if _, err := e.q.Claim(ctx, "s"); !errors.Is(err, admission.ErrSessionBusy) {
		t.Fatalf("second claim while started: %s", errName(err))
	}
	_, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil)
	check(t, err)
	// A cancelled admission is skipped.
	_, err = e.q.Cancel(ctx, "s", recs[1].AdmissionID)
	check(t, err)
	a = claimOne(3)
	_, err = e.q.Settle(ctx, a, admission.OutcomeFailed, "x", nil)
	check(t, err)
	a = claimOne(4)
	// A crash leaves it unknown: it blocks its follower, and its
	// generation is never reused.
	e.crash()
	if _, err := e.q.Claim(ctx, "s"); !errors.Is(err, admission.ErrUnknownExecution) {
		t.Fatalf("claim behind an unknown admission: %s", errName(err))
	}
	if r := e.mustRow(recs[4].AdmissionID); r.Status != admission.StatusQueued {
		t.Fatalf("follower of an unknown admission is %s", r.Status)
	}
	_, err = e.q.ResolveUnknown(ctx, "s", a.AdmissionID, a.Generation(), nil)
	check(t, err)
	a = claimOne(5)
	if a.Daemon.V != 2 {
		t.Fatalf("owner_epoch %d after the crash", a.Daemon.V)
	}
	_, err = e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil)
	check(t, err)
	if _, err := e.q.Claim(ctx, "s"); !errors.Is(err, admission.ErrNothingQueued) {
		t.Fatalf("claim of an empty FIFO: %s", errName(err))
	}
	if _, err := e.q.Claim(ctx, "missing"); !errors.Is(err, admission.ErrNothingQueued) {
		t.Fatalf("claim of a missing session: %s", errName(err))
	}
	if fmt.Sprint(gens) != "[1 2 3 4]" {
		t.Fatalf("generations %v", gens)
	}
}

func TestClaimRacesYieldOneStarted(t *testing.T) {
	e := newEnv(t)
	e.session("s")
	for i := range 3 {
		e.admit("s", fmt.Sprint(i), "x")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, busy := 0, 0
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			_, err := e.q.Claim(context.Background(), "s")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, admission.ErrSessionBusy):
				busy++
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins != 1 || busy != 15 {
		t.Fatalf("%d claims won, %d busy", wins, busy)
	}
	if s := e.sess("s"); s.Gen != 1 {
		t.Fatalf("generation %d", s.Gen)
	}
}

// turnWithToolCalls claims the head of sess and writes an assistant message
// with two tool calls, of which only the first got a result.
func turnWithToolCalls(t *testing.T, e *env, sess string) admission.Admission {
	t.Helper()
	a := e.claim(sess)
	err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.AppendMessage(sess, a.AdmissionID, transcript.RoleAssistant, "", []store.ToolCall{
			{ID: "call_1_" + a.AdmissionID, Name: "terminal", Arguments: `{"command":"ls"}`},
			{ID: "call_2_" + a.AdmissionID, Name: "terminal", Arguments: `{"command":"make"}`},
		}, "", ""); err != nil {
			return err
		}
		_, err := tx.AppendMessage(sess, a.AdmissionID, transcript.RoleTool, `{"exit_code":0}`, nil, "call_1_"+a.AdmissionID, "")
		return err
	})
	check(t, err)
	return a
}

type msgShape struct{ role, content, toolCallID, kind, admission string }

func shapes(ms []store.Message) []msgShape {
	var out []msgShape
	for _, m := range ms {
		out = append(out, msgShape{m.Role, m.Content, m.ToolCallID.String, m.Kind.String, m.AdmissionID.String})
	}
	return out
}

func TestSettleClosesTheTranscript(t *testing.T) {
	for _, tc := range []struct {
		outcome        admission.Outcome
		errText        string
		note, boundary string
	}{
		{admission.OutcomeInterrupted, "", "not run: turn interrupted", "[turn interrupted before it finished]"},
		{admission.OutcomeFailed, "model said no", "not run: turn failed", "[turn failed: model said no]"},
		{admission.OutcomeCompleted, "", "", ""},
	} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			e := newEnv(t)
			e.session("s")
			// An earlier turn with an unanswered call that was already
			// closed: a later settle must not touch it.
			e.admit("s", "old", "old text")
			old := turnWithToolCalls(t, e, "s")
			_, err := e.q.Settle(context.Background(), old, admission.OutcomeInterrupted, "", nil)
			check(t, err)
			oldMsgs := shapes(e.messages("s"))

			e.admit("s", "in-1", "do things")
			a := turnWithToolCalls(t, e, "s")
			id := a.AdmissionID
			out, err := e.q.Settle(context.Background(), a, tc.outcome, tc.errText, nil)
			check(t, err)
			if out.Status != admission.StatusTerminal || out.Outcome.String != string(tc.outcome) || out.Error.String != tc.errText {
				t.Fatalf("settled %+v", out)
			}
			want := append(oldMsgs,
				msgShape{"user", "do things", "", "", id},
				msgShape{"assistant", "", "", "", id},
				msgShape{"tool", `{"exit_code":0}`, "call_1_" + id, "", id})
			if tc.outcome != admission.OutcomeCompleted {
				want = append(want,
					msgShape{"tool", tc.note, "call_2_" + id, transcript.KindSynthetic, id},
					msgShape{"boundary", tc.boundary, "", "", id})
			}
			if got := shapes(e.messages("s")); !reflect.DeepEqual(got, want) {
				t.Fatalf("transcript:\n got  %v\n want %v", got, want)
			}
			evs := e.events("s")
			tc2 := evs[len(evs)-1]
			var payload map[string]string
			check(t, json.Unmarshal(tc2.Payload, &payload))
			if tc2.Type != "turn.completed" || payload["outcome"] != string(tc.outcome) || payload["error"] != tc.errText ||
				evs[len(evs)-2].Type != "admission.updated" {
				t.Fatalf("events %s %s %s", evs[len(evs)-2].Type, tc2.Type, tc2.Payload)
			}
		})
	}
}

func TestResolveUnknownClosesTheTranscriptAndNeverReruns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "in-1", "risky")
	a := turnWithToolCalls(t, e, "s")
	follower := e.admit("s", "in-2", "next")
	res := e.crash()
	if len(res.Unknown) != 1 || res.Unknown[0].AdmissionID != a.AdmissionID || len(res.Sessions) != 1 || res.Sessions[0] != "s" {
		t.Fatalf("Recover: %+v", res)
	}
	u := e.mustRow(a.AdmissionID)
	if u.Status != admission.StatusUnknown || u.Generation() != a.Generation() || u.Daemon.V != 1 {
		t.Fatalf("after the crash: %+v", u)
	}
	// Boot recovery itself never repairs, requeues or reruns.
	if n := len(e.messages("s")); n != 3 {
		t.Fatalf("recover touched the transcript: %d messages", n)
	}
	var hookRes []string
	hook := func(tx *store.Tx, got admission.Admission, resolution string) error {
		hookRes = append(hookRes, resolution)
		if got.Status != admission.StatusTerminal || got.AdmissionID != a.AdmissionID {
			return fmt.Errorf("hook saw %+v", got)
		}
		return nil
	}
	out, err := e.q.ResolveUnknown(ctx, "s", a.AdmissionID, a.Generation(), hook)
	check(t, err)
	if out.Status != admission.StatusTerminal || out.Outcome.String != "interrupted" || fmt.Sprint(hookRes) != "[fenced]" {
		t.Fatalf("resolved %+v, hook %v", out, hookRes)
	}
	id := a.AdmissionID
	want := []msgShape{
		{"user", "risky", "", "", id},
		{"assistant", "", "", "", id},
		{"tool", `{"exit_code":0}`, "call_1_" + id, "", id},
		{"tool", "not run: the daemon stopped during this turn", "call_2_" + id, transcript.KindSynthetic, id},
		{"boundary", "[turn lost: the daemon stopped while it ran; an operator resolved it without re-running]", "", "", id},
	}
	if got := shapes(e.messages("s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("transcript:\n got  %v\n want %v", got, want)
	}
	// Resolving again is stale; nothing is requeued; the follower runs next.
	if _, err := e.q.ResolveUnknown(ctx, "s", a.AdmissionID, a.Generation(), nil); !errors.Is(err, admission.ErrStaleGeneration) {
		t.Fatalf("second resolve: %s", errName(err))
	}
	if rows := e.rows("s"); len(rows) != 2 || rows[1].Status != admission.StatusQueued {
		t.Fatalf("rows after resolve: %+v", rows)
	}
	next := e.claim("s")
	if next.AdmissionID != follower.AdmissionID || next.Generation() != a.Generation()+1 {
		t.Fatalf("claimed %+v after resolve", next)
	}
	if n := e.count(`SELECT COUNT(*) FROM messages WHERE role = 'user' AND admission_id = ?`, id); n != 1 {
		t.Fatalf("the resolved input reached the transcript %d times", n)
	}
	// The duplicate of the resolved input reports it; it is not re-admitted.
	dup, err := e.q.Admit(ctx, req("s", "in-1", "risky"), nil)
	check(t, err)
	if !dup.Duplicate || dup.AdmissionID != id || dup.Status != admission.StatusTerminal {
		t.Fatalf("resubmitting the lost input: %+v", dup)
	}
}

func TestHooksRunInTheSameTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "in-1", "x")
	a := e.claim("s")
	boom := errors.New("hook failed")
	var got []string
	failing := func(tx *store.Tx, _ admission.Admission, resolution string) error {
		got = append(got, resolution)
		return boom
	}
	before, evBefore := e.rows("s"), e.sess("s")
	if _, err := e.q.Settle(ctx, a, admission.OutcomeInterrupted, "", failing); !errors.Is(err, boom) {
		t.Fatalf("settle with a failing hook: %v", err)
	}
	if _, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", failing); !errors.Is(err, boom) {
		t.Fatalf("settle with a failing hook: %v", err)
	}
	if fmt.Sprint(got) != "[interrupted fenced]" {
		t.Fatalf("hook resolutions %v", got)
	}
	if after := e.rows("s"); !reflect.DeepEqual(after, before) || e.sess("s") != evBefore || len(e.messages("s")) != 1 {
		t.Fatalf("a failed hook left changes behind")
	}
	// Recover's hook failing keeps the row started.
	later := &admission.Queue{DB: e.db, Daemon: 7}
	if _, err := later.Recover(ctx, func(*store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("recover with a failing hook: %v", err)
	}
	if r := e.mustRow(a.AdmissionID); r.Status != admission.StatusStarted {
		t.Fatalf("row is %s after a failed recover", r.Status)
	}
	ran := false
	res, err := later.Recover(ctx, func(tx *store.Tx) error {
		ran = true
		var st string
		if err := tx.Get(&st, `SELECT status FROM session_admissions WHERE admission_id = ?`, a.AdmissionID); err != nil {
			return err
		}
		if st != "unknown" {
			return fmt.Errorf("hook ran before the row became unknown: %s", st)
		}
		return nil
	})
	check(t, err)
	if !ran || len(res.Unknown) != 1 {
		t.Fatalf("recover: ran=%v %+v", ran, res)
	}
	// ResolveUnknown's hook failing keeps it unknown.
	if _, err := later.ResolveUnknown(ctx, "s", a.AdmissionID, a.Generation(), failing); !errors.Is(err, boom) {
		t.Fatalf("resolve with a failing hook: %v", err)
	}
	if r := e.mustRow(a.AdmissionID); r.Status != admission.StatusUnknown {
		t.Fatalf("row is %s after a failed resolve", r.Status)
	}
}

func TestAdmitConcurrentSameInput(t *testing.T) {
	e := newEnv(t)
	e.session("s")
	const n = 50
	recs := make([]admission.Receipt, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			recs[i], errs[i] = e.q.Admit(context.Background(), req("s", "same", "same text"), nil)
		})
	}
	close(start)
	wg.Wait()
	firsts := 0
	for i := range n {
		check(t, errs[i])
		if recs[i].AdmissionID != recs[0].AdmissionID || recs[i].Seq != 1 {
			t.Fatalf("receipt %d: %+v vs %+v", i, recs[i], recs[0])
		}
		if !recs[i].Duplicate {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d receipts with duplicate=false, want 1", firsts)
	}
	if rows := e.rows("s"); len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if s := e.sess("s"); s.NextSeq != 2 || s.LastEvent != 1 {
		t.Fatalf("session %+v", s)
	}
}

func TestAdmitOrderOfOneClientUnderLoad(t *testing.T) {
	e := newEnv(t)
	e.session("mine")
	e.session("noisy")
	const n = 50
	stop := make(chan struct{})
	var hammer sync.WaitGroup
	var mu sync.Mutex
	noisy := 0
	start := make(chan struct{})
	var mineDone atomic.Int32 // how many of mine were acknowledged
	overlap := 0              // of mine acknowledged while the noise ran
	for g := range 49 {
		hammer.Go(func() {
			<-start
			// Bounded so that the race-instrumented SQLite keeps this
			// test short; every pair is two more writers in the queue.
			for i := range 6 {
				select {
				case <-stop:
					return
				default:
				}
				rec, err := e.q.Admit(context.Background(), req("noisy", fmt.Sprintf("g%d-%d", g, i), "noise"), nil)
				if err != nil {
					t.Errorf("noisy admit: %v", err)
					return
				}
				// Cancel it again: Admit's wait reason reads every
				// non-terminal row ahead, so an ever-growing queue would make
				// this test quadratic (see BenchmarkAdmitBehindQueue).
				if _, err := e.q.Cancel(context.Background(), "noisy", rec.AdmissionID); err != nil {
					t.Errorf("noisy cancel: %v", err)
					return
				}
				mu.Lock()
				noisy++
				mu.Unlock()
			}
		})
	}
	noiseDone := make(chan struct{})
	go func() { hammer.Wait(); overlap = int(mineDone.Load()); close(noiseDone) }()
	done := make(chan []admission.Receipt)
	go func() {
		<-start
		var recs []admission.Receipt
		for i := range n {
			rec, err := e.q.Admit(context.Background(), req("mine", fmt.Sprintf("m-%02d", i), fmt.Sprint(i)), nil)
			if err != nil {
				t.Errorf("admit %d: %v", i, err)
			}
			recs = append(recs, rec)
			mineDone.Add(1)
		}
		done <- recs
	}()
	close(start)
	recs := <-done
	close(stop)
	<-noiseDone
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.InputID != fmt.Sprintf("m-%02d", i) {
			t.Fatalf("submit %d got seq %d (%s)", i, r.Seq, r.InputID)
		}
	}
	for i, r := range e.rows("mine") {
		if r.InputID != fmt.Sprintf("m-%02d", i) || r.Text != fmt.Sprint(i) {
			t.Fatalf("row seq %d is %s", r.Seq, r.InputID)
		}
	}
	// The noisy session is gap-free too.
	rows := e.rows("noisy")
	if len(rows) != noisy {
		t.Fatalf("noisy: %d rows, %d acknowledged", len(rows), noisy)
	}
	for i, r := range rows {
		if r.Seq != int64(i+1) {
			t.Fatalf("noisy seq %d at %d", r.Seq, i)
		}
	}
	b, txs := e.db.Stats()
	t.Logf("%d noisy admit+cancel pairs alongside, %d of ours acknowledged while they ran; %d transactions in %d group commits", noisy, overlap, txs, b)
}

func TestAdmitConcurrentDistinctInputs(t *testing.T) {
	e := newEnv(t)
	e.session("s")
	const n = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	seqs := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			<-start
			rec, err := e.q.Admit(context.Background(), req("s", fmt.Sprintf("in-%d", i), fmt.Sprintf("text %d", i)), nil)
			if err != nil {
				t.Errorf("admit %d: %v", i, err)
			}
			seqs[i] = rec.Seq
		})
	}
	close(start)
	wg.Wait()
	rows := e.rows("s")
	if len(rows) != n {
		t.Fatalf("%d rows", len(rows))
	}
	bySeq := map[int64]string{}
	for i, r := range rows {
		if r.Seq != int64(i+1) {
			t.Fatalf("gap: row %d has seq %d", i, r.Seq)
		}
		bySeq[r.Seq] = r.InputID
	}
	for i, s := range seqs {
		if bySeq[s] != fmt.Sprintf("in-%d", i) {
			t.Fatalf("receipt of in-%d says seq %d, the row there is %s", i, s, bySeq[s])
		}
	}
	if s := e.sess("s"); s.NextSeq != n+1 || s.LastEvent != n {
		t.Fatalf("session %+v", s)
	}
}

// TestStorageFull lowers max_page_count on the writer so that SQLite
// reports SQLITE_FULL: nothing is acknowledged, and raising the limit
// heals without reopening.
func TestStorageFull(t *testing.T) {
	storetest.Only(t, store.SQLite)
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "small", "fits")
	setMax := func(n string) {
		t.Helper()
		check(t, e.db.InTx(ctx, func(tx *store.Tx) error {
			if n == "current" {
				var pages int
				if err := tx.Get(&pages, "PRAGMA page_count"); err != nil {
					return err
				}
				n = fmt.Sprint(pages)
			}
			_, err := tx.Exec("PRAGMA max_page_count = " + n)
			return err
		}))
	}
	setMax("current")
	before := e.sess("s")
	big := strings.Repeat("lorem ipsum ", 20000) // ~240 KB: needs new pages
	_, err := e.q.Admit(ctx, req("s", "big", big), nil)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Admit on a full disk: %v, want ErrUnavailable", err)
	}
	if _, ok := e.row("big"); ok || e.count(`SELECT COUNT(*) FROM session_admissions WHERE request_id = 'big'`) != 0 {
		t.Fatal("an admission was stored although Admit failed")
	}
	if after := e.sess("s"); after != before {
		t.Fatalf("session moved on a failed admit: %+v → %+v", before, after)
	}
	// A duplicate of what is already stored needs no space.
	if dup, err := e.q.Admit(ctx, req("s", "small", "fits"), nil); err != nil || !dup.Duplicate {
		t.Fatalf("duplicate on a full disk: %+v %v", dup, err)
	}
	setMax("1073741823")
	rec, err := e.q.Admit(ctx, req("s", "big", big), nil)
	check(t, err)
	if rec.Duplicate || rec.Seq != 2 {
		t.Fatalf("after space came back: %+v", rec)
	}
	if r := e.mustRow(rec.AdmissionID); r.Text != big {
		t.Fatal("stored text differs")
	}
}

// TestStorageLocked holds the write lock from another connection past the
// busy timeout: Admit fails with ErrUnavailable, acknowledges nothing, and
// works again once the lock is gone.
func TestStorageLocked(t *testing.T) {
	e := newEnvOpt(t, store.Options{BusyTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	e.session("s")
	release := holdWrites(t, e)
	if _, err := e.q.Admit(ctx, req("s", "in-1", "x"), nil); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Admit while another process holds the write lock: %v, want ErrUnavailable", err)
	}
	release()
	if n := e.count(`SELECT COUNT(*) FROM session_admissions`); n != 0 {
		t.Fatal("an admission was stored although Admit failed")
	}
	rec := e.admit("s", "in-1", "x")
	if rec.Seq != 1 || rec.Duplicate {
		t.Fatalf("after the lock cleared: %+v", rec)
	}
}

// The admit of a queued input is five statements, each a round trip on
// PostgreSQL: the seq (whose update locks the session's row), the input_id
// lookup, the insert, the wait reason and the event (two statements on
// SQLite, where they run on the committer). A duplicate writes nothing, not
// even the seq it reserved.
func TestAdmitStatements(t *testing.T) {
	e := newEnv(t)
	e.session("s")
	want := int64(6)
	if e.opt.Driver == store.Postgres {
		want = 5
	}
	ctx := context.Background()
	for i := range 3 {
		before := e.db.Statements()
		rec, err := e.q.Admit(ctx, req("s", fmt.Sprint("in-", i), "hello"), always(false))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.db.Statements() - before; got != want {
			t.Fatalf("admit %d: %d statements, want %d", i, got, want)
		}
		if rec.Seq != int64(i+1) || rec.Status != admission.StatusQueued {
			t.Fatalf("admit %d: receipt %+v", i, rec)
		}
	}
	var seq int64
	if err := e.db.Get(ctx, &seq, `SELECT next_admission_seq FROM sessions WHERE session_id = 's'`); err != nil {
		t.Fatal(err)
	}
	dup, err := e.q.Admit(ctx, req("s", "in-1", "hello"), always(false))
	if err != nil || !dup.Duplicate || dup.Seq != 2 || dup.Reason != admission.WaitBusy {
		t.Fatalf("duplicate: %+v, %v", dup, err)
	}
	var after int64
	if err := e.db.Get(ctx, &after, `SELECT next_admission_seq FROM sessions WHERE session_id = 's'`); err != nil {
		t.Fatal(err)
	}
	if after != seq {
		t.Fatalf("the duplicate moved next_admission_seq from %d to %d", seq, after)
	}
	next, err := e.q.Admit(ctx, req("s", "in-3", "hello"), always(false))
	if err != nil || next.Seq != 4 {
		t.Fatalf("the admit after the duplicate: %+v, %v (want seq 4)", next, err)
	}
}
