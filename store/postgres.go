package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// migrationLockKey is the pg_advisory_xact_lock key that serialises
// migrations of daemons starting at once on one database.
const migrationLockKey = 0x5e5510d0

// Re-runs of InTx on PostgreSQL: a transaction that deadlocked (40P01) or,
// rarely under READ COMMITTED, failed to serialize (40001) runs again, at
// most pgMaxAttempts times, sleeping a random time below
// min(pgRetryMax, pgRetryBase<<n) between runs.
//
// Re-runs also take the store's retry lock for their whole attempt: the
// transactions of one daemon that collided once then run one at a time
// instead of colliding again, while first attempts stay concurrent.
const (
	pgMaxAttempts = 30
	pgRetryBase   = 500 * time.Microsecond
	pgRetryMax    = 20 * time.Millisecond
)

// pgState is what a PostgreSQL store holds besides the pool (DB.r).
type pgState struct {
	cfg *pgx.ConnConfig // for the LISTEN connection
	seq sequencer       // publishes commits' hooks in commit order
	// retry is held by every re-run of a transaction (see pgMaxAttempts).
	retry sync.Mutex
	// afterCommit, when set (tests only), runs after each COMMIT returned,
	// before the transaction waits for its turn to run its hooks.
	afterCommit func()
	stop        chan struct{} // closed by Close: ends the probe loop
	done        chan struct{} // closed when the probe loop returned
	lis         *listener
	// reserved is a one-connection pool of its own for ExecReserved.
	reserved *sqlx.DB
}

