package admission_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"
)

// BenchmarkAdmit admits b.N distinct inputs, one after the other, into one
// session. Every admission stays queued, so the queue grows with b.N.
func BenchmarkAdmit(b *testing.B) {
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
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "admissions/s")
}

// BenchmarkAdmitBehindQueue measures one Admit with a queue of `queued`
// admissions already waiting in the same session (bulk-inserted), to show
// how the cost of the wait reason grows with the queue.
func BenchmarkAdmitBehindQueue(b *testing.B) {
	for _, depth := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			e := newEnv(b)
			e.session("s")
			check(b, e.db.InTx(context.Background(), func(tx *store.Tx) error {
				const insert = `INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq,
					status, text, payload_digest, created_at) VALUES (?, 's', ?, ?, 'queued', 'x', 'd', ?)`
				now := store.Now()
				for i := 1; i <= depth; i++ {
					if _, err := tx.Exec(insert, fmt.Sprint("pre-", i), fmt.Sprint("pre-", i), i, now); err != nil {
						return err
					}
				}
				_, err := tx.Exec(`UPDATE sessions SET next_admission_seq = ? WHERE session_id = 's'`, depth+1)
				return err
			}))
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.q.Admit(ctx, req("s", fmt.Sprint("in-", i), "x"), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdmitParallel admits from 64 goroutines, each into its own
// session, to measure group commit (SQLite) or concurrent SERIALIZABLE
// transactions on the connection pool (PostgreSQL, fsync on). TestMain runs
// it on both drivers: go test -run XXX -bench 'BenchmarkAdmit$|AdmitParallel' ./admission/
func BenchmarkAdmitParallel(b *testing.B) {
	const workers = 64
	e := newEnv(b)
	for w := range workers {
		e.session(fmt.Sprint("s", w))
	}
	ctx := context.Background()
	b0, t0 := e.db.Stats()
	r0 := e.db.Reruns()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		n := b.N / workers
		if w < b.N%workers {
			n++
		}
		wg.Go(func() {
			sess := fmt.Sprint("s", w)
			for i := range n {
				if _, err := e.q.Admit(ctx, req(sess, fmt.Sprintf("in-%d", i), "benchmark input"), nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b1, t1 := e.db.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "admissions/s")
	if e.opt.Driver == store.Postgres {
		// Each transaction commits by itself (the server groups the WAL
		// flushes); what matters is how often one collided and ran again.
		b.ReportMetric(float64(e.db.Reruns()-r0)/float64(b.N), "reruns/op")
	} else if b1 > b0 {
		b.ReportMetric(float64(t1-t0)/float64(b1-b0), "txs/commit")
	}
}

// BenchmarkRecover times boot recovery over a store of `total` admissions
// of which `open` are not terminal (one started and nine queued per
// session, the rest of each session's history terminal). The store is
// built with bulk SQL, not Admit. SESSIOND_BENCH_BIG=1 makes it
// 1,000,000 / 100,000 (use -benchtime=1x); the default is 100,000 / 10,000.
func BenchmarkRecover(b *testing.B) {
	total, open := 100_000, 10_000
	if os.Getenv("SESSIOND_BENCH_BIG") == "1" {
		total, open = 1_000_000, 100_000
	}
	const perOpen = 10 // 1 started + 9 queued
	sessions := open / perOpen
	history := total/sessions - perOpen
	e := newEnv(b)
	ctx := context.Background()
	built := time.Now()
	check(b, e.db.InTx(ctx, func(tx *store.Tx) error {
		now := store.Now()
		const sessionInsert = `INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at,
			execution_generation, next_admission_seq) VALUES (?, '/tmp', 'm', 'openai', '', '[]', ?, ?, ?)`
		const admissionInsert = `INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status,
			outcome, execution_generation, owner_epoch, text, payload_digest, created_at, started_at, settled_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'benchmark input text', 'digest', ?, ?, ?)`
		for s := range sessions {
			sid := fmt.Sprintf("sess-%06d", s)
			if _, err := tx.Exec(sessionInsert, sid, now, history+1, history+perOpen+1); err != nil {
				return err
			}
			for seq := 1; seq <= history+perOpen; seq++ {
				id := fmt.Sprintf("adm-%06d-%07d", s, seq)
				var err error
				switch {
				case seq <= history:
					_, err = tx.Exec(admissionInsert, id, sid, id, seq, "terminal", "completed", seq, 1, now, now, now)
				case seq == history+1:
					_, err = tx.Exec(admissionInsert, id, sid, id, seq, "started", nil, seq, 1, now, now, nil)
				default:
					_, err = tx.Exec(admissionInsert, id, sid, id, seq, "queued", nil, nil, nil, now, nil, nil)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	}))
	b.Logf("built %d admissions (%d open, %d sessions) in %v", total, open, sessions, time.Since(built).Round(time.Millisecond))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 { // put the started rows back
			check(b, e.exec(`UPDATE session_admissions SET status = 'started' WHERE status = 'unknown'`))
		}
		q := &admission.Queue{DB: e.db, Daemon: cluster.DaemonID(i + 2)}
		b.StartTimer()
		res, err := q.Recover(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(res.Unknown) != sessions || len(res.Sessions) != sessions {
			b.Fatalf("recovered %d unknown in %d sessions, want %d", len(res.Unknown), len(res.Sessions), sessions)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(sessions), "unknown/op")
}
