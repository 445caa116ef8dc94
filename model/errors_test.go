package model

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Quirk 4: EOF with neither [DONE] nor a finish_reason is truncated, never
// success, and is not retried.
func TestTruncated(t *testing.T) {
	cases := map[string]func(w http.ResponseWriter){
		"text then EOF": func(w http.ResponseWriter) {
			sseFrames(w, roleChunk(), textChunk("par"), textChunk("tial"))
		},
		"tool deltas then EOF": func(w http.ResponseWriter) {
			sseFrames(w, toolChunk(0, "call_a", "terminal", `{"comm`))
		},
		"usage only then EOF": func(w http.ResponseWriter) {
			sseFrames(w, textChunk("x"), usageChunk(1, 1))
		},
		"empty 200 body": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
		},
		"only keep-alive comments": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(": ping\n\n: ping\n\n"))
		},
		"event without blank line then EOF": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: " + textChunk("x") + "\n\ndata: " + finishChunk("stop")))
		},
		"connection aborted mid-stream": func(w http.ResponseWriter) {
			sseFrames(w, textChunk("a"), textChunk("b"))
			panic(http.ErrAbortHandler)
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) { h(w) })
			resp, _, err := stream(t, testClient(s, nil), simpleReq())
			if resp != nil {
				t.Errorf("resp = %+v, want nil", resp)
			}
			e := asError(t, err, KindTruncated)
			if e.Status != http.StatusOK {
				t.Errorf("Status = %d", e.Status)
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want 1 (no retry once the stream started)", n)
			}
		})
	}
}

// Quirk 5: non-2xx replies carry the server's text.
func TestHTTPStatusErrors(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	cases := []struct {
		name, ctype, body string
		status            int
		wantMsg           string
	}{
		{"openai json error", "application/json", `{"error":{"message":"model 'x' not found","type":"invalid_request_error","code":"model_not_found"}}`, 404, "model 'x' not found"},
		{"plain text", "text/plain", "upstream exploded\n", 400, "upstream exploded"},
		{"string error", "application/json", `{"error":"context length exceeded"}`, 400, "context length exceeded"},
		{"fastapi detail", "application/json", `{"detail":"Unauthorized"}`, 401, "Unauthorized"},
		{"html", "text/html", "<html><body>Bad Gateway</body></html>", 403, "Bad Gateway"},
		{"long body", "text/plain", long, 422, "éé"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, _, err := stream(t, testClient(s, nil), simpleReq())
			e := asError(t, err, KindHTTPStatus)
			if e.Status != tc.status {
				t.Errorf("Status = %d, want %d", e.Status, tc.status)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), tc.wantMsg)
			}
			if len(e.Body) > MaxErrorBody || !strings.HasPrefix(tc.body, e.Body) || e.Body == "" {
				t.Errorf("Body (%d bytes) is not a capped prefix of the reply", len(e.Body))
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want 1 (4xx is not retried)", n)
			}
		})
	}
}

