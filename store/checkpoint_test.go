package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is an io.Writer safe for the committer goroutine's logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCheckpointNoticesReadOnlyDatabase: with only state.db unwritable,
// commits still land in the WAL (they are durable and acknowledged), but
// checkpoints fail. The periodic checkpoint reports it once, with the path,
// and reports the recovery once the file is writable again.
func TestCheckpointNoticesReadOnlyDatabase(t *testing.T) {
	logs := &lockedBuffer{}
	db := openTest(t, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := context.Background()
	if st := db.LastCheckpoint(); !st.At.IsZero() {
		t.Fatalf("a checkpoint before the first interval: %+v", st)
	}
	if st, err := db.Checkpoint(ctx); err != nil || st.At.IsZero() {
		t.Fatalf("checkpoint of a healthy store: %+v %v", st, err)
	}
	makeImmutable(t, db.Path())
	for i, p := range []string{"after-1", "after-2"} {
		if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, p) }); err != nil {
			t.Fatalf("commit %d with only state.db read-only: %v (the WAL is writable)", i, err)
		}
		st, err := db.Checkpoint(ctx)
		if !errors.Is(err, ErrUnavailable) || st.Err == nil || db.LastCheckpoint().Err == nil {
			t.Fatalf("checkpoint into a read-only state.db: %+v %v, want ErrUnavailable", st, err)
		}
	}
	if n := strings.Count(logs.String(), "state.db cannot be written"); n != 1 || !strings.Contains(logs.String(), db.Path()) {
		t.Fatalf("want one error naming %s, logs:\n%s", db.Path(), logs)
	}
	if err := setImmutable(db.Path(), false); err != nil {
		t.Fatal(err)
	}
	st, err := db.Checkpoint(ctx)
	if err != nil || st.Checkpointed != st.WALFrames {
		t.Fatalf("checkpoint once writable: %+v %v", st, err)
	}
	if !strings.Contains(logs.String(), "state.db is writable again") {
		t.Fatalf("no recovery log:\n%s", logs)
	}
	var n int
	if err := db.Get(ctx, &n, `SELECT count(*) FROM approval_allowlist WHERE pattern LIKE 'after-%'`); err != nil || n != 2 {
		t.Fatalf("%d of the 2 commits are readable (%v)", n, err)
	}
}

func TestCheckpointAfterClose(t *testing.T) {
	db := openTest(t, Options{})
	db.Close()
	if _, err := db.Checkpoint(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v", err)
	}
}
