package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
)

// prompt.submit to an idle session admits and starts the input in one
// commit (issue 28): the receipt says started with the turn's execution
// generation, and by the time the turn runs the store committed once. An
// input behind it is only queued (reason busy).
func TestSubmitToAnIdleSessionCommitsOnce(t *testing.T) {
	d := startTest(t, "")
	// The daemon's own commits (its boot's last steps, lease beats) may
	// land in the window: the fewest commits over three sessions counts.
	fewest := int64(1 << 30)
	var sid string
	for i := 0; i < 3; i++ {
		sid = mustSession(t, d)
		_, before := d.db.Stats()
		out, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "first", "text": "hello"})
		if err != nil {
			t.Fatal(err)
		}
		rec := out.(protocol.Receipt)
		if rec.Status != admission.StatusStarted || rec.ExecutionGeneration == nil || *rec.ExecutionGeneration != 1 || rec.Reason != "" {
			t.Fatalf("receipt %+v, want started with generation 1", rec)
		}
		fixtures.Eventually(t, 30*time.Second, "the turn runs", func() bool {
			a, ok := d.sched.Running(sid)
			return ok && a.AdmissionID == rec.AdmissionID
		})
		_, after := d.db.Stats()
		fewest = min(fewest, after-before)
	}
	if fewest != 1 {
		t.Fatalf("submit to an idle session and its turn's start: %d commits, want 1", fewest)
	}
	out, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "second", "text": "next"})
	if err != nil {
		t.Fatal(err)
	}
	if rec := out.(protocol.Receipt); rec.Status != admission.StatusQueued || rec.Reason != admission.WaitBusy {
		t.Fatalf("behind a running turn: %+v", rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, ok, err := d.sched.Interrupt(ctx, sid, 1); err != nil || !ok {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	// The queued input starts next (the settle's commit starts it).
	fixtures.Eventually(t, 30*time.Second, "the second input runs", func() bool {
		a, ok := d.sched.Running(sid)
		return ok && a.InputID == "second" && a.Generation() == 2
	})
}
