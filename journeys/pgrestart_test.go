package journeys

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
)

// unavailableBound is how long a call that needs the store may take while
// the PostgreSQL server is down before it must have answered: the store's
// connect attempts and retries, plus room for -race on two shared cores. A
// bound on "a clear error, not a hang".
const unavailableBound = 20 * time.Second

// TestClusterSurvivesPostgresRestart restarts the PostgreSQL server (a fast
// shutdown, then the same data directory again) under two daemons, with a
// turn in flight on daemon A (held in the fake model) and a follower queued
// through B. While the server is down, prompt.submit on either daemon is
// refused with storage_unavailable within a bound, and both processes stay
// up. Once it is back, without restarting any daemon: the held turn
// completes and B's subscriber receives its events (B's LISTEN connection
// reconnected and resynchronised), the follower runs, the inputs refused
// during the outage are admitted as new when sent again, new submits
// succeed through both daemons, every acknowledged input reaches the model
// exactly once, nothing is left started or unknown, and B's subscriber got
// exactly the stored events, in order (docs/scale-out.md, "A restart of the
// PostgreSQL server").
//
// In the second case the server stays down until daemon A fenced itself
// (past 3/4 of lease_ttl 2): the held turn then ends interrupted ("this
// daemon lost the session's lease") once the server is back, and the rest
// is the same.
func TestClusterSurvivesPostgresRestart(t *testing.T) {
	t.Run("short", func(t *testing.T) { pgRestartJourney(t, 10, false) })
	t.Run("past the self-fence", func(t *testing.T) { pgRestartJourney(t, 2, true) })
}

