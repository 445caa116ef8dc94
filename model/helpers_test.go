package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// proxyHits counts requests that reached the trap proxy. Every test server
// listens on 127.0.0.1, which Go never proxies, so it must stay zero.
var proxyHits atomic.Int64

func TestMain(m *testing.M) {
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyHits.Add(1)
		http.Error(w, "trap proxy: tests must not be proxied", http.StatusBadGateway)
	}))
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		os.Setenv(k, trap.URL)
	}
	os.Unsetenv("NO_PROXY")
	os.Unsetenv("no_proxy")
	code := m.Run()
	trap.Close()
	if n := proxyHits.Load(); n != 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d request(s) went through HTTP_PROXY\n", n)
		code = 1
	}
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// server is an httptest server on 127.0.0.1 that counts requests and keeps
// the last request body.
type server struct {
	*httptest.Server
	requests atomic.Int64
	lastBody atomic.Value // []byte
	lastReq  atomic.Value // *http.Request (headers only)
}

func newServer(t testing.TB, h func(w http.ResponseWriter, r *http.Request, n int64)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.lastBody.Store(b)
		s.lastReq.Store(r.Clone(context.Background()))
		h(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

// sseFrames writes each frame as "data: <frame>\n\n", flushing after each.
func sseFrames(w http.ResponseWriter, frames ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	f, _ := w.(http.Flusher)
	for _, fr := range frames {
		fmt.Fprintf(w, "data: %s\n\n", fr)
		if f != nil {
			f.Flush()
		}
	}
}

// sseHandler replies with the given frames.
func sseHandler(frames ...string) func(http.ResponseWriter, *http.Request, int64) {
	return func(w http.ResponseWriter, r *http.Request, _ int64) { sseFrames(w, frames...) }
}

// testClient returns a client for s with fast retries and a generous idle
// timeout (so a bug fails rather than hangs for minutes).
func testClient(s *server, mod func(*Config)) *Client {
	cfg := Config{BaseURL: s.URL + "/v1", IdleTimeout: 10 * time.Second, ConnectTimeout: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c := New(cfg)
	c.maxRetryDelay = time.Millisecond
	return c
}

func simpleReq() Request {
	return Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}
}

const chunkHead = `"id":"c1","object":"chat.completion.chunk","created":1,"model":"m"`

func textChunk(s string) string {
	b, _ := json.Marshal(s)
	return `{` + chunkHead + `,"choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func roleChunk() string {
	return `{` + chunkHead + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
}

func finishChunk(reason string) string {
	return `{` + chunkHead + `,"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

func usageChunk(p, c int64) string {
	return fmt.Sprintf(`{`+chunkHead+`,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, p, c, p+c)
}

// toolChunk is one tool-call delta; index < 0 omits "index", empty id omits "id".
func toolChunk(index int, id, name, args string) string {
	tc := map[string]any{"function": map[string]any{"arguments": args}}
	if index >= 0 {
		tc["index"] = index
	}
	if id != "" {
		tc["id"] = id
		tc["type"] = "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
	return `{` + chunkHead + `,"choices":[{"index":0,"delta":` + string(b) + `,"finish_reason":null}]}`
}

// collect returns an onDelta that appends to a slice.
func collect(dst *[]string) func(string) {
	return func(s string) { *dst = append(*dst, s) }
}

// asError asserts err is a *Error of the given kind.
func asError(t *testing.T, err error, kind ErrorKind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want error of kind %q, got success", kind)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %T: %v", err, err)
	}
	if e.Kind != kind {
		t.Fatalf("want kind %q, got %q: %v", kind, e.Kind, err)
	}
	if msg := e.Error(); !strings.HasPrefix(msg, "model: ") {
		t.Fatalf("Error() = %q", msg)
	}
	return e
}

func stream(t *testing.T, c *Client, req Request) (*Response, []string, error) {
	t.Helper()
	var deltas []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Stream(ctx, req, collect(&deltas))
	return resp, deltas, err
}
