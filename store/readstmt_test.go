package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Reads run prepared statements cached on the reader pool, also inside
// read transactions, and a read transaction never waits for a second
// connection of the pool to prepare one: with every reader held by a
// ReadTx whose query is not cached yet, each still answers (this hung
// when the cache prepared on the pool for a ReadTx: TestAttackInterrupt-
// AsTurnEnds' session.create snapshots then waited for ever).
func TestReadsUseCachedStatementsWithoutASecondConnection(t *testing.T) {
	const readers = 2
	db := openTest(t, Options{Readers: readers})
	ctx := context.Background()
	var held sync.WaitGroup
	held.Add(readers)
	errs := make(chan error, readers)
	for i := range readers {
		go func() {
			errs <- db.ReadTx(ctx, func(r *Reads) error {
				held.Done()
				held.Wait() // every reader connection is held now
				var n int
				if err := r.Get(&n, fmt.Sprintf("SELECT %d + ?", i), 1); err != nil {
					return err
				}
				if n != i+1 {
					return fmt.Errorf("reader %d read %d", i, n)
				}
				return nil
			})
		}()
	}
	deadline := time.After(30 * time.Second)
	for range readers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("read transactions holding every reader connection hung on a statement not cached yet")
		}
	}
	// The pool's reads are cached, and a later ReadTx uses the cached one.
	q := "SELECT count(*) FROM sessions WHERE session_id <> ?"
	var n int
	for range 3 {
		if err := db.Get(ctx, &n, q, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ReadTx(ctx, func(r *Reads) error { return r.Get(&n, q, "y") }); err != nil {
		t.Fatal(err)
	}
	db.rstmtMu.Lock()
	_, cached := db.rstmts[q]
	db.rstmtMu.Unlock()
	if cached != (db.drv == SQLite) {
		t.Fatalf("statement cached: %v on %s", cached, db.drv)
	}
}
