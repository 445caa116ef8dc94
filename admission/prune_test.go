package admission_test

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// TestRetentionKeepsToolRunningOfOpenAdmissions: the events window prunes
// old events, but not the tool.running of an admission that is not
// terminal (a boot after a crash needs it to kill the command, and the
// resolve to say that it ran); once the admission settles it goes too. A
// resume that asks from before the window still gets snapshot_required,
// even though an old row was kept.
func TestRetentionKeepsToolRunningOfOpenAdmissions(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	e.session("s")
	rec := e.admit("s", "a", "run the long job")
	a := e.claim("s")
	appendEvents := func(typ protocol.EventType, n int) {
		t.Helper()
		check(t, e.db.InTx(ctx, func(tx *store.Tx) error {
			for i := 0; i < n; i++ {
				if _, err := tx.AppendEvent("s", typ, rec.AdmissionID, a.Generation(), map[string]string{"tool_call_id": "c1"}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	appendEvents("tool.running", 1)
	appendEvents("tool.output.kept", store.EventRetention+200)
	if n := e.count(`SELECT count(*) FROM events WHERE session_id = 's' AND type = 'tool.running'`); n != 1 {
		t.Fatalf("%d tool.running rows after the window moved past it, want 1 (kept while the admission is open)", n)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE session_id = 's'`); n > store.EventRetention+64+1 {
		t.Fatalf("%d events kept, want the window (%d) plus the kept row", n, store.EventRetention)
	}
	var last int64
	check(t, e.db.Get(ctx, &last, `SELECT last_event_seq FROM sessions WHERE session_id = 's'`))
	err := e.db.ReadTx(ctx, func(tx *store.Reads) error {
		kept := int64(e.count(`SELECT seq FROM events WHERE session_id = 's' AND type = 'tool.running'`))
		for _, after := range []int64{0, kept - 1, kept} {
			if _, complete, err := e.db.EventsAfter(tx, "s", after); err != nil || complete {
				t.Fatalf("resume after seq %d (the kept row is %d): complete=%v %v, want snapshot_required", after, kept, complete, err)
			}
		}
		evs, complete, err := e.db.EventsAfter(tx, "s", last-5)
		if err != nil || !complete || len(evs) != 5 {
			t.Fatalf("resume from last-5: %d events complete=%v %v", len(evs), complete, err)
		}
		return nil
	})
	check(t, err)
	if _, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil); err != nil {
		t.Fatal(err)
	}
	appendEvents("tool.output.kept", 64)
	if n := e.count(`SELECT count(*) FROM events WHERE session_id = 's' AND type = 'tool.running'`); n != 0 {
		t.Fatalf("%d tool.running rows of a terminal admission outside the window, want 0", n)
	}
}
