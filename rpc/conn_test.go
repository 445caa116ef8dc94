package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/protocol"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// serve starts an httptest server on loopback that serves mux with opt and
// returns its ws:// URL and a channel of accepted connections.
func serve(t *testing.T, mux *Mux, opt Options) (string, chan *Conn) {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	conns := make(chan *Conn, 16)
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := NewConn(ctx, ws, mux, opt)
		conns <- c
		c.Serve()
	}))
	t.Cleanup(func() { cancel(); srv.Close() })
	return "ws" + strings.TrimPrefix(srv.URL, "http"), conns
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

type resp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func roundTrip(t *testing.T, c *websocket.Conn, frame string) resp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r resp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("bad response %s: %v", b, err)
	}
	return r
}

func TestErrorReasonSurvivesWrapping(t *testing.T) {
	err := fmt.Errorf("submitting: %w", protocol.Errorf(protocol.ReasonStaleGeneration, "generation 3 is not live"))
	if !errors.Is(err, protocol.ErrStaleGeneration) || errors.Is(err, protocol.ErrNotFound) {
		t.Fatal("errors.Is must compare reasons")
	}
	we := protocol.AsError(err)
	if we.Code != protocol.CodeRefused || we.Reason != protocol.ReasonStaleGeneration || !strings.Contains(we.Message, "submitting") {
		t.Fatalf("wire error = %+v", we)
	}
	if e := protocol.AsError(errors.New("boom")); e.Code != protocol.CodeInternal || e.Reason != protocol.ReasonInternal {
		t.Fatalf("plain error = %+v", e)
	}
	if e := protocol.Errorf(protocol.ReasonInvalidParams, "x"); e.Code != protocol.CodeInvalidParams {
		t.Fatalf("invalid_params code = %d", e.Code)
	}
}

func TestDispatchErrors(t *testing.T) {
	mux := NewMux()
	mux.Handle("echo", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		var v struct {
			N int `json:"n"`
		}
		if err := Decode(p, &v); err != nil {
			return nil, err
		}
		return v, nil
	})
	mux.Handle("refuse", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return nil, fmt.Errorf("wrapped: %w", protocol.ErrNotFound.With("admission_id", "adm_1"))
	})
	mux.Handle("panic", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { panic("boom") })
	url, _ := serve(t, mux, Options{})
	c := dial(t, url)
	cases := []struct {
		frame  string
		code   int
		reason string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, protocol.CodeParseError, "parse_error"},
		{`[{"jsonrpc":"2.0","id":1,"method":"echo"}]`, protocol.CodeInvalidRequest, "invalid_request"},
		{`"just a string"`, protocol.CodeInvalidRequest, "invalid_request"},
		{`{"jsonrpc":"1.0","id":1,"method":"echo"}`, protocol.CodeInvalidRequest, "invalid_request"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"echo"}`, protocol.CodeInvalidRequest, "invalid_request"},
		{`{"jsonrpc":"2.0","id":1,"method":"nope"}`, protocol.CodeMethodNotFound, "method_not_found"},
		{`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`, protocol.CodeInvalidParams, "invalid_params"},
		{`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"n":"x"}}`, protocol.CodeInvalidParams, "invalid_params"},
		{`{"jsonrpc":"2.0","id":1,"method":"refuse"}`, protocol.CodeRefused, "not_found"},
		{`{"jsonrpc":"2.0","id":1,"method":"panic"}`, protocol.CodeInternal, "internal"},
	}
	for _, tc := range cases {
		r := roundTrip(t, c, tc.frame)
		if r.Error == nil || r.Error.Code != tc.code || r.Error.Data["reason"] != tc.reason {
			t.Fatalf("%s: got %+v", tc.frame, r.Error)
		}
	}
	r := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"refuse"}`)
	if r.Error.Data["admission_id"] != "adm_1" || !strings.Contains(r.Error.Message, "wrapped") {
		t.Fatalf("refusal data = %+v", r.Error)
	}
	// The connection is still usable, and ids come back as sent.
	r = roundTrip(t, c, `{"jsonrpc":"2.0","id":"abc","method":"echo","params":{"n":7}}`)
	if string(r.ID) != `"abc"` || string(r.Result) != `{"n":7}` {
		t.Fatalf("echo = %s %s", r.ID, r.Result)
	}
	// Binary frames are refused without closing.
	ctx := context.Background()
	c.Write(ctx, websocket.MessageBinary, []byte(`{}`))
	_, b, _ := c.Read(ctx)
	if !strings.Contains(string(b), "binary frames") {
		t.Fatalf("binary frame answer %s", b)
	}
}

func TestConcurrentRequestsMatchedByID(t *testing.T) {
	release := make(chan struct{})
	mux := NewMux()
	mux.Handle("slow", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		<-release
		return "slow", nil
	})
	mux.Handle("fast", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { return "fast", nil })
	url, _ := serve(t, mux, Options{})
	c := dial(t, url)
	ctx := context.Background()
	c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"slow"}`))
	c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":2,"method":"fast"}`))
	_, b, _ := c.Read(ctx)
	if !strings.Contains(string(b), `"id":2`) {
		t.Fatalf("the fast request waited for the slow one: %s", b)
	}
	close(release)
	_, b, _ = c.Read(ctx)
	if !strings.Contains(string(b), `"id":1`) || !strings.Contains(string(b), `"slow"`) {
		t.Fatalf("slow response %s", b)
	}
}

