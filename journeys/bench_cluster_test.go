package journeys

// Figures of issue 17 (docs/performance.md, "Scale-out on PostgreSQL"):
// durable admissions/s with 64 clients over 1, 2 and 3 daemons on one
// PostgreSQL, the daemon's overhead per turn on PostgreSQL, and the time a
// client of a surviving daemon waits for the takeover after a SIGKILL.
// The PostgreSQL server is a private one (fixtures/pgtest) with fsync and
// full_page_writes on and synchronous_commit on (its defaults), so every
// acknowledged admission is durable as in production.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/rpc"
)

var durablePG struct {
	once sync.Once
	c    *pgtest.Cluster
	err  error
}

// benchDSN returns a fresh database on a durable private PostgreSQL server
// shared by the benchmarks of this process (stopped when the last
// benchmark using it ends: at process exit the server dies with its
// parent).
func benchDSN(b *testing.B) string {
	b.Helper()
	durablePG.once.Do(func() {
		durablePG.c, durablePG.err = pgtest.Start(pgtest.Options{Durable: true})
		if durablePG.err == nil {
			stopAtExit = append(stopAtExit, durablePG.c.Stop)
		}
	})
	if durablePG.err != nil {
		b.Fatal(durablePG.err)
	}
	return durablePG.c.NewDatabase(b)
}

// stopAtExit is run by TestMain after the tests and benchmarks.
var stopAtExit []func()

// benchAdmissionConfig parks every turn in the model, so that the
// admissions of a session queue behind its first one and the figure is the
// admission path alone (as BenchmarkPromptSubmitParallel in ./daemon/).
const benchAdmissionConfig = "limits: {max_concurrent_turns: 1000, max_in_flight: 1024, max_queued_per_session: 1000000, max_connections: 4096}"

// BenchmarkClusterAdmissions: 64 clients, each on its own session, call
// prompt.submit in a loop (each call waits for its durable receipt); the
// clients are spread round-robin over the daemons. Sub-benchmarks: one
// daemon on SQLite (the baseline of this harness), then 1, 2 and 3 daemons
// on one PostgreSQL. Metrics: admissions/s, and reruns-% (the daemons'
// write transactions run again after a deadlock or serialization failure,
// per 100 committed: sessiond_store_transaction_reruns_total over
// sessiond_store_transactions_total, during the timed loop).
//
//	go test -run '^$' -bench BenchmarkClusterAdmissions -benchtime 20000x ./journeys/
func BenchmarkClusterAdmissions(b *testing.B) {
	b.Run("sqlite/daemons=1", func(b *testing.B) {
		m := fixtures.NewFakeModel(b)
		benchParkEveryTurn(b, m)
		d := fixtures.StartDaemon(b, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, benchAdmissionConfig)})
		benchAdmissions(b, []*fixtures.Daemon{d})
	})
	for n := 1; n <= 3; n++ {
		b.Run(fmt.Sprintf("postgres/daemons=%d", n), func(b *testing.B) {
			m := fixtures.NewFakeModel(b)
			benchParkEveryTurn(b, m)
			cl := fixtures.NewCluster(b, fixtures.ClusterOptions{DSN: benchDSN(b), LeaseTTL: 10,
				Config: fixtures.FakeModelConfig(m, benchAdmissionConfig)})
			for range n {
				cl.Start(b)
			}
			benchAdmissions(b, cl.Daemons())
		})
	}
}

func benchParkEveryTurn(b *testing.B, m *fixtures.FakeModel) {
	park := fixtures.NewGate()
	b.Cleanup(park.Release)
	m.Default(fixtures.Reply{Text: "parked", Gate: park})
}

