package journeys

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// BenchmarkTurnOverhead measures the daemon's overhead per turn against the
// fake model on loopback: the time from sending prompt.submit to receiving
// turn.completed, minus the fake model's own time. The fake's time is
// measured in the same benchmark by replaying the very request bodies the
// daemon sent (recorded by the fake) with a plain keep-alive HTTP client
// and reading each response to its end; the median of those replays, one
// per model call of the turn, is subtracted from every turn.
//
// Every turn is the first of a fresh session, so requests do not grow with
// b.N.
//
// With a tool call, the model's reply after the tool result comes after
// modelThink (20 ms, about the shortest a real model takes to answer a
// tool result; the replays include it, so it is subtracted like the rest
// of the fake's time): the daemon pre-starts the next command's sandbox
// helper when a command ends (tools.Prestarts), and in a real session that
// exec runs while the model thinks. Without the pause its exec would
// compete with the turn's last steps on this benchmark's CPUs, which no
// session sees. Turns of the benchmark are commands of one spec and cwd,
// so each command after the first finds the helper its predecessor
// pre-started, as a session's second and later commands do.
//
// Metrics (milliseconds): overhead-p50/p99 (turn minus fake), turn-p50/p99
// (raw), fake-p50 (the fake's median time per turn), submit-p50 (until the
// receipt of prompt.submit arrived), to-model-p50 (until the fake had read
// the turn's first request body) and, for scale, fsync-p50 (one small
// write + fsync in the daemon's home; every acknowledged commit is fsynced)
// and sh-true-p50 (spawning /bin/sh -c true from the test process; the
// tool's own cost is part of the daemon's overhead).
//
// Run without -race, with a fixed count so the percentiles have samples:
//
//	go test -run '^$' -bench BenchmarkTurnOverhead -benchtime 500x ./journeys/
func BenchmarkTurnOverhead(b *testing.B) {
	b.Run("no-tool", func(b *testing.B) { trBenchTurns(b, false, "") })
	b.Run("one-tool", func(b *testing.B) { trBenchTurns(b, true, "") })
	// The same with the sandbox switched off: the difference is the
	// sandbox's cost per command (helper exec, namespaces, Landlock,
	// seccomp, the private temp directory).
	b.Run("one-tool-sandbox-off", func(b *testing.B) { trBenchTurns(b, true, "\nsandbox: {mode: off}") })
}

// modelThink is the fake model's delay before its answer to a tool
// result in BenchmarkTurnOverhead.
const modelThink = 20 * time.Millisecond

