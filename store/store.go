package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql migrations_pg/*.sql
var migrationFS embed.FS

// Options tune Open. Zero values take the documented defaults.
type Options struct {
	// Driver selects the database engine: SQLite (default, "sqlite": the
	// file given to Open) or Postgres ("postgres": the database named by
	// DSN; Open's path is ignored).
	Driver Driver
	// DSN is the PostgreSQL connection URL
	// (postgres://user:password@host:port/dbname?sslmode=...), required
	// with Driver Postgres and refused with SQLite.
	DSN string
	// MaxConns bounds the PostgreSQL connection pool (write transactions
	// and reads; the LISTEN connection and the lease's reserved connection
	// come on top). Default 16; the DSN's pool_max_conns parameter
	// overrides it. Unused on SQLite.
	MaxConns int
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection or process before failing with SQLITE_BUSY (PRAGMA
	// busy_timeout). Default 5s.
	BusyTimeout time.Duration
	// Readers bounds the pool of query-only connections. Default 4.
	Readers int
	// Synchronous is the PRAGMA synchronous level of the writer: "FULL"
	// (default; every acknowledged commit is fsynced) or "NORMAL".
	Synchronous string
	// MaxBatch bounds how many queued write transactions one group commit
	// takes. Default 256.
	MaxBatch int
	// CheckpointInterval is how often the committer, between batches, runs
	// a passive WAL checkpoint to notice that state.db cannot be written:
	// SQLite's automatic checkpoints after commits fail silently, commits
	// keep landing (durably) in state.db-wal, and the WAL grows. Default 30s.
	CheckpointInterval time.Duration
	// OnCommit, when set, is called by the committer after each group
	// commit with its duration (BEGIN to COMMIT, fsync included) and the
	// number of transactions in it. It must not block.
	OnCommit func(d time.Duration, txs int)
	// Logger receives the checkpoint failures and recoveries. Default
	// slog.Default().
	Logger *slog.Logger
}

// CheckpointStatus is the outcome of the last periodic passive checkpoint
// (see Options.CheckpointInterval). At is zero before the first one.
// WALBytes is the size of state.db-wal after it; WALFrames (pages in the
// WAL) and Checkpointed (how many of them are in state.db) are known only
// when it succeeded. Busy means another process was running a checkpoint
// of the same file, so this one did nothing (not a failure; SQLite's
// automatic checkpoints catch up). Err is nil or wraps ErrUnavailable.
type CheckpointStatus struct {
	At                      time.Time
	WALBytes                int64
	WALFrames, Checkpointed int
	Busy                    bool
	Err                     error
}

func (o *Options) defaults() {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Driver == "" {
		o.Driver = SQLite
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
}

// DB is the store. On SQLite it is state.db: one writer connection owned by
// a committer goroutine and a bounded pool of query-only readers. On
// PostgreSQL it is a bounded pool of connections (each InTx one READ
// COMMITTED transaction with explicit row locks) plus one LISTEN
// connection. Safe for concurrent
// use.
type DB struct {
	path  string
	opt   Options
	drv   Driver
	pg    *pgState   // nil on SQLite
	w     *sqlx.DB   // the writer pool: one connection
	wconn *sqlx.Conn // that connection, pinned by the committer after migrations
	r     *sqlx.DB

	reqs    chan *txRequest
	stop    chan struct{}
	stopped chan struct{}
	closed  atomic.Bool

	sink func(Event)

	stmtMu sync.Mutex
	stmts  map[string]*sqlx.Stmt

	// rstmts caches the reads' prepared statements on the reader pool
	// (SQLite only; database/sql prepares each on a connection once, when
	// first used there): parsing the SQL of every read anew was 13% of the
	// daemon's CPU in a no-tool turn and most of a session.resume.
	rstmtMu  sync.Mutex
	rstmts   map[string]*sqlx.Stmt
	rpending map[string]bool // being prepared for a ReadTx, in the background

	// batches and txs count group commits for benchmarks and tests.
	batches atomic.Int64
	txs     atomic.Int64
	reruns  atomic.Int64 // PostgreSQL: attempts re-run after a deadlock or serialization failure
	// statements run by write transactions (Tx's Get, Select, Exec,
	// Queryx), not the committer's BEGIN, SAVEPOINT and COMMIT
	statements atomic.Int64

	ckpt    atomic.Pointer[CheckpointStatus]
	ckptNow chan chan CheckpointStatus // Checkpoint's requests to the committer

	// beforeQueue, when set (tests only), runs in InTx between its closed
	// check and queueing the request: the window a racing Close can hit.
	beforeQueue func()

	notify notifier
}

// DSN returns the modernc.org/sqlite data source name for path with the
// pragmas that every connection of the given role must carry. Pragmas are
// set per connection (not once on a pooled handle) so that a pool-opened
// connection can never miss them.
func DSN(path string, writer bool, opt Options) string {
	opt.defaults()
	q := url.Values{}
	add := func(p string) { q.Add("_pragma", p) }
	add(fmt.Sprintf("busy_timeout(%d)", opt.BusyTimeout.Milliseconds()))
	add("foreign_keys(1)")
	if writer {
		add("journal_mode(WAL)")
		add("synchronous(" + opt.Synchronous + ")")
		add("secure_delete(1)")
		q.Set("_txlock", "immediate")
	} else {
		add("query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Open opens (creating if needed) the database at path, checks that WAL mode
// took effect, applies pending migrations and starts the committer. Errors
// wrap ErrUnavailable when SQLite itself failed (locked, read-only, full).
func Open(ctx context.Context, path string, opt Options) (*DB, error) {
	opt.defaults()
	switch opt.Driver {
	case SQLite:
		if opt.DSN != "" {
			return nil, fmt.Errorf("store: a DSN is for driver %q, not %q", Postgres, SQLite)
		}
	case Postgres:
		return openPostgres(ctx, opt)
	default:
		return nil, fmt.Errorf("store: unknown driver %q (want %q or %q)", opt.Driver, SQLite, Postgres)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := sqlx.Open("sqlite", DSN(abs, true, opt))
	if err != nil {
		return nil, fmt.Errorf("open writer: %w", err)
	}
	// One writer connection. After the migrations the committer pins it for
	// the store's lifetime (see commitLoop).
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db := &DB{path: abs, opt: opt, drv: SQLite, w: w,
		reqs: make(chan *txRequest, 4*opt.MaxBatch), stop: make(chan struct{}), stopped: make(chan struct{}),
		ckptNow: make(chan chan CheckpointStatus)}
	fail := func(err error) (*DB, error) {
		if db.wconn != nil {
			db.wconn.Close()
		}
		w.Close()
		if db.r != nil {
			db.r.Close()
		}
		return nil, err
	}
	var mode string
	if err := w.GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil {
		return fail(Classify(fmt.Errorf("read journal_mode: %w", err)))
	}
	if !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("state.db: journal_mode is %q, want wal (is the file on a filesystem without shared memory?)", mode))
	}
	if err := db.probeWritable(ctx); err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY {
			return fail(fmt.Errorf("%s cannot be written (read-only file or file system, immutable flag, or no permission): %w", abs, err))
		}
		return fail(fmt.Errorf("%s: write check: %w", abs, err))
	}
	if err := db.migrate(ctx); err != nil {
		return fail(err)
	}
	if db.wconn, err = w.Connx(ctx); err != nil {
		return fail(Classify(fmt.Errorf("pin writer connection: %w", err)))
	}
	// The committer keeps its temporary files in memory: a group commit's
	// savepoint journal spills to a temp file past 64 KiB, and its pwrite
	// was 6% of the CPU of BenchmarkPromptSubmitParallel. Only after the
	// migrations, whose temporary files (the statement journal of an
	// UPDATE of every row, a CREATE INDEX's sort) grow with the database:
	// in memory, migration 0006 of a 595 MB state.db peaked at 1.2 GB RSS
	// (TestMigrationsKeepTemporaryFilesOnDisk).
	if _, err := db.wconn.ExecContext(ctx, "PRAGMA temp_store = MEMORY"); err != nil {
		return fail(Classify(fmt.Errorf("writer temp_store: %w", err)))
	}
	r, err := sqlx.Open("sqlite", DSN(abs, false, opt))
	if err != nil {
		return fail(fmt.Errorf("open readers: %w", err))
	}
	r.SetMaxOpenConns(opt.Readers)
	r.SetMaxIdleConns(opt.Readers)
	db.r = r
	if err := r.GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil {
		return fail(Classify(fmt.Errorf("reader journal_mode: %w", err)))
	}
	if !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("state.db reader: journal_mode is %q, want wal", mode))
	}
	db.notify.init(db)
	go db.commitLoop()
	return db, nil
}

// Path is the absolute path of the database file on SQLite; on PostgreSQL
// the DSN with its password redacted.
func (db *DB) Path() string { return db.path }

// Driver is the engine behind the store, for the rare statement that must
// differ between dialects.
func (db *DB) Driver() Driver { return db.drv }

// Stats reports group-commit counters: committed batches and the write
// transactions they carried (on PostgreSQL each transaction is its own
// batch).
func (db *DB) Stats() (batches, txs int64) { return db.batches.Load(), db.txs.Load() }

// Reruns is how many times InTx ran a transaction again after it
// deadlocked or failed to serialize (PostgreSQL; always 0 on SQLite).
// Stats' txs counts the transactions that committed.
func (db *DB) Reruns() int64 { return db.reruns.Load() }

// Statements is how many statements the write transactions of this DB ran
// (Tx.Get, Select, Exec, Queryx; a pg_notify too), committed or not; not
// the BEGIN, SAVEPOINT and COMMIT around them. On PostgreSQL each is a
// round trip to the server.
func (db *DB) Statements() int64 { return db.statements.Load() }

// Close stops the committer after the queued transactions ran, checkpoints
// the WAL into the main file (PRAGMA wal_checkpoint(TRUNCATE)) and closes
// every connection. It is safe to call more than once.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	if db.pg != nil {
		return db.closePostgres()
	}
	db.notify.close()
	close(db.stop)
	<-db.stopped
	db.stmtMu.Lock()
	for _, s := range db.stmts {
		s.Close()
	}
	db.stmts = nil
	db.stmtMu.Unlock()
	db.rstmtMu.Lock()
	for _, s := range db.rstmts {
		s.Close()
	}
	db.rstmts = nil
	db.rstmtMu.Unlock()
	_, _ = db.wconn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
	db.wconn.Close()
	return errors.Join(db.r.Close(), db.w.Close())
}

// migrateUpTo, when > 0, stops the migrations after that version: tests
// of a migration open a store at the version before it.
var migrateUpTo int

// migrate applies the embedded migrations numbered above PRAGMA user_version,
// each in its own IMMEDIATE transaction.
func (db *DB) migrate(ctx context.Context) error {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return err
	}
	type mig struct {
		version int
		name    string
	}
	var migs []mig
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return fmt.Errorf("migration %q: name must start with a number and _", e.Name())
		}
		migs = append(migs, mig{v, e.Name()})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	var current int
	if err := db.w.GetContext(ctx, &current, "PRAGMA user_version"); err != nil {
		return Classify(fmt.Errorf("read user_version: %w", err))
	}
	if n := len(migs); n > 0 && current > migs[n-1].version {
		return fmt.Errorf("state.db schema version %d is newer than this sessiond knows (%d); use a newer sessiond", current, migs[n-1].version)
	}
	for _, m := range migs {
		if m.version <= current || (migrateUpTo > 0 && m.version > migrateUpTo) {
			continue
		}
		body, err := migrationFS.ReadFile("migrations/" + m.name)
		if err != nil {
			return err
		}
		tx, err := db.w.BeginTxx(ctx, nil)
		if err != nil {
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
			tx.Rollback()
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
		n := faultBefore("migrate")
		if err := tx.Commit(); err != nil {
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
		faultAfter(n, "migrate")
	}
	return nil
}

// probeWritable makes a database that cannot be written fail Open, naming
// the file, rather than the first write after start. SQLite opens a file it
// may not write (mode, chattr +i, read-only mount) read-only without saying
// so, and reads keep working. The probe rewrites PRAGMA user_version with its
// own value in a transaction that is rolled back: nothing reaches the disk,
// so a full disk passes (it is reported by the write that needs the space).
func (db *DB) probeWritable(ctx context.Context) error {
	tx, err := db.w.BeginTxx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return Classify(err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.GetContext(ctx, &v, "PRAGMA user_version"); err != nil {
		return Classify(err)
	}
	_, err = tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
	return Classify(err)
}

// SchemaVersion returns the last applied migration: PRAGMA user_version on
// SQLite, the highest version in table schema_version on PostgreSQL.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	q := "PRAGMA user_version"
	if db.drv == Postgres {
		q = "SELECT coalesce(max(version), 0) FROM schema_version"
	}
	err := db.r.GetContext(ctx, &v, q)
	return v, Classify(err)
}

// ErrUnavailable means the database could not perform the operation: on
// SQLite the database is locked past busy_timeout, the disk is full, the
// file is read-only, or an I/O error occurred; on PostgreSQL the server
// cannot be reached or is shutting down, lacks resources (disk full,
// connections), is read-only, or a transaction kept failing to serialize
// after its retries. Nothing of the failed transaction was committed. The
// wire reason is storage_unavailable.
var ErrUnavailable = errors.New("storage unavailable")

// ErrClosed is returned by InTx and the reads (Get, Select, Reads, ReadTx)
// after Close.
var ErrClosed = fmt.Errorf("%w: store is closed", ErrUnavailable)

type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return "storage unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Classify wraps err so that errors.Is(err, ErrUnavailable) holds when it is
// a SQLite failure of the environment (busy, locked, full, read-only, I/O,
// cannot open, no memory, corrupt) rather than of the statement. Other errors
// (constraint violations, sql.ErrNoRows, caller errors) pass through.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if pgUnavailable(err) {
		return &unavailableError{err}
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL,
			sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB,
			sqlite3.SQLITE_PROTOCOL:
			return &unavailableError{err}
		}
	}
	return err
}

// IsConstraint reports whether err is a constraint violation (UNIQUE,
// CHECK, FOREIGN KEY, NOT NULL): SQLITE_CONSTRAINT, or a PostgreSQL error of
// class 23.
func IsConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT || pgConstraint(err)
}

// Tx is one write transaction handed to an InTx callback. It runs inside a
// savepoint of a group commit on the pinned writer connection; see InTx.
// Get, Select and Exec use prepared statements cached for the store's
// lifetime.
type Tx struct {
	ctx      context.Context
	db       *DB
	onCommit []func()
	sink     func(Event)
	// pg is the PostgreSQL transaction (nil on SQLite); retry is set when
	// one of its statements failed to serialize (40001, 40P01), so that
	// InTx runs the attempt again whatever fn made of the error.
	pg      *sqlx.Tx
	retry   bool
	locked  []string // sessions LockSessions locked
	notices []notice
	// label names the transaction (Label; else the caller of InTx) and
	// fault is its number among the process's write transactions, for
	// fault injection (fault.go).
	label string
	fault int64
}

// Context is the context of the InTx call.
func (t *Tx) Context() context.Context { return t.ctx }

// OnCommit registers f to run after the transaction is durably committed,
// on the committer goroutine, before InTx returns. f must not block (push to a
// buffered channel, signal a condition). It never runs if the transaction
// rolls back.
func (t *Tx) OnCommit(f func()) { t.onCommit = append(t.onCommit, f) }

type txRequest struct {
	ctx    context.Context
	fn     func(*Tx) error
	caller string       // the caller of InTx, under -tags faultinject (fault.go)
	state  atomic.Int32 // 0 pending, 1 running, 2 abandoned
	done   chan txResult
}

type txResult struct {
	err      error
	panicked any
	stack    []byte
}

// InTx runs fn inside one IMMEDIATE write transaction and returns after it is
// durably committed (synchronous=FULL) or rolled back. fn's error rolls back
// its work and is returned as is; a panic in fn rolls back and re-panics in
// the caller's goroutine. fn must keep in-memory effects for Tx.OnCommit.
//
// Concurrent calls are batched into one SQLite transaction (group commit),
// each fn inside its own SAVEPOINT, so one caller's error never undoes
// another's work, and nobody is told "committed" before the COMMIT returned.
// Nobody is answered before it either: when the COMMIT fails, every caller
// of the batch gets its error, also one whose fn returned an error, since
// that fn may have decided on the writes of an earlier fn of the batch.
// If ctx ends before fn started, InTx returns ctx.Err() and fn never runs;
// once fn started, InTx waits for the outcome. SQLite failures wrap
// ErrUnavailable.
//
// On PostgreSQL fn runs in one READ COMMITTED transaction of its own (fn
// takes the row locks it needs: LockSessions first in a session-scoped
// write, FOR UPDATE SKIP LOCKED where daemons compete for work) and runs
// again when that transaction deadlocks (40P01) or fails to serialize
// (40001), at most 30 times (then ErrUnavailable): fn must be re-runnable,
// with its in-memory effects in Tx.OnCommit (the hooks of an attempt that
// did not commit never run). A statement that failed aborts the attempt
// (sql.ErrNoRows is not a failure): fn returns the error rather than
// carrying on. Hooks run after COMMIT in commit order.
func (db *DB) InTx(ctx context.Context, fn func(*Tx) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	caller := faultCaller()
	if db.pg != nil {
		return db.inTxPostgres(ctx, caller, fn)
	}
	req := &txRequest{ctx: ctx, fn: fn, caller: caller, done: make(chan txResult, 1)}
	if db.beforeQueue != nil {
		db.beforeQueue()
	}
	select {
	case db.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-db.stop:
		return ErrClosed
	}
	var res txResult
	select {
	case res = <-req.done:
	case <-ctx.Done():
		if req.state.CompareAndSwap(0, 2) {
			return ctx.Err()
		}
		res = <-req.done
	case <-db.stopped:
		// The committer has returned. It answered everything it took
		// before that; a request queued after its last drain (Close raced
		// this call) was never taken and never will be.
		select {
		case res = <-req.done:
		default:
			return ErrClosed
		}
	}
	if res.panicked != nil {
		panic(fmt.Sprintf("store.InTx: %v\n%s", res.panicked, res.stack))
	}
	return res.err
}

func (db *DB) commitLoop() {
	defer close(db.stopped)
	batch := make([]*txRequest, 0, db.opt.MaxBatch)
	tick := time.NewTicker(db.opt.CheckpointInterval)
	defer tick.Stop()
	for {
		var first *txRequest
		select {
		case first = <-db.reqs:
		case <-tick.C:
			db.checkpoint()
			continue
		case reply := <-db.ckptNow:
			reply <- db.checkpoint()
			continue
		case <-db.stop:
			// Drain what was queued before Close so no caller hangs.
			for {
				select {
				case r := <-db.reqs:
					db.runBatch([]*txRequest{r})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < db.opt.MaxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		db.runBatch(batch)
	}
}

func (db *DB) runBatch(batch []*txRequest) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(0, 1) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	failAll := func(err error) {
		for _, r := range live {
			r.done <- txResult{err: err}
		}
	}
	// The committer drives the transaction on its pinned connection itself:
	// BEGIN IMMEDIATE … COMMIT, one SAVEPOINT per caller.
	ctl := &Tx{ctx: context.Background(), db: db}
	rollback := func() { ctl.control("ROLLBACK") } // fails harmlessly if SQLite already rolled back
	began := time.Now()
	if _, err := ctl.control("BEGIN IMMEDIATE"); err != nil {
		failAll(Classify(fmt.Errorf("begin immediate: %w", err)))
		return
	}
	results := make([]txResult, len(live))
	hooks := make([][]func(), len(live))
	txs := make([]*Tx, len(live)) // the transactions that will commit
	if len(live) == 1 {
		// Alone in its batch, a transaction needs no savepoint: its
		// failure rolls back the whole transaction (two statements fewer
		// per commit on the common path of one writer at a time).
		db.runAlone(live[0], ctl, began)
		return
	}
	for i, r := range live {
		t := &Tx{ctx: r.ctx, db: db, sink: db.sink, label: r.caller}
		if _, err := t.control("SAVEPOINT sp"); err != nil {
			rollback()
			failAll(Classify(fmt.Errorf("savepoint: %w", err)))
			return
		}
		res := callTx(r.fn, t)
		if res.err == nil && res.panicked == nil {
			if _, err := t.control("RELEASE sp"); err != nil {
				rollback()
				failAll(Classify(fmt.Errorf("release savepoint: %w", err)))
				return
			}
			hooks[i] = t.onCommit
			t.fault = faultBefore(t.label)
			txs[i] = t
			continue
		}
		res.err = Classify(res.err)
		results[i] = res
		// SQLite may have rolled back the whole transaction by itself (disk
		// full, I/O error, busy); then the savepoint is gone and the batch
		// must fail as one.
		if _, err := t.control("ROLLBACK TO sp"); err != nil {
			rollback()
			for j, r := range live {
				if j == i {
					r.done <- res
				} else {
					r.done <- txResult{err: Classify(fmt.Errorf("transaction rolled back by SQLite: %w", res.err))}
				}
			}
			return
		}
		if _, err := t.control("RELEASE sp"); err != nil {
			rollback()
			failAll(Classify(fmt.Errorf("release savepoint: %w", err)))
			return
		}
	}
	if _, err := ctl.control("COMMIT"); err != nil {
		rollback()
		err = Classify(fmt.Errorf("commit: %w", err))
		for i, r := range live {
			// A caller whose fn failed gets the COMMIT's error too: its
			// fn may have decided on an earlier caller's writes in this
			// batch, which did not commit (a duplicate input_id answered
			// with the receipt of an admission that is gone).
			if results[i].panicked != nil {
				r.done <- results[i]
			} else {
				r.done <- txResult{err: err}
			}
		}
		return
	}
	for _, t := range txs {
		if t != nil {
			faultAfter(t.fault, t.label)
		}
	}
	db.batches.Add(1)
	db.txs.Add(int64(len(live)))
	if db.opt.OnCommit != nil {
		db.opt.OnCommit(time.Since(began), len(live))
	}
	for i, r := range live {
		for _, h := range hooks[i] {
			h()
		}
		r.done <- results[i]
	}
}

// runAlone is runBatch for a batch of one transaction r, begun (ctl, at
// began) without a savepoint: fn's error or panic rolls the transaction
// back and is returned as is.
func (db *DB) runAlone(r *txRequest, ctl *Tx, began time.Time) {
	rollback := func() { ctl.control("ROLLBACK") } // fails harmlessly if SQLite already rolled back
	t := &Tx{ctx: r.ctx, db: db, sink: db.sink, label: r.caller}
	res := callTx(r.fn, t)
	if res.err != nil || res.panicked != nil {
		rollback()
		res.err = Classify(res.err)
		r.done <- res
		return
	}
	t.fault = faultBefore(t.label)
	if _, err := ctl.control("COMMIT"); err != nil {
		rollback()
		r.done <- txResult{err: Classify(fmt.Errorf("commit: %w", err))}
		return
	}
	faultAfter(t.fault, t.label)
	db.batches.Add(1)
	db.txs.Add(1)
	if db.opt.OnCommit != nil {
		db.opt.OnCommit(time.Since(began), 1)
	}
	for _, h := range t.onCommit {
		h()
	}
	r.done <- res
}

// checkpoint runs PRAGMA wal_checkpoint(PASSIVE) on the writer connection
// (from the committer, between batches), records the outcome and logs a
// failure when it starts and the recovery when it ends.
func (db *DB) checkpoint() CheckpointStatus {
	st := CheckpointStatus{At: time.Now()}
	var busy int
	err := db.wconn.QueryRowxContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &st.WALFrames, &st.Checkpointed)
	if err != nil {
		st.Err = Classify(fmt.Errorf("wal checkpoint: %w", err))
	}
	st.Busy = busy != 0
	if fi, err := os.Stat(db.path + "-wal"); err == nil {
		st.WALBytes = fi.Size()
	}
	prev := db.ckpt.Load()
	failing := prev != nil && prev.Err != nil
	if st.Busy && failing {
		st.Err = prev.Err // a checkpoint that did not run proves nothing
	}
	db.ckpt.Store(&st)
	switch {
	case st.Err != nil && !failing:
		db.opt.Logger.Error("state.db cannot be written: WAL checkpoints fail; commits still land in the WAL, which grows until this is fixed",
			"path", db.path, "wal_bytes", st.WALBytes, "err", st.Err)
	case st.Err == nil && failing:
		db.opt.Logger.Info("state.db is writable again: WAL checkpoints work", "path", db.path,
			"wal_frames", st.WALFrames, "checkpointed", st.Checkpointed)
	}
	return st
}

// Checkpoint runs a passive WAL checkpoint now, between group commits, and
// returns its outcome; the committer also runs one every
// Options.CheckpointInterval. It returns ErrClosed after Close.
func (db *DB) Checkpoint(ctx context.Context) (CheckpointStatus, error) {
	if db.pg != nil {
		return db.probePostgres(ctx)
	}
	reply := make(chan CheckpointStatus, 1)
	select {
	case db.ckptNow <- reply:
	case <-db.stopped:
		return CheckpointStatus{}, ErrClosed
	case <-ctx.Done():
		return CheckpointStatus{}, ctx.Err()
	}
	st := <-reply
	return st, st.Err
}

// LastCheckpoint returns the outcome of the last checkpoint (zero before
// the first, CheckpointInterval after Open).
func (db *DB) LastCheckpoint() CheckpointStatus {
	if st := db.ckpt.Load(); st != nil {
		return *st
	}
	return CheckpointStatus{}
}

func callTx(fn func(*Tx) error, t *Tx) (res txResult) {
	defer func() {
		if p := recover(); p != nil {
			res = txResult{panicked: p, stack: debug.Stack(), err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return txResult{err: fn(t)}
}

// ExecReserved runs one statement (with '?' placeholders) in its own short
// transaction, for writes that must not wait behind the store's other work:
// a daemon's lease renewal. On PostgreSQL it runs in autocommit (READ
// COMMITTED, never re-run) on a connection reserved for it, outside the
// pool that InTx and the reads share, so a saturated pool or a hot table's
// serialization re-runs cannot delay it; ctx bounds it, including a wait
// for that connection. On SQLite it is one InTx (the single writer
// serialises every write anyway). Errors are classified (ErrUnavailable).
func (db *DB) ExecReserved(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if db.pg != nil {
		// One autocommit statement: "before" its commit is before it is
		// sent (fault.go).
		label := faultCaller()
		n := faultBefore(label)
		res, err := db.pg.reserved.ExecContext(ctx, db.rebind(query), args...)
		if err == nil {
			faultAfter(n, label)
		}
		return res, Classify(err)
	}
	var res sql.Result
	err := db.InTx(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.Exec(query, args...)
		return err
	})
	return res, err
}

// Get runs a single-row query on a reader (a pooled connection on
// PostgreSQL); sql.ErrNoRows when nothing matched. query uses '?'
// placeholders on both drivers.
func (db *DB) Get(ctx context.Context, dest any, query string, args ...any) error {
	return db.Reads(ctx).Get(dest, query, args...)
}

// Select runs a query on a reader and scans every row into dest (a slice).
func (db *DB) Select(ctx context.Context, dest any, query string, args ...any) error {
	return db.Reads(ctx).Select(dest, query, args...)
}

// Reads returns a Queryer (and RowQueryer) running each query on its own
// reader connection with ctx. Consecutive queries may see different
// commits; use ReadTx for one consistent view.
func (db *DB) Reads(ctx context.Context) *Reads { return &Reads{ctx: ctx, db: db, q: db.r} }

// maxReadStmts bounds the reads' statement cache; queries beyond it (there
// are far fewer distinct ones) are prepared at each use.
const maxReadStmts = 512

// readStmt returns the cached prepared statement of query on the reader
// pool, preparing it first when prepare is set; nil on PostgreSQL (pgx
// caches statements per connection itself), when the cache is full, when
// it is not cached and prepare is not set, or when preparing failed (the
// caller then runs the query unprepared and reports its error).
//
// Preparing takes a connection of the pool: never while holding one (a
// ReadTx asks with prepare unset, or its readers could all wait for each
// other's connections), and never under rstmtMu.
func (db *DB) readStmt(ctx context.Context, query string, prepare bool) *sqlx.Stmt {
	if db.drv != SQLite {
		return nil
	}
	db.rstmtMu.Lock()
	s, ok := db.rstmts[query]
	full := len(db.rstmts) >= maxReadStmts
	db.rstmtMu.Unlock()
	if ok || !prepare || full || db.closed.Load() {
		return s
	}
	s, err := db.r.PreparexContext(ctx, query)
	if err != nil {
		return nil
	}
	db.rstmtMu.Lock()
	defer db.rstmtMu.Unlock()
	if prev, ok := db.rstmts[query]; ok || db.closed.Load() { // raced with another reader, or Close
		s.Close()
		return prev
	}
	if db.rstmts == nil {
		db.rstmts = map[string]*sqlx.Stmt{}
	}
	db.rstmts[query] = s
	return s
}

// Reads runs read queries with '?' placeholders on both drivers: on the
// reader pool (DB.Reads) or in one read transaction (DB.ReadTx). Errors
// are classified (ErrUnavailable).
type Reads struct {
	ctx context.Context
	db  *DB
	q   interface {
		GetContext(ctx context.Context, dest any, query string, args ...any) error
		SelectContext(ctx context.Context, dest any, query string, args ...any) error
		QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error)
	}
	tx *sqlx.Tx // the read transaction of ReadTx; nil on the pool
}

// stmt is the cached prepared statement of query for r (bound to its read
// transaction, if any), or nil to run it unprepared.
func (r *Reads) stmt(query string) *sqlx.Stmt {
	// In a read transaction only a statement already cached is used (bound
	// to the transaction's connection, where database/sql prepares it once);
	// a miss is prepared on the pool in the background, for the next time.
	s := r.db.readStmt(r.ctx, query, r.tx == nil)
	if r.tx == nil {
		return s
	}
	if s == nil {
		r.db.prepareLater(query)
		return nil
	}
	return r.tx.StmtxContext(r.ctx, s)
}

// prepareLater prepares query on the reader pool in a goroutine (once at a
// time per query), for a read transaction that may not take a second
// connection itself.
func (db *DB) prepareLater(query string) {
	if db.drv != SQLite || db.closed.Load() {
		return
	}
	db.rstmtMu.Lock()
	if db.rpending[query] || len(db.rstmts) >= maxReadStmts {
		db.rstmtMu.Unlock()
		return
	}
	if db.rpending == nil {
		db.rpending = map[string]bool{}
	}
	db.rpending[query] = true
	db.rstmtMu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), db.opt.BusyTimeout)
		defer cancel()
		db.readStmt(ctx, query, true)
		db.rstmtMu.Lock()
		delete(db.rpending, query)
		db.rstmtMu.Unlock()
	}()
}

// Get runs a single-row query; sql.ErrNoRows when nothing matched.
func (r *Reads) Get(dest any, query string, args ...any) error {
	if s := r.stmt(query); s != nil {
		return r.db.classifyRead(s.GetContext(r.ctx, dest, args...))
	}
	return r.db.classifyRead(r.q.GetContext(r.ctx, dest, r.db.rebind(query), args...))
}

// Select runs a query and scans every row into dest (a slice).
func (r *Reads) Select(dest any, query string, args ...any) error {
	if s := r.stmt(query); s != nil {
		return r.db.classifyRead(s.SelectContext(r.ctx, dest, args...))
	}
	return r.db.classifyRead(r.q.SelectContext(r.ctx, dest, r.db.rebind(query), args...))
}

// Queryx runs a query whose rows are read one at a time; the caller closes
// them.
func (r *Reads) Queryx(query string, args ...any) (*sqlx.Rows, error) {
	if s := r.stmt(query); s != nil {
		rows, err := s.QueryxContext(r.ctx, args...)
		return rows, r.db.classifyRead(err)
	}
	rows, err := r.q.QueryxContext(r.ctx, r.db.rebind(query), args...)
	return rows, r.db.classifyRead(err)
}

// ReadTx runs fn in one read-only transaction, so that every query in it
// sees one consistent snapshot: a WAL snapshot on a SQLite reader, a
// REPEATABLE READ READ ONLY transaction on PostgreSQL.
func (db *DB) ReadTx(ctx context.Context, fn func(*Reads) error) error {
	opt := &sql.TxOptions{ReadOnly: true}
	if db.drv == Postgres {
		opt.Isolation = sql.LevelRepeatableRead
	}
	tx, err := db.r.BeginTxx(ctx, opt)
	if err != nil {
		return db.classifyRead(err)
	}
	defer tx.Rollback()
	return db.classifyRead(fn(&Reads{ctx: ctx, db: db, q: tx, tx: tx}))
}

// classifyRead is Classify for a read, which fails with ErrClosed once the
// store is closed (database/sql's own "database is closed" says nothing
// of ErrUnavailable).
func (db *DB) classifyRead(err error) error {
	if err != nil && db.closed.Load() && !errors.Is(err, sql.ErrNoRows) {
		return ErrClosed
	}
	return Classify(err)
}

// Now is the store's timestamp format: RFC 3339 UTC with milliseconds,
// fixed width so that text order is time order.
func Now() string { return FormatTime(time.Now()) }

// FormatTime formats t like Now.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// stmt returns the prepared statement for query on the pinned writer
// connection, preparing it once. Only the committer goroutine calls it.
func (db *DB) stmt(query string) (*sqlx.Stmt, error) {
	db.stmtMu.Lock()
	defer db.stmtMu.Unlock()
	if s, ok := db.stmts[query]; ok {
		return s, nil
	}
	s, err := db.wconn.PreparexContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	if db.stmts == nil {
		db.stmts = map[string]*sqlx.Stmt{}
	}
	db.stmts[query] = s
	return s, nil
}

// Get runs a single-row query in the transaction; sql.ErrNoRows when
// nothing matched. query uses '?' placeholders on both drivers.
func (t *Tx) Get(dest any, query string, args ...any) error {
	t.db.statements.Add(1)
	if t.pg != nil {
		return t.pgErr(t.pg.GetContext(t.pgctx(), dest, t.db.rebind(query), args...))
	}
	s, err := t.db.stmt(query)
	if err != nil {
		return err
	}
	return s.Get(dest, args...)
}

// Select runs a query in the transaction and scans every row into dest (a
// slice).
func (t *Tx) Select(dest any, query string, args ...any) error {
	t.db.statements.Add(1)
	if t.pg != nil {
		return t.pgErr(t.pg.SelectContext(t.pgctx(), dest, t.db.rebind(query), args...))
	}
	s, err := t.db.stmt(query)
	if err != nil {
		return err
	}
	return s.Select(dest, args...)
}

// Exec runs a statement in the transaction.
func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	t.db.statements.Add(1)
	return t.exec(query, args...)
}

// control runs the committer's own statements (BEGIN, SAVEPOINT, RELEASE,
// ROLLBACK, COMMIT on SQLite), which Statements does not count.
func (t *Tx) control(query string) (sql.Result, error) { return t.exec(query) }

func (t *Tx) exec(query string, args ...any) (sql.Result, error) {
	if t.pg != nil {
		res, err := t.pg.ExecContext(t.pgctx(), t.db.rebind(query), args...)
		return res, t.pgErr(err)
	}
	s, err := t.db.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.Exec(args...)
}

// Queryx runs a query in the transaction whose rows are read one at a time;
// the caller closes them before the next statement.
func (t *Tx) Queryx(query string, args ...any) (*sqlx.Rows, error) {
	t.db.statements.Add(1)
	if t.pg != nil {
		rows, err := t.pg.QueryxContext(t.pgctx(), t.db.rebind(query), args...)
		return rows, t.pgErr(err)
	}
	s, err := t.db.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.Queryx(args...)
}
