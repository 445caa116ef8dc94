package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
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
	sqliteOnly(t)
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
	sqliteOnly(t)
	db := openTest(t, Options{})
	db.Close()
	if _, err := db.Checkpoint(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v", err)
	}
}

// TestWALStartsOverUnderSustainedWrites: under sustained writes from
// several writers the WAL must still start over (SQLite's automatic
// checkpoint runs in the committing connection, between commits, so it
// copies every page). Without that the WAL grows with every commit (36 MB
// here when an experiment moved checkpoints to their own connection).
func TestWALStartsOverUnderSustainedWrites(t *testing.T) {
	sqliteOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 750 {
				if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("x", 200))) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	fi, err := os.Stat(db.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if limit := int64(8 << 20); fi.Size() > limit {
		t.Fatalf("WAL is %d bytes after 3,000 commits, want at most %d: it did not start over", fi.Size(), limit)
	}
	t.Logf("WAL %d bytes after 3,000 commits", fi.Size())
	if n := countPatterns(t, db); n != 3000 {
		t.Fatalf("%d rows, want 3000", n)
	}
}

// TestCheckpointBusy: while another process runs a checkpoint (here a
// RESTART one on another connection, waiting for a reader on an old
// snapshot), a passive checkpoint cannot start. It reports Busy, not
// success and not a failure.
//
// A RESTART checkpoint that starts while the store's own passive one holds
// the checkpoint lock gives up at once (busy in its row, no error; the
// lock is not subject to busy_timeout) and then holds nothing. The other
// connection therefore runs RESTART again and again, reading its row,
// until the store has seen Busy once: a single RESTART, its row dropped by
// ExecContext, left the test waiting 20 s for a Busy that could not come.
func TestCheckpointBusy(t *testing.T) {
	sqliteOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "before") }); err != nil {
		t.Fatal(err)
	}
	reader, err := db.r.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.GetContext(ctx, &n, "SELECT count(*) FROM approval_allowlist"); err != nil { // the snapshot starts
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "after") }); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", DSN(db.Path(), true, Options{BusyTimeout: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	restart := func() (busy int, err error) {
		var log, done int
		err = other.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &log, &done)
		return busy, err
	}
	stop := make(chan struct{})
	restarted := make(chan error, 1)
	go func() { // holds the checkpoint lock most of the time, waiting for the reader
		for {
			select {
			case <-stop:
				restarted <- nil
				return
			default:
			}
			if busy, err := restart(); err != nil {
				restarted <- err
				return
			} else if busy == 0 {
				restarted <- errors.New("a RESTART checkpoint completed beside a reader on an old snapshot")
				return
			}
		}
	}()
	var st CheckpointStatus
	fixtures.Eventually(t, 20*time.Second, "a Busy checkpoint beside a waiting RESTART checkpoint", func() bool {
		st, err = db.Checkpoint(ctx)
		if err != nil {
			t.Fatalf("checkpoint beside another one: %+v %v, want Busy and no error", st, err)
		}
		return st.Busy
	})
	if last := db.LastCheckpoint(); !last.Busy || last.Err != nil {
		t.Fatalf("LastCheckpoint = %+v", last)
	}
	close(stop)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	reader.ExecContext(ctx, "COMMIT")
	if busy, err := restart(); err != nil || busy != 0 {
		t.Fatalf("RESTART once the reader is gone: busy %d, %v", busy, err)
	}
	if st, err := db.Checkpoint(ctx); err != nil || st.Busy {
		t.Fatalf("checkpoint once alone: %+v %v", st, err)
	}
}

// TestCloseRacingInTx: an InTx that passed its closed check just before
// Close, and queues its request only after the committer's last drain
// (forced here), returns ErrClosed at once instead of waiting forever; its
// function never runs.
func TestCloseRacingInTx(t *testing.T) {
	sqliteOnly(t)
	// The queueing select picks at random between a free slot and the
	// stop signal: 20 rounds all but certainly hit the slot.
	for round := range 20 {
		db := openTest(t, Options{})
		db.beforeQueue = func() { db.Close() } // the committer is gone when the request is queued
		var ran atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- db.InTx(context.Background(), func(tx *Tx) error { ran.Store(true); return nil })
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) || ran.Load() {
				t.Fatalf("round %d: InTx racing Close = %v (ran %v), want ErrClosed without running", round, err, ran.Load())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: InTx still waits 30 s after Close", round)
		}
	}
}
