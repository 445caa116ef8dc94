package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/protocol"
)

func openTest(t *testing.T, opt Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), testOptions(t, opt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenSetsPragmasPerConnection(t *testing.T) {
	sqliteOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	var mode string
	if err := db.Get(ctx, &mode, "PRAGMA journal_mode"); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	// Every reader connection carries the pragmas, not just the first one.
	conns := make([]*sqlx.Conn, 0, 4)
	for range 4 {
		c, err := db.r.Connx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var fk, busy, qo int
		if err := c.GetContext(ctx, &fk, "PRAGMA foreign_keys"); err != nil {
			t.Fatal(err)
		}
		c.GetContext(ctx, &busy, "PRAGMA busy_timeout")
		c.GetContext(ctx, &qo, "PRAGMA query_only")
		if fk != 1 || busy != 5000 || qo != 1 {
			t.Fatalf("reader pragmas: foreign_keys=%d busy_timeout=%d query_only=%d", fk, busy, qo)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	err := db.InTx(ctx, func(tx *Tx) error {
		var sync, fk, temp int
		if err := tx.Get(&sync, "PRAGMA synchronous"); err != nil {
			return err
		}
		if err := tx.Get(&fk, "PRAGMA foreign_keys"); err != nil {
			return err
		}
		if err := tx.Get(&temp, "PRAGMA temp_store"); err != nil {
			return err
		}
		// 2 = FULL; temp_store 2 = MEMORY (set on the committer's connection
		// after the migrations), which keeps the group commit's
		// savepoint journal off the disk.
		if sync != 2 || fk != 1 || temp != 2 {
			return fmt.Errorf("writer synchronous=%d foreign_keys=%d temp_store=%d", sync, fk, temp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Readers refuse writes.
	if _, err := db.r.Exec("INSERT INTO approval_allowlist(pattern, created_at) VALUES ('x','y')"); err == nil {
		t.Fatal("reader accepted a write")
	}
}

func TestMigrationsAreVersionedAndIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	opt := testOptions(t, Options{})
	tables := "SELECT count(*) FROM sqlite_schema WHERE name IN ('sessions','session_admissions','messages','prompts','events','boot_epochs')"
	column := "SELECT count(*) FROM pragma_table_info('sessions') WHERE name = 'sandbox'"
	if testDriver == Postgres {
		tables = `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()
			AND table_name IN ('sessions','session_admissions','messages','prompts','events','boot_epochs')`
		column = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
			AND table_name = 'sessions' AND column_name = 'sandbox'`
	}
	for range 2 {
		db, err := Open(context.Background(), path, opt)
		if err != nil {
			t.Fatal(err)
		}
		v, err := db.SchemaVersion(context.Background())
		if want := latestMigration(t); err != nil || v != want {
			t.Fatalf("schema version = %d, %v; want %d", v, err, want)
		}
		var n int
		db.Get(context.Background(), &n, tables)
		if n != 6 {
			t.Fatalf("tables = %d", n)
		}
		// 0002: each session's frozen sandbox; 0007: its MCP servers.
		if err := db.Get(context.Background(), &n, column); err != nil || n != 1 {
			t.Fatalf("sessions.sandbox column: %d, %v", n, err)
		}
		if err := db.Get(context.Background(), &n, strings.ReplaceAll(column, "'sandbox'", "'mcp_servers'")); err != nil || n != 1 {
			t.Fatalf("sessions.mcp_servers column: %d, %v", n, err)
		}
		db.Close()
	}
}

// Migration 0005 renames the session's fencing counter owner_epoch to
// lease_epoch and keeps its value and its CHECK; the daemon ids named
// owner_epoch (session_admissions, PROTOCOL.md section 9, and prompts)
// keep their name.
func TestMigration0005RenamesTheLeaseEpoch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	opt := testOptions(t, Options{})
	migrateUpTo = 4
	db, err := Open(ctx, path, opt)
	migrateUpTo = 0
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at, owner_daemon, owner_epoch)
			VALUES ('s1', '/tmp', 'm', 'openai', 'http://x', '[]', ?, 3, 7)`, Now()); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status, execution_generation, owner_epoch, text, payload_digest, created_at)
			VALUES ('a1', 's1', 'i1', 1, 'started', 1, 3, 'hi', 'd', ?)`, Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v != latestMigration(t) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, latestMigration(t))
	}
	var s struct {
		Owner int64 `db:"owner_daemon"`
		Epoch int64 `db:"lease_epoch"`
	}
	if err := db.Get(ctx, &s, `SELECT owner_daemon, lease_epoch FROM sessions WHERE session_id = 's1'`); err != nil || s.Owner != 3 || s.Epoch != 7 {
		t.Fatalf("sessions row = %+v, %v; want owner_daemon 3, lease_epoch 7", s, err)
	}
	var daemon int64
	if err := db.Get(ctx, &daemon, `SELECT owner_epoch FROM session_admissions WHERE admission_id = 'a1'`); err != nil || daemon != 3 {
		t.Fatalf("session_admissions.owner_epoch = %d, %v; want 3", daemon, err)
	}
	for _, c := range []struct {
		table, column string
		want          int
	}{{"sessions", "owner_epoch", 0}, {"sessions", "lease_epoch", 1}, {"session_admissions", "owner_epoch", 1}, {"prompts", "owner_epoch", 1}} {
		q := "SELECT count(*) FROM pragma_table_info('" + c.table + "') WHERE name = ?"
		if testDriver == Postgres {
			q = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '` + c.table + `' AND column_name = ?`
		}
		var n int
		if err := db.Get(ctx, &n, q, c.column); err != nil || n != c.want {
			t.Errorf("%s.%s: %d columns, %v; want %d", c.table, c.column, n, err, c.want)
		}
	}
	err = db.InTx(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE sessions SET lease_epoch = -1 WHERE session_id = 's1'`)
		return err
	})
	if err == nil {
		t.Fatal("lease_epoch = -1 was accepted; the CHECK (>= 0) was lost")
	}
}

func insertPattern(tx *Tx, p string) error {
	_, err := tx.Exec("INSERT INTO approval_allowlist(pattern, created_at) VALUES (?, ?)", p, Now())
	return err
}

func countPatterns(t *testing.T, db *DB) int {
	var n int
	if err := db.Get(context.Background(), &n, "SELECT count(*) FROM approval_allowlist"); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInTxRollsBackOnErrorAndPanic(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	boom := errors.New("boom")
	committed := false
	err := db.InTx(ctx, func(tx *Tx) error {
		tx.OnCommit(func() { committed = true })
		if err := insertPattern(tx, "a"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || committed || countPatterns(t, db) != 0 {
		t.Fatalf("err=%v committed=%v rows=%d", err, committed, countPatterns(t, db))
	}
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "kaboom") {
				t.Fatalf("recovered %v, want the panic re-raised", p)
			}
		}()
		db.InTx(ctx, func(tx *Tx) error {
			insertPattern(tx, "b")
			panic("kaboom")
		})
	}()
	if n := countPatterns(t, db); n != 0 {
		t.Fatalf("rows after panic = %d", n)
	}
	// The writer is still healthy.
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "c") }); err != nil {
		t.Fatal(err)
	}
	if countPatterns(t, db) != 1 {
		t.Fatal("commit lost")
	}
}

func TestGroupCommitIsolatesFailures(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range 200 {
		wg.Go(func() {
			errs[i] = db.InTx(ctx, func(tx *Tx) error {
				if err := insertPattern(tx, fmt.Sprint(i)); err != nil {
					return err
				}
				if i%10 == 0 {
					return fmt.Errorf("refuse %d", i)
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i%10 == 0) != (err != nil) {
			t.Fatalf("tx %d: err = %v", i, err)
		}
	}
	if n := countPatterns(t, db); n != 180 {
		t.Fatalf("rows = %d, want 180", n)
	}
	batches, txs := db.Stats()
	t.Logf("%d transactions in %d commits", txs, batches)
}

func TestBusyPastTimeoutIsUnavailableAndRecovers(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(context.Background(), path, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := sql.Open("sqlite", DSN(path, true, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hold, err := other.Begin() // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(context.Background(), func(tx *Tx) error { return insertPattern(tx, "x") })
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	hold.Rollback()
	if err := db.InTx(context.Background(), func(tx *Tx) error { return insertPattern(tx, "x") }); err != nil {
		t.Fatalf("after the lock cleared: %v", err)
	}
}

func TestDiskFullIsUnavailableAndRecovers(t *testing.T) {
	sqliteOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	var pages int
	db.Get(ctx, &pages, "PRAGMA page_count")
	setMax := func(n int) {
		t.Helper()
		if err := db.InTx(ctx, func(tx *Tx) error {
			_, err := tx.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	setMax(pages + 1)
	big := strings.Repeat("x", 64<<10)
	err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, big) })
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := countPatterns(t, db); n != 0 {
		t.Fatalf("rows = %d after a full disk", n)
	}
	setMax(1073741823)
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, big) }); err != nil {
		t.Fatalf("after space came back: %v", err)
	}
}

// Immutable inode flag (chattr +i): even root cannot write such a file, also
// through descriptors opened before the flag was set.
const fsImmutableFL = 0x10 // FS_IMMUTABLE_FL

// fsIoc encodes FS_IOC_GETFLAGS (dir 2, nr 1) and FS_IOC_SETFLAGS (dir 1,
// nr 2): _IOR/_IOW('f', nr, long) in the generic Linux encoding.
func fsIoc(dir, nr uintptr) uintptr { return dir<<30 | unsafe.Sizeof(uintptr(0))<<16 | 'f'<<8 | nr }

// setImmutable sets or clears the immutable flag of path; the error says why
// it cannot (file system or platform without the ioctl, no
// CAP_LINUX_IMMUTABLE).
func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIoc(2, 1), uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("FS_IOC_GETFLAGS %s: %w", path, e)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIoc(1, 2), uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("FS_IOC_SETFLAGS %s: %w", path, e)
	}
	return nil
}

// makeImmutable sets the flag on path for the rest of the test, skipping
// the test when that is impossible here. The flag is cleared at cleanup (an
// immutable file cannot be removed with the temporary directory).
func makeImmutable(t *testing.T, path string) {
	t.Helper()
	if err := setImmutable(path, true); err != nil {
		t.Skipf("cannot set the immutable flag on %s (file system or platform without FS_IOC_SETFLAGS, or no CAP_LINUX_IMMUTABLE): %v", path, err)
	}
	t.Cleanup(func() {
		if err := setImmutable(path, false); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("clearing the immutable flag of %s: %v", path, err)
		}
	})
}

func TestOpenReadOnlyFileFailsNamingIt(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(context.Background(), func(tx *Tx) error { return insertPattern(tx, "kept") }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
	} else {
		makeImmutable(t, path) // root ignores file modes
	}
	// SQLite silently falls back to a read-only open; Open must say so
	// rather than the first write after start.
	db, err = Open(context.Background(), path, Options{})
	if err == nil {
		db.Close()
		t.Fatal("Open of a read-only state.db succeeded")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("err = %v, want ErrUnavailable naming %s and saying read-only", err, path)
	}
}

// A write lock held by another process at start is reported as such, not as
// a read-only file.
func TestOpenWhileLockedIsNotReadOnly(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	other, err := sql.Open("sqlite", DSN(path, true, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hold, err := other.Begin() // BEGIN IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	db, err = Open(context.Background(), path, Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded while another connection held the write lock")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "cannot be written") {
		t.Fatalf("err = %v, want ErrUnavailable naming %s as locked, not read-only", err, path)
	}
}

// An I/O error (here: the WAL turned immutable under the open writer, so
// pwrite fails with EPERM) fails the transaction as ErrUnavailable with
// nothing committed, and the same store works again once it clears.
func TestIOErrorIsUnavailableAndRecovers(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "before") }); err != nil {
		t.Fatal(err)
	}
	wal := path + "-wal"
	makeImmutable(t, wal)
	for i := range 3 {
		err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprint("during", i)) })
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("write %d to an immutable WAL: err = %v, want ErrUnavailable", i, err)
		}
	}
	if n := countPatterns(t, db); n != 1 {
		t.Fatalf("rows = %d after failed commits, want 1", n)
	}
	if err := setImmutable(wal, false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, fmt.Sprint("after", i)) }); err != nil {
			t.Fatalf("write %d after the WAL became writable again: %v", i, err)
		}
	}
	if n := countPatterns(t, db); n != 4 {
		t.Fatalf("rows = %d, want 4", n)
	}
}

func TestInTxAbandonedBeforeStartNeverRuns(t *testing.T) {
	db := openTest(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := db.InTx(ctx, func(tx *Tx) error { ran = true; return nil })
	if err == nil {
		// The request may have raced into the committer before cancel was
		// seen; then it must have run and committed.
		if !ran {
			t.Fatal("nil error but fn never ran")
		}
		return
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	db.InTx(context.Background(), func(tx *Tx) error { return nil }) // flush the queue
	if ran {
		t.Fatal("fn ran although InTx reported cancellation")
	}
}

func BenchmarkInTxParallel(b *testing.B) {
	db, err := Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), testOptions(b, Options{}))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n sync.Mutex
	i := 0
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Lock()
			i++
			k := i
			n.Unlock()
			if err := db.InTx(context.Background(), func(tx *Tx) error { return insertPattern(tx, fmt.Sprint(k)) }); err != nil {
				b.Error(err)
			}
		}
	})
	if db.Driver() == Postgres {
		b.ReportMetric(float64(db.Reruns())/float64(b.N), "reruns/op")
		return
	}
	batches, txs := db.Stats()
	b.ReportMetric(float64(txs)/float64(max(batches, 1)), "tx/commit")
}

// latestMigration is the number of the last embedded migration of the
// store's driver in this run (the schema version a fresh Open reaches).
func latestMigration(t *testing.T) int {
	t.Helper()
	dir := "migrations"
	if testDriver == Postgres {
		dir = "migrations_pg"
	}
	migs, err := readMigrations(dir)
	if err != nil || len(migs) == 0 {
		t.Fatalf("embedded migrations of %s: %d, %v", dir, len(migs), err)
	}
	return migs[len(migs)-1].version
}

// Migration 0006 (issue 25) gives every existing admission its FIFO place
// (queue_order = seq) and delivery 'queue'; delivery is checked.
func TestMigration0006OrdersTheExistingQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	opt := testOptions(t, Options{})
	migrateUpTo = 5
	db, err := Open(ctx, path, opt)
	migrateUpTo = 0
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at)
			VALUES ('s1', '/tmp', 'm', 'openai', 'http://x', '[]', ?)`, Now()); err != nil {
			return err
		}
		for _, seq := range []int{1, 2, 3} {
			if _, err := tx.Exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status, text, payload_digest, created_at)
				VALUES (?, 's1', ?, ?, 'queued', 'hi', 'd', ?)`, fmt.Sprintf("a%d", seq), fmt.Sprintf("i%d", seq), seq, Now()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []struct {
		Seq      int64   `db:"seq"`
		Order    int64   `db:"queue_order"`
		Delivery string  `db:"delivery"`
		Steered  *string `db:"steered_into"`
	}
	if err := db.Select(ctx, &rows, `SELECT seq, queue_order, delivery, steered_into FROM session_admissions ORDER BY seq`); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Order != r.Seq || r.Delivery != "queue" || r.Steered != nil {
			t.Fatalf("after 0006: %+v", rows)
		}
	}
	err = db.InTx(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE session_admissions SET delivery = 'bogus' WHERE seq = 1`)
		return err
	})
	if err == nil || !IsConstraint(err) {
		t.Fatalf("delivery 'bogus' was accepted: %v", err)
	}
}

