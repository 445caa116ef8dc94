package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder collects the payloads one Listen delivers.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(p string) {
	r.mu.Lock()
	r.got = append(r.got, p)
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// waitFor polls cond every few milliseconds until it holds or 20s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func notify(t *testing.T, db *DB, fail bool, notes ...[2]string) {
	t.Helper()
	err := db.InTx(context.Background(), func(tx *Tx) error {
		for _, n := range notes {
			tx.Notify(n[0], n[1])
		}
		if fail {
			return errors.New("roll back")
		}
		return nil
	})
	if (err != nil) != fail {
		t.Fatalf("InTx: %v", err)
	}
}

// TestListenNotify: a notification reaches every Listen of its channel
// after COMMIT, in commit order; a rolled-back transaction's never does;
// another channel's never does; after stop, nothing more.
func TestListenNotify(t *testing.T) {
	db := openTest(t, Options{})
	var a, b, other recorder
	stopA := db.Listen("sessiond_events", a.add)
	stopB := db.Listen("sessiond_events", b.add)
	defer stopB()
	stopOther := db.Listen("sessiond_sessions", other.add)
	defer stopOther()
	notify(t, db, false, [2]string{"sessiond_events", "s1:1"}, [2]string{"sessiond_events", "s1:2"})
	notify(t, db, true, [2]string{"sessiond_events", "rolled-back"})
	notify(t, db, false, [2]string{"sessiond_events", "s2:1"})
	want := []string{"s1:1", "s1:2", "s2:1"}
	waitFor(t, "three notifications on both listeners", func() bool { return len(b.list()) >= 3 && len(a.list()) >= 3 })
	if got := a.list(); !slices.Equal(got, want) {
		t.Fatalf("listener a got %q, want %q", got, want)
	}
	if got := b.list(); !slices.Equal(got, want) {
		t.Fatalf("listener b got %q, want %q", got, want)
	}
	stopA()
	stopA() // twice is fine
	notify(t, db, false, [2]string{"sessiond_events", "after-stop"}, [2]string{"sessiond_sessions", "s1"})
	// b and other hear it; a, stopped, does not (b is served after a on
	// the same delivery goroutine, so once b has it a would have had it).
	waitFor(t, "the notification after stop", func() bool { return len(b.list()) == 4 && len(other.list()) == 1 })
	if got := a.list(); len(got) != 3 {
		t.Fatalf("a stopped listener got %q", got)
	}
	if got := other.list(); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("the other channel got %q", got)
	}
}

// TestListenReconnects: when the LISTEN connection is lost (its server
// process terminated), the store reconnects, every listener hears "" (resync
// from the tables), and notifications flow again.
func TestListenReconnects(t *testing.T) {
	postgresOnly(t) // PostgreSQL's LISTEN connection; SQLite delivers in-process
	db := openTest(t, Options{})
	var r recorder
	stop := db.Listen("sessiond_sessions", r.add)
	defer stop()
	notify(t, db, false, [2]string{"sessiond_sessions", "before"})
	waitFor(t, "the first notification", func() bool { return len(r.list()) == 1 })
	pid := db.pg.lis.backendPID()
	if pid == 0 {
		t.Fatal("no LISTEN connection")
	}
	var ok bool
	if err := db.Get(context.Background(), &ok, "SELECT pg_terminate_backend(?)", int64(pid)); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
	}
	waitFor(t, "the resync call after the reconnect", func() bool { return slices.Contains(r.list(), "") })
	if new := db.pg.lis.backendPID(); new == pid || new == 0 {
		t.Fatalf("backend pid %d after the reconnect (was %d)", new, pid)
	}
	notify(t, db, false, [2]string{"sessiond_sessions", "after"})
	waitFor(t, "a notification after the reconnect", func() bool { return slices.Contains(r.list(), "after") })
	if got := r.list(); !slices.Equal(got, []string{"before", "", "after"}) {
		t.Fatalf("got %q", got)
	}
}

// TestListenStopFromCallback: fn may end its own subscription; the
// delivery goroutine goes on serving the others.
func TestListenStopFromCallback(t *testing.T) {
	db := openTest(t, Options{})
	var once, other recorder
	var stop func()
	var mu sync.Mutex
	mu.Lock()
	stop = db.Listen("sessiond_sessions", func(p string) {
		once.add(p)
		mu.Lock()
		s := stop
		mu.Unlock()
		s()
	})
	mu.Unlock()
	stopOther := db.Listen("sessiond_sessions", other.add)
	defer stopOther()
	notify(t, db, false, [2]string{"sessiond_sessions", "1"})
	notify(t, db, false, [2]string{"sessiond_sessions", "2"})
	waitFor(t, "both notifications on the other listener", func() bool { return len(other.list()) == 2 })
	if got := once.list(); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("the listener that stopped itself got %q", got)
	}
}