func TestInFlightLimitRefusesWithOverloaded(t *testing.T) {
	release := make(chan struct{})
	mux := NewMux()
	mux.Handle("block", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		<-release
		return nil, nil
	})
	url, _ := serve(t, mux, Options{MaxInFlight: 2})
	c := dial(t, url)
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		c.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block"}`, i)))
	}
	r := roundTrip(t, c, `{"jsonrpc":"2.0","id":3,"method":"block"}`)
	if r.Error == nil || r.Error.Data["reason"] != "overloaded" {
		t.Fatalf("third request: %+v", r)
	}
	close(release)
}

func TestSlowReaderIsClosedWith1008(t *testing.T) {
	mux := NewMux()
	// The write timeout is long: this test is about the send-queue bound.
	// A write that times out makes the websocket library drop the TCP
	// connection without a close frame, and on a loaded machine a 500 ms
	// timeout could expire before the client below starts draining.
	url, conns := serve(t, mux, Options{SendQueue: 8, WriteTimeout: 30 * time.Second})
	c := dial(t, url)
	sc := <-conns
	// The client reads nothing while the server pushes large notifications
	// until the bound trips; Notify never blocks.
	big := strings.Repeat("x", 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Notify("session.event", map[string]string{"pad": big}) {
		if time.Now().After(deadline) {
			t.Fatal("the send queue never filled")
		}
	}
	select {
	case <-sc.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("slow connection not closed")
	}
	// Drain: the client eventually sees the 1008 close.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
				t.Fatalf("close status %v (%v), want 1008", got, err)
			}
			return
		}
	}
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	mux := NewMux()
	url, _ := serve(t, mux, Options{MaxMessageBytes: 1024})
	c := dial(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, []byte(`{"pad":"`+strings.Repeat("x", 4096)+`"}`))
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("close status %v (%v), want 1009", got, err)
	}
}

func TestCloseSendsStatusAfterQueuedFrames(t *testing.T) {
	mux := NewMux()
	url, conns := serve(t, mux, Options{})
	c := dial(t, url)
	sc := <-conns
	for i := 0; i < 5; i++ {
		sc.Notify("session.event", map[string]int{"n": i})
	}
	sc.Close(websocket.StatusGoingAway, "stopping")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got int
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusGoingAway {
				t.Fatalf("close %v", err)
			}
			break
		}
		got++
	}
	if got != 5 {
		t.Fatalf("got %d of 5 queued notifications before the close", got)
	}
	var once sync.Once
	sc.OnClose(func() { once.Do(func() {}) }) // after close: runs at once, no hang
}

func TestInvalidUTF8IsAParseError(t *testing.T) {
	mux := NewMux()
	mux.Handle("echo", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { return "ok", nil })
	url, _ := serve(t, mux, Options{})
	c := dial(t, url)
	r := roundTrip(t, c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"text\":\"a\xffb\"}}")
	if r.Error == nil || r.Error.Code != protocol.CodeParseError || !strings.Contains(r.Error.Message, "UTF-8") {
		t.Fatalf("invalid UTF-8 frame: %+v", r)
	}
	if r := roundTrip(t, c, `{"jsonrpc":"2.0","id":2,"method":"echo"}`); r.Error != nil {
		t.Fatalf("connection unusable after: %+v", r.Error)
	}
}

// TestUnreadResponsesAreBounded: a client that sends requests and never
// reads the responses cannot make the daemon queue them without bound:
// past SendQueue+MaxInFlight frames (or MaxQueuedBytes) it is closed with
// 1008, like a slow reader of notifications.
func TestUnreadResponsesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"frames", Options{SendQueue: 16, MaxInFlight: 4, WriteTimeout: time.Minute}},
		{"bytes", Options{SendQueue: 1 << 20, MaxInFlight: 1024, MaxQueuedBytes: 1 << 20, WriteTimeout: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := NewMux()
			big := strings.Repeat("x", 32<<10)
			mux.Handle("big", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) { return big, nil })
			url, conns := serve(t, mux, tc.opt)
			c := dial(t, url)
			sc := <-conns
			go func() {
				for i := 0; i < 3000 && sc.Context().Err() == nil; i++ {
					frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"big"}`, i)
					if c.Write(context.Background(), websocket.MessageText, []byte(frame)) != nil {
						return
					}
				}
			}()
			select {
			case <-sc.Context().Done():
			case <-time.After(20 * time.Second):
				sc.out.mu.Lock()
				n, b := len(sc.out.frames), sc.out.bytes
				sc.out.mu.Unlock()
				t.Fatalf("a client that reads nothing is still served; %d frames (%d bytes) queued", n, b)
			}
			if cause := context.Cause(sc.Context()); !errors.Is(cause, errSlow) {
				t.Fatalf("closed with cause %v, want the slow-client close (1008)", cause)
			}
		})
	}
}
