package prompts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/store"
)

// Two daemons share the store: daemon 1 runs the turn of s1/a1 and waits on
// its prompt; a client connected to daemon 2 answers it. Daemon 2 judges
// the answer from the store (daemon 1's lease on the database's clock
// included), and daemon 1's Ask gets it through the bus.

func (e *env) daemon(t *testing.T, epoch, leaseMS int64) {
	var n int
	if err := e.db.Get(context.Background(), &n, `SELECT count(*) FROM boot_epochs WHERE epoch = ?`, epoch); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		var got int64
		if err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
			return tx.Get(&got, `INSERT INTO boot_epochs (pid, version, started_at) VALUES (1, 'test', ?) RETURNING epoch`, store.Now())
		}); err != nil || got != epoch {
			t.Fatalf("boot epoch %d, want %d (%v)", got, epoch, err)
		}
	}
	e.exec(t, `UPDATE boot_epochs SET lease_expires_ms = `+cluster.DialectOf(e.db).NowMS()+` + ? WHERE epoch = ?`, leaseMS, epoch)
}

// twoDaemons returns daemon 2's manager; daemon 1 (e.m) polls its waiters
// when woken, as the daemon's wake loop does.
func twoDaemons(t *testing.T, e *env) *prompts.Manager {
	e.daemon(t, 1, 60_000)
	e.daemon(t, 2, 60_000)
	bus1, bus2 := cluster.NewBus(e.db), cluster.NewBus(e.db)
	e.m.SetCluster(bus1)
	m2 := prompts.NewManager(e.db, 2, liveFunc(e.isLive), nil)
	m2.SetCluster(bus2)
	stop := bus1.Listen(cluster.ChannelSessions, func(sessionID string) {
		go e.m.Poll(context.Background(), sessionID)
	})
	t.Cleanup(func() { stop(); bus1.Close(); bus2.Close() })
	return m2
}

func TestAnswerOnAnotherDaemonReachesTheOwner(t *testing.T) {
	e := setup(t)
	m2 := twoDaemons(t, e)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	st, err := m2.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if err != nil || st != prompts.StatusResolved {
		t.Fatalf("answer on daemon 2: %q %v", st, err)
	}
	res := wait(t, done)
	if res.err != nil || res.out.Resolution != prompts.ResolutionAnswered || string(res.out.Response) != `{"choice":"once"}` {
		t.Fatalf("daemon 1's Ask = %+v %v", res.out, res.err)
	}
	// A second answer, on either daemon, finds it resolved.
	if st, err := m2.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("deny")}); err != nil || st != prompts.StatusAlreadyResolved {
		t.Fatalf("second answer: %q %v", st, err)
	}
}

func TestAnswerOnAnotherDaemonUsesTheDurableState(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(t *testing.T, e *env)
	}{
		"owner's lease expired": {func(t *testing.T, e *env) { e.daemon(t, 1, -1) }},
		"interrupt requested": {func(t *testing.T, e *env) {
			e.exec(t, `UPDATE sessions SET interrupt_generation = 1 WHERE session_id = 's1'`)
		}},
		"session taken": {func(t *testing.T, e *env) { e.exec(t, `UPDATE sessions SET owner_daemon = 3 WHERE session_id = 's1'`) }},
		"turn settled": {func(t *testing.T, e *env) {
			e.exec(t, `UPDATE session_admissions SET status = 'terminal', outcome = 'completed' WHERE admission_id = 'a1'`)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			e := setup(t)
			m2 := twoDaemons(t, e)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			id, done := e.ask(t, ctx, e.m, approval("s1", "a1", 1, "p"))
			tc.setup(t, e)
			_, err := m2.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
			if !errors.Is(err, prompts.ErrStaleGeneration) {
				t.Fatalf("err = %v, want ErrStaleGeneration", err)
			}
			if r := e.row(t, id); r.Status != "open" || r.Response != nil {
				t.Fatalf("stored = %+v", r)
			}
			cancel()
			wait(t, done)
		})
	}
}

// A takeover closes the prompts of the daemon it replaces, and their ids
// answer stale_generation on every daemon.
func TestFenceSessionClosesOtherDaemonsPrompts(t *testing.T) {
	e := setup(t)
	m2 := twoDaemons(t, e)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error { return m2.FenceSession(tx, "s1") }); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, done); res.out.Resolution != prompts.ResolutionFenced {
		t.Fatalf("Ask = %+v", res.out)
	}
	for _, m := range []*prompts.Manager{e.m, m2} {
		if _, err := m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")}); !errors.Is(err, prompts.ErrStaleGeneration) {
			t.Fatalf("answer after the takeover: %v", err)
		}
	}
}
