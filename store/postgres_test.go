package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/protocol"
)

// postgresOnly starts a test of PostgreSQL's own mechanics, selected in
// TestMain for the PostgreSQL pass. It fails a test not selected so.
func postgresOnly(t *testing.T) {
	t.Helper()
	only.Mark(t, string(Postgres))
}

// TestPostgresReadCommitted: InTx runs READ COMMITTED on PostgreSQL
// (its consistency comes from explicit row locks, docs/scale-out.md),
// whatever the server's default isolation.
func TestPostgresReadCommitted(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	if _, err := db.r.ExecContext(context.Background(), "ALTER DATABASE "+currentDB(t, db)+" SET default_transaction_isolation = 'serializable'"); err != nil {
		t.Fatal(err)
	}
	db.r.SetMaxIdleConns(0) // new connections read the new default
	db.r.SetMaxIdleConns(db.opt.MaxConns)
	var iso string
	if err := db.InTx(context.Background(), func(tx *Tx) error {
		return tx.Get(&iso, "SHOW transaction_isolation")
	}); err != nil {
		t.Fatal(err)
	}
	if iso != "read committed" {
		t.Fatalf("InTx runs %q, want read committed", iso)
	}
}

// TestPostgresRetriesDeadlock: two transactions that lock two rows in
// opposite orders deadlock (40P01); PostgreSQL aborts one, InTx runs it
// again, so both succeed, and the OnCommit hooks of the failed attempt
// never run. Reruns counts the re-run.
func TestPostgresRetriesDeadlock(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	if err := db.InTx(context.Background(), func(tx *Tx) error {
		if err := insertPattern(tx, "a"); err != nil {
			return err
		}
		return insertPattern(tx, "b")
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.r.ExecContext(context.Background(), "ALTER DATABASE "+currentDB(t, db)+" SET deadlock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	db.r.SetMaxIdleConns(0)
	db.r.SetMaxIdleConns(db.opt.MaxConns)
	var attempts, hooks atomic.Int32
	var locked sync.WaitGroup
	locked.Add(2)
	run := func(first, second string) error {
		once := true
		return db.InTx(context.Background(), func(tx *Tx) error {
			attempts.Add(1)
			tx.OnCommit(func() { hooks.Add(1) })
			touch := func(p string) error {
				_, err := tx.Exec("UPDATE approval_allowlist SET created_at = ? WHERE pattern = ?", Now(), p)
				return err
			}
			if err := touch(first); err != nil {
				return err
			}
			if once {
				// Each holds its first row before either asks for its second.
				once = false
				locked.Done()
				locked.Wait()
			}
			return touch(second)
		})
	}
	r0 := db.Reruns()
	errs := make(chan error, 2)
	go func() { errs <- run("a", "b") }()
	go func() { errs <- run("b", "a") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("InTx: %v", err)
		}
	}
	if a, h, r := attempts.Load(), hooks.Load(), db.Reruns()-r0; a != 3 || h != 2 || r != 1 {
		t.Fatalf("%d attempts, %d OnCommit hooks run, %d re-runs counted; want 3 attempts (one re-run), 2 hooks, 1 re-run", a, h, r)
	}
}

// TestPostgresRetriesSerializationFailure: two SERIALIZABLE transactions
// (each asks for it itself: InTx runs READ COMMITTED) that each read the
// allowlist and then insert into it (write skew) cannot both commit; InTx
// runs the loser again, so both succeed, and the OnCommit hooks of the
// failed attempt never run.
func TestPostgresRetriesSerializationFailure(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	var attempts, hooks atomic.Int32
	var read sync.WaitGroup
	read.Add(2)
	run := func(p string) error {
		first := true
		return db.InTx(context.Background(), func(tx *Tx) error {
			attempts.Add(1)
			tx.OnCommit(func() { hooks.Add(1) })
			if _, err := tx.Exec("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"); err != nil {
				return err
			}
			var n int
			if err := tx.Get(&n, "SELECT count(*) FROM approval_allowlist"); err != nil {
				return err
			}
			if first {
				// Both have read before either writes.
				first = false
				read.Done()
				read.Wait()
			}
			return insertPattern(tx, p)
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run("a") }()
	go func() { errs <- run("b") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("InTx: %v", err)
		}
	}
	if n := countPatterns(t, db); n != 2 {
		t.Fatalf("rows = %d, want 2", n)
	}
	if a, h := attempts.Load(), hooks.Load(); a != 3 || h != 2 {
		t.Fatalf("%d attempts and %d OnCommit hooks run, want 3 attempts (one re-run) and 2 hooks", a, h)
	}
}

// TestPostgresRetriesAreBounded: a transaction that keeps failing to
// serialize is given up after pgMaxAttempts runs with ErrUnavailable.
func TestPostgresRetriesAreBounded(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	var attempts int
	err := db.InTx(context.Background(), func(tx *Tx) error {
		attempts++
		return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
	})
	if !errors.Is(err, ErrUnavailable) || attempts != pgMaxAttempts {
		t.Fatalf("err = %v after %d attempts, want ErrUnavailable after %d", err, attempts, pgMaxAttempts)
	}
	// A plain error of fn is not retried.
	attempts = 0
	boom := errors.New("boom")
	if err := db.InTx(context.Background(), func(tx *Tx) error { attempts++; return boom }); !errors.Is(err, boom) || attempts != 1 {
		t.Fatalf("err = %v after %d attempts", err, attempts)
	}
}

// TestPostgresConcurrentOpenMigratesOnce: daemons starting at once on a
// fresh database all open it; the advisory lock makes them migrate one
// after the other, each version applied once.
func TestPostgresConcurrentOpenMigratesOnce(t *testing.T) {
	postgresOnly(t)
	opt := testOptions(t, Options{})
	const n = 6
	dbs := make([]*DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = Open(context.Background(), "", opt) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		defer dbs[i].Close()
	}
	if t.Failed() {
		t.FailNow()
	}
	var versions []int
	if err := dbs[0].Select(context.Background(), &versions, "SELECT version FROM schema_version ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	migs, err := readMigrations("migrations_pg")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range migs {
		want = append(want, m.version)
	}
	if fmt.Sprint(versions) != fmt.Sprint(want) {
		t.Fatalf("schema_version = %v, want %v (each migration once)", versions, want)
	}
}

// TestPostgresHooksInCommitOrder: concurrent transactions appending events
// to one session reach the event sink in seq order, as on SQLite's single
// committer.
func TestPostgresHooksInCommitOrder(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	var mu sync.Mutex
	var seqs []int64
	db.SetEventSink(func(e Event) {
		mu.Lock()
		seqs = append(seqs, e.Seq)
		mu.Unlock()
	})
	ctx := context.Background()
	addSession(t, db, "s")
	var wg sync.WaitGroup
	const n = 200
	for range 16 {
		wg.Go(func() {
			for range n / 16 {
				if err := db.InTx(ctx, func(tx *Tx) error {
					_, err := tx.AppendEvent("s", protocol.EventType("test.event"), "", 0, map[string]any{})
					return err
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("the sink got seq %d at position %d: %v", s, i, seqs)
		}
	}
	if len(seqs) != n/16*16 {
		t.Fatalf("the sink got %d events", len(seqs))
	}
	seqs = nil
	mu.Unlock()

	// The race made certain: A commits and is held back before its hooks
	// until B's event reached the sink (or a second passed); B reads A's
	// row, so it began after A's COMMIT. B's event must wait for A's.
	sunk := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seqs)
	}
	var first atomic.Bool
	committed := make(chan struct{})
	db.pg.afterCommit = func() {
		if first.CompareAndSwap(false, true) {
			close(committed)
			deadline := time.Now().Add(time.Second)
			for sunk() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	appendOne := func() error {
		return db.InTx(ctx, func(tx *Tx) error {
			_, err := tx.AppendEvent("s", protocol.EventType("test.event"), "", 0, map[string]any{})
			return err
		})
	}
	errA := make(chan error, 1)
	go func() { errA <- appendOne() }()
	<-committed
	if err := appendOne(); err != nil {
		t.Fatal(err)
	}
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != 2 || seqs[0] > seqs[1] {
		t.Fatalf("the sink got seqs %v: B's event before A's", seqs)
	}
}

// TestPostgresReadOnlyIsUnavailable: a database that refuses writes (a hot
// standby, default_transaction_read_only) makes writes fail with
// ErrUnavailable and the periodic probe (Checkpoint) report it; when it
// takes writes again, both recover.
func TestPostgresReadOnlyIsUnavailable(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	st, err := db.Checkpoint(ctx)
	if err != nil || st.At.IsZero() || st.WALBytes != 0 || db.LastCheckpoint().At != st.At {
		t.Fatalf("probe of a writable database: %+v %v", st, err)
	}
	setReadOnly := func(on bool) {
		t.Helper()
		// Every pooled connection starts a read-only transaction from now on.
		if err := db.InTx(ctx, func(tx *Tx) error {
			_, err := tx.Exec(fmt.Sprintf("ALTER DATABASE %s SET default_transaction_read_only = %v", currentDB(t, db), on))
			return err
		}); err != nil && on {
			t.Fatal(err)
		}
		var n int
		db.Get(ctx, &n, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
		db.r.SetMaxIdleConns(0) // drop the connection of that query too
		db.r.SetMaxIdleConns(db.opt.MaxConns)
	}
	setReadOnly(true)
	waitFor(t, "writes to fail with ErrUnavailable", func() bool {
		err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "x") })
		return errors.Is(err, ErrUnavailable) && strings.Contains(err.Error(), "25006")
	})
	if st, err := db.Checkpoint(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(st.Err, ErrUnavailable) {
		t.Fatalf("probe of a read-only database: %+v %v", st, err)
	}
	// Back to writable: the ALTER must run on a writable session.
	if _, err := db.r.ExecContext(ctx, "BEGIN READ WRITE; ALTER DATABASE "+currentDB(t, db)+" SET default_transaction_read_only = off; COMMIT"); err != nil {
		t.Fatal(err)
	}
	setReadOnly(false)
	waitFor(t, "writes to work again", func() bool {
		return db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "x") }) == nil
	})
	if st, err := db.Checkpoint(ctx); err != nil || st.Err != nil {
		t.Fatalf("probe after recovery: %+v %v", st, err)
	}
}

func currentDB(t *testing.T, db *DB) string {
	var name string
	if err := db.Get(context.Background(), &name, "SELECT current_database()"); err != nil {
		t.Fatal(err)
	}
	return `"` + name + `"`
}

// TestClassifyPostgres: failures of the server or of the way to it are
// ErrUnavailable; statement failures are not; class 23 is a constraint.
func TestClassifyPostgres(t *testing.T) {
	for code, want := range map[string]bool{
		"08006": true, "08001": true, "53100": true, "53300": true, "57P01": true, "57P02": true, "57P03": true,
		"25006": true, "40001": true, "40P01": true, "55P03": true, "58030": true,
		"23505": false, "23514": false, "42601": false, "42883": false, "22P02": false, "57014": false,
	} {
		err := fmt.Errorf("ctx: %w", &pgconn.PgError{Code: code})
		if got := errors.Is(Classify(err), ErrUnavailable); got != want {
			t.Errorf("%s: unavailable = %v, want %v", code, got, want)
		}
		if got := IsConstraint(err); got != strings.HasPrefix(code, "23") {
			t.Errorf("%s: IsConstraint = %v", code, got)
		}
	}
	if !errors.Is(Classify(&pgconn.ConnectError{}), ErrUnavailable) {
		t.Error("a connect error is not unavailable")
	}
	if errors.Is(Classify(context.Canceled), ErrUnavailable) {
		t.Error("context.Canceled is unavailable")
	}
}

// TestDSNChecksAndRedaction: bad DSNs are refused with errors that never
// show the password; RedactDSN hides it in both places it can be.
func TestDSNChecksAndRedaction(t *testing.T) {
	for dsn, want := range map[string]string{
		"":                                   "needs a DSN",
		"mysql://u:pw@h/db":                  "must be a postgres://",
		"host=h password=pw":                 "must be a postgres://",
		"postgres://u:pw@h":                  "postgres://u:xxxxx@h names no database",
		"postgres://u:pw@/db":                "names no host",
		"postgres://u:pw@h:notaport/db":      "not a URL",
		"postgres://u:pw@h/db?password=pw22": "",
		"postgresql://u@/db?host=/run/pg":    "",
	} {
		err := CheckDSN(dsn)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", dsn, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: %v, want %q and no password", dsn, err, want)
		}
	}
	for dsn, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=secret":             "postgres://u@h/db?password=xxxxx",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"host=h password=secret":                        "(DSN not shown: not a postgres:// URL)",
	} {
		if got := RedactDSN(dsn); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
	if _, err := Open(context.Background(), "", Options{Driver: "oracle"}); err == nil || !strings.Contains(err.Error(), `unknown driver "oracle"`) {
		t.Errorf("unknown driver: %v", err)
	}
	if _, err := Open(context.Background(), t.TempDir()+"/x.db", Options{DSN: "postgres://u@h/db"}); err == nil || !strings.Contains(err.Error(), "not \"sqlite\"") {
		t.Errorf("sqlite with a DSN: %v", err)
	}
}

// TestPostgresServerGoneIsUnavailable: when the server goes away, writes,
// reads and the probe fail with ErrUnavailable (not a statement error),
// and Close still returns.
func TestPostgresServerGoneIsUnavailable(t *testing.T) {
	postgresOnly(t)
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, dsn, err := c.CreateDatabase()
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	db, err := Open(context.Background(), "", Options{Driver: Postgres, DSN: dsn})
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "before") }); err != nil {
		c.Stop()
		t.Fatal(err)
	}
	c.Stop()
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "after") }); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("InTx with the server gone: %v, want ErrUnavailable", err)
	}
	var n int
	if err := db.Get(ctx, &n, "SELECT count(*) FROM approval_allowlist"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get with the server gone: %v, want ErrUnavailable", err)
	}
	if _, err := db.Checkpoint(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("probe with the server gone: %v, want ErrUnavailable", err)
	}
	if _, err := Open(ctx, "", Options{Driver: Postgres, DSN: dsn}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open with the server gone: %v, want ErrUnavailable", err)
	}
}

