package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/protocol"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// testServer serves mux on /rpc behind a bearer-token check, like the
// daemon, and hands every server-side Conn to conns.
type testServer struct {
	*httptest.Server
	conns chan *Conn
}

const testToken = "secret-token"

func newTestServer(t *testing.T, mux *Mux, opt Options) *testServer {
	t.Helper()
	ts := &testServer{conns: make(chan *Conn, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.Header.Get("Authorization") == "Bearer "+testToken
		for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
			if strings.TrimSpace(p) == TokenSubprotocolPrefix+testToken {
				ok = true
			}
		}
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
		if err != nil {
			return
		}
		c := NewConn(ctx, ws, mux, opt)
		select {
		case ts.conns <- c:
		default:
		}
		wg.Add(1)
		defer wg.Done()
		c.Serve()
	}))
	t.Cleanup(func() {
		// Connections end first and the base context last: that is how
		// the daemon stops too.
		ts.Server.CloseClientConnections()
		wg.Wait()
		cancel()
		ts.Server.Close()
	})
	return ts
}

func (ts *testServer) url() string { return "ws" + strings.TrimPrefix(ts.URL, "http") + "/rpc" }

func dialT(t *testing.T, ts *testServer, opt DialOptions) *Client {
	t.Helper()
	if opt.Token == "" {
		opt.Token = testToken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.url(), opt)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func echoMux() *Mux {
	m := NewMux()
	m.Handle("echo", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		var p struct {
			N       int `json:"n"`
			DelayMS int `json:"delay_ms"`
		}
		if err := Decode(params, &p); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(p.DelayMS) * time.Millisecond)
		return map[string]int{"n": p.N}, nil
	})
	m.Handle("missing", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		return nil, protocol.Errorf(protocol.ReasonNotFound, "unknown session %q", "s1").With("session_id", "s1")
	})
	m.Handle("notify", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		p := struct {
			N int `json:"n"`
		}{3}
		if err := Decode(params, &p); err != nil {
			return nil, err
		}
		for i := 1; i <= p.N; i++ {
			c.Notify(protocol.NotifySessionEvent, map[string]int{"seq": i})
		}
		return "ok", nil
	})
	m.Handle("block", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return m
}

func TestClientDialAuth(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	_, err := Dial(ctx10(t), ts.url(), DialOptions{Token: "wrong"})
	var de *DialError
	if !errors.As(err, &de) || de.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: err = %v, want DialError 401", err)
	}
	_, err = Dial(ctx10(t), ts.url(), DialOptions{})
	if !errors.As(err, &de) || de.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: err = %v, want DialError 401", err)
	}
	// Both ways of sending the token work.
	for _, sub := range []bool{false, true} {
		c := dialT(t, ts, DialOptions{TokenAsSubprotocol: sub})
		var out map[string]int
		if err := c.Call(ctx10(t), "echo", map[string]int{"n": 7}, &out); err != nil || out["n"] != 7 {
			t.Fatalf("subprotocol token=%v: echo = %v, %v", sub, out, err)
		}
	}
	// Nothing listening: no HTTP status.
	addr := ts.url()
	ts.Close()
	_, err = Dial(ctx10(t), addr, DialOptions{Token: testToken})
	if !errors.As(err, &de) || de.StatusCode != 0 {
		t.Fatalf("closed server: err = %v", err)
	}
}

