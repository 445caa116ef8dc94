package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/protocol"
)

var fixtureBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-fixture-")
	if err != nil {
		panic(err)
	}
	fixtureBin = filepath.Join(dir, "mcpserver")
	out, err := exec.Command("go", "build", "-o", fixtureBin, "../../fixtures/mcpserver").CombinedOutput()
	if err != nil {
		panic("build the fixture server: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// events reads the fixture's event log.
func events(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func count(evs []map[string]any, event, tool string) int {
	n := 0
	for _, e := range evs {
		if e["event"] == event && (tool == "" || e["tool"] == tool) {
			n++
		}
	}
	return n
}

// statusLog collects OnStatus reports.
type statusLog struct {
	mu  sync.Mutex
	all []protocol.MCPServerStatus
}

func (l *statusLog) add(s protocol.MCPServerStatus) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *statusLog) has(st protocol.MCPStatus, errPart string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		if s.Status == st && strings.Contains(s.Error, errPart) {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newSet makes an unsandboxed set of one fixture server started with
// mode; the log is in a temp dir.
func newSet(t *testing.T, mode string, opt Options) (*Set, string, *statusLog) {
	t.Helper()
	dir := t.TempDir()
	logf := filepath.Join(dir, "events.jsonl")
	srv := Server{Name: "fx", Command: fixtureBin, Args: []string{"-mode", mode, "-log", logf}, Source: SourceConfig, AutoApprove: []string{"echo"}}
	sl := &statusLog{}
	opt.Cwd = dir
	opt.Env = []string{"PATH=" + os.Getenv("PATH")}
	opt.OnStatus = sl.add
	s := NewSet([]Server{srv}, opt)
	t.Cleanup(s.Stop)
	return s, logf, sl
}

func ready(t *testing.T, s *Set) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Wait(ctx)
	if st := s.Status()[0]; st.Status != protocol.MCPReady {
		t.Fatalf("server not ready: %+v", st)
	}
}

func TestListAndCall(t *testing.T) {
	s, logf, sl := newSet(t, "serve", Options{})
	if st := s.Status()[0]; st.Status != protocol.MCPStopped {
		t.Fatalf("before Acquire: %+v, want stopped", st)
	}
	s.Acquire()
	defer s.Release()
	ready(t, s)
	tools := s.Tools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.FullName)
	}
	if !strings.Contains(strings.Join(names, ","), "mcp__fx__echo") || !sl.has(protocol.MCPReady, "") {
		t.Fatalf("tools %v", names)
	}
	echo, _ := s.Tool("fx", "echo")
	if !echo.AutoApproved || !strings.Contains(string(echo.InputSchema), `"text"`) {
		t.Errorf("echo: %+v", echo)
	}
	sent := false
	res, err := s.Call(context.Background(), "fx", "echo", json.RawMessage(`{"text":"hi"}`), CallOptions{BeforeSend: func() error { sent = true; return nil }})
	if err != nil || !sent {
		t.Fatalf("call: %v (sent %v)", err, sent)
	}
	txt, ok := FormatResult("fx", "echo", res, 1000)
	if !ok || !strings.Contains(txt, "echo: hi") || !strings.Contains(txt, `"structured_content":{"echo":"hi"}`) {
		t.Errorf("result %s", txt)
	}
	if n := count(events(t, logf), "call", "echo"); n != 1 {
		t.Errorf("%d echo calls reached the server, want 1", n)
	}
	// BeforeSend failing sends nothing.
	_, err = s.Call(context.Background(), "fx", "echo", json.RawMessage(`{"text":"no"}`), CallOptions{BeforeSend: func() error { return errors.New("store down") }})
	if !errors.Is(err, ErrNotSent) || count(events(t, logf), "call", "echo") != 1 {
		t.Errorf("BeforeSend failure: %v; calls %d", err, count(events(t, logf), "call", "echo"))
	}
	// list_changed: the new tool appears.
	if _, err := s.Call(context.Background(), "fx", "grow", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tool extra after list_changed", func() bool { _, ok := s.Tool("fx", "extra"); return ok })
}

func TestExitAtStartFailsAndRestarts(t *testing.T) {
	s, logf, sl := newSet(t, "exit", Options{})
	s.Acquire()
	defer s.Release()
	eventually(t, "failed with the server's stderr", func() bool { return sl.has(protocol.MCPFailed, "exiting at start") })
	if len(s.Tools()) != 0 {
		t.Errorf("tools of a failed server: %v", s.Tools())
	}
	if notes := s.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "withdrawn") {
		t.Errorf("notes %v", notes)
	}
	_, err := s.Call(context.Background(), "fx", "echo", nil, CallOptions{})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("call on a failed server: %v", err)
	}
	// Restarted with backoff: a second start.
	eventually(t, "a restart", func() bool { return count(events(t, logf), "start", "") >= 2 })
}

func TestHangInInitializeTimesOut(t *testing.T) {
	s, _, sl := newSet(t, "hang-init", Options{StartTimeout: 500 * time.Millisecond})
	s.Acquire()
	defer s.Release()
	eventually(t, "failed: initialize timed out", func() bool { return sl.has(protocol.MCPFailed, "within 500ms") })
}

