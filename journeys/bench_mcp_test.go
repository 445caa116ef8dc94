package journeys

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// BenchmarkMCPCall measures one MCP tool call (the test server's echo)
// through the daemon against the same call made directly with the SDK.
//
//   - direct: an SDK client session with fixtures/mcpserver started
//     unsandboxed by the benchmark, CallTool echo, timed around the call.
//   - daemon: a session whose config server is the same binary (sandboxed,
//     approvals off, so no prompt), the fake model asking for one echo call
//     per model request; each call is timed from its tool.started event to
//     its tool.completed event as a client receives them: the argument
//     validation against the schema, the gate, the durable tool.running,
//     the call itself, the result's formatting and the durable
//     tool.completed (with the tool message), each commit fsynced.
//   - daemon-sandbox-off: the same with sandbox mode off (the server is a
//     plain child process), for the sandbox's share (none per call once
//     the server runs: it is started once per session).
//
// Metrics: p50-ms and p99-ms of the calls. Run without -race:
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchtime 300x ./journeys/
func BenchmarkMCPCall(b *testing.B) {
	b.Run("direct", benchMCPDirect)
	b.Run("daemon", func(b *testing.B) { benchMCPDaemon(b, "") })
	b.Run("daemon-sandbox-off", func(b *testing.B) { benchMCPDaemon(b, "sandbox: {mode: off}\n") })
}

func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func benchMCPDirect(b *testing.B) {
	src := fixtures.BuildBinary(b, "./fixtures/mcpserver")
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: exec.Command(src)}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint("hi ", i)}})
		if err != nil || res.IsError {
			b.Fatalf("call %d: %v", i, err)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, ds)
}

func benchMCPDaemon(b *testing.B, extra string) {
	m := fixtures.NewFakeModel(b)
	dir := b.TempDir()
	src := fixtures.BuildBinary(b, "./fixtures/mcpserver")
	bin := filepath.Join(dir, "bin", "mcpserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		b.Fatal(err)
	}
	replies := make([]fixtures.Reply, 0, b.N+1)
	for i := 0; i < b.N; i++ {
		replies = append(replies, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "mcp__fx__echo", Arguments: fmt.Sprintf(`{"text":"hi %d"}`, i)}}})
	}
	replies = append(replies, fixtures.Reply{Text: "done"})
	m.On("bench", replies...)
	cfg := fixtures.FakeModelConfig(m, fmt.Sprintf("approvals: {mode: off}\nagent: {max_iterations: %d}\n", b.N+5)+extra+fmt.Sprintf("mcp:\n  servers:\n    fx: {command: %q}\n", bin))
	d := fixtures.StartDaemon(b, fixtures.DaemonOptions{Config: cfg})

	var c *rpc.Client
	var mu sync.Mutex
	started := map[string]time.Time{}
	var ds []time.Duration
	done := make(chan struct{})
	ctx := context.Background()
	c, err = rpc.Dial(ctx, d.Desc.URL, rpc.DialOptions{Token: d.Desc.Token, OnNotification: func(n rpc.Notification) {
		now := time.Now()
		var ev protocol.Event
		if json.Unmarshal(n.Params, &ev) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case protocol.EventToolStarted:
			var p protocol.ToolStartedPayload
			json.Unmarshal(ev.Payload, &p)
			started[p.ToolCallID] = now
		case protocol.EventToolCompleted:
			var p protocol.ToolCompletedPayload
			json.Unmarshal(ev.Payload, &p)
			if t0, ok := started[p.ToolCallID]; ok && p.OK {
				ds = append(ds, now.Sub(t0))
			}
		case protocol.EventTurnCompleted:
			close(done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var snap protocol.Snapshot
	if err := c.Call(ctx, protocol.MethodSessionCreate, protocol.SessionCreateParams{Cwd: dir}, &snap); err != nil {
		b.Fatal(err)
	}
	if err := c.Call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: snap.SessionID}, &snap); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := c.Call(ctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: snap.SessionID, InputID: "bench", Text: "bench"}, nil); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatal("the turn did not end")
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	if len(ds) != b.N {
		b.Fatalf("%d calls completed ok, want %d", len(ds), b.N)
	}
	reportPercentiles(b, ds)
}
