package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// capture is a send func for a deltaOutbox that records what it is given
// and, while hold is set, blocks until released.
type capture struct {
	mu      sync.Mutex
	batches [][]cluster.Notification
	hold    chan struct{}
	fail    bool
	sending chan struct{}
}

func (c *capture) send(ctx context.Context, ns []cluster.Notification) error {
	c.mu.Lock()
	hold, fail := c.hold, c.fail
	c.mu.Unlock()
	if c.sending != nil {
		select {
		case c.sending <- struct{}{}:
		default:
		}
	}
	if hold != nil {
		<-hold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fail {
		return errors.New("planted failure")
	}
	c.batches = append(c.batches, ns)
	return nil
}

func (c *capture) all() []cluster.Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cluster.Notification
	for _, b := range c.batches {
		out = append(out, b...)
	}
	return out
}

// While a send is in flight, deltas of one stream coalesce into one frame;
// announcements keep their place among them; every payload fits
// cluster.MaxPayload (text full of escapes included), and the frames'
// offsets and texts rebuild each stream exactly.
func TestDeltaOutboxCoalescesInOrderWithinPayloadLimit(t *testing.T) {
	c := &capture{hold: make(chan struct{}), sending: make(chan struct{}, 1)}
	o := newDeltaOutbox(7, c.send, slog.Default())
	defer o.close()
	o.add("s1", protocol.EventToolOutput, "adm", 1, 3, "call", "first\n")
	<-c.sending // the first batch is in flight: what follows queues up
	var out strings.Builder
	out.WriteString("first\n")
	for i := 0; i < 200; i++ {
		line := strings.Repeat("x", 50) + "\n"
		o.add("s1", protocol.EventToolOutput, "adm", 1, 3, "call", line)
		out.WriteString(line)
	}
	o.announce("s1", 4)
	o.announce("s1", 5)                    // merged with the one before
	msg := strings.Repeat("\x01é\"", 3000) // escapes: ~6x when encoded
	o.add("s1", protocol.EventMessageDelta, "adm", 1, 5, "", msg)
	c.mu.Lock()
	hold := c.hold
	c.hold = nil
	c.mu.Unlock()
	close(hold)
	fixtures.Eventually(t, 10*time.Second, "the sends", func() bool {
		ns := c.all()
		return len(ns) > 0 && strings.Contains(ns[len(ns)-1].Payload, "message.delta")
	})
	ns := c.all()
	texts := map[protocol.EventType]*strings.Builder{protocol.EventToolOutput: {}, protocol.EventMessageDelta: {}}
	next := map[protocol.EventType]int64{}
	var order []string
	toolFrames := 0
	for _, n := range ns {
		if len(n.Payload) > cluster.MaxPayload {
			t.Fatalf("a %d-byte payload on %s", len(n.Payload), n.Channel)
		}
		if n.Channel == cluster.ChannelEvents {
			order = append(order, "announce "+n.Payload)
			continue
		}
		var f deltaFrame
		if err := json.Unmarshal([]byte(n.Payload), &f); err != nil {
			t.Fatal(err)
		}
		if f.Offset != next[f.Type] {
			t.Fatalf("%s frame at offset %d, want %d", f.Type, f.Offset, next[f.Type])
		}
		next[f.Type] += int64(len(f.Text))
		texts[f.Type].WriteString(f.Text)
		if f.Type == protocol.EventToolOutput {
			toolFrames++
		}
		if len(order) == 0 || order[len(order)-1] != string(f.Type) {
			order = append(order, string(f.Type))
		}
	}
	if got := texts[protocol.EventToolOutput].String(); got != out.String() {
		t.Fatalf("tool output rebuilt as %d bytes, want %d", len(got), out.Len())
	}
	if got := texts[protocol.EventMessageDelta].String(); got != msg {
		t.Fatalf("message text rebuilt as %d bytes, want %d", len(got), len(msg))
	}
	// 10,251 bytes of output in 6 KiB chunks: the first frame, then two.
	if toolFrames != 3 {
		t.Errorf("the 201 tool output deltas went out as %d frames, want 3 (coalesced)", toolFrames)
	}
	if want := []string{"tool.output", "announce s1:5", "message.delta"}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("order on the wire %v, want %v", order, want)
	}
}