func TestClientConcurrentCallsMatchIDs(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	c := dialT(t, ts, DialOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var out map[string]int
			// Later calls answer sooner, so responses come out of order.
			if err := c.Call(ctx10(t), "echo", map[string]int{"n": i, "delay_ms": (40 - i) % 7 * 3}, &out); err != nil {
				errs <- err
				return
			}
			if out["n"] != i {
				errs <- fmt.Errorf("call %d got %d", i, out["n"])
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClientErrorsCarryReason(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	c := dialT(t, ts, DialOptions{})
	err := c.Call(ctx10(t), "missing", nil, nil)
	var re *protocol.Error
	if !errors.As(err, &re) || !errors.Is(err, protocol.ErrNotFound) || re.Code != protocol.CodeRefused || re.Data["session_id"] != "s1" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(re.Error(), `unknown session "s1"`) {
		t.Fatalf("message = %q", re.Error())
	}
	err = c.Call(ctx10(t), "no.such.method", nil, nil)
	if !errors.As(err, &re) || re.Code != protocol.CodeMethodNotFound || re.Reason != protocol.ReasonMethodNotFound {
		t.Fatalf("err = %#v", err)
	}
	err = c.Call(ctx10(t), "echo", map[string]string{"n": "x"}, nil)
	if !errors.Is(err, protocol.ErrInvalidParams) {
		t.Fatalf("err = %#v", err)
	}
}

func TestClientNotificationsInOrder(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	c := dialT(t, ts, DialOptions{})
	if err := c.Call(ctx10(t), "notify", nil, nil); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 3; want++ {
		select {
		case n := <-c.Notifications():
			var p struct{ Seq int }
			json.Unmarshal(n.Params, &p)
			if n.Method != protocol.NotifySessionEvent || p.Seq != want {
				t.Fatalf("notification %d = %s %s", want, n.Method, n.Params)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %d did not come", want)
		}
	}

	// The callback form sees them on the reader, in order.
	var mu sync.Mutex
	var got []string
	cb := dialT(t, ts, DialOptions{OnNotification: func(n Notification) {
		mu.Lock()
		got = append(got, string(n.Params))
		mu.Unlock()
	}})
	if err := cb.Call(ctx10(t), "notify", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Notifications were queued before the response, so they are in.
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != `{"seq":1},{"seq":2},{"seq":3}` {
		t.Fatalf("callback got %v", got)
	}
	if _, ok := <-cb.Notifications(); ok {
		t.Fatal("Notifications must be closed when a callback is used")
	}
}

func TestClientCancelledCallKeepsConnection(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	c := dialT(t, ts, DialOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Call(ctx, "block", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	var out map[string]int
	if err := c.Call(ctx10(t), "echo", map[string]int{"n": 1}, &out); err != nil || out["n"] != 1 {
		t.Fatalf("after a cancelled call: %v %v", out, err)
	}
}

func TestClientCloseStatus(t *testing.T) {
	mux := echoMux()
	// hang ignores the connection ending, so its call can only fail by
	// the close (not by an error response).
	release := make(chan struct{})
	mux.Handle("hang", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		<-release
		return nil, nil
	})
	ts := newTestServer(t, mux, Options{})
	t.Cleanup(func() { close(release) })
	c := dialT(t, ts, DialOptions{})
	server := <-ts.conns
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), "hang", nil, nil) }()
	// Let the call reach the server before it goes away.
	fixtures.Eventually(t, 10*time.Second, "the call to be pending", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending) == 1
	})
	server.Close(websocket.StatusGoingAway, "daemon stopping")
	select {
	case err := <-callErr:
		var ce *ClosedError
		if !errors.Is(err, ErrClosed) || !errors.As(err, &ce) || ce.Status != websocket.StatusGoingAway {
			t.Fatalf("pending call err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pending call did not fail on close")
	}
	<-c.Done()
	if c.CloseStatus() != websocket.StatusGoingAway || !strings.Contains(c.Err().Error(), "daemon stopping") {
		t.Fatalf("close status %d, err %v", c.CloseStatus(), c.Err())
	}
	if err := c.Call(ctx10(t), "echo", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
	if _, ok := <-c.Notifications(); ok {
		t.Fatal("Notifications must be closed after the connection ended")
	}
}

func TestClientSlowConsumerIsClosed(t *testing.T) {
	ts := newTestServer(t, echoMux(), Options{})
	c := dialT(t, ts, DialOptions{NotificationQueue: 2})
	// The response arrives after ten notifications; nobody reads them,
	// so the client gives up with 1008 rather than growing without bound.
	err := c.Call(ctx10(t), "notify", map[string]int{"n": 10}, nil)
	select {
	case <-c.Done():
	case <-ctx10(t).Done():
		t.Fatalf("the client was not closed after ten unread notifications (call err %v)", err)
	}
	if c.CloseStatus() != websocket.StatusPolicyViolation {
		t.Fatalf("close status %d (call err %v)", c.CloseStatus(), err)
	}
}

// TestClientMemberNamesAreCaseSensitive: a frame whose member names differ
// from JSON-RPC's only by case ("ID", "Result", "Method") is neither a
// reply nor a notification; the well-formed reply that follows is.
func TestClientMemberNamesAreCaseSensitive(t *testing.T) {
	var got []Notification
	c := &Client{pending: map[int64]chan clientResponse{}, opt: DialOptions{OnNotification: func(n Notification) { got = append(got, n) }}}
	ch := make(chan clientResponse, 2)
	c.pending[1] = ch
	for _, f := range []string{
		`{"jsonrpc":"2.0","ID":1,"result":{"n":"wrong"}}`,
		`{"jsonrpc":"2.0","id":1,"Result":{"n":"wrong"}}`,
		`{"jsonrpc":"2.0","Method":"session.event","params":{}}`,
	} {
		c.dispatch([]byte(f))
		select {
		case r := <-ch:
			t.Fatalf("%s was taken as the reply: %+v", f, r)
		default:
		}
	}
	if len(got) != 0 {
		t.Fatalf("notifications from wrong-case frames: %+v", got)
	}
	c.dispatch([]byte(`{"jsonrpc":"2.0","id":1,"result":{"n":"right"}}`))
	select {
	case r := <-ch:
		if string(r.result) != `{"n":"right"}` {
			t.Fatalf("reply %s", r.result)
		}
	default:
		t.Fatal("the well-formed reply was not delivered")
	}
}

// With VisibleStrings, escape sequences in results and notifications
// arrive made visible; without, they arrive as sent.
func TestClientVisibleStrings(t *testing.T) {
	m := NewMux()
	evil := "echo hi\x1b[2K\r\x1b]52;c;cm0gLXJmIH4=\x07 \u202etxt"
	m.Handle("evil", func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		c.Notify(protocol.NotifySessionEvent, map[string]string{"text": evil})
		return map[string]string{"command": evil}, nil
	})
	ts := newTestServer(t, m, Options{})
	for _, visible := range []bool{true, false} {
		c := dialT(t, ts, DialOptions{VisibleStrings: visible})
		var r struct{ Command string }
		if err := c.Call(ctx10(t), "evil", nil, &r); err != nil {
			t.Fatal(err)
		}
		n := <-c.Notifications()
		var p struct{ Text string }
		json.Unmarshal(n.Params, &p)
		for _, got := range []string{r.Command, p.Text} {
			clean := !strings.ContainsAny(got, "\x1b\r\x07\u202e")
			if clean != visible {
				t.Fatalf("VisibleStrings %v: got %q", visible, got)
			}
		}
	}
}