// An event costs PostgreSQL one round trip (the seq and the row in one
// statement), SQLite its two statements on the committer; a missing
// session is sql.ErrNoRows, as before. Statements counts what a
// transaction's code ran, not the committer's BEGIN or COMMIT.
func TestAppendEventStatements(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	addSession(t, db, "s")
	want := int64(2)
	if db.drv == Postgres {
		want = 1
	}
	var seqs []int64
	for i := range 3 {
		before := db.Statements()
		if err := db.InTx(ctx, func(tx *Tx) error {
			ev, err := tx.AppendEvent("s", protocol.EventType("test.event"), "adm_x", int64(i), map[string]any{"i": i})
			seqs = append(seqs, ev.Seq)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := db.Statements() - before; got != want {
			t.Fatalf("event %d: %d statements, want %d", i, got, want)
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("seqs %v, want [1 2 3]", seqs)
	}
	evs, complete, err := db.EventsAfter(db.Reads(ctx), "s", 0)
	if err != nil || !complete || len(evs) != 3 {
		t.Fatalf("EventsAfter: %d events, complete %v, %v", len(evs), complete, err)
	}
	if e := evs[2]; e.Type != "test.event" || *e.AdmissionID != "adm_x" || *e.ExecutionGeneration != 2 || string(e.Payload) != `{"i":2}` || e.CreatedAt == "" {
		t.Fatalf("stored event %+v (payload %s)", e, e.Payload)
	}
	if evs[0].ExecutionGeneration != nil {
		t.Fatalf("generation 0 stored as %v, want NULL", *evs[0].ExecutionGeneration)
	}
	err = db.InTx(ctx, func(tx *Tx) error {
		_, err := tx.AppendEvent("gone", protocol.EventType("test.event"), "", 0, map[string]any{})
		return err
	})
	if !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("event of a missing session: %v, want sql.ErrNoRows", err)
	}
}

// A group commit answers its callers only after its COMMIT: when that
// fails, a caller whose fn failed gets the COMMIT's error too, because its
// fn may have decided on an earlier caller's writes in the same batch,
// which did not commit. (admission's duplicate input_id rolls its
// savepoint back and answers the earlier admission's receipt: with that
// admission's row rolled back by the failed COMMIT, the caller was told its
// input was admitted when nothing was.) The COMMIT fails here on a deferred
// foreign key of a third caller (PRAGMA defer_foreign_keys).
func TestGroupCommitFailureReachesCallersThatFailed(t *testing.T) {
	sqliteOnly(t)
	db := openTest(t, Options{})
	ctx := context.Background()
	release, holding := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := db.InTx(ctx, func(tx *Tx) error { close(holding); <-release; return nil }); err != nil {
			t.Error(err)
		}
	})
	<-holding
	found := errors.New("the first caller's row is there")
	var first, second, poison error
	queue := func(n int, run func()) {
		wg.Go(run)
		for len(db.reqs) < n {
			runtime.Gosched()
		}
	}
	queue(1, func() { first = db.InTx(ctx, func(tx *Tx) error { return insertPattern(tx, "p") }) })
	queue(2, func() {
		second = db.InTx(ctx, func(tx *Tx) error {
			var n int
			if err := tx.Get(&n, `SELECT count(*) FROM approval_allowlist WHERE pattern = 'p'`); err != nil {
				return err
			}
			if n == 1 {
				return found // decided on the first caller's write
			}
			return fmt.Errorf("the first caller's row is not there")
		})
	})
	queue(3, func() {
		poison = db.InTx(ctx, func(tx *Tx) error {
			if _, err := tx.Exec(`PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO events (session_id, seq, type, payload, created_at) VALUES ('none', 1, 'x', '{}', ?)`, Now())
			return err
		})
	})
	close(release)
	wg.Wait()
	if poison == nil || first == nil {
		t.Fatalf("the COMMIT did not fail: first %v, poison %v", first, poison)
	}
	if n := countPatterns(t, db); n != 0 {
		t.Fatalf("%d rows after the failed COMMIT", n)
	}
	if second == nil || errors.Is(second, found) {
		t.Fatalf("the caller that decided on the rolled-back row got %v, want the COMMIT's error (%v)", second, first)
	}
}

