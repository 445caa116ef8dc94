package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/protocol"
)

// Two daemons in this process, each with its own home, sharing one
// database: each has its own store (connections, lease, event sink), and
// they meet only through the store and the bus. Every test runs twice: on
// one SQLite file (two writers, the in-process bus) and on one PostgreSQL
// database (LISTEN/NOTIFY, SERIALIZABLE transactions).

const clusterWait = 30 * time.Second

// store is where the daemons of one test meet: a SQLite file or a
// PostgreSQL DSN.
type sharedStore struct{ path, dsn string }

func bothStores(t *testing.T, run func(t *testing.T, st sharedStore)) {
	t.Run("sqlite", func(t *testing.T) { run(t, sharedStore{path: filepath.Join(t.TempDir(), "state.db")}) })
	t.Run("postgres", func(t *testing.T) { run(t, sharedStore{dsn: pgtest.DSN(t)}) })
}

func startClusterDaemon(t *testing.T, st sharedStore, m *fixtures.FakeModel, extra string) *Daemon {
	t.Helper()
	home := t.TempDir()
	if st.dsn != "" {
		extra += fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", st.dsn)
	}
	cfg := fixtures.FakeModelConfig(m, "cluster: {lease_ttl: 3}\n"+extra)
	if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Options{Home: home, statePath: st.path,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

type clusterEnv struct {
	m    *fixtures.FakeModel
	a, b *Daemon
	ca   *fixtures.Client
	cb   *fixtures.Client
	sid  string
}

func newClusterEnv(t *testing.T, st sharedStore, script func(m *fixtures.FakeModel)) *clusterEnv {
	t.Helper()
	m := fixtures.NewFakeModel(t)
	if script != nil {
		script(m)
	}
	e := &clusterEnv{m: m}
	e.a = startClusterDaemon(t, st, m, "")
	e.b = startClusterDaemon(t, st, m, "")
	e.ca = fixtures.Dial(t, e.a.desc.URL, e.a.token)
	e.cb = fixtures.Dial(t, e.b.desc.URL, e.b.token)
	var snap protocol.Snapshot
	if err := e.ca.Call(context.Background(), protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir(), "toolsets": []string{"terminal", "clarify"}}, &snap); err != nil {
		t.Fatal(err)
	}
	e.sid = snap.SessionID
	// The client of B follows the session from the start.
	if err := e.cb.Call(context.Background(), protocol.MethodSessionResume, map[string]any{"session_id": e.sid, "after_seq": 0}, &snap); err != nil {
		t.Fatal(err)
	}
	return e
}

func submit(t *testing.T, c *fixtures.Client, sid, input, text string) protocol.Receipt {
	t.Helper()
	var r protocol.Receipt
	if err := c.Call(context.Background(), protocol.MethodPromptSubmit, map[string]any{"session_id": sid, "input_id": input, "text": text}, &r); err != nil {
		t.Fatalf("submit %s: %v", input, err)
	}
	return r
}

// admissionDaemon is the daemon that started the admission (owner_epoch).
func (e *clusterEnv) admissionRow(t *testing.T, id string) (status, outcome string, daemon cluster.DaemonID) {
	t.Helper()
	var r struct {
		Status  string            `db:"status"`
		Outcome *string           `db:"outcome"`
		Daemon  *cluster.DaemonID `db:"owner_epoch"`
	}
	if err := e.b.db.Get(context.Background(), &r, `SELECT status, outcome, owner_epoch FROM session_admissions WHERE admission_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != nil {
		outcome = *r.Outcome
	}
	if r.Daemon != nil {
		daemon = *r.Daemon
	}
	return r.Status, outcome, daemon
}

// durableSeqs checks that c got the session's durable events in order,
// each once, without a gap, and returns how many.
func durableSeqs(t *testing.T, c *fixtures.Client, sid string) int {
	t.Helper()
	var last int64
	n := 0
	for _, ev := range c.Events() {
		if ev.SessionID != sid || ev.Seq == nil {
			continue
		}
		if *ev.Seq != last+1 {
			t.Fatalf("durable event seq %d after %d (%s): out of order, duplicated or missing", *ev.Seq, last, ev.Type)
		}
		last = *ev.Seq
		n++
	}
	return n
}

func turnCompleted(id, outcome string) func(fixtures.Event) bool {
	return func(ev fixtures.Event) bool {
		if ev.Type != "turn.completed" || ev.AdmissionID != id {
			return false
		}
		var p struct {
			Outcome string `json:"outcome"`
		}
		json.Unmarshal(ev.Payload, &p)
		return p.Outcome == outcome
	}
}

// One FIFO across daemons: an input submitted on B runs on A, the owner,
// after A's running turn; a client of B sees every event of both turns, in
// order and once each, though A committed them.
func TestClusterSubmitOnAnyDaemonOneFIFOAndEventsEverywhere(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		g := fixtures.NewGate()
		t.Cleanup(g.Release)
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("one", fixtures.Reply{Text: "r1", Gate: g})
			m.On("two", fixtures.Reply{Text: "r2"})
		})
		one := submit(t, e.ca, e.sid, "in-1", "one")
		<-g.Waiting()
		two := submit(t, e.cb, e.sid, "in-2", "two")
		if two.Status != "queued" {
			t.Fatalf("submit on B while A runs: %+v", two)
		}
		g.Release()
		e.cb.WaitEvent(t, clusterWait, turnCompleted(two.AdmissionID, "completed"))
		for _, id := range []string{one.AdmissionID, two.AdmissionID} {
			if st, out, daemon := e.admissionRow(t, id); st != "terminal" || out != "completed" || daemon != e.a.epoch {
				t.Fatalf("admission %s: %s/%s on daemon %d, want completed on A (%d)", id, st, out, daemon, e.a.epoch)
			}
		}
		if n := durableSeqs(t, e.cb, e.sid); n < 8 {
			t.Fatalf("B's client got %d durable events", n)
		}
		// Replay by after_seq on B gives the same events.
		c2 := fixtures.Dial(t, e.b.desc.URL, e.b.token)
		var snap protocol.Snapshot
		if err := c2.Call(context.Background(), protocol.MethodSessionResume, map[string]any{"session_id": e.sid, "after_seq": 0}, &snap); err != nil {
			t.Fatal(err)
		}
		if len(snap.Events) != int(snap.LastSeq) || snap.LastSeq < 8 {
			t.Fatalf("replay by after_seq on B: %d events, last_seq %d", len(snap.Events), snap.LastSeq)
		}
		for i, ev := range snap.Events {
			if ev.Seq == nil || *ev.Seq != int64(i+1) {
				t.Fatalf("replayed event %d has seq %v", i, ev.Seq)
			}
		}
	})
}

// An answer given on B reaches the prompt that A's turn waits on.
func TestClusterAnswerOnAnotherDaemon(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("ask", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: `{"question":"which?","choices":["a","b"]}`}}},
				fixtures.Reply{Text: "thanks"})
		})
		rec := submit(t, e.ca, e.sid, "in-1", "ask")
		opened := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
		var p struct {
			Prompt protocol.Prompt `json:"prompt"`
		}
		if err := json.Unmarshal(opened.Payload, &p); err != nil {
			t.Fatal(err)
		}
		var res protocol.RespondResult
		if err := e.cb.Call(context.Background(), protocol.MethodClarifyRespond, map[string]any{"session_id": e.sid, "prompt_id": p.Prompt.PromptID,
			"execution_generation": p.Prompt.ExecutionGeneration, "answer": "a"}, &res); err != nil || res.Status != "resolved" {
			t.Fatalf("clarify.respond on B: %+v %v", res, err)
		}
		e.cb.WaitEvent(t, clusterWait, turnCompleted(rec.AdmissionID, "completed"))
	})
}

// session.interrupt on B stops the turn that runs on A.
func TestClusterInterruptOnAnotherDaemon(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		g := fixtures.NewGate()
		t.Cleanup(g.Release)
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) { m.On("one", fixtures.Reply{Text: "r1", Gate: g}) })
		rec := submit(t, e.ca, e.sid, "in-1", "one")
		<-g.Waiting()
		var res protocol.InterruptResult
		if err := e.cb.Call(context.Background(), protocol.MethodInterrupt, map[string]any{"session_id": e.sid}, &res); err != nil {
			t.Fatal(err)
		}
		if res.Interrupted == nil || *res.Interrupted != rec.AdmissionID {
			t.Fatalf("interrupt on B = %+v", res)
		}
		if st, out, _ := e.admissionRow(t, rec.AdmissionID); st != "terminal" || out != "interrupted" {
			t.Fatalf("admission %s/%s", st, out)
		}
	})
}

// A graceful stop of A hands the session over at once: its running turn
// settles interrupted and the queued input runs on B.
func TestClusterGracefulHandover(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		g := fixtures.NewGate()
		t.Cleanup(g.Release)
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("one", fixtures.Reply{Text: "r1", Gate: g})
			m.On("two", fixtures.Reply{Text: "r2"})
		})
		one := submit(t, e.ca, e.sid, "in-1", "one")
		<-g.Waiting()
		two := submit(t, e.ca, e.sid, "in-2", "two")
		if ci := clusterInfo(t, e.ca); ci.LiveDaemons != 2 || ci.OwnedSessions != 1 || ci.LeaseTTL != 3 {
			t.Fatalf("A's daemon.info cluster = %+v", ci)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		e.cb.WaitEvent(t, clusterWait, turnCompleted(two.AdmissionID, "completed"))
		if st, out, _ := e.admissionRow(t, one.AdmissionID); st != "terminal" || out != "interrupted" {
			t.Fatalf("A's turn: %s/%s, want interrupted", st, out)
		}
		if _, _, daemon := e.admissionRow(t, two.AdmissionID); daemon != e.b.epoch {
			t.Fatalf("the queued input ran on daemon %d, want B (%d)", daemon, e.b.epoch)
		}
		if ci := clusterInfo(t, e.cb); ci.LiveDaemons != 1 || ci.OwnedSessions != 1 {
			t.Fatalf("B's daemon.info cluster after A stopped = %+v", ci)
		}
		durableSeqs(t, e.cb, e.sid)
	})
}

// A stops renewing its lease (paused, partitioned, dead) while its turn
// waits on a prompt: after the lease, B takes the session with the boot
// rules (the turn becomes unknown, the prompt closes fenced and its id
// answers stale_generation), and A's turn stops without writing more.
func TestClusterTakeoverAfterTheLease(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("ask", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: `{"question":"which?","choices":["a","b"]}`}}},
				fixtures.Reply{Text: "thanks"})
		})
		rec := submit(t, e.ca, e.sid, "in-1", "ask")
		opened := e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
		var p struct {
			Prompt protocol.Prompt `json:"prompt"`
		}
		json.Unmarshal(opened.Payload, &p)
		e.a.member.Halt()
		e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool {
			return ev.Type == "admission.updated" && ev.AdmissionID == rec.AdmissionID && json.Valid(ev.Payload) &&
				string(mustField(ev.Payload, "status")) == `"unknown"`
		})
		e.cb.WaitEvent(t, clusterWait, func(ev fixtures.Event) bool {
			return ev.Type == "prompt.closed" && string(mustField(ev.Payload, "resolution")) == `"fenced"`
		})
		_, rerr, err := e.cb.CallRaw(context.Background(), protocol.MethodClarifyRespond, map[string]any{"session_id": e.sid, "prompt_id": p.Prompt.PromptID,
			"execution_generation": p.Prompt.ExecutionGeneration, "answer": "a"})
		if err != nil || rerr == nil || rerr.Reason() != "stale_generation" {
			t.Fatalf("answer after the takeover: %v %v, want stale_generation", rerr, err)
		}
		fixtures.Eventually(t, clusterWait, "A's turn stops", func() bool { return e.a.sched.RunningCount() == 0 })
		if st, _, _ := e.admissionRow(t, rec.AdmissionID); st != "unknown" {
			t.Fatalf("admission is %s after A's turn stopped, want unknown (A wrote after the takeover)", st)
		}
		if n := e.m.ChatRequests(); n != 1 {
			t.Fatalf("the model got %d requests; the lost turn must not go on", n)
		}
		durableSeqs(t, e.cb, e.sid)
	})
}

func clusterInfo(t *testing.T, c *fixtures.Client) protocol.ClusterInfo {
	t.Helper()
	var info protocol.DaemonInfo
	if err := c.Call(context.Background(), protocol.MethodDaemonInfo, map[string]any{}, &info); err != nil || info.Cluster == nil {
		t.Fatalf("daemon.info: %+v %v", info, err)
	}
	return *info.Cluster
}

func mustField(raw json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	return m[key]
}

// The self-fence: a daemon that could not renew its lease in time stops
// its turns (their commands are killed with them) and claims nothing until
// a renewal succeeds; nobody took its sessions meanwhile, so the stopped
// turn settles interrupted and the queue goes on afterwards.
func TestClusterSelfFenceStopsTurnsUntilRenewed(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		g := fixtures.NewGate()
		t.Cleanup(g.Release)
		e := newClusterEnv(t, st, func(m *fixtures.FakeModel) {
			m.On("one", fixtures.Reply{Text: "r1", Gate: g})
			m.On("two", fixtures.Reply{Text: "r2"})
		})
		one := submit(t, e.ca, e.sid, "in-1", "one")
		<-g.Waiting()
		e.a.onLeaseLost()
		e.ca.WaitEvent(t, clusterWait, turnCompleted(one.AdmissionID, "interrupted"))
		two := submit(t, e.ca, e.sid, "in-2", "two")
		if e.a.sched.FreeSlots() != 0 {
			t.Fatal("a fenced daemon offers capacity")
		}
		if st, _, _ := e.admissionRow(t, two.AdmissionID); st != "queued" {
			t.Fatalf("a fenced daemon started %s (%s)", two.AdmissionID, st)
		}
		e.a.onLeaseRenewed()
		e.ca.WaitEvent(t, clusterWait, turnCompleted(two.AdmissionID, "completed"))
		if _, _, daemon := e.admissionRow(t, two.AdmissionID); daemon != e.a.epoch {
			t.Fatalf("the queue went on on daemon %d, want A (%d), which still owns the session", daemon, e.a.epoch)
		}
	})
}

// A session deleted through A is forgotten by B's subscriptions too.
func TestClusterDeleteOnAnotherDaemonDropsSubscribers(t *testing.T) {
	bothStores(t, func(t *testing.T, st sharedStore) {
		e := newClusterEnv(t, st, nil)
		subscribed := func() bool {
			e.b.hub.mu.Lock()
			defer e.b.hub.mu.Unlock()
			return len(e.b.hub.subs[e.sid]) > 0
		}
		if !subscribed() {
			t.Fatal("B's client is not subscribed")
		}
		var res protocol.SessionDeleteResult
		if err := e.ca.Call(context.Background(), protocol.MethodSessionDelete, map[string]any{"session_id": e.sid}, &res); err != nil || !res.Deleted {
			t.Fatalf("delete on A: %+v %v", res, err)
		}
		fixtures.Eventually(t, clusterWait, "B drops the deleted session's subscribers", func() bool { return !subscribed() })
	})
}
