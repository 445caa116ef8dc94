package journeys

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// TestToolOutputFloodKeepsSlowClients: a command prints 8 MB while one
// client does not read (its notification handler is blocked) and the send
// queue holds 16 notifications. The client is not closed: once it reads
// again it gets the start of the output, one marker saying how many bytes
// were left out, then tool.completed and turn.completed in order, and its
// connection still answers calls. (Before, the daemon closed it with 1008.)
func TestToolOutputFloodKeepsSlowClients(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("flood", ctlTerminalCall("head -c 8000000 /dev/zero | tr '\\0' x; echo; echo flood-done"), fixtures.Reply{Text: "flooded"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\nlimits: {send_queue: 16}")})
	watcher := d.Dial(t)
	s := createSession(t, watcher, map[string]any{"cwd": t.TempDir()}).SessionID
	resume(t, watcher, s)

	gate := make(chan struct{})
	var mu sync.Mutex
	var events []protocol.Event
	slow, err := rpc.Dial(ctxT(t), d.Desc.URL, rpc.DialOptions{Token: d.Desc.Token, OnNotification: func(n rpc.Notification) {
		<-gate // the client stops reading until the turn is over
		var ev protocol.Event
		json.Unmarshal(n.Params, &ev)
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	var snap protocol.Snapshot
	if err := slow.Call(ctxT(t), protocol.MethodSessionResume, protocol.ResumeParams{SessionID: s}, &snap); err != nil {
		t.Fatal(err)
	}
	submit(t, watcher, s, "flood-1", "flood")
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	defer db.Close()
	fixtures.Eventually(t, wait, "the flood's turn to settle", func() bool {
		rows := fixtures.Admissions(t, db, s)
		return len(rows) == 1 && rows[0].Status == "terminal"
	})
	close(gate)

	var turnDone bool
	fixtures.Eventually(t, wait, "the slow client to receive turn.completed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			turnDone = turnDone || e.Type == "turn.completed"
		}
		return turnDone || slow.Err() != nil
	})
	if err := slow.Err(); err != nil {
		t.Fatalf("the slow client was closed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got strings.Builder
	var omitted int64
	var order []string
	for _, e := range events {
		switch e.Type {
		case "tool.output":
			var p struct {
				Text    string `json:"text"`
				Omitted int64  `json:"omitted_bytes"`
			}
			json.Unmarshal(e.Payload, &p)
			got.WriteString(p.Text)
			if p.Omitted > 0 {
				omitted += p.Omitted
				order = append(order, "marker")
			}
		case "tool.completed", "turn.completed":
			order = append(order, string(e.Type))
		}
	}
	if omitted == 0 || !strings.Contains(got.String(), "bytes of output left out here") {
		t.Fatalf("no marker of left-out output; %d bytes received", got.Len())
	}
	if n := int64(got.Len()) + omitted; n < 8_000_000 {
		t.Errorf("received %d + left out %d bytes, want at least the 8,000,011 printed", got.Len(), omitted)
	}
	if strings.Join(order, ",") != "marker,tool.completed,turn.completed" {
		t.Errorf("order of the marker and the ends: %v", order)
	}
	var info protocol.DaemonInfo
	if err := slow.Call(ctxT(t), protocol.MethodDaemonInfo, nil, &info); err != nil {
		t.Fatalf("the slow client's connection after the flood: %v", err)
	}
}