// openPostgres connects to opt.DSN, applies the pending migrations under an
// advisory lock and starts the periodic probe (see Checkpoint).
func openPostgres(ctx context.Context, opt Options) (*DB, error) {
	if err := CheckDSN(opt.DSN); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	cfg, err := pgx.ParseConfig(opt.DSN)
	if err != nil {
		return nil, fmt.Errorf("store: DSN %s: %v", RedactDSN(opt.DSN), redactErr(err, opt.DSN))
	}
	// pool_max_conns (pgxpool's parameter) sizes the pool; it is ours, not
	// a server setting, so it does not reach the server.
	if v, ok := cfg.RuntimeParams[PoolMaxConnsParam]; ok {
		delete(cfg.RuntimeParams, PoolMaxConnsParam)
		n, err := ParsePoolMaxConns(v)
		if err != nil {
			return nil, fmt.Errorf("store: DSN %s: %w", RedactDSN(opt.DSN), err)
		}
		opt.MaxConns = n
	}
	// A lock wait is bounded like SQLite's busy_timeout; the failure
	// (55P03) is ErrUnavailable.
	if _, ok := cfg.RuntimeParams["lock_timeout"]; !ok {
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(opt.BusyTimeout.Milliseconds(), 10)
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "sessiond"
	}
	pool := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	pool.SetMaxOpenConns(opt.MaxConns)
	pool.SetMaxIdleConns(opt.MaxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{path: RedactDSN(opt.DSN), opt: opt, drv: Postgres, r: pool,
		pg: &pgState{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}}
	db.pg.seq.cond = sync.NewCond(&db.pg.seq.mu)
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, Classify(fmt.Errorf("connect to %s: %w", db.path, redactErr(err, opt.DSN)))
	}
	if err := db.migratePostgres(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	db.pg.reserved = sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	db.pg.reserved.SetMaxOpenConns(1)
	db.pg.reserved.SetMaxIdleConns(1)
	db.pg.lis = newListener(db)
	go db.probeLoop()
	return db, nil
}

// PoolMaxConnsParam is the DSN parameter that sizes the connection pool
// (as pgxpool names it): ?pool_max_conns=N overrides Options.MaxConns.
const PoolMaxConnsParam = "pool_max_conns"

// MaxPoolConns bounds Options.MaxConns and pool_max_conns.
const MaxPoolConns = 1000

// ParsePoolMaxConns parses a pool_max_conns value: an integer from 1 to
// MaxPoolConns.
func ParsePoolMaxConns(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPoolConns {
		return 0, fmt.Errorf("%s=%q: want an integer from 1 to %d", PoolMaxConnsParam, v, MaxPoolConns)
	}
	return n, nil
}

// redactErr keeps a password of dsn out of an error's text.
func redactErr(err error, dsn string) error {
	if err == nil {
		return nil
	}
	u, perr := url.Parse(dsn)
	if perr != nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), pw, "xxxxx"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (db *DB) closePostgres() error {
	close(db.pg.stop)
	<-db.pg.done
	db.pg.lis.close()
	return errors.Join(db.pg.reserved.Close(), db.r.Close())
}

// migratePostgres applies the migrations of migrations_pg numbered above
// the highest version in schema_version, all in one transaction holding
// pg_advisory_xact_lock: daemons that start at once on one database
// migrate one after the other, and the later ones find nothing to do.
func (db *DB) migratePostgres(ctx context.Context) error {
	migs, err := readMigrations("migrations_pg")
	if err != nil {
		return err
	}
	tx, err := db.r.BeginTxx(ctx, nil)
	if err != nil {
		return Classify(fmt.Errorf("migrate: %w", err))
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey); err != nil {
		return Classify(fmt.Errorf("migrate: lock: %w", err))
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    BIGINT PRIMARY KEY,
		applied_at TEXT NOT NULL)`); err != nil {
		return Classify(fmt.Errorf("migrate: schema_version: %w", err))
	}
	var current int
	if err := tx.GetContext(ctx, &current, "SELECT coalesce(max(version), 0) FROM schema_version"); err != nil {
		return Classify(fmt.Errorf("migrate: read schema_version: %w", err))
	}
	if n := len(migs); n > 0 && current > migs[n-1].version {
		return fmt.Errorf("database schema version %d is newer than this sessiond knows (%d); use a newer sessiond", current, migs[n-1].version)
	}
	for _, m := range migs {
		if m.version <= current || (migrateUpTo > 0 && m.version > migrateUpTo) {
			continue
		}
		// No arguments: the simple protocol, which runs a file of several
		// statements.
		if _, err := tx.ExecContext(ctx, m.body); err != nil {
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)", m.version, Now()); err != nil {
			return Classify(fmt.Errorf("migration %s: %w", m.name, err))
		}
	}
	n := faultBefore("migrate")
	if err := tx.Commit(); err != nil {
		return Classify(err)
	}
	faultAfter(n, "migrate")
	return nil
}

type migration struct {
	version    int
	name, body string
}

// readMigrations returns the embedded migrations of dir in version order.
func readMigrations(dir string) ([]migration, error) {
	entries, err := migrationFS.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var migs []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a number and _", e.Name())
		}
		body, err := migrationFS.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		migs = append(migs, migration{v, e.Name(), string(body)})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	return migs, nil
}

// inTxPostgres is InTx on PostgreSQL: fn runs in one READ COMMITTED
// transaction on a pooled connection (its consistency comes from the row
// locks fn takes: Tx.LockSessions, FOR UPDATE SKIP LOCKED, guarded
// statements; docs/scale-out.md audits every transaction), and runs again
// (at most pgMaxAttempts times, after a jittered backoff) when the
// transaction deadlocked (40P01) or failed to serialize (40001). The
// OnCommit hooks of an attempt that did not commit are dropped. After
// COMMIT the hooks run in commit order (see sequencer), so that the event
// sink sees a session's events in seq order.
func (db *DB) inTxPostgres(ctx context.Context, caller string, fn func(*Tx) error) error {
	var err error
	for attempt := 0; attempt < pgMaxAttempts; attempt++ {
		if attempt > 0 {
			d := min(pgRetryMax, pgRetryBase<<attempt)
			t := time.NewTimer(rand.N(d) + time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err() // nothing of fn was committed
			}
		}
		var retry bool
		if attempt > 0 {
			db.reruns.Add(1)
		}
		if attempt == 0 {
			retry, err = db.attemptPostgres(ctx, caller, fn)
		} else {
			retry, err = db.retryPostgres(ctx, caller, fn)
		}
		if !retry {
			return err
		}
	}
	return Classify(fmt.Errorf("transaction failed to serialize %d times: %w", pgMaxAttempts, err))
}

// retryPostgres is attemptPostgres holding the retry lock.
func (db *DB) retryPostgres(ctx context.Context, caller string, fn func(*Tx) error) (bool, error) {
	db.pg.retry.Lock()
	defer db.pg.retry.Unlock()
	return db.attemptPostgres(ctx, caller, fn)
}

// attemptPostgres runs fn once; retry says the attempt failed to serialize
// and nothing of it was committed.
func (db *DB) attemptPostgres(ctx context.Context, caller string, fn func(*Tx) error) (retry bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// Once fn started, the caller waits for the outcome, as on SQLite: the
	// transaction does not see ctx's cancellation.
	began := time.Now()
	sqltx, err := db.beginPostgres(ctx)
	if err != nil {
		return false, Classify(fmt.Errorf("begin: %w", err))
	}
	t := &Tx{ctx: ctx, db: db, sink: db.sink, pg: sqltx, label: caller}
	res := callTx(fn, t)
	if res.err == nil && res.panicked == nil {
		res.err = t.sendNotices()
	}
	if res.panicked != nil {
		sqltx.Rollback()
		panic(fmt.Sprintf("store.InTx: %v\n%s", res.panicked, res.stack))
	}
	if res.err != nil {
		sqltx.Rollback()
		if t.retry || isSerialization(res.err) {
			return true, res.err
		}
		return false, Classify(res.err)
	}
	t.fault = faultBefore(t.label)
	ticket := db.pg.seq.take()
	err = sqltx.Commit()
	if db.pg.afterCommit != nil {
		db.pg.afterCommit()
	}
	db.pg.seq.wait(ticket)
	defer db.pg.seq.finish(ticket)
	if err != nil {
		if isSerialization(err) {
			return true, err
		}
		return false, Classify(fmt.Errorf("commit: %w", err))
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
	return false, nil
}

// beginPostgres begins a READ COMMITTED transaction (the isolation is
// explicit: a server or role whose default_transaction_isolation is higher
// would re-run transactions for nothing). A pooled connection
// that the server closed since its last use (a restart of the server, a
// terminated backend, a failover) fails its BEGIN before anything reached
// the server (pgconn.SafeToRetry: "write: broken pipe"); database/sql drops
// that connection, and the BEGIN is tried again on another one, at most
// MaxConns+1 times in all, so each dead pooled connection does not cost a
// transaction. Any other failure is returned at once.
func (db *DB) beginPostgres(ctx context.Context) (*sqlx.Tx, error) {
	for attempt := 0; ; attempt++ {
		tx, err := db.r.BeginTxx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err == nil || !pgconn.SafeToRetry(err) || attempt >= db.opt.MaxConns {
			return tx, err
		}
	}
}

// LockSessions takes the row lock of each session in ids for the rest of
// the transaction (SELECT ... FOR UPDATE, one id at a time in ascending
// order, so that two transactions locking the same sessions cannot
// deadlock on them). Every session-scoped write transaction calls it
// first, before reading what it decides on: two transactions on one
// session then run one after the other, and under READ COMMITTED each
// statement after the lock sees what the transaction before it
// committed. On SQLite it does nothing (the single writer runs write
// transactions one at a time). A session that does not exist locks
// nothing and is no error: the transaction's own statements find it
// missing. A session the transaction locked already costs no statement.
func (t *Tx) LockSessions(ids ...string) error {
	if t.pg == nil || len(ids) == 0 {
		return nil
	}
	if len(ids) > 1 {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	for _, id := range ids {
		if slices.Contains(t.locked, id) {
			continue
		}
		var got []string
		if err := t.Select(&got, `SELECT session_id FROM sessions WHERE session_id = ? FOR UPDATE`, id); err != nil {
			return fmt.Errorf("lock session %s: %w", id, err)
		}
		t.locked = append(t.locked, id)
	}
	return nil
}

// NoteLocked records that the transaction already holds the row lock of
// session id, taken by an UPDATE of that row (on PostgreSQL FOR NO KEY
// UPDATE, which the FOR UPDATE of every other session-scoped write waits
// for, and which waits for it), so that LockSessions of id costs no
// statement. Call it only after such an UPDATE matched the row, and lock
// other sessions only if their ids sort after id (LockSessions' order). On
// SQLite it does nothing.
func (t *Tx) NoteLocked(id string) {
	if t.pg != nil && !slices.Contains(t.locked, id) {
		t.locked = append(t.locked, id)
	}
}

// pgctx is the context of the transaction's statements: the caller's
// without its cancellation (see attemptPostgres).
func (t *Tx) pgctx() context.Context { return context.WithoutCancel(t.ctx) }

// pgErr notes a serialization failure of a statement (InTx then re-runs
// the transaction whatever fn does with the error) and passes err on.
func (t *Tx) pgErr(err error) error {
	if err != nil && isSerialization(err) {
		t.retry = true
	}
	return err
}

// sequencer orders the post-commit work of concurrent transactions by the
// moment they sent COMMIT. A transaction that read another's writes began
// after that one's COMMIT returned, so it sent its own COMMIT later and
// runs its hooks after the other's: events reach the sink in seq order.
type sequencer struct {
	mu         sync.Mutex
	cond       *sync.Cond
	next, done uint64 // next ticket to hand out; tickets below done finished
}

func (s *sequencer) take() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.next
	s.next++
	return t
}

// wait returns when every ticket before t has finished.
func (s *sequencer) wait(t uint64) {
	s.mu.Lock()
	for s.done != t {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

func (s *sequencer) finish(t uint64) {
	s.mu.Lock()
	s.done = t + 1
	s.cond.Broadcast()
	s.mu.Unlock()
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isSerialization reports a PostgreSQL serialization failure or deadlock:
// the transaction was rolled back and may succeed when run again.
func isSerialization(err error) bool {
	c := pgCode(err)
	return c == "40001" || c == "40P01"
}

// pgUnavailable reports a failure of the PostgreSQL server or of the way to
// it rather than of the statement: connection (class 08, or no connection
// at all), insufficient resources (class 53: disk full 53100, out of
// memory, too many connections), shutdown (57P01-57P03), system or I/O
// error (class 58), read-only transaction (25006: a hot standby), lock
// timeout (55P03) and serialization failure or deadlock (40001, 40P01:
// InTx returns them only after its retries).
func pgUnavailable(err error) bool {
	if c := pgCode(err); c != "" {
		switch {
		case strings.HasPrefix(c, "08"), strings.HasPrefix(c, "53"), strings.HasPrefix(c, "58"):
			return true
		}
		switch c {
		case "57P01", "57P02", "57P03", "25006", "55P03", "40001", "40P01":
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; the database may be fine
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.Is(err, io.EOF) && strings.Contains(err.Error(), "unexpected EOF"))
}

// pgConstraint reports a PostgreSQL integrity constraint violation (class
// 23).
func pgConstraint(err error) bool { return strings.HasPrefix(pgCode(err), "23") }

// probePostgres is Checkpoint on PostgreSQL, which has no WAL file of the
// daemon's to checkpoint: it checks that the database takes a write (an
// UPDATE that matches no row: nothing is written, but a read-only server
// refuses it) and records the outcome like a checkpoint (WALBytes and the frame counts stay 0). The probe loop
// runs it every CheckpointInterval, so LastCheckpoint, /metrics and
// daemon.info tell whether the database was writable lately.
func (db *DB) probePostgres(ctx context.Context) (CheckpointStatus, error) {
	if db.closed.Load() {
		return CheckpointStatus{}, ErrClosed
	}
	st := CheckpointStatus{At: time.Now()}
	pctx, cancel := context.WithTimeout(ctx, db.opt.BusyTimeout)
	defer cancel()
	// An UPDATE of no row: refused by a read-only database (a standby,
	// default_transaction_read_only) at its start, writes nothing.
	_, err := db.r.ExecContext(pctx, "UPDATE schema_version SET applied_at = applied_at WHERE false")
	if err != nil {
		if ctx.Err() != nil {
			return CheckpointStatus{}, ctx.Err()
		}
		st.Err = Classify(fmt.Errorf("probe write: %w", err))
		if !errors.Is(st.Err, ErrUnavailable) {
			st.Err = &unavailableError{st.Err}
		}
	}
	prev := db.ckpt.Load()
	failing := prev != nil && prev.Err != nil
	db.ckpt.Store(&st)
	switch {
	case st.Err != nil && !failing:
		db.opt.Logger.Error("the PostgreSQL database cannot be written", "dsn", db.path, "err", st.Err)
	case st.Err == nil && failing:
		db.opt.Logger.Info("the PostgreSQL database is writable again", "dsn", db.path)
	}
	return st, st.Err
}

func (db *DB) probeLoop() {
	defer close(db.pg.done)
	tick := time.NewTicker(db.opt.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-db.pg.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-db.pg.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			db.probePostgres(ctx)
			cancel()
		}
	}
}
