package admission_test

import (
	"context"
	"fmt"
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
