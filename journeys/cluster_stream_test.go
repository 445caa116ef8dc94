package journeys

// Streaming across daemons (issue 28): the deltas of a turn that runs on
// daemon A (message.delta, tool.output: seq null, never stored) reach a
// subscriber of daemon B too, in the owner's order among the durable
// events.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
)

// streamedCommand prints six lines over about half a second, so that its
// output streams in several tool.output deltas.
const streamedCommand = `for i in 1 2 3 4 5 6; do echo "line-$i of the streamed output"; sleep 0.08; done`

// streamView is what one client saw of one admission: the text of its
// message.delta and tool.output deltas (by tool call), and, in arrival
// order, every event with its index, so that order can be checked.
type streamView struct {
	message string
	output  map[string]string
	markers int
	events  []fixtures.Event
}

func viewOf(evs []fixtures.Event, sessionID, admissionID string) streamView {
	v := streamView{output: map[string]string{}}
	for _, e := range evs {
		if e.SessionID != sessionID || e.AdmissionID != admissionID {
			continue
		}
		v.events = append(v.events, e)
		switch e.Type {
		case "message.delta":
			var p struct{ Text string }
			json.Unmarshal(e.Payload, &p)
			v.message += p.Text
		case "tool.output":
			var p struct {
				ToolCallID   string `json:"tool_call_id"`
				Text         string `json:"text"`
				OmittedBytes int64  `json:"omitted_bytes"`
			}
			json.Unmarshal(e.Payload, &p)
			if p.OmittedBytes > 0 {
				v.markers++
				continue
			}
			v.output[p.ToolCallID] += p.Text
		}
	}
	return v
}

// checkStreamOrder checks that, in arrival order, every message.delta of a
// model call comes before the message.completed that ends it, and every
// tool.output of a call comes after its tool.started and before its
// tool.completed; and that the durable events come in seq order.
func checkStreamOrder(t *testing.T, who string, v streamView) {
	t.Helper()
	started, completed := map[string]bool{}, map[string]bool{}
	var lastSeq int64
	openText := false
	for i, e := range v.events {
		callOf := func() string {
			var p struct {
				ToolCallID string `json:"tool_call_id"`
			}
			json.Unmarshal(e.Payload, &p)
			return p.ToolCallID
		}
		if e.Seq != nil {
			if *e.Seq <= lastSeq {
				t.Fatalf("%s: event %d (%s) has seq %d after %d", who, i, e.Type, *e.Seq, lastSeq)
			}
			lastSeq = *e.Seq
		}
		switch e.Type {
		case "message.delta":
			openText = true
		case "message.completed":
			openText = false
		case "tool.started":
			started[callOf()] = true
		case "tool.output":
			c := callOf()
			if !started[c] || completed[c] {
				t.Fatalf("%s: tool.output of %s arrived outside its tool.started..tool.completed (event %d of %s)", who, c, i, describeEvents(v.events))
			}
		case "tool.completed":
			completed[callOf()] = true
		case "turn.completed":
			if openText {
				t.Fatalf("%s: message.delta without its message.completed before turn.completed: %s", who, describeEvents(v.events))
			}
		}
	}
}

