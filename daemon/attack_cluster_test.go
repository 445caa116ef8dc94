package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/protocol"
)

// Adversarial tests of the cluster (issue 17), on a real PostgreSQL: each
// one names the promise it attacks.

// listenPIDs returns the backends of the daemon whose DSN carries
// application_name app that hold its LISTEN connection.
func listenPIDs(t *testing.T, d *Daemon, app string) []int64 {
	t.Helper()
	var pids []int64
	if err := d.db.Select(context.Background(), &pids, `SELECT pid FROM pg_stat_activity
		WHERE application_name = ? AND datname = current_database() AND query LIKE 'LISTEN%'`, app); err != nil {
		t.Fatal(err)
	}
	return pids
}

// TestAttackClusterListenResyncWakesOwnedQueue: an input submitted on B for
// a session that A owns is announced to A on ChannelSessions. When A's
// LISTEN connection is down at that moment, the notification is lost; A's
// listener comes back and calls fn("") (resync from the tables). The
// resync must make A schedule the queued input of the sessions it owns:
// nobody else may run it (A is alive, B may not take the session), so a
// resync that only looks at running turns, prompts and orphans leaves the
// acknowledged input queued forever.
func TestAttackClusterListenResyncWakesOwnedQueue(t *testing.T) {
	dsn := pgtest.DSN(t)
	m := fixtures.NewFakeModel(t)
	m.On("one", fixtures.Reply{Text: "r1"})
	m.On("two", fixtures.Reply{Text: "r2"})
	a := startClusterDaemon(t, sharedStore{dsn: dsn + "&application_name=attackA"}, m, "")
	b := startClusterDaemon(t, sharedStore{dsn: dsn + "&application_name=attackB"}, m, "")
	ca := fixtures.Dial(t, a.desc.URL, a.token)
	cb := fixtures.Dial(t, b.desc.URL, b.token)
	ctx := context.Background()
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := ca.Call(ctx, "session.create", map[string]any{"cwd": t.TempDir()}, &snap); err != nil {
		t.Fatal(err)
	}
	sid := snap.SessionID
	if err := cb.Call(ctx, "session.resume", map[string]any{"session_id": sid, "after_seq": 0}, nil); err != nil {
		t.Fatal(err)
	}
	one := submit(t, ca, sid, "in-1", "one")
	cb.WaitEvent(t, clusterWait, turnCompleted(one.AdmissionID, "completed"))
	var owner cluster.DaemonID
	if err := b.db.Get(ctx, &owner, `SELECT owner_daemon FROM sessions WHERE session_id = ?`, sid); err != nil || owner != a.epoch {
		t.Fatalf("owner of the session = %d (%v), want A (%d)", owner, err, a.epoch)
	}

	// A's LISTEN connection goes down and cannot come back for a while
	// (the database refuses new connections; pooled ones stay).
	var dbname string
	if err := b.db.Get(ctx, &dbname, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	pg, err := pgtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, clusterWait, "A listens", func() bool { return len(listenPIDs(t, b, "attackA")) > 0 })
	if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allow := func() {
		if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS true`); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range listenPIDs(t, b, "attackA") {
		if err := pg.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			allow()
			t.Fatal(err)
		}
	}
	fixtures.Eventually(t, clusterWait, "A's LISTEN backend gone", func() bool { return len(listenPIDs(t, b, "attackA")) == 0 })

	two := submit(t, cb, sid, "in-2", "two")
	if two.Status != "queued" {
		allow()
		t.Fatalf("submit on B: %+v", two)
	}
	allow()
	fixtures.Eventually(t, clusterWait, "A listens again", func() bool { return len(listenPIDs(t, b, "attackA")) > 0 })
	cb.WaitEvent(t, clusterWait, turnCompleted(two.AdmissionID, "completed"))
	if _, _, daemon := (&clusterEnv{b: b}).admissionRow(t, two.AdmissionID); daemon != a.epoch {
		t.Fatalf("in-2 ran on daemon %d, want A (%d), the owner", daemon, a.epoch)
	}
	if n := m.ChatRequests(); n != 2 {
		t.Fatalf("the model got %d requests, want 2", n)
	}
	durableSeqs(t, cb, sid)
}

// logBuffer is a daemon's log, read by tests.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLoggedClusterDaemon is startClusterDaemon with its log kept.
func startLoggedClusterDaemon(t *testing.T, dsn string, m *fixtures.FakeModel) (*Daemon, *logBuffer) {
	t.Helper()
	home := t.TempDir()
	cfg := fixtures.FakeModelConfig(m, "cluster: {lease_ttl: 3}\n"+fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", dsn))
	if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	d, err := Start(context.Background(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d, logs
}

// TestAttackClusterCatchUpRetriesAfterReadError: a subscriber on B gets
// the events A commits through B's catch-up, which reads them from the
// events table when A announces them. When that read fails (the database
// is briefly unreachable from B: a restart, a failover, a dropped pool
// connection) the events must still reach the subscriber once the
// database is back, although nothing more happens in the session: a
// client must not wait forever for the turn.completed of a turn that
// completed.
func TestAttackClusterCatchUpRetriesAfterReadError(t *testing.T) {
	dsn := pgtest.DSN(t)
	pg, err := pgtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	g := fixtures.NewGate()
	t.Cleanup(g.Release)
	m := fixtures.NewFakeModel(t)
	m.On("one", fixtures.Reply{Text: "r1", Gate: g})
	a := startClusterDaemon(t, sharedStore{dsn: dsn + "&application_name=attackA"}, m, "")
	b, blog := startLoggedClusterDaemon(t, dsn+"&application_name=attackB", m)
	ca := fixtures.Dial(t, a.desc.URL, a.token)
	cb := fixtures.Dial(t, b.desc.URL, b.token)
	ctx := context.Background()
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := ca.Call(ctx, "session.create", map[string]any{"cwd": t.TempDir()}, &snap); err != nil {
		t.Fatal(err)
	}
	sid := snap.SessionID
	if err := cb.Call(ctx, "session.resume", map[string]any{"session_id": sid, "after_seq": 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := ca.Call(ctx, "session.resume", map[string]any{"session_id": sid, "after_seq": 0}, nil); err != nil {
		t.Fatal(err)
	}
	one := submit(t, ca, sid, "in-1", "one")
	<-g.Waiting()

	// B's pooled connections die and no new one is allowed; its LISTEN
	// connection stays, so B hears A's announcements.
	var dbname string
	if err := b.db.Get(ctx, &dbname, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allowed := false
	allow := func() {
		if !allowed {
			allowed = true
			if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS true`); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(allow)
	if err := pg.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'attackB' AND datname = $1 AND query NOT LIKE 'LISTEN%'`, dbname); err != nil {
		t.Fatal(err)
	}
	g.Release()
	last := ca.WaitEvent(t, clusterWait, turnCompleted(one.AdmissionID, "completed"))
	fixtures.Eventually(t, clusterWait, "B hears of A's last event", func() bool {
		b.hub.mu.Lock()
		defer b.hub.mu.Unlock()
		return b.hub.seen[sid] >= *last.Seq
	})
	// Make sure that B's catch-up has read (and failed to read) after the
	// last announcement: one more attempt, then a marker behind it in the
	// catch-up's queue.
	b.hub.remoteEvent(fmt.Sprintf("%s:%d", sid, *last.Seq))
	catchUpIdle := func() bool {
		b.hub.mu.Lock()
		defer b.hub.mu.Unlock()
		return len(b.hub.behind) == 0
	}
	fixtures.Eventually(t, clusterWait, "B's catch-up takes the session", catchUpIdle)
	b.hub.mu.Lock()
	b.hub.markBehindLocked("ses_marker")
	b.hub.mu.Unlock()
	fixtures.Eventually(t, clusterWait, "B's catch-up read the session", catchUpIdle)
	if !strings.Contains(blog.String(), "read events committed by another daemon") {
		t.Fatalf("B's catch-up did not fail while the database refused it; log:\n%s", blog.String())
	}
	allow()
	cb.WaitEvent(t, clusterWait, turnCompleted(one.AdmissionID, "completed"))
	durableSeqs(t, cb, sid)
}

// TestAttackClusterSameInputOnTwoDaemonsAtOnce: clients on A and on B
// submit the same input_id (a retry that went to both daemons behind a
// load balancer) at the same moment, round after round. Each round admits
// one input: both receipts name the same admission, one of them
// duplicate, and the model gets each text exactly once, in submit order.
func TestAttackClusterSameInputOnTwoDaemonsAtOnce(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) { m.Default(fixtures.Reply{Text: "ok"}) })
		const rounds = 12
		var last string
		for i := range rounds {
			input, text := fmt.Sprintf("in-%d", i), fmt.Sprintf("text %d", i)
			recs := make([]protocol.Receipt, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, c := range []*fixtures.Client{e.ca, e.cb} {
				wg.Go(func() {
					errs[j] = c.Call(context.Background(), protocol.MethodPromptSubmit,
						map[string]any{"session_id": e.sid, "input_id": input, "text": text}, &recs[j])
				})
			}
			wg.Wait()
			for j := range errs {
				if errs[j] != nil {
					t.Fatalf("round %d: submit on daemon %d: %v", i, j, errs[j])
				}
			}
			if recs[0].AdmissionID != recs[1].AdmissionID || recs[0].Duplicate == recs[1].Duplicate {
				t.Fatalf("round %d: receipts %+v and %+v, want one admission, one duplicate", i, recs[0], recs[1])
			}
			last = recs[0].AdmissionID
		}
		e.cb.WaitEvent(t, clusterWait, turnCompleted(last, "completed"))
		var n int
		if err := e.b.db.Get(context.Background(), &n, `SELECT count(*) FROM session_admissions WHERE target_session_id = ?`, e.sid); err != nil || n != rounds {
			t.Fatalf("%d admissions (%v), want %d", n, err, rounds)
		}
		reqs := e.m.Requests()
		if len(reqs) != rounds {
			var rows []struct {
				Seq     int64          `db:"seq"`
				Status  string         `db:"status"`
				Outcome sql.NullString `db:"outcome"`
				Error   sql.NullString `db:"error"`
			}
			e.b.db.Select(context.Background(), &rows, `SELECT seq, status, outcome, error FROM session_admissions WHERE target_session_id = ? ORDER BY seq`, e.sid)
			t.Fatalf("the model got %d requests, want %d; admissions %+v", len(reqs), rounds, rows)
		}
		for i, r := range reqs {
			if got, want := r.LastUserText(), fmt.Sprintf("text %d", i); got != want {
				t.Fatalf("request %d is %q, want %q", i, got, want)
			}
		}
		durableSeqs(t, e.cb, e.sid)
	})
}

// TestAttackClusterCreateSameRequestOnTwoDaemonsAtOnce: session.create
// with one request_id on both daemons at the same moment, many times:
// both answer with one session (never an error, never two sessions).
// On PostgreSQL (READ COMMITTED) both may miss each other's row in the
// look-up; the INSERT ... ON CONFLICT (create_request_id) DO NOTHING and
// the re-read make the loser answer with the winner's session. Seen
// failing without them: a unique violation on
// sessions_create_request_id_key reached the client.
func TestAttackClusterCreateSameRequestOnTwoDaemonsAtOnce(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) { m.Default(fixtures.Reply{Text: "ok"}) })
		cwd := t.TempDir()
		for i := range 25 {
			req := fmt.Sprintf("create-%d", i)
			snaps := make([]protocol.Snapshot, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for j, c := range []*fixtures.Client{e.ca, e.cb} {
				wg.Go(func() {
					<-start
					errs[j] = c.Call(context.Background(), protocol.MethodSessionCreate,
						map[string]any{"cwd": cwd, "request_id": req}, &snaps[j])
				})
			}
			close(start)
			wg.Wait()
			for j := range errs {
				if errs[j] != nil {
					t.Fatalf("round %d: session.create on daemon %d: %v", i, j, errs[j])
				}
			}
			if snaps[0].SessionID != snaps[1].SessionID {
				t.Fatalf("round %d: request_id %s created %s and %s, want one session", i, req, snaps[0].SessionID, snaps[1].SessionID)
			}
		}
		var n int
		if err := e.b.db.Get(context.Background(), &n, `SELECT count(*) FROM sessions WHERE create_request_id LIKE 'create-%'`); err != nil || n != 25 {
			t.Fatalf("%d sessions (%v), want 25", n, err)
		}
	})
}

// TestAttackClusterApproveTwiceThenInterruptElsewhere: a command's
// approval is answered on A (which runs the turn) and on B at the same
// moment: one answer resolves it, the other is already_resolved, and the
// command runs once. Then session.interrupt on B stops the turn on A and
// the command is killed (its process is gone), not left running.
func TestAttackClusterApproveTwiceThenInterruptElsewhere(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		cmd := `rm -f nothing.log; echo run >> runs; sleep 300` // rm -f: dangerous, gated
		args, _ := json.Marshal(map[string]string{"command": cmd})
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("go", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: string(args)}}},
				fixtures.Reply{Text: "done"})
		})
		rec := submit(t, e.ca, e.sid, "in-1", "go")
		opened := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
		var p struct {
			Prompt protocol.Prompt `json:"prompt"`
		}
		if err := json.Unmarshal(opened.Payload, &p); err != nil {
			t.Fatal(err)
		}
		res := make([]protocol.RespondResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, c := range []*fixtures.Client{e.ca, e.cb} {
			wg.Go(func() {
				errs[j] = c.Call(context.Background(), protocol.MethodApprovalRespond, map[string]any{"session_id": e.sid, "prompt_id": p.Prompt.PromptID,
					"execution_generation": p.Prompt.ExecutionGeneration, "choice": "once"}, &res[j])
			})
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("answers: %v / %v", errs[0], errs[1])
		}
		if got := []string{string(res[0].Status), string(res[1].Status)}; !(got[0] == "resolved" && got[1] == "already_resolved") && !(got[1] == "resolved" && got[0] == "already_resolved") {
			t.Fatalf("answers on A and B: %v, want one resolved and one already_resolved", got)
		}
		running := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "tool.running" })
		var rp struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(running.Payload, &rp); err != nil || rp.PID <= 0 {
			t.Fatalf("tool.running %s: %v", running.Payload, err)
		}
		var cwd string
		if err := e.b.db.Get(context.Background(), &cwd, `SELECT cwd FROM sessions WHERE session_id = ?`, e.sid); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, clusterWait, "the command runs", func() bool {
			_, err := os.Stat(filepath.Join(cwd, "runs"))
			return err == nil
		})
		var ir protocol.InterruptResult
		if err := e.cb.Call(context.Background(), protocol.MethodInterrupt, map[string]any{"session_id": e.sid}, &ir); err != nil {
			t.Fatal(err)
		}
		if ir.Interrupted == nil || *ir.Interrupted != rec.AdmissionID {
			t.Fatalf("interrupt on B = %+v", ir)
		}
		e.cb.WaitEvent(t, clusterWait, turnCompleted(rec.AdmissionID, "interrupted"))
		fixtures.Eventually(t, clusterWait, "the command's process is gone", func() bool {
			return syscall.Kill(rp.PID, 0) == syscall.ESRCH
		})
		b, err := os.ReadFile(filepath.Join(cwd, "runs"))
		if err != nil || strings.Count(string(b), "run") != 1 {
			t.Fatalf("the command ran %q times (%v), want once", b, err)
		}
		durableSeqs(t, e.cb, e.sid)
	})
}

// TestAttackClusterSplitBrainKillsTheCommand: A runs an approved command
// when it stops renewing its lease (paused, partitioned); B takes the
// session (the admission becomes unknown). A must kill its command and
// write nothing more of the turn: no tool.completed, no turn.completed, no
// message, and the model is not asked again.
func TestAttackClusterSplitBrainKillsTheCommand(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		cmd := `rm -f nothing.log; echo run >> runs; sleep 300` // rm -f: dangerous, gated
		args, _ := json.Marshal(map[string]string{"command": cmd})
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("go", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: string(args)}}},
				fixtures.Reply{Text: "done"})
		})
		ctx := context.Background()
		rec := submit(t, e.ca, e.sid, "in-1", "go")
		opened := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
		var p struct {
			Prompt protocol.Prompt `json:"prompt"`
		}
		if err := json.Unmarshal(opened.Payload, &p); err != nil {
			t.Fatal(err)
		}
		var res protocol.RespondResult
		if err := e.ca.Call(ctx, protocol.MethodApprovalRespond, map[string]any{"session_id": e.sid, "prompt_id": p.Prompt.PromptID,
			"execution_generation": p.Prompt.ExecutionGeneration, "choice": "once"}, &res); err != nil {
			t.Fatal(err)
		}
		running := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "tool.running" })
		var rp struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(running.Payload, &rp); err != nil || rp.PID <= 0 {
			t.Fatalf("tool.running %s: %v", running.Payload, err)
		}
		e.a.member.Halt()
		e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool {
			return ev.Type == "admission.updated" && ev.AdmissionID == rec.AdmissionID && string(mustField(ev.Payload, "status")) == `"unknown"`
		})
		fixtures.Eventually(t, clusterWait, "A's command is killed", func() bool { return syscall.Kill(rp.PID, 0) == syscall.ESRCH })
		fixtures.Eventually(t, clusterWait, "A's turn stops", func() bool { return e.a.sched.RunningCount() == 0 })
		var n int
		if err := e.b.db.Get(ctx, &n, `SELECT count(*) FROM events WHERE session_id = ? AND admission_id = ?
			AND type IN ('tool.completed', 'turn.completed', 'message.completed')`, e.sid, rec.AdmissionID); err != nil {
			t.Fatal(err)
		}
		if n != 1 { // the assistant message with the tool call, before the takeover
			t.Fatalf("%d message/tool/turn completions of the fenced turn, want 1 (A wrote after the takeover)", n)
		}
		if st, _, _ := e.admissionRow(t, rec.AdmissionID); st != "unknown" {
			t.Fatalf("admission %s, want unknown", st)
		}
		if got := e.m.ChatRequests(); got != 1 {
			t.Fatalf("the model got %d requests, want 1", got)
		}
		durableSeqs(t, e.cb, e.sid)
	})
}

// TestAttackClusterSubmitOnFullDaemonRunsOnTheFreeOne: A runs as many
// turns as it may (limits.max_concurrent_turns: 1); an input submitted on
// A to a new, unowned session must not wait for A's slot while B is idle:
// B takes the session and runs it, once, while A's turn still runs.
func TestAttackClusterSubmitOnFullDaemonRunsOnTheFreeOne(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		g := fixtures.NewGate()
		t.Cleanup(g.Release)
		m := fixtures.NewFakeModel(t)
		m.On("busy", fixtures.Reply{Text: "r1", Gate: g})
		m.On("other", fixtures.Reply{Text: "r2"})
		a := startClusterDaemon(t, st, m, "limits: {max_concurrent_turns: 1}\n")
		b := startClusterDaemon(t, st, m, "limits: {max_concurrent_turns: 1}\n")
		ca := fixtures.Dial(t, a.desc.URL, a.token)
		ctx := context.Background()
		var s1, s2 protocol.Snapshot
		if err := ca.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir()}, &s1); err != nil {
			t.Fatal(err)
		}
		if err := ca.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir()}, &s2); err != nil {
			t.Fatal(err)
		}
		if err := ca.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": s2.SessionID, "after_seq": 0}, &protocol.Snapshot{}); err != nil {
			t.Fatal(err)
		}
		one := submit(t, ca, s1.SessionID, "in-1", "busy")
		<-g.Waiting()
		if _, _, daemon := (&clusterEnv{b: b}).admissionRow(t, one.AdmissionID); daemon != a.epoch {
			t.Fatalf("the first turn runs on daemon %d, want A (%d)", daemon, a.epoch)
		}
		two := submit(t, ca, s2.SessionID, "in-2", "other")
		ca.WaitEvent(t, clusterWait, turnCompleted(two.AdmissionID, "completed"))
		if _, _, daemon := (&clusterEnv{b: b}).admissionRow(t, two.AdmissionID); daemon != b.epoch {
			t.Fatalf("the second turn ran on daemon %d, want B (%d)", daemon, b.epoch)
		}
		if n := len(m.RequestsWithLastUser("other")); n != 1 {
			t.Fatalf("the model got %q %d times", "other", n)
		}
		g.Release()
		ca.WaitEvent(t, clusterWait, turnCompleted(one.AdmissionID, "completed"))
	})
}
