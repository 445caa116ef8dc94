package admission_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
)

// BenchmarkTurnCycle is the FIFO's part of one turn, admit → claim →
// settle, in one session, one after the other: the per-turn cost of the
// admission's transactions (the ownership check of the claim and the fence
// of the settle included).
func BenchmarkTurnCycle(b *testing.B) {
	e := newEnv(b)
	e.session("s")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := e.q.Admit(ctx, req("s", fmt.Sprint("in-", i), "benchmark input"), nil); err != nil {
			b.Fatal(err)
		}
		a, err := e.q.Claim(ctx, "s")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
}

// BenchmarkTurnCycleFolded is the FIFO's part of one turn as the daemon
// runs it since issue 28: admit+claim in one commit (the session is idle
// and this daemon's), then the settle, one session, one turn after the
// other. It is the store's floor under BenchmarkTurnOverhead/no-tool,
// which adds the user and assistant messages, the model client, the agent
// and the WebSocket; p50-µs is one turn's two commits.
func BenchmarkTurnCycleFolded(b *testing.B) {
	e := newEnv(b)
	e.session("s")
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var a admission.Admission
		r := req("s", fmt.Sprint("in-", i), "benchmark input")
		r.Take = true
		r.Start = func(s admission.Admission) { a = s }
		res, err := e.q.AdmitWith(ctx, r, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Started {
			b.Fatalf("turn %d: the admit did not start the input (%+v)", i, res.Receipt)
		}
		if _, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
}
