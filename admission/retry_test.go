package admission_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/store"
)

// logRecorder is a slog.Handler that keeps every record's message and
// attributes, so a test can wait for the scheduler's retry logs.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// maxAttempt is the highest "attempt" attribute of the records whose
// message starts with prefix, 0 if none; count is how many there are.
func (l *logRecorder) find(prefix string) (count int, maxAttempt int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if !strings.HasPrefix(r.Message, prefix) {
			continue
		}
		count++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "attempt" {
				maxAttempt = max(maxAttempt, a.Value.Int64())
			}
			return true
		})
	}
	return count, maxAttempt
}

// TestSchedulerRetriesClaimAfterStoreFailure: a claim that fails because
// the store is locked is retried by the scheduler itself. Nothing else
// wakes it here (no admit, no settle), so without the retry the input
// would wait queued forever in an idle daemon.
func TestSchedulerRetriesClaimAfterStoreFailure(t *testing.T) {
	t.Cleanup(admission.SetRetryBackoff(5*time.Millisecond, 20*time.Millisecond))
	e := newEnvOpt(t, store.Options{BusyTimeout: 20 * time.Millisecond})
	e.session("s")
	rec := e.admit("s", "a", "first")
	release := holdWrites(t, e)

	logs := &logRecorder{}
	f := newFakeExec(t)
	s := admission.NewScheduler(e.q, f, 1, nil, slog.New(logs))
	s.Start([]string{"s"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		s.Stop(ctx)
	})
	waitFor(t, waitLong, "two failed claims", func() bool { n, _ := logs.find("claim failed"); return n >= 2 })
	if a := e.mustRow(rec.AdmissionID); a.Status != admission.StatusQueued {
		t.Fatalf("while the store is locked: %s, want queued", a.Status)
	}
	release()
	if got := f.next("a"); got.AdmissionID != rec.AdmissionID {
		t.Fatalf("started %s, want %s", got.AdmissionID, rec.AdmissionID)
	}
	f.finish("a", admission.Result{Outcome: admission.OutcomeCompleted})
	waitFor(t, waitLong, "a completed", func() bool {
		a := e.mustRow(rec.AdmissionID)
		return a.Status == admission.StatusTerminal && a.Outcome.String == "completed"
	})
}

// TestSchedulerSettleRetriesUntilStoreRecovers: a turn whose settle meets a
// locked store keeps retrying — well past the 50 attempts an earlier
// version gave up after, leaving the row started and the session stuck in
// a live daemon — and once the lock goes, it settles and the next input of
// the session starts.
func TestSchedulerSettleRetriesUntilStoreRecovers(t *testing.T) {
	t.Cleanup(admission.SetRetryBackoff(time.Millisecond, time.Millisecond))
	e := newEnvOpt(t, store.Options{BusyTimeout: 5 * time.Millisecond})
	e.session("s")
	logs := &logRecorder{}
	f := newFakeExec(t)
	s := admission.NewScheduler(e.q, f, 1, nil, slog.New(logs))
	s.Start(nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		s.Stop(ctx)
	})
	a := e.admit("s", "a", "first")
	b := e.admit("s", "b", "second")
	s.Wake("s")
	f.next("a")

	release := holdWrites(t, e)
	f.finish("a", admission.Result{Outcome: admission.OutcomeCompleted})
	waitFor(t, waitLong, "60 settle attempts", func() bool { _, n := logs.find("settle failed; retrying"); return n >= 60 })
	if row := e.mustRow(a.AdmissionID); row.Status != admission.StatusStarted {
		t.Fatalf("while the store is locked: %s, want started", row.Status)
	}
	if _, ok := s.Running("s"); !ok {
		t.Fatal("the turn left the running set before its settle committed")
	}
	release()
	waitFor(t, waitLong, "a settled", func() bool {
		row := e.mustRow(a.AdmissionID)
		return row.Status == admission.StatusTerminal && row.Outcome.String == "completed"
	})
	if got := f.next("b"); got.AdmissionID != b.AdmissionID {
		t.Fatalf("next started %s, want %s", got.AdmissionID, b.AdmissionID)
	}
	f.finish("b", admission.Result{Outcome: admission.OutcomeCompleted})
	if n, _ := logs.find("settle failed; the admission stays started"); n != 0 {
		t.Fatalf("the settle was abandoned %d times", n)
	}
}