// A failed send drops its deltas (the receivers see a gap) but keeps its
// announcements, which go out with the next send, before what followed.
func TestDeltaOutboxRetriesAnnouncements(t *testing.T) {
	c := &capture{fail: true, sending: make(chan struct{}, 1)}
	o := newDeltaOutbox(7, c.send, slog.New(slog.DiscardHandler))
	defer o.close()
	o.add("s1", protocol.EventMessageDelta, "adm", 1, 3, "", "lost")
	o.announce("s1", 4)
	<-c.sending
	c.mu.Lock()
	c.fail = false
	c.mu.Unlock()
	o.add("s1", protocol.EventMessageDelta, "adm", 1, 4, "", "kept")
	fixtures.Eventually(t, 10*time.Second, "the retry", func() bool { return len(c.all()) >= 2 })
	ns := c.all()
	if ns[0].Channel != cluster.ChannelEvents || ns[0].Payload != "s1:4" {
		t.Fatalf("first after the failure: %+v, want the announcement s1:4", ns[0])
	}
	var f deltaFrame
	json.Unmarshal([]byte(ns[1].Payload), &f)
	if f.Text != "kept" || f.Offset != 4 {
		t.Fatalf("then %+v, want \"kept\" at offset 4 (the lost frame's 4 bytes are a gap)", f)
	}
}

// wsPair is a released subscription of a real rpc.Conn to session "s1" on
// h, and the client end that reads what it is sent.
func wsPair(t *testing.T, h *hub) (client *websocket.Conn, closed <-chan struct{}) {
	t.Helper()
	ready := make(chan struct{})
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := rpc.NewConn(context.Background(), ws, rpc.NewMux(), rpc.Options{})
		c.OnClose(func() { close(done) })
		h.subscribe(c, "s1")(0)
		close(ready)
		c.Serve()
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	<-ready
	return ws, done
}

// readEvents reads n session.event notifications.
func readEvents(t *testing.T, ws *websocket.Conn, n int) []protocol.Event {
	t.Helper()
	var out []protocol.Event
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(out) < n {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		var msg struct {
			Params protocol.Event `json:"params"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		out = append(out, msg.Params)
	}
	return out
}

func frameOf(t *testing.T, f deltaFrame) string {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A receiver holds a delta until its subscriber has the event it follows,
// ignores its own daemon's frames, and marks a gap in a stream of tool
// output with the marker frame a slow client gets (omitted_bytes).
func TestRemoteDeltaOrderAndGapMarker(t *testing.T) {
	h := newHub(slog.New(slog.DiscardHandler))
	h.origin = 1
	ws, _ := wsPair(t, h)
	tool := func(off int64, after int64, text string) string {
		return frameOf(t, deltaFrame{Origin: 2, SessionID: "s1", AfterSeq: after, Type: protocol.EventToolOutput, AdmissionID: "adm",
			Generation: 1, ToolCallID: "call", Offset: off, Text: text})
	}
	h.remoteDelta(frameOf(t, deltaFrame{Origin: 1, SessionID: "s1", Type: protocol.EventToolOutput, ToolCallID: "call", Text: "own"}))
	h.remoteDelta(tool(0, 1, "abc")) // follows event 1, which the subscriber lacks
	adm := "adm"
	h.publish(store.Event{SessionID: "s1", Seq: 1, Type: string(protocol.EventToolStarted), AdmissionID: &adm,
		Payload: json.RawMessage(`{"tool_call_id":"call","name":"terminal","args":{}}`)})
	h.remoteDelta(tool(10, 1, "xyz")) // 7 bytes never arrived
	evs := readEvents(t, ws, 4)
	var got []string
	for _, e := range evs {
		if e.Seq != nil {
			got = append(got, string(e.Type))
			continue
		}
		var p protocol.ToolOutputPayload
		json.Unmarshal(e.Payload, &p)
		if p.OmittedBytes > 0 {
			got = append(got, "marker:"+strconvI(p.OmittedBytes))
			continue
		}
		got = append(got, "out:"+p.Text)
	}
	if want := "tool.started|out:abc|marker:7|out:xyz"; strings.Join(got, "|") != want {
		t.Fatalf("the subscriber got %v, want %s", got, want)
	}
}

// A lost message.delta closes the subscriber's connection (1008), as one
// daemon does when it cannot queue one: its client resumes.
func TestRemoteMessageDeltaGapClosesTheConnection(t *testing.T) {
	h := newHub(slog.New(slog.DiscardHandler))
	h.origin = 1
	ws, closed := wsPair(t, h)
	msg := func(off int64, text string) string {
		return frameOf(t, deltaFrame{Origin: 2, SessionID: "s1", Type: protocol.EventMessageDelta, AdmissionID: "adm", Generation: 1, Offset: off, Text: text})
	}
	h.remoteDelta(msg(0, "hel"))
	readEvents(t, ws, 1)
	go func() { // read on: the close handshake completes
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	h.remoteDelta(msg(5, "world"))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection stayed open after a message.delta was lost")
	}
}

func strconvI(n int64) string { b, _ := json.Marshal(n); return string(b) }