func TestGarbageAtStart(t *testing.T) {
	s, _, sl := newSet(t, "garbage", Options{StartTimeout: 5 * time.Second})
	s.Acquire()
	defer s.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Wait(ctx)
	st := s.Status()[0]
	t.Logf("after malformed frames at start: %+v (history %d)", st, len(sl.all))
	if st.Status != protocol.MCPReady && st.Status != protocol.MCPFailed {
		t.Fatalf("status %+v", st)
	}
}

func TestDieMidCall(t *testing.T) {
	s, logf, sl := newSet(t, "serve", Options{})
	s.Acquire()
	defer s.Release()
	ready(t, s)
	_, err := s.Call(context.Background(), "fx", "die", nil, CallOptions{})
	if err == nil || !strings.Contains(err.Error(), "exited with status 9") {
		t.Fatalf("call to a dying server: %v", err)
	}
	eventually(t, "failed, then ready again", func() bool {
		return sl.has(protocol.MCPFailed, "status 9") && s.Status()[0].Status == protocol.MCPReady
	})
	if n := count(events(t, logf), "call", "die"); n != 1 {
		t.Errorf("die reached the server %d times, want 1 (never re-sent)", n)
	}
}

func TestCancelSendsCancelled(t *testing.T) {
	s, logf, _ := newSet(t, "serve", Options{})
	s.Acquire()
	defer s.Release()
	ready(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, "fx", "slow", json.RawMessage(`{"seconds":600}`), CallOptions{})
		done <- err
	}()
	eventually(t, "the call at the server", func() bool { return count(events(t, logf), "call", "slow") == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	eventually(t, "notifications/cancelled at the server", func() bool { return count(events(t, logf), "cancelled", "slow") == 1 })
}

func TestElicitationAndSampling(t *testing.T) {
	s, logf, _ := newSet(t, "serve", Options{})
	s.Acquire()
	defer s.Release()
	ready(t, s)
	var gotMsg string
	res, err := s.Call(context.Background(), "fx", "ask", json.RawMessage(`{"question":"colour?"}`), CallOptions{
		Elicit: func(ctx context.Context, msg string, schema json.RawMessage) (*sdk.ElicitResult, error) {
			gotMsg = msg
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": "blue"}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	txt, _ := FormatResult("fx", "ask", res, 1000)
	if gotMsg != "colour?" || !strings.Contains(txt, `accept {\"answer\":\"blue\"}`) {
		t.Errorf("elicitation: msg %q result %s", gotMsg, txt)
	}
	// Without a hook, declined.
	res, err = s.Call(context.Background(), "fx", "ask", json.RawMessage(`{"question":"x"}`), CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if txt, _ := FormatResult("fx", "ask", res, 1000); !strings.Contains(txt, "decline") {
		t.Errorf("elicitation without a hook: %s", txt)
	}
	res, err = s.Call(context.Background(), "fx", "sample", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if txt, _ := FormatResult("fx", "sample", res, 1000); !strings.Contains(txt, `sampling refused: `) || !(strings.Contains(txt, "method not found") || strings.Contains(txt, "does not support CreateMessage")) {
		t.Errorf("sampling: %s", txt)
	}
	_ = logf
}

func TestBigResultIsCapped(t *testing.T) {
	s, _, _ := newSet(t, "serve", Options{})
	s.Acquire()
	defer s.Release()
	ready(t, s)
	res, err := s.Call(context.Background(), "fx", "big", json.RawMessage(`{"bytes":20000000}`), CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	txt, ok := FormatResult("fx", "big", res, 50000)
	var r Result
	if err := json.Unmarshal([]byte(txt), &r); err != nil || !ok {
		t.Fatalf("%v %v", err, ok)
	}
	if !r.Truncated || r.TotalBytes != 20000000 || len(txt) > 60000 || !strings.HasPrefix(r.Content[0].Text, "BEGIN") || !strings.HasSuffix(r.Content[0].Text, "END") {
		t.Errorf("capped result: truncated %v total %d len %d", r.Truncated, r.TotalBytes, len(txt))
	}
}

func TestIdleStopAndStop(t *testing.T) {
	s, _, sl := newSet(t, "serve", Options{IdleTimeout: 200 * time.Millisecond})
	s.Acquire()
	ready(t, s)
	s.Release()
	eventually(t, "stopped when idle", func() bool { return s.Status()[0].Status == protocol.MCPStopped })
	s.Acquire()
	ready(t, s)
	s.Release()
	s.Stop()
	if st := s.Status()[0]; st.Status != protocol.MCPStopped {
		t.Errorf("after Stop: %+v", st)
	}
	_ = sl
}

// An Acquire during the idle stop (here a server that ignores the end of
// its input, so the stop lasts its grace) starts the server again once the
// stop is done: a start that found the previous run still stopping used to
// do nothing, leaving the set in use with its servers stopped.
func TestAcquireDuringIdleStop(t *testing.T) {
	s, logf, _ := newSet(t, "linger", Options{IdleTimeout: time.Millisecond})
	s.Acquire()
	ready(t, s)
	s.Release()
	eventually(t, "the idle stop to begin", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running
	})
	s.Acquire()
	defer s.Release()
	eventually(t, "a second start, ready", func() bool {
		return count(events(t, logf), "start", "") == 2 && s.Status()[0].Status == protocol.MCPReady
	})
}