// TestPostgresDeadPooledConnectionsAreReplaced: when the server ends the
// pool's connections (a restart, pg_terminate_backend, a failover), the
// next transactions begin on new connections instead of failing with
// "begin: broken pipe" once per dead pooled connection: nothing of a
// transaction reached the server before its BEGIN, so the store takes
// another connection. First with the backends terminated (deterministic:
// the connections were used a moment ago, so database/sql's idle ping does
// not catch them), then across a real restart of the server.
func TestPostgresDeadPooledConnectionsAreReplaced(t *testing.T) {
	postgresOnly(t)
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	name, dsn, err := c.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	const conns = 4
	db, err := Open(context.Background(), "", Options{Driver: Postgres, DSN: dsn, MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	// fill leaves a connection in the pool that was used a moment ago.
	fill := func(tag string) {
		t.Helper()
		for i := range conns {
			if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprintf("%s-%d", tag, i)) }); err != nil {
				t.Fatalf("%s: transaction %d: %v", tag, i, err)
			}
		}
	}
	fill("before")
	if err := c.Exec(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, name); err != nil {
		t.Fatal(err)
	}
	for i := range conns + 1 {
		if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprintf("after-kill-%d", i)) }); err != nil {
			t.Fatalf("transaction %d after the pool's backends were terminated: %v", i, err)
		}
	}
	fill("before-restart")
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := range conns + 1 {
		if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprintf("after-restart-%d", i)) }); err != nil {
			t.Fatalf("transaction %d after the server restarted: %v", i, err)
		}
	}
	if n := countPatterns(t, db); n != 2*conns+2*(conns+1) {
		t.Fatalf("%d rows, want %d", n, 2*conns+2*(conns+1))
	}
}