// Quirk 5: a 200 that is not a usable event stream is bad_response with the
// server's text.
func TestBadResponse(t *testing.T) {
	cases := []struct {
		name     string
		h        func(w http.ResponseWriter)
		wantBody string
	}{
		{"html page", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>Captive portal: please log in</body></html>"))
		}, "Captive portal"},
		{"non-streamed json", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"error": {"message": "streaming is disabled"}}`))
		}, "streaming is disabled"},
		{"garbage data", func(w http.ResponseWriter) {
			sseFrames(w, textChunk("ok"), "this is not json", finishChunk("stop"), "[DONE]")
		}, "this is not json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) { tc.h(w) })
			_, _, err := stream(t, testClient(s, nil), simpleReq())
			e := asError(t, err, KindBadResponse)
			if !strings.Contains(e.Body, tc.wantBody) || !strings.Contains(err.Error(), tc.wantBody) {
				t.Errorf("Body = %q, Error() = %q; want both to contain %q", e.Body, err.Error(), tc.wantBody)
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

// Quirk 6: a 500 then a good stream retries once and succeeds.
func TestRetry5xxThenSuccess(t *testing.T) {
	for _, status := range []int{503, 429} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int64) {
				if n == 1 {
					http.Error(w, "try again", status)
					return
				}
				sseFrames(w, textChunk("ok"), finishChunk("stop"), "[DONE]")
			})
			resp, deltas, err := stream(t, testClient(s, nil), simpleReq())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "ok" || len(deltas) != 1 {
				t.Errorf("resp=%+v deltas=%q", resp, deltas)
			}
			if n := s.requests.Load(); n != 2 {
				t.Errorf("requests = %d, want 2", n)
			}
		})
	}
}

// TestNoRetryWhenTheRequestMayHaveRun: 500, 502 and 504 may mean the
// server (or the upstream behind a gateway) processed the request; a retry
// could make one input reach the model twice.
func TestNoRetryWhenTheRequestMayHaveRun(t *testing.T) {
	for _, status := range []int{500, 502, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
				http.Error(w, `{"error":{"message":"upstream trouble"}}`, status)
			})
			_, _, err := stream(t, testClient(s, nil), simpleReq())
			e := asError(t, err, KindHTTPStatus)
			if e.Status != status || !strings.Contains(err.Error(), "upstream trouble") {
				t.Errorf("err = %v", err)
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		http.Error(w, `{"error":{"message":"still broken"}}`, http.StatusServiceUnavailable)
	})
	_, _, err := stream(t, testClient(s, nil), simpleReq())
	e := asError(t, err, KindHTTPStatus)
	if e.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "still broken") {
		t.Errorf("err = %v", err)
	}
	if n := s.requests.Load(); n != 1+DefaultMaxRetries {
		t.Errorf("requests = %d, want %d", n, 1+DefaultMaxRetries)
	}
}

func TestNegativeMaxRetriesDisablesRetry(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	})
	_, _, err := stream(t, testClient(s, func(c *Config) { c.MaxRetries = -1 }), simpleReq())
	asError(t, err, KindHTTPStatus)
	if n := s.requests.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

// Quirk 6: a stream that fails after deltas were delivered is never retried,
// even though its failure is a connection error.
func TestNoRetryAfterDeltas(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		sseFrames(w, textChunk("one "), textChunk("two"))
		panic(http.ErrAbortHandler)
	})
	_, deltas, err := stream(t, testClient(s, func(c *Config) { c.MaxRetries = 5 }), simpleReq())
	asError(t, err, KindTruncated)
	if strings.Join(deltas, "") != "one two" {
		t.Errorf("deltas = %q", deltas)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := New(Config{BaseURL: "http://" + addr + "/v1", MaxRetries: 1})
	c.maxRetryDelay = time.Millisecond
	_, _, err = stream(t, c, simpleReq())
	e := asError(t, err, KindConnection)
	if e.Err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err = %v", err)
	}
}

// A server that accepts the connection but never answers hits the
// response-header part of ConnectTimeout.
func TestConnectTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	c := New(Config{BaseURL: "http://" + l.Addr().String() + "/v1", ConnectTimeout: 200 * time.Millisecond, MaxRetries: -1})
	start := time.Now()
	_, _, err = stream(t, c, simpleReq())
	asError(t, err, KindTimeout)
	if d := time.Since(start); d < 200*time.Millisecond || d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// Quirk 7: one chunk then silence times out after about IdleTimeout.
func TestIdleTimeout(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		sseFrames(w, textChunk("first"))
		<-r.Context().Done() // stall until the client gives up
	})
	const idle = 200 * time.Millisecond
	c := testClient(s, func(c *Config) { c.IdleTimeout = idle })
	start := time.Now()
	_, deltas, err := stream(t, c, simpleReq())
	elapsed := time.Since(start)
	e := asError(t, err, KindTimeout)
	if len(deltas) != 1 {
		t.Errorf("deltas = %q", deltas)
	}
	if !strings.Contains(e.Error(), "idle") {
		t.Errorf("Error() = %q", e.Error())
	}
	if elapsed < idle || elapsed > 10*time.Second {
		t.Errorf("took %v with IdleTimeout %v", elapsed, idle)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

// The idle timer measures server silence only: a consumer that is slow in
// onDelta does not make the stream time out.
func TestSlowConsumerIsNotIdle(t *testing.T) {
	released := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		sseFrames(w, textChunk("first"))
		select {
		case <-released: // the client finished its slow onDelta
		case <-r.Context().Done():
			return
		}
		sseFrames(w, textChunk(" second"), finishChunk("stop"), "[DONE]")
	})
	// Long enough that the server's next chunk, sent as soon as the
	// consumer returns, arrives within it even on a loaded machine.
	const idle = 500 * time.Millisecond
	c := testClient(s, func(c *Config) { c.IdleTimeout = idle })
	var once sync.Once
	resp, err := c.Stream(t.Context(), simpleReq(), func(string) {
		once.Do(func() {
			// Simulate a consumer that takes longer than IdleTimeout; this
			// wait is the behaviour under test, not synchronisation.
			<-time.After(3 * idle)
			close(released)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "first second" {
		t.Errorf("resp = %+v", resp)
	}
}

// Quirk 7: cancelling the context mid-stream returns cancelled promptly.
func TestCancelDuringStream(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		sseFrames(w, textChunk("first"))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	_, err := testClient(s, nil).Stream(ctx, simpleReq(), func(string) { cancel() })
	e := asError(t, err, KindCancelled)
	if !errors.Is(e, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = false: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func TestCancelBeforeHeaders(t *testing.T) {
	arrived := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := testClient(s, func(c *Config) { c.MaxRetries = 5 }).Stream(ctx, simpleReq(), nil)
	asError(t, err, KindCancelled)
	if n := s.requests.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestCancelledUpFront(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("x"), "[DONE]"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := testClient(s, nil).Stream(ctx, simpleReq(), nil)
	asError(t, err, KindCancelled)
	if n := s.requests.Load(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
}

func TestDeadlineIsCancelled(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		sseFrames(w, textChunk("first"))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := testClient(s, nil).Stream(ctx, simpleReq(), nil)
	e := asError(t, err, KindCancelled)
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

// A finish_reason counts as complete: a server that then stalls (or drops the
// connection) instead of sending usage and [DONE] does not fail the call.
func TestFinishReasonThenStallOrReset(t *testing.T) {
	t.Run("stall", func(t *testing.T) {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
			sseFrames(w, textChunk("done"), finishChunk("stop"))
			<-r.Context().Done()
		})
		c := testClient(s, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
		resp, _, err := stream(t, c, simpleReq())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "done" || resp.FinishReason != "stop" || resp.Usage != nil {
			t.Errorf("resp = %+v", resp)
		}
	})
	t.Run("reset", func(t *testing.T) {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
			sseFrames(w, toolChunk(0, "call_a", "terminal", `{"command":"ls"}`), finishChunk("tool_calls"))
			panic(http.ErrAbortHandler)
		})
		resp, _, err := stream(t, testClient(s, nil), simpleReq())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 1 || resp.FinishReason != "tool_calls" {
			t.Errorf("resp = %+v", resp)
		}
	})
}

// openai-go would also retry 408/409 and anything marked
// "x-should-retry: true"; sessiond retries only 429, 5xx and transport errors.
func TestRetryPolicyNarrowed(t *testing.T) {
	for _, status := range []int{408, 409, 200} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
				w.Header().Set("X-Should-Retry", "true")
				if status != 200 {
					http.Error(w, "no", status)
					return
				}
				sseFrames(w, textChunk("x"))
			})
			_, _, err := stream(t, testClient(s, nil), simpleReq())
			if err == nil {
				t.Fatal("want error")
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}
