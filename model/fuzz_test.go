package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// memTransport answers every request in memory (no network, not even
// loopback) with status 200, Content-Type text/event-stream and body as
// the response body, handed out at most chunk bytes per Read (0: all at
// once).
type memTransport struct {
	body  []byte
	chunk int
}

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          io.NopCloser(&chunkReader{b: m.body, n: m.chunk}),
		ContentLength: -1,
		Request:       req,
	}, nil
}

// chunkReader reads b at most n bytes at a time (n <= 0: unbounded).
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if r.n > 0 && len(p) > r.n {
		p = p[:r.n]
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// fuzzOutcome is one Stream call's result and the fragments passed to
// onDelta.
type fuzzOutcome struct {
	resp   *Response
	err    error
	deltas []string
}

// fuzzDeadline bounds one Stream call; a body held in memory must be read
// far faster, so reaching it means a hang.
const fuzzDeadline = 5 * time.Second

func fuzzStream(body []byte, chunk int) fuzzOutcome {
	c := New(Config{BaseURL: "http://model.invalid/v1", MaxRetries: -1, IdleTimeout: fuzzDeadline,
		HTTPClient: &http.Client{Transport: memTransport{body: body, chunk: chunk}}})
	ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
	defer cancel()
	var o fuzzOutcome
	o.resp, o.err = c.Stream(ctx, simpleReq(), func(s string) { o.deltas = append(o.deltas, s) })
	return o
}

// brief formats v for a failure message, at most 300 bytes of it.
func brief(v any) string {
	s := fmt.Sprintf("%+v", v)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// generatedID is the id the client makes for a call the server sent
// without one.
var generatedID = regexp.MustCompile(`^call_[0-9a-f]{16}$`)

// checkOutcome asserts the documented result shapes of Client.Stream.
func checkOutcome(t *testing.T, body []byte, o fuzzOutcome) {
	t.Helper()
	if (o.resp == nil) == (o.err == nil) {
		t.Fatalf("Stream returned resp=%v and err=%v; want exactly one", o.resp, o.err)
	}
	if o.err != nil {
		var e *Error
		if !errors.As(o.err, &e) {
			t.Fatalf("error %T %v is not a *model.Error", o.err, o.err)
		}
		switch e.Kind {
		case KindTruncated, KindBadResponse, KindStreamError:
		case KindCancelled, KindTimeout:
			t.Fatalf("an in-memory body of %d bytes did not finish within %v: %v", len(body), fuzzDeadline, o.err)
		default:
			t.Fatalf("error kind %q for a 200 text/event-stream reply: %v", e.Kind, o.err)
		}
		msg := o.err.Error()
		if !strings.HasPrefix(msg, "model: ") || !utf8.ValidString(msg) {
			t.Fatalf("unclear error message %.300q", msg)
		}
		if e.Status != http.StatusOK {
			t.Fatalf("error status %d, want 200: %v", e.Status, o.err)
		}
		if len(e.Body) > MaxErrorBody || !utf8.ValidString(e.Body) {
			t.Fatalf("error body of %d bytes (valid UTF-8: %v)", len(e.Body), utf8.ValidString(e.Body))
		}
		return
	}
	r := o.resp
	// The reply is complete only after a finish_reason or [DONE].
	if !bytes.Contains(body, []byte("[DONE]")) && !bytes.Contains(body, []byte("finish")) && !bytes.Contains(body, []byte(`\u`)) {
		t.Fatalf("success without a finish_reason or [DONE] in the body: %s", brief(r))
	}
	if r.FinishReason == "" {
		t.Fatalf("success without a finish reason: %s", brief(r))
	}
	for _, d := range o.deltas {
		if d == "" {
			t.Fatal("onDelta was called with an empty fragment")
		}
	}
	if got := strings.Join(o.deltas, ""); got != r.Content {
		t.Fatalf("Content %.200q is not the concatenated deltas %.200q", r.Content, got)
	}
	if !utf8.ValidString(r.Content) {
		t.Fatalf("Content is not valid UTF-8: %.200q", r.Content)
	}
	for i, tc := range r.ToolCalls {
		if tc.ID == "" || strings.TrimSpace(tc.Arguments) == "" {
			t.Fatalf("tool call %d has no id or empty arguments: %s", i, brief(tc))
		}
		if !utf8.ValidString(tc.ID) || !utf8.ValidString(tc.Name) || !utf8.ValidString(tc.Arguments) {
			t.Fatalf("tool call %d is not valid UTF-8: %s", i, brief(tc))
		}
	}
}

// sameOutcome reports why two outcomes of the same body differ, or "".
// Ids the client generated differ between calls by design.
func sameOutcome(a, b fuzzOutcome) string {
	if (a.err == nil) != (b.err == nil) {
		return "one call failed, the other did not"
	}
	if a.err != nil {
		var ea, eb *Error
		errors.As(a.err, &ea)
		errors.As(b.err, &eb)
		if ea.Kind != eb.Kind || ea.Body != eb.Body {
			return "errors differ"
		}
		return ""
	}
	ra, rb := *a.resp, *b.resp
	if ra.Content != rb.Content || ra.FinishReason != rb.FinishReason || !reflect.DeepEqual(ra.Usage, rb.Usage) ||
		len(ra.ToolCalls) != len(rb.ToolCalls) {
		return "responses differ"
	}
	for i := range ra.ToolCalls {
		ca, cb := ra.ToolCalls[i], rb.ToolCalls[i]
		if ca.Name != cb.Name || ca.Arguments != cb.Arguments {
			return "tool calls differ"
		}
		if ca.ID != cb.ID && !(generatedID.MatchString(ca.ID) && generatedID.MatchString(cb.ID)) {
			return "tool call ids differ"
		}
	}
	return ""
}

// FuzzStream feeds arbitrary bytes as the text/event-stream body of a 200
// reply to the real client (Client.Stream: openai-go's SSE decoder, chunk
// decoding, tool-call accumulation, error classification) over an
// in-memory transport, once in one piece and once split into reads of
// 1-16 bytes. Properties: no panic, no hang (each call must end within
// 5 s); either a Response or an *Error, never both; an error is
// truncated or bad_response with a "model: " message in valid UTF-8 and a
// capped Body; a Response has a finish reason (only when the body has a
// finish_reason or [DONE]), Content equal to the concatenated non-empty
// onDelta fragments, and tool calls with ids and non-empty arguments; the
// outcome does not depend on how the body is split across reads.
//
// Tool-call names and arguments are passed through as the model produced
// them (see ToolCall); the agent reports an unknown name or malformed
// arguments to the model as a failed tool call.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: "+textChunk("hi")+"\n\ndata: "+finishChunk("stop")+"\n\ndata: [DONE]\n\n"), uint8(0))
	f.Add([]byte("data: "+toolChunk(0, "call_a", "terminal", `{"command":"ls"}`)+"\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data: "+textChunk("cut")+"\n\n"), uint8(1))
	f.Add([]byte("<html>502 Bad Gateway</html>"), uint8(7))
	f.Fuzz(func(t *testing.T, body []byte, split uint8) {
		whole := fuzzStream(body, 0)
		checkOutcome(t, body, whole)
		pieces := fuzzStream(body, int(split%16)+1)
		checkOutcome(t, body, pieces)
		if why := sameOutcome(whole, pieces); why != "" {
			t.Fatalf("%s when the body is read in %d-byte pieces:\nwhole:  %s %s\npieces: %s %s",
				why, split%16+1, brief(whole.resp), brief(whole.err), brief(pieces.resp), brief(pieces.err))
		}
	})
}