func benchAdmissions(b *testing.B, daemons []*fixtures.Daemon) {
	const clients = 64
	// The production client (package rpc, as sessionctl and sessiond-load
	// use it): the fixtures' client validates every frame against the
	// schema, which would take the CPU the daemons need.
	ctx := context.Background()
	cs := make([]*rpc.Client, clients)
	sessions := make([]string, clients)
	cwd := b.TempDir()
	for i := range cs {
		d := daemons[i%len(daemons)]
		c, err := rpc.Dial(ctx, d.Desc.URL, rpc.DialOptions{Token: d.Desc.Token, OnNotification: func(rpc.Notification) {}})
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
		var s snapshot
		if err := c.Call(ctx, "session.create", map[string]any{"cwd": cwd}, &s); err != nil {
			b.Fatal(err)
		}
		sessions[i] = s.SessionID
	}
	storeTxs := func() (txs, reruns float64) {
		for _, d := range daemons {
			m := scrape(b, strings.TrimSuffix(strings.Replace(d.Desc.URL, "ws://", "http://", 1), "/rpc")+"/metrics", d.Desc.Token)
			txs += m["sessiond_store_transactions_total"]
			reruns += m["sessiond_store_transaction_reruns_total"]
		}
		return txs, reruns
	}
	tx0, re0 := storeTxs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range cs {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if err := cs[i].Call(ctx, "prompt.submit", map[string]any{"session_id": sessions[i], "input_id": fmt.Sprintf("p-%d", n), "text": "benchmark input"}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "admissions/s")
	if tx1, re1 := storeTxs(); tx1 > tx0 {
		b.ReportMetric(100*(re1-re0)/(tx1-tx0), "reruns-%")
	}
	for _, c := range cs {
		c.Close()
	}
}

// BenchmarkClusterTurnOverhead is BenchmarkTurnOverhead with the daemon's
// store on PostgreSQL (one daemon, lease_ttl 10): the daemon's time per
// turn beyond the fake model's.
//
//	go test -run '^$' -bench BenchmarkClusterTurnOverhead -benchtime 500x ./journeys/
func BenchmarkClusterTurnOverhead(b *testing.B) {
	pg := func(b *testing.B) string {
		return fmt.Sprintf("\nstore: {driver: postgres, dsn: %q}\ncluster: {lease_ttl: 10}", benchDSN(b))
	}
	b.Run("no-tool", func(b *testing.B) { trBenchTurns(b, false, pg(b)) })
	b.Run("one-tool", func(b *testing.B) { trBenchTurns(b, true, pg(b)) })
}

// BenchmarkClusterTakeover measures, b.N times, the time from the SIGKILL
// of the daemon running a turn (parked on a clarification) to the moment a
// client of the other daemon receives the admission.updated event that
// makes it unknown (the takeover). The killed daemon is restarted on its
// home for the next round. Metrics: takeover-p50-s, takeover-p99-s,
// takeover-max-s; run with -benchtime 20x for "p50/p99 over 20 kills".
//
//	go test -run '^$' -bench 'BenchmarkClusterTakeover' -benchtime 20x -timeout 30m ./journeys/
func BenchmarkClusterTakeover(b *testing.B) {
	for _, ttl := range []int{2, 10} {
		b.Run(fmt.Sprintf("lease_ttl=%d", ttl), func(b *testing.B) { benchTakeover(b, ttl) })
	}
}

func benchTakeover(b *testing.B, ttl int) {
	m := fixtures.NewFakeModel(b)
	m.Default(fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("clarify", `{"question":"Which one?","choices":["a","b"]}`)}})
	cl := fixtures.NewCluster(b, fixtures.ClusterOptions{DSN: benchDSN(b), LeaseTTL: ttl,
		Config: fixtures.FakeModelConfig(m, "agent: {clarify_timeout: 3600}")})
	ds := []*fixtures.Daemon{cl.Start(b), cl.Start(b)}
	cwd := b.TempDir()
	bound := time.Duration(3*ttl)*time.Second + wait
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := ds[i%2].Dial(b)
		var s snapshot
		if err := atkCall(c, "session.create", map[string]any{"cwd": cwd}, &s); err != nil {
			b.Fatal(err)
		}
		var r receipt
		if err := atkCall(c, "prompt.submit", map[string]any{"session_id": s.SessionID, "input_id": "park", "text": fmt.Sprint("park ", i)}, &r); err != nil {
			b.Fatal(err)
		}
		// The owner is the daemon whose running_turns shows the turn.
		owner := -1
		fixtures.Eventually(b, wait, "a daemon to run the parked turn", func() bool {
			for j, d := range ds {
				var info struct {
					RunningTurns int `json:"running_turns"`
				}
				dc := d.Dial(b)
				err := atkCall(dc, "daemon.info", nil, &info)
				dc.Close()
				if err == nil && info.RunningTurns > 0 {
					owner = j
					return true
				}
			}
			return false
		})
		other := ds[1-owner]
		co := other.Dial(b)
		if err := atkCall(co, "session.resume", map[string]any{"session_id": s.SessionID}, nil); err != nil {
			b.Fatal(err)
		}
		c.Close()
		b.StartTimer()
		t0 := time.Now()
		ds[owner].SIGKILL(b)
		co.WaitEvent(b, bound, func(e fixtures.Event) bool {
			return e.Type == "admission.updated" && e.AdmissionID == r.AdmissionID && receiptStatus(e) == "unknown"
		})
		took = append(took, time.Since(t0))
		b.StopTimer()
		co.Close()
		ds[owner].Restart(b)
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	b.ReportMetric(sec(trPct(took, 50)), "takeover-p50-s")
	b.ReportMetric(sec(trPct(took, 99)), "takeover-p99-s")
	b.ReportMetric(sec(trPct(took, 100)), "takeover-max-s")
}