// TestPostgresLockSessionsSerializes: transactions that read a session's
// counter and write it back one statement later (a read-modify-write, as
// the admission FIFO's decisions are) lose no update when each takes the
// session row's lock first: under READ COMMITTED the second one's read,
// after the lock, sees the first one's commit. Without the lock
// (LockSessions removed) updates are lost.
func TestPostgresLockSessionsSerializes(t *testing.T) {
	postgresOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	if err := db.InTx(ctx, func(tx *Tx) error {
		return InsertSession(tx, NewSession{SessionID: "s1", Cwd: "/tmp", Model: "m", Provider: "openai", Toolsets: `[]`, CreatedAt: Now()})
	}); err != nil {
		t.Fatal(err)
	}
	var start int64
	if err := db.Get(ctx, &start, "SELECT next_admission_seq FROM sessions WHERE session_id = ?", "s1"); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := db.InTx(ctx, func(tx *Tx) error {
					if err := tx.LockSessions("s1", "s1"); err != nil {
						return err
					}
					var n int64
					if err := tx.Get(&n, "SELECT next_admission_seq FROM sessions WHERE session_id = ?", "s1"); err != nil {
						return err
					}
					_, err := tx.Exec("UPDATE sessions SET next_admission_seq = ? WHERE session_id = ?", n+1, "s1")
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var got int64
	if err := db.Get(ctx, &got, "SELECT next_admission_seq FROM sessions WHERE session_id = ?", "s1"); err != nil {
		t.Fatal(err)
	}
	if want := start + workers*each; got != want {
		t.Fatalf("next_admission_seq = %d after %d increments from %d: %d updates lost", got, workers*each, start, want-got)
	}
	// A session that does not exist locks nothing and is no error.
	if err := db.InTx(ctx, func(tx *Tx) error { return tx.LockSessions("nope", "s1") }); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresCreateRequestTaken: an INSERT of a session whose
// create_request_id another session holds inserts nothing and says so
// (ErrCreateRequestTaken), so that session.create answers with that
// session.
func TestPostgresCreateRequestTaken(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	req := sql.NullString{String: "r1", Valid: true}
	ins := func(id string) error {
		return db.InTx(ctx, func(tx *Tx) error {
			return InsertSession(tx, NewSession{SessionID: id, Cwd: "/tmp", Model: "m", Provider: "openai", Toolsets: `[]`,
				CreateRequestID: req, CreatedAt: Now()})
		})
	}
	if err := ins("s1"); err != nil {
		t.Fatal(err)
	}
	if err := ins("s2"); !errors.Is(err, ErrCreateRequestTaken) {
		t.Fatalf("second insert under request r1: %v, want ErrCreateRequestTaken", err)
	}
	var n int
	if err := db.Get(ctx, &n, "SELECT count(*) FROM sessions"); err != nil || n != 1 {
		t.Fatalf("%d sessions (%v), want 1", n, err)
	}
}

// TestPostgresPoolMaxConns: the DSN's pool_max_conns sizes the pool (and
// is not sent to the server as a setting); a bad value is refused by
// CheckDSN and Open, naming the parameter.
func TestPostgresPoolMaxConns(t *testing.T) {
	postgresOnly(t)
	opt := testOptions(t, Options{MaxConns: 9})
	opt.DSN += "&pool_max_conns=3"
	db, err := Open(context.Background(), "", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.r.Stats().MaxOpenConnections; got != 3 || db.opt.MaxConns != 3 {
		t.Fatalf("pool of %d (MaxConns %d), want 3", got, db.opt.MaxConns)
	}
	for _, bad := range []string{"0", "-1", "x", "1001"} {
		dsn := "postgres://u@h/db?pool_max_conns=" + bad
		if err := CheckDSN(dsn); err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
			t.Errorf("CheckDSN(%s) = %v, want an error naming pool_max_conns", dsn, err)
		}
		o := opt
		o.DSN = strings.Replace(opt.DSN, "pool_max_conns=3", "pool_max_conns="+bad, 1)
		if db, err := Open(context.Background(), "", o); err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
			if db != nil {
				db.Close()
			}
			t.Errorf("Open with pool_max_conns=%s: %v, want an error naming it", bad, err)
		}
	}
}