// peakRSS is the process's peak resident set (VmHWM, bytes) since the last
// resetPeakRSS.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// A migration's temporary files (the statement journal of an UPDATE of
// every row, a CREATE INDEX's sort) stay on disk: in memory
// (temp_store=MEMORY, which the committer's connection uses for its
// savepoint journals) migration 0006 of a 595 MB state.db peaked at 1.2
// GB of RSS, against 27 MB on disk. Here a ~48 MB state.db at version 5
// must open within a quarter of its size in RSS.
func TestMigrationsKeepTemporaryFilesOnDisk(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	opt := testOptions(t, Options{Synchronous: "OFF"})
	migrateUpTo = 5
	db, err := Open(ctx, path, opt)
	migrateUpTo = 0
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 2000)
	for b := range 3 {
		if err := db.InTx(ctx, func(tx *Tx) error {
			if b == 0 {
				if _, err := tx.Exec(`INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at)
					VALUES ('s1', '/tmp', 'm', 'openai', 'http://x', '[]', ?)`, Now()); err != nil {
					return err
				}
			}
			for i := range 4000 {
				seq := b*4000 + i + 1
				if _, err := tx.Exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status, outcome, text, payload_digest, created_at)
					VALUES (?, 's1', ?, ?, 'terminal', 'completed', ?, 'd', ?)`, fmt.Sprint("a", seq), fmt.Sprint("i", seq), seq, text, Now()); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	// Reset VmHWM to the current RSS (Linux: clear_refs 5).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	before := peakRSS(t)
	db, err = Open(ctx, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v < 6 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	if grew := peakRSS(t) - before; grew > fi.Size()/4 {
		t.Fatalf("opening (migrating) a %d MB state.db raised the peak RSS by %d MB, want under %d MB", fi.Size()>>20, grew>>20, fi.Size()>>22)
	}
}

// After Close, reads fail as writes do: ErrClosed, which is ErrUnavailable
// (the daemon's storage_unavailable), not database/sql's bare "database is
// closed".
func TestReadsAfterCloseAreErrClosed(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	var n int
	const q = `SELECT count(*) FROM sessions`
	if err := db.Get(ctx, &n, q); err != nil { // cached on SQLite from here on
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var rows []int
	for name, err := range map[string]error{
		"Get":            db.Get(ctx, &n, q),
		"Get uncached":   db.Get(ctx, &n, `SELECT count(*) FROM session_admissions`),
		"Select":         db.Select(ctx, &rows, q),
		"ReadTx":         db.ReadTx(ctx, func(r *Reads) error { return r.Get(&n, q) }),
		"InTx":           db.InTx(ctx, func(*Tx) error { return nil }),
		"Reads().Get":    db.Reads(ctx).Get(&n, q),
		"Reads().Select": db.Reads(ctx).Select(&rows, q),
	} {
		if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// addSession inserts a bare session row id, for tests of the store's own
// mechanics.
func addSession(t *testing.T, db *DB, id string) {
	t.Helper()
	if err := db.InTx(context.Background(), func(tx *Tx) error {
		_, err := tx.Exec(`INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at)
			VALUES (?, '/', 'm', 'openai', '', '[]', ?)`, id, Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