func trBenchTurns(b *testing.B, withTool bool, extraConfig string) {
	m := fixtures.NewFakeModel(b)
	script := func(text string) {
		if withTool {
			m.On(text, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: `{"command":"true"}`}}}, fixtures.Reply{Text: "done", Delay: modelThink})
		} else {
			m.On(text, fixtures.Reply{Text: "done"})
		}
	}
	cwd := b.TempDir()
	d := fixtures.StartDaemon(b, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}"+extraConfig)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var c *fixtures.Client
	var sessionID string
	// Every turn runs in a fresh session so that its request does not grow
	// with the turns before it; a fresh client now and then keeps
	// WaitEvent's scan of the received events short (the old one is closed
	// so the daemon stops feeding it). Both happen outside the timer.
	newSession := func(i int) {
		if i%64 == 0 {
			if c != nil {
				c.Close()
			}
			c = d.Dial(b)
		}
		var s snapshot
		if err := c.Call(ctx, "session.create", map[string]any{"cwd": cwd}, &s); err != nil {
			b.Fatal(err)
		}
		sessionID = s.SessionID
		if err := c.Call(ctx, "session.resume", map[string]any{"session_id": sessionID}, nil); err != nil {
			b.Fatal(err)
		}
	}
	var submits []time.Duration
	starts := map[string]time.Time{}
	turn := func(i int) time.Duration {
		text := fmt.Sprintf("bench turn %d", i)
		script(text)
		var r receipt
		start := time.Now()
		starts[text] = start
		if err := c.Call(ctx, "prompt.submit", map[string]any{"session_id": sessionID, "input_id": fmt.Sprint("b", i), "text": text}, &r); err != nil {
			b.Fatal(err)
		}
		submits = append(submits, time.Since(start))
		ev := c.WaitEvent(b, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == r.AdmissionID })
		took := time.Since(start)
		if !bytes.Contains(ev.Payload, []byte(`"outcome":"completed"`)) {
			b.Fatalf("turn %d: %s", i, ev.Payload)
		}
		return took
	}
	// Warm up: connections to the fake, prepared statements, page cache.
	for i := 0; i < 5; i++ {
		newSession(i)
		turn(-1 - i)
	}

	durs := make([]time.Duration, 0, b.N)
	submits = submits[:0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		newSession(i)
		b.StartTimer()
		durs = append(durs, turn(i))
	}
	b.StopTimer()

	// Where the first model request arrived, relative to the submit.
	var toModel []time.Duration
	firstSeen := map[string]bool{}
	for _, rq := range m.Requests() {
		text := rq.LastUserText()
		if st, ok := starts[text]; ok && !firstSeen[text] && !strings.HasPrefix(text, "bench turn -") {
			firstSeen[text] = true
			toModel = append(toModel, rq.ReceivedAt.Sub(st))
		}
	}

	// The fake's own time: replay the last turn's requests.
	last := fmt.Sprintf("bench turn %d", b.N-1)
	bodies := m.RequestsWithLastUser(last)
	wantCalls := 1
	if withTool {
		wantCalls = 2
	}
	if len(bodies) != wantCalls {
		b.Fatalf("last turn made %d model calls, want %d", len(bodies), wantCalls)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	per := make([][]time.Duration, wantCalls)
	const replays = 200
	for k := -5; k < replays; k++ { // 5 warm-up rounds
		script(last) // restart the script: tool reply, then the final text
		for j, rq := range bodies {
			t0 := time.Now()
			resp, err := hc.Post(m.URL()+"/chat/completions", "application/json", bytes.NewReader(rq.Raw))
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(t0)
			if resp.StatusCode != 200 || n == 0 {
				b.Fatalf("replay: status %d, %d bytes", resp.StatusCode, n)
			}
			if k >= 0 {
				per[j] = append(per[j], took)
			}
		}
	}
	var fake time.Duration
	for _, p := range per {
		fake += trPct(p, 50)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(trPct(durs, 50)-fake), "overhead-p50-ms")
	b.ReportMetric(ms(trPct(durs, 99)-fake), "overhead-p99-ms")
	b.ReportMetric(ms(trPct(durs, 50)), "turn-p50-ms")
	b.ReportMetric(ms(trPct(durs, 99)), "turn-p99-ms")
	b.ReportMetric(ms(fake), "fake-p50-ms")
	b.ReportMetric(ms(trPct(submits, 50)), "submit-p50-ms")
	b.ReportMetric(ms(trPct(toModel, 50)), "to-model-p50-ms")
	if !withTool {
		// For scale: one small write + fsync on the filesystem of the
		// daemon's home (every acknowledged commit is fsynced).
		f, err := os.CreateTemp(d.Home, "fsync-probe-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		var fs []time.Duration
		for i := 0; i < 100; i++ {
			t0 := time.Now()
			f.Write([]byte("0123456789abcdef0123456789abcdef"))
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			fs = append(fs, time.Since(t0))
		}
		b.ReportMetric(ms(trPct(fs, 50)), "fsync-p50-ms")
	}
	if withTool {
		var sh []time.Duration
		for i := 0; i < 100; i++ {
			t0 := time.Now()
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
			sh = append(sh, time.Since(t0))
		}
		b.ReportMetric(ms(trPct(sh, 50)), "sh-true-p50-ms")
	}
}

// pct returns the p-th percentile (nearest rank) of ds.
func trPct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100 // ceil(n*p/100), 1-based rank
	if i < 1 {
		i = 1
	}
	return s[min(i, len(s))-1]
}