// TestClusterSubscriberSeesDeltasOfAnotherDaemon: a turn runs on daemon A;
// a client of A and a client of B subscribed to its session see the same
// streamed text (message.delta) and command output (tool.output), each in
// order among the turn's durable events, and B no gap marker.
func TestClusterSubscriberSeesDeltasOfAnotherDaemon(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	answer := strings.Repeat("streamed words of the first answer, ", 40)
	m.On("stream on A",
		fixtures.Reply{Text: answer, ChunkDelay: 20 * time.Millisecond, Gate: g,
			ToolCalls: []fixtures.FakeToolCall{{ID: "call_stream", Name: "terminal", Arguments: fmt.Sprintf(`{"command":%q}`, streamedCommand)}}},
		fixtures.Reply{Text: "the output ended", ChunkDelay: 20 * time.Millisecond})
	cluster := newCluster(t, m, clusterTTL, "approvals: {mode: off}")
	a := cluster.Start(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{}).SessionID
	resume(t, ca, s)
	r := submit(t, ca, s, "stream", "stream on A")
	waitParked(t, g, "the turn")
	if owner, o := cluster.Owner(t, s); owner != a {
		t.Fatalf("the session is owned by daemon id %v, want A (boot epoch %d)", o.DaemonID, a.Desc.BootEpoch)
	}
	b := cluster.Start(t)
	cb := b.Dial(t)
	resume(t, cb, s)
	g.Release()
	for who, c := range map[string]*fixtures.Client{"A": ca, "B": cb} {
		if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
			t.Fatalf("%s's client saw the turn end %s", who, out)
		}
	}
	va, vb := viewOf(ca.Events(), s, r.AdmissionID), viewOf(cb.Events(), s, r.AdmissionID)
	if want := answer + "the output ended"; va.message != want {
		t.Fatalf("A's client (the owner's) streamed %q, want %q", va.message, want)
	}
	if !strings.Contains(va.output["call_stream"], "line-6 of the streamed output") {
		t.Fatalf("A's client streamed the output %q", va.output["call_stream"])
	}
	if vb.message != va.message {
		t.Errorf("B's client streamed the text %q, A's %q", vb.message, va.message)
	}
	if vb.output["call_stream"] != va.output["call_stream"] {
		t.Errorf("B's client streamed the output %q, A's %q", vb.output["call_stream"], va.output["call_stream"])
	}
	if vb.markers != 0 {
		t.Errorf("B's client got %d gap markers", vb.markers)
	}
	checkStreamOrder(t, "A", va)
	checkStreamOrder(t, "B", vb)
}

// BenchmarkClusterDeltaLatency measures how much later a tool.output
// delta reaches a subscriber of another daemon than one of the daemon that
// runs the turn (PostgreSQL, two daemons on the same machine): a command
// prints one line every 20 ms, each line one delta.
//
//	go test -run '^$' -bench BenchmarkClusterDeltaLatency -benchtime 200x ./journeys/
func BenchmarkClusterDeltaLatency(b *testing.B) {
	m := fixtures.NewFakeModel(b)
	cluster := fixtures.NewCluster(b, fixtures.ClusterOptions{DSN: pgtest.DSN(b), LeaseTTL: 10, Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	a := cluster.Start(b)
	ca := a.Dial(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var snap snapshot
	if err := ca.Call(ctx, "session.create", map[string]any{"cwd": b.TempDir()}, &snap); err != nil {
		b.Fatal(err)
	}
	s := snap.SessionID
	bd := cluster.Start(b)
	cb := bd.Dial(b)
	for _, c := range []*fixtures.Client{ca, cb} {
		if err := c.Call(ctx, "session.resume", map[string]any{"session_id": s}, nil); err != nil {
			b.Fatal(err)
		}
	}
	lines := b.N
	cmd := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "delta-line-$i"; i=$((i+1)); sleep 0.02; done`, lines)
	m.On("latency", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: "call_lat", Name: "terminal", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}}},
		fixtures.Reply{Text: "done"})
	b.ResetTimer()
	var r receipt
	if err := ca.Call(ctx, "prompt.submit", map[string]any{"session_id": s, "input_id": "latency", "text": "latency"}, &r); err != nil {
		b.Fatal(err)
	}
	for _, c := range []*fixtures.Client{ca, cb} {
		c.WaitEvent(b, 10*time.Minute, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == r.AdmissionID })
	}
	b.StopTimer()
	at := func(c *fixtures.Client) map[string]time.Time {
		out := map[string]time.Time{}
		for _, e := range c.Events() {
			if e.Type != "tool.output" || e.AdmissionID != r.AdmissionID {
				continue
			}
			var p struct{ Text string }
			json.Unmarshal(e.Payload, &p)
			for _, l := range strings.Split(p.Text, "\n") {
				if strings.HasPrefix(l, "delta-line-") {
					if _, ok := out[l]; !ok {
						out[l] = e.Received
					}
				}
			}
		}
		return out
	}
	ta, tb := at(ca), at(cb)
	var lat []float64
	for l, t0 := range ta {
		if t1, ok := tb[l]; ok {
			lat = append(lat, float64(t1.Sub(t0).Microseconds())/1000)
		}
	}
	if len(lat) < lines*9/10 {
		b.Fatalf("the other daemon's client got %d of %d lines (the owner's %d)", len(lat), lines, len(ta))
	}
	sort.Float64s(lat)
	b.ReportMetric(lat[len(lat)/2], "added-p50-ms")
	b.ReportMetric(lat[len(lat)*99/100], "added-p99-ms")
}
