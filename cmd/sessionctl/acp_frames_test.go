package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is the bridge's stdout in these tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// filtered runs the frame filter over in and returns the lines it passes
// to the SDK and what it answered itself on stdout.
func filtered(t *testing.T, in string) (lines []string, answered string) {
	t.Helper()
	out := &syncBuffer{}
	f := newFrames(&bridge{}, out)
	sc := bufio.NewScanner(f.filter(strings.NewReader(in)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return lines, out.String()
}

// TestACPOversizedFrameDoesNotEndTheBridge: the editor sends one frame
// longer than the 10 MiB line limit (a pasted log in a prompt), then an
// ordinary request. The filter answered -32700 and stopped reading stdin:
// the SDK saw end of input and the bridge exited, dropping the next
// request and every later one. What should hold: the oversized frame is
// refused and skipped; the next frame goes through.
func TestACPOversizedFrameDoesNotEndTheBridge(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"` +
		strings.Repeat("x", maxFrame+1) + `"}]}}`
	next := `{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`
	lines, answered := filtered(t, big+"\n"+next+"\n")
	if len(lines) != 1 || lines[0] != next {
		t.Errorf("after an oversized frame the SDK got %d lines (want only the next request %s)", len(lines), next)
	}
	if !strings.Contains(answered, `"code":-32600`) && !strings.Contains(answered, `"code":-32700`) {
		t.Errorf("the oversized frame was not refused: stdout %.300q", answered)
	}
	if !strings.Contains(answered, `"id":1`) {
		t.Errorf("the refusal does not name the request's id 1 (its head has it), the editor waits for an answer: %.300q", answered)
	}
}

// TestACPPromptFrameRewrittenPastTheSDKLimit: a session/prompt frame just
// under the line limit passes the filter, which adds the request id to its
// _meta; the rewritten line is then longer than the SDK's 10 MiB scanner
// buffer, the SDK's reader fails and the connection shuts down with the
// prompt unanswered. What should hold: nothing longer than the SDK's limit
// reaches it; such a request is answered with an error by its id.
func TestACPPromptFrameRewrittenPastTheSDKLimit(t *testing.T) {
	head := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"`
	tail := `"}]}}`
	line := head + strings.Repeat("y", sdkMaxLine-1-len(head)-len(tail)) + tail
	lines, answered := filtered(t, line+"\n")
	for _, l := range lines {
		if len(l) >= sdkMaxLine {
			t.Errorf("a %d-byte line reached the SDK, whose limit is %d: it shuts the connection down", len(l), sdkMaxLine)
		}
	}
	if len(lines) == 0 && !strings.Contains(answered, `"id":7`) {
		t.Errorf("the prompt was neither passed on nor answered: stdout %.300q", answered)
	}
}

// TestACPCancelRequestOfNonPromptsIsForgotten: $/cancel_request of a
// request that is not a prompt (session/list, session/load), of one long
// answered or of an id never sent was kept in the bridge's map of
// "prompts cancelled before they registered" for the bridge's lifetime: an
// editor cancelling its requests grew it without bound. What should hold:
// an id not in flight is ignored, and the entry goes when its request is
// answered.
func TestACPCancelRequestOfNonPromptsIsForgotten(t *testing.T) {
	out := &syncBuffer{}
	b := newBridge(&app{}, nil, 0)
	f := newFrames(b, out)
	pending := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.cancelledReqs)
	}
	f.frame([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":41}}`))
	if n := pending(); n != 0 {
		t.Errorf("$/cancel_request of an id never sent left %d entries", n)
	}
	f.frame([]byte(`{"jsonrpc":"2.0","id":42,"method":"session/list","params":{}}`))
	f.frame([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":42}}`))
	f.out.Write([]byte(`{"jsonrpc":"2.0","id":42,"error":{"code":-32800,"message":"Request cancelled"}}` + "\n"))
	if n := pending(); n != 0 {
		t.Errorf("$/cancel_request of session/list, answered since, left %d entries", n)
	}
}
