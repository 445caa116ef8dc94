package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// startBench starts an in-process daemon on a fresh home whose model is a
// fake that parks every turn, so that admissions queue behind the first
// one and the benchmarks measure the admission path alone.
func startBench(b *testing.B) *Daemon {
	b.Helper()
	m := fixtures.NewFakeModel(b)
	park := fixtures.NewGate()
	b.Cleanup(park.Release)
	m.Default(fixtures.Reply{Text: "parked", Gate: park})
	home := b.TempDir()
	if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(fixtures.FakeModelConfig(m, "limits: {max_concurrent_turns: 1000, max_in_flight: 1024, max_queued_per_session: 1000000}")), 0o600); err != nil {
		b.Fatal(err)
	}
	d, err := Start(context.Background(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

// benchClient is a minimal sequential JSON-RPC client: one call at a time.
type benchClient struct {
	c  *websocket.Conn
	id int
}

func dialBench(b *testing.B, d *Daemon) *benchClient {
	c, _, err := websocket.Dial(context.Background(), d.desc.URL, &websocket.DialOptions{
		HTTPHeader: map[string][]string{"Authorization": {"Bearer " + d.token}}, Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	b.Cleanup(func() { c.CloseNow() })
	return &benchClient{c: c}
}

func (bc *benchClient) call(method string, params any, out any) error {
	bc.id++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": bc.id, "method": method, "params": params})
	ctx := context.Background()
	if err := bc.c.Write(ctx, websocket.MessageText, req); err != nil {
		return err
	}
	for {
		_, data, err := bc.c.Read(ctx)
		if err != nil {
			return err
		}
		var resp struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &resp); err != nil {
			return err
		}
		if resp.ID == nil || *resp.ID != bc.id {
			continue // a notification
		}
		if resp.Error != nil {
			return fmt.Errorf("%s", resp.Error)
		}
		if out != nil {
			return json.Unmarshal(resp.Result, out)
		}
		return nil
	}
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkSessionCreate is the session.create round trip over a real
// WebSocket on loopback (issue 2).
func BenchmarkSessionCreate(b *testing.B) {
	d := startBench(b)
	c := dialBench(b, d)
	cwd := b.TempDir()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := c.call("session.create", map[string]any{"cwd": cwd, "title": "bench"}, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// fsyncFloor measures this disk's 4 KiB write+fsync latency (median) in dir.
func fsyncFloor(b *testing.B, dir string) time.Duration {
	f, err := os.CreateTemp(dir, "fsync-floor")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, 200)
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

// BenchmarkPromptSubmit is the durable prompt.submit round trip with one
// client (issue 3), reported next to the disk's fsync floor.
func BenchmarkPromptSubmit(b *testing.B) {
	d := startBench(b)
	c := dialBench(b, d)
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := c.call("session.create", map[string]any{"cwd": b.TempDir()}, &snap); err != nil {
		b.Fatal(err)
	}
	floor := fsyncFloor(b, d.home)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := c.call("prompt.submit", map[string]any{"session_id": snap.SessionID, "input_id": fmt.Sprintf("in-%d", i), "text": "benchmark input"}, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatencies(b, lat)
	b.ReportMetric(float64(floor.Microseconds()), "fsync-floor-µs")
}

// BenchmarkPromptSubmitWhenBusy is the durable prompt.submit round trip
// with one client while the session runs a turn (parked at the fake
// model), for each when_busy that stores the input: queue (the FIFO's
// end) and steer (placed for the running turn, ahead of the queue), so
// that the two compare in one sitting (issue 25).
func BenchmarkPromptSubmitWhenBusy(b *testing.B) {
	for _, mode := range []string{"queue", "steer"} {
		b.Run(mode, func(b *testing.B) {
			d := startBench(b)
			c := dialBench(b, d)
			var snap struct {
				SessionID string `json:"session_id"`
			}
			if err := c.call("session.create", map[string]any{"cwd": b.TempDir()}, &snap); err != nil {
				b.Fatal(err)
			}
			// The turn that keeps the session busy.
			if err := c.call("prompt.submit", map[string]any{"session_id": snap.SessionID, "input_id": "busy", "text": "parked"}, nil); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := c.call("prompt.submit", map[string]any{"session_id": snap.SessionID, "input_id": fmt.Sprintf("in-%d", i),
					"text": "benchmark input", "when_busy": mode}, nil); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			reportLatencies(b, lat)
		})
	}
}

// BenchmarkPromptSubmitParallel drives 64 clients on 64 sessions and
// reports durable admissions per second (issue 3).
func BenchmarkPromptSubmitParallel(b *testing.B) {
	const clients = 64
	d := startBench(b)
	cs := make([]*benchClient, clients)
	sessions := make([]string, clients)
	for i := range cs {
		cs[i] = dialBench(b, d)
		var snap struct {
			SessionID string `json:"session_id"`
		}
		if err := cs[i].call("session.create", map[string]any{"cwd": b.TempDir()}, &snap); err != nil {
			b.Fatal(err)
		}
		sessions[i] = snap.SessionID
	}
	var next atomic.Int64
	b0, t0 := d.db.Stats()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if err := cs[i].call("prompt.submit", map[string]any{"session_id": sessions[i], "input_id": fmt.Sprintf("p-%d", n), "text": "benchmark input"}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b1, t1 := d.db.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "admissions/s")
	if b1 > b0 {
		b.ReportMetric(float64(t1-t0)/float64(b1-b0), "tx/commit")
	}
}
