package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
)

// TestAttackFoldTwoClientsSubmitToOneIdleSession: two clients submit to
// the same idle session at the same instant, with different input_ids and
// with the same one, round after round (issue 28's admit+claim). Each
// round: at most one receipt is started (the other is queued behind it, or
// is the duplicate of the same admission), generations follow seq, every
// admission completes, and the model receives each input exactly once.
func TestAttackFoldTwoClientsSubmitToOneIdleSession(t *testing.T) {
	var m *fixtures.FakeModel
	d := startTestWith(t, "limits: {max_concurrent_turns: 2}\n", func(fm *fixtures.FakeModel) {
		m = fm
		fm.Default(fixtures.Reply{Text: "done"})
	})
	const rounds = 12
	for round := 0; round < rounds; round++ {
		sid := liveSession(t, d)
		same := round%2 == 1
		ids := []string{fmt.Sprintf("r%d-a", round), fmt.Sprintf("r%d-b", round)}
		if same {
			ids[1] = ids[0]
		}
		var wg sync.WaitGroup
		recs := make([]protocol.Receipt, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				out, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": ids[i], "text": "text of " + ids[i]})
				errs[i] = err
				if err == nil {
					recs[i] = out.(protocol.Receipt)
				}
			}(i)
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: submit %s: %v", round, ids[i], err)
			}
		}
		started := 0
		for _, r := range recs {
			if r.Status == admission.StatusStarted && !r.Duplicate {
				started++
			}
		}
		if started > 1 {
			t.Fatalf("round %d: two started receipts in one session: %+v", round, recs)
		}
		if same && (recs[0].AdmissionID != recs[1].AdmissionID || recs[0].Duplicate == recs[1].Duplicate) {
			t.Fatalf("round %d: one input_id twice: %+v", round, recs)
		}
		fixtures.Eventually(t, 30*time.Second, "every admission of the round to complete", func() bool {
			rows := sessionRows(t, d, sid)
			for _, a := range rows {
				if a.Status != admission.StatusTerminal {
					return false
				}
			}
			return len(rows) == len(uniq(ids))
		})
		for i, a := range sessionRows(t, d, sid) {
			if a.Outcome.String != string(admission.OutcomeCompleted) || a.Generation() != int64(i+1) {
				t.Fatalf("round %d: admission %s seq %d: %s/%s generation %d", round, a.InputID, a.Seq, a.Status, a.Outcome.String, a.Generation())
			}
		}
		for _, id := range uniq(ids) {
			if n := len(m.RequestsWithLastUser("text of " + id)); n != 1 {
				t.Fatalf("round %d: the model received %s %d times", round, id, n)
			}
		}
	}
}

func uniq(ids []string) []string {
	var out []string
	for _, id := range ids {
		if len(out) == 0 || out[len(out)-1] != id {
			out = append(out, id)
		}
	}
	return out
}

func sessionRows(t *testing.T, d *Daemon, sid string) []admission.Admission {
	t.Helper()
	var all []admission.Admission
	if err := d.db.Select(context.Background(), &all, `SELECT admission_id, target_session_id, request_id, seq, status, outcome, execution_generation
		FROM session_admissions WHERE target_session_id = ? ORDER BY seq`, sid); err != nil {
		t.Fatal(err)
	}
	return all
}
