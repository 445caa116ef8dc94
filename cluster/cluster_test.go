package cluster_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/store"
)

func open(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), storetest.Options(t, store.Options{Synchronous: "NORMAL"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func bootEpoch(t *testing.T, db *store.DB) cluster.DaemonID {
	t.Helper()
	var id cluster.DaemonID
	if err := db.InTx(context.Background(), func(tx *store.Tx) error {
		return tx.Get(&id, `INSERT INTO boot_epochs (pid, version, started_at) VALUES (1, 'test', ?) RETURNING epoch`, store.Now())
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func live(t *testing.T, db *store.DB, id cluster.DaemonID) bool {
	t.Helper()
	var n int
	if err := db.Get(context.Background(), &n, `SELECT CASE WHEN `+cluster.DialectOf(db).LiveDaemon("?")+` THEN 1 ELSE 0 END`, id); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// fakeClock is the monotonic clock of the self-fence.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestLeaseIsJudgedOnTheDatabaseClock(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	id := bootEpoch(t, db)
	if live(t, db, id) {
		t.Fatal("a daemon that never joined is live")
	}
	m, err := cluster.Join(ctx, db, id, cluster.Options{TTL: time.Hour, Label: "hostA"})
	if err != nil {
		t.Fatal(err)
	}
	if !live(t, db, id) || !m.Valid() {
		t.Fatal("a daemon that joined is not live")
	}
	var label string
	if err := db.Get(ctx, &label, `SELECT label FROM boot_epochs WHERE epoch = ?`, id); err != nil || label != "hostA" {
		t.Fatalf("label %q %v", label, err)
	}
	// The lease is compared with the database's now, whatever the
	// daemon's clock says.
	if err := db.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE boot_epochs SET lease_expires_ms = `+cluster.DialectOf(db).NowMS()+` - 1 WHERE epoch = ?`, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if live(t, db, id) {
		t.Fatal("an expired lease is live")
	}
	if err := m.Renew(ctx); err != nil || !live(t, db, id) {
		t.Fatalf("renewal: %v", err)
	}
	other := bootEpoch(t, db)
	if _, err := cluster.Join(ctx, db, other, cluster.Options{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.ExpireOthers(ctx, db, other); err != nil {
		t.Fatal(err)
	}
	if live(t, db, id) || !live(t, db, other) {
		t.Fatal("ExpireOthers")
	}
	if err := m.Stop(ctx); err != nil || live(t, db, id) {
		t.Fatalf("a stopped daemon is live (%v)", err)
	}
}

func TestSelfFenceBeforeTheLeaseCanExpire(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	id := bootEpoch(t, db)
	clock := &fakeClock{now: time.Unix(1000, 0)}
	var lost, renewed, beats atomic.Int32
	m, err := cluster.Join(ctx, db, id, cluster.Options{TTL: 8 * time.Second, Now: clock.Now,
		OnLost: func() { lost.Add(1) }, OnRenewed: func() { renewed.Add(1) }, OnBeat: func() { beats.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if m.FenceAfter() != 6*time.Second {
		t.Fatalf("FenceAfter %v, want 3/4 of the TTL", m.FenceAfter())
	}
	clock.Add(5 * time.Second)
	if !m.Check() || lost.Load() != 0 {
		t.Fatal("fenced before FenceAfter")
	}
	clock.Add(time.Second) // the renewals failed (paused, cut off) for 3/4 of the TTL
	if m.Check() || m.Valid() || lost.Load() != 1 {
		t.Fatalf("not fenced at FenceAfter: lost=%d", lost.Load())
	}
	m.Check()
	if lost.Load() != 1 {
		t.Fatal("OnLost ran twice")
	}
	m.Beat() // the store answers again
	if renewed.Load() != 1 || beats.Load() != 1 || !m.Valid() {
		t.Fatalf("after a renewal: renewed=%d beats=%d valid=%v", renewed.Load(), beats.Load(), m.Valid())
	}
}

func TestBusDeliversAfterCommitOnly(t *testing.T) {
	db := open(t)
	a, b := cluster.NewBus(db), cluster.NewBus(db)
	defer a.Close()
	defer b.Close()
	got := make(chan string, 4)
	stop := b.Listen(cluster.ChannelSessions, func(p string) { got <- p })
	ctx := context.Background()
	_ = db.InTx(ctx, func(tx *store.Tx) error {
		a.Notify(tx, cluster.ChannelSessions, "rolled-back")
		return context.Canceled
	})
	if err := db.InTx(ctx, func(tx *store.Tx) error { a.Notify(tx, cluster.ChannelSessions, "s1"); return nil }); err != nil {
		t.Fatal(err)
	}
	a.Publish(cluster.ChannelSessions, "s2")
	a.Publish(cluster.ChannelEvents, "other channel")
	for _, want := range []string{"s1", "s2"} {
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("got %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q never arrived", want)
		}
	}
	if storetest.Driver() == store.SQLite {
		// In-process, a bus does not hear itself (PostgreSQL's LISTEN does).
		b.Publish(cluster.ChannelSessions, "to itself")
	}
	stop()
	a.Publish(cluster.ChannelSessions, "after stop")
	select {
	case p := <-got:
		t.Fatalf("delivered %q", p)
	default:
	}
}

// TestAttackClusterSelfFenceWhileABeatIsStuck: the self-fence must fire
// FenceAfter after the last renewal even when the renewal that follows is
// stuck (here behind a write transaction holding this daemon's row, as a
// store cut off without a reset would hold it): otherwise the lease
// expires, another daemon takes the sessions, and this daemon's commands
// still run.
func TestAttackClusterSelfFenceWhileABeatIsStuck(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	id := bootEpoch(t, db)
	var lost atomic.Int32
	m, err := cluster.Join(ctx, db, id, cluster.Options{TTL: 900 * time.Millisecond,
		OnLost: func() { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	stuck, holding, held := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(held)
		db.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.Exec(`UPDATE boot_epochs SET label = label WHERE epoch = ?`, id)
			close(holding)
			<-stuck
			return err
		})
	}()
	<-holding
	m.Start()
	defer func() {
		close(stuck)
		<-held
		m.Halt()
	}()
	fixtures.Eventually(t, 30*time.Second, "the self-fence while the renewals are stuck (else the lease expires with this daemon's turns still running)",
		func() bool { return lost.Load() > 0 })
}

// A heartbeat's OnBeat (taking orphans, checking turns) that takes long
// does not hold the renewals up: they go on beside it, and the lease stays
// alive. Before, OnBeat ran between renewals, and a slow one let the lease
// lapse.
func TestSlowOnBeatDoesNotStopRenewals(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	id := bootEpoch(t, db)
	var lost atomic.Int32
	stuck, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	m, err := cluster.Join(ctx, db, id, cluster.Options{TTL: 900 * time.Millisecond,
		OnLost: func() { lost.Add(1) },
		OnBeat: func() {
			once.Do(func() { close(entered) })
			<-stuck
		}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer func() {
		close(stuck)
		m.Halt()
	}()
	<-entered
	expires := func() int64 {
		var ms int64
		if err := db.Get(ctx, &ms, `SELECT lease_expires_ms FROM boot_epochs WHERE epoch = ?`, id); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	first := expires()
	fixtures.Eventually(t, 30*time.Second, "renewals going on while OnBeat is stuck (the lease moved a whole TTL on)",
		func() bool { return expires() >= first+900 })
	if lost.Load() > 0 {
		t.Fatal("the daemon fenced itself while its renewals went through")
	}
}

// A lease renewal does not wait behind the store's other work: with every
// connection of the pool held by long transactions (a saturated daemon),
// Renew still goes through, on its reserved connection. Before, it queued
// for the pool, the lease lapsed and the daemon fenced itself under load.
func TestRenewNotDelayedBySaturatedPool(t *testing.T) {
	storetest.Only(t, store.Postgres) // SQLite has one writer: every write waits its turn there, and nobody can take a lone daemon's sessions
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), storetest.Options(t, store.Options{MaxConns: 2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := cluster.Join(context.Background(), db, bootEpoch(t, db), cluster.Options{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var held, done sync.WaitGroup
	for range 2 {
		held.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			db.InTx(context.Background(), func(tx *store.Tx) error {
				var one int
				err := tx.Get(&one, `SELECT 1`)
				held.Done()
				<-release
				return err
			})
		}()
	}
	held.Wait() // both pool connections are in use
	renewed := make(chan error, 1)
	go func() { renewed <- m.Renew(context.Background()) }()
	select {
	case err := <-renewed:
		if err != nil {
			t.Errorf("renew with a saturated pool: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the renewal waited for the saturated pool (10 s and counting): the lease would lapse under load")
	}
	close(release)
	done.Wait()
	if t.Failed() {
		<-renewed
	}
}

func TestRegisterAndMarkStopped(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	a, err := cluster.Register(ctx, db, 11, "v1", store.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.Register(ctx, db, 12, "v1", store.Now())
	if err != nil || b <= a {
		t.Fatalf("second boot epoch %d (%v), want above %d", b, err, a)
	}
	if err := cluster.MarkStopped(ctx, db, a); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Epoch     cluster.DaemonID `db:"epoch"`
		PID       int              `db:"pid"`
		CleanStop int              `db:"clean_stop"`
		Stopped   *string          `db:"stopped_at"`
	}
	if err := db.Select(ctx, &rows, `SELECT epoch, pid, clean_stop, stopped_at FROM boot_epochs ORDER BY epoch`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Epoch != a || rows[0].PID != 11 || rows[0].CleanStop != 1 || rows[0].Stopped == nil ||
		rows[1].Epoch != b || rows[1].CleanStop != 0 || rows[1].Stopped != nil {
		t.Fatalf("boot_epochs = %+v", rows)
	}
}