func pgRestartJourney(t *testing.T, ttl int, pastFence bool) {
	pg, err := pgtest.Start(pgtest.Options{}) // private: restarting the shared server would hit other tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	dsn := pg.NewDatabase(t)

	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	m.On("held on A", fixtures.Reply{Text: "answer held across the restart", Gate: g})
	m.Default(fixtures.Reply{Text: "fine"})
	// ttl 10 (the default): the restart takes well under the 7.5 s after
	// which a daemon fences itself, so ownership does not move. ttl 2 with
	// pastFence: the server stays down until A fenced itself (1.5 s).
	cluster := fixtures.NewCluster(t, fixtures.ClusterOptions{DSN: dsn, LeaseTTL: ttl, Config: fixtures.FakeModelConfig(m, "")})
	a := cluster.Start(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{}).SessionID
	held := submit(t, ca, s, "held", "held on A")
	waitParked(t, g, "the turn on A")
	b := cluster.Start(t)
	cb := b.Dial(t)
	snap := resume(t, cb, s)
	follower := submit(t, cb, s, "follower", "queued through B")
	if follower.Status != "queued" {
		t.Fatalf("follower receipt %+v, want queued behind the held turn", follower)
	}
	if owner, o := cluster.Owner(t, s); owner != a {
		t.Fatalf("the session is owned by daemon id %v, want A (boot epoch %d)", o.DaemonID, a.Desc.BootEpoch)
	}

	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name  string
		c     *fixtures.Client
		input string
	}{{"A", ca, "during-a"}, {"B", cb, "during-b"}} {
		ctx, cancel := context.WithTimeout(context.Background(), unavailableBound)
		start := time.Now()
		var r receipt
		err := side.c.Call(ctx, "prompt.submit", map[string]any{"session_id": s, "input_id": side.input, "text": "sent while down " + side.input}, &r)
		cancel()
		if err == nil {
			t.Fatalf("submit through %s while PostgreSQL is down was acknowledged: %+v", side.name, r)
		}
		if reason := fixtures.ErrorReason(err); reason != "storage_unavailable" {
			t.Fatalf("submit through %s while PostgreSQL is down after %v: %v (reason %q), want storage_unavailable",
				side.name, time.Since(start), err, reason)
		}
	}
	for _, d := range []*fixtures.Daemon{a, b} {
		if !d.Running() {
			t.Fatalf("daemon pid %d exited while PostgreSQL was down; stderr:\n%s", d.PID(), d.Stderr())
		}
	}
	if pastFence {
		fixtures.Eventually(t, wait, "daemon A to fence itself", func() bool {
			return strings.Contains(a.Stderr(), "(self-fencing)")
		})
	}
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}

	// Back, and the turn still held: the inputs refused during the outage
	// were not admitted, so sent again they are new; new inputs go through
	// both daemons. The first call after the server is back must succeed:
	// a pooled connection the restart killed is the store's problem, not
	// the client's (no retry here).
	var after []receipt
	for _, x := range []struct {
		c           *fixtures.Client
		input, text string
	}{
		{ca, "during-a", "sent while down during-a"},
		{cb, "during-b", "sent while down during-b"},
		{ca, "after-a", "after the restart through A"},
		{cb, "after-b", "after the restart through B"},
	} {
		var r receipt
		if err := atkCall(x.c, "prompt.submit", map[string]any{"session_id": s, "input_id": x.input, "text": x.text}, &r); err != nil {
			t.Fatalf("submit %s once PostgreSQL is back: %v", x.input, err)
		}
		if r.Duplicate || r.Status != "queued" {
			t.Fatalf("%s after the restart: %+v, want a new admission queued behind the held turn", x.input, r)
		}
		after = append(after, r)
	}
	// The held turn ends on A (completed, or interrupted past the
	// self-fence), and B's subscriber sees it and the follower.
	g.Release()
	wantHeld := "completed"
	if pastFence {
		wantHeld = "interrupted"
	}
	if !pastFence {
		if out := waitTurn(t, cb, held.AdmissionID); out != wantHeld {
			t.Fatalf("B's client saw the held turn end %s, want %s", out, wantHeld)
		}
	} else {
		// A stopped the turn when it fenced itself. Once the server is back
		// either A still owns the session and settles the turn interrupted
		// ("this daemon lost the session's lease"), or B renewed first and
		// took the session from A, whose lease had run out: the turn is then
		// unknown (the takeover rules) and the operator resolves it, which
		// also ends it interrupted. Nothing else is acceptable.
		db := cluster.DB(t)
		var row fixtures.AdmissionRow
		fixtures.Eventually(t, wait, "the held turn to settle or become unknown", func() bool {
			row = admissionRow(t, fixtures.Admissions(t, db, s), held.AdmissionID)
			return row.Status == "terminal" || row.Status == "unknown"
		})
		if row.Status == "unknown" {
			var r receipt
			if err := atkCall(cb, "prompt.resolve_unknown", map[string]any{"session_id": s, "admission_id": held.AdmissionID,
				"execution_generation": row.ExecutionGeneration.Int64}, &r); err != nil {
				t.Fatalf("resolve the held turn left unknown by the takeover: %v", err)
			}
		}
		fixtures.Eventually(t, wait, "the held turn to end interrupted", func() bool {
			row = admissionRow(t, fixtures.Admissions(t, db, s), held.AdmissionID)
			return row.Status == "terminal"
		})
		wantRow(t, row, "terminal", wantHeld)
	}
	if out := waitTurn(t, cb, follower.AdmissionID); out != "completed" {
		t.Fatalf("B's client saw the follower end %s, want completed", out)
	}
	for _, r := range after {
		if out := waitTurn(t, cb, r.AdmissionID); out != "completed" {
			t.Fatalf("%s after the restart: %s", r.InputID, out)
		}
	}
	// A session created and run on B after the restart.
	s2 := createSession(t, cb, map[string]any{}).SessionID
	r2 := submit(t, cb, s2, "b-own", "a new session on B")
	if out := waitTurn(t, cb, r2.AdmissionID); out != "completed" {
		t.Fatalf("the new session's turn: %s", out)
	}

	db := cluster.DB(t) // opened after the restart
	rows := waitAllTerminal(t, db, s)
	if len(rows) != 6 {
		t.Fatalf("%d admissions, want 6 (held, follower, the two refused inputs sent again, two new): %+v", len(rows), rows)
	}
	for _, r := range rows {
		want := "completed"
		if r.AdmissionID == held.AdmissionID {
			want = wantHeld
		}
		wantRow(t, r, "terminal", want)
	}
	for _, text := range []string{"held on A", "queued through B", "sent while down during-a", "sent while down during-b",
		"after the restart through A", "after the restart through B", "a new session on B"} {
		if n := len(m.RequestsWithLastUser(text)); n != 1 {
			t.Fatalf("%q reached the model %d times, want once", text, n)
		}
	}
	sameEvents(t, "B's subscriber across the restart", durableEvents(cb.Events(), s), storedEventsAfter(t, db, s, snap.LastSeq))
	for _, d := range []*fixtures.Daemon{a, b} {
		if !d.Running() {
			t.Fatalf("daemon pid %d exited; stderr:\n%s", d.PID(), d.Stderr())
		}
		for _, line := range strings.Split(d.Stderr(), "\n") {
			if strings.Contains(line, "panic:") || strings.Contains(line, "DATA RACE") {
				t.Fatalf("daemon pid %d: %s", d.PID(), line)
			}
		}
		if testing.Verbose() {
			t.Logf("daemon pid %d stderr:\n%s", d.PID(), d.Stderr())
		}
	}
}
