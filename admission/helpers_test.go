package admission_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"

	_ "github.com/jackc/pgx/v5/stdlib" // sql driver "pgx" for holdWrites

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/storetest"
)

// env is one state.db with the Queue of the current (simulated) daemon.
type env struct {
	t     testing.TB
	path  string
	opt   store.Options
	db    *store.DB
	q     *admission.Queue
	epoch cluster.DaemonID
}

func newEnv(t testing.TB) *env { return newEnvOpt(t, store.Options{}) }

// fastSync is for the long tests that reopen the store thousands of times
// per second: synchronous=NORMAL skips the per-commit fsync of the WAL. It
// changes nothing that these tests observe: their "crash" closes and
// reopens the store inside one process, so the OS cache keeps every
// committed page either way; durability across power loss is store's
// concern and is tested there.
var fastSync = store.Options{Synchronous: "NORMAL"}

func newEnvOpt(t testing.TB, opt store.Options) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "state.db"), opt: storetest.Options(t, opt), epoch: 1}
	e.open()
	t.Cleanup(func() {
		if e.db != nil {
			e.db.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := store.Open(context.Background(), e.path, e.opt)
	if err != nil {
		e.t.Fatalf("store.Open: %v", err)
	}
	e.db = db
	e.q = &admission.Queue{DB: db, Daemon: e.epoch}
}

// crash closes the store without settling anything (the daemon died), opens
// it again as the next boot epoch and runs the boot recovery.
func (e *env) crash() admission.RecoverResult {
	e.t.Helper()
	if err := e.db.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.db = nil
	e.epoch++
	e.open()
	res, err := e.q.Recover(context.Background(), nil)
	if err != nil {
		e.t.Fatalf("Recover: %v", err)
	}
	return res
}

func (e *env) session(id string) {
	e.t.Helper()
	err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Exec(`INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at)
			VALUES (?, '/tmp', 'm', 'openai', '', '[]', ?)`, id, store.Now())
		return err
	})
	if err != nil {
		e.t.Fatalf("insert session %s: %v", id, err)
	}
}

func (e *env) exec(query string, args ...any) error {
	return e.db.InTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Exec(query, args...)
		return err
	})
}

func (e *env) admit(sess, input, text string) admission.Receipt {
	e.t.Helper()
	rec, err := e.q.Admit(context.Background(), admission.AdmitRequest{SessionID: sess, InputID: input, Text: text}, nil)
	if err != nil {
		e.t.Fatalf("Admit(%s, %s): %v", sess, input, err)
	}
	return rec
}

func (e *env) claim(sess string) admission.Admission {
	e.t.Helper()
	a, err := e.q.Claim(context.Background(), sess)
	if err != nil {
		e.t.Fatalf("Claim(%s): %v", sess, err)
	}
	return a
}

const admColumns = `admission_id, target_session_id, request_id, seq, status, outcome, execution_generation,
	owner_epoch, text, attachments, payload_digest, error, created_at, started_at, settled_at,
	queue_order, delivery, steered_into, edited_digest`

// row reads one admission directly; ok=false when it does not exist.
func (e *env) row(id string) (admission.Admission, bool) {
	e.t.Helper()
	var a admission.Admission
	err := e.db.Get(context.Background(), &a, `SELECT `+admColumns+` FROM session_admissions WHERE admission_id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false
	}
	if err != nil {
		e.t.Fatalf("read admission %s: %v", id, err)
	}
	return a, true
}

func (e *env) mustRow(id string) admission.Admission {
	e.t.Helper()
	a, ok := e.row(id)
	if !ok {
		e.t.Fatalf("admission %s does not exist", id)
	}
	return a
}

func (e *env) rows(sess string) []admission.Admission {
	e.t.Helper()
	var out []admission.Admission
	if err := e.db.Select(context.Background(), &out, `SELECT `+admColumns+` FROM session_admissions
		WHERE target_session_id = ? ORDER BY seq`, sess); err != nil {
		e.t.Fatalf("read admissions of %s: %v", sess, err)
	}
	return out
}

type sessRow struct {
	Gen       int64 `db:"execution_generation"`
	NextSeq   int64 `db:"next_admission_seq"`
	LastEvent int64 `db:"last_event_seq"`
}

func (e *env) sess(id string) sessRow {
	e.t.Helper()
	var s sessRow
	if err := e.db.Get(context.Background(), &s, `SELECT execution_generation, next_admission_seq, last_event_seq
		FROM sessions WHERE session_id = ?`, id); err != nil {
		e.t.Fatalf("read session %s: %v", id, err)
	}
	return s
}

func (e *env) events(sess string) []store.Event {
	e.t.Helper()
	var rows []struct {
		store.Event
		Text string `db:"payload_text"`
	}
	if err := e.db.Select(context.Background(), &rows, `SELECT session_id, seq, type, admission_id, execution_generation, payload AS payload_text, created_at
		FROM events WHERE session_id = ? ORDER BY seq`, sess); err != nil {
		e.t.Fatalf("read events of %s: %v", sess, err)
	}
	evs := make([]store.Event, len(rows))
	for i, r := range rows {
		evs[i] = r.Event
		evs[i].Payload = []byte(r.Text)
	}
	return evs
}

func (e *env) messages(sess string) []store.Message {
	e.t.Helper()
	ms, err := store.Transcript(e.db.Reads(context.Background()), sess)
	if err != nil {
		e.t.Fatalf("read transcript of %s: %v", sess, err)
	}
	return ms
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Get(context.Background(), &n, query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after timeout. It
// runs on the test goroutine.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	fixtures.Eventually(t, timeout, what, cond)
}

// errName names the admission error err is, for messages.
func errName(err error) string {
	for _, k := range []struct {
		e error
		n string
	}{
		{admission.ErrSessionNotFound, "ErrSessionNotFound"}, {admission.ErrNotFound, "ErrNotFound"},
		{admission.ErrConflict, "ErrConflict"}, {admission.ErrCancelled, "ErrCancelled"},
		{admission.ErrNotQueued, "ErrNotQueued"}, {admission.ErrUnknownExecution, "ErrUnknownExecution"},
		{admission.ErrStaleGeneration, "ErrStaleGeneration"}, {admission.ErrIllegalTransition, "ErrIllegalTransition"},
		{admission.ErrNothingQueued, "ErrNothingQueued"}, {admission.ErrSessionBusy, "ErrSessionBusy"},
		{store.ErrUnavailable, "ErrUnavailable"},
	} {
		if errors.Is(err, k.e) {
			return k.n
		}
	}
	if err == nil {
		return "nil"
	}
	return fmt.Sprintf("untyped(%v)", err)
}

// holdWrites makes the env's database refuse writes from another
// connection, as another process would, until the returned func: on SQLite
// it holds the write lock (BEGIN IMMEDIATE); on PostgreSQL an open
// transaction holds the row locks of every session, so the store's writes
// to them wait past lock_timeout (Options.BusyTimeout).
func holdWrites(t *testing.T, e *env) (release func()) {
	t.Helper()
	var other *sql.DB
	var err error
	if e.opt.Driver == store.Postgres {
		other, err = sql.Open("pgx", e.opt.DSN)
	} else {
		other, err = sql.Open("sqlite", store.DSN(e.path, true, store.Options{}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE sessions SET title = title`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback(); other.Close() }) }
	t.Cleanup(release)
	return release
}
