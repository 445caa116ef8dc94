package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/model"
)

// poisoned is a stored history with every defect an older build or a
// misbehaving server could leave: the call whose id changed after its first
// chunk, stored as two calls (one without a name), a call without an id,
// two calls with one id in a message, a call whose id an earlier message
// used (with its result), arguments that are not JSON, a result that
// answers nothing, a role nobody knows.
func poisoned() []Stored {
	return []Stored{
		{Role: "user", Content: "first"},
		{Role: "assistant", ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "terminal", Arguments: `{"command":`},
			{ID: "call_b", Name: "", Arguments: `"echo hi"}`},
		}},
		{Role: "tool", ToolCallID: "call_a", Content: `{"error":"invalid terminal arguments"}`},
		{Role: "tool", ToolCallID: "call_b", Content: `{"error":"unknown tool \"\""}`},
		{Role: "boundary", Content: "[turn failed: model: invalid request: message 2: tool call 1 without id or name]"},
		{Role: "user", Content: "second"},
		{Role: "assistant", ToolCalls: []model.ToolCall{
			{ID: "", Name: "terminal", Arguments: `{"command":"ls"}`},
			{ID: "call_d", Name: "terminal", Arguments: `{"command":"pwd"}`},
			{ID: "call_d", Name: "terminal", Arguments: `{"command":"pwd"}`},
			{ID: "call_a", Name: "terminal", Arguments: `{"command":"date"}`},
		}},
		{Role: "tool", ToolCallID: "call_d", Content: "r_d"},
		{Role: "tool", ToolCallID: "call_a", Content: "r_a2"},
		{Role: "tool", ToolCallID: "call_zz", Content: "orphan"},
		{Role: "narrator", Content: "?"},
		{Role: "assistant", Content: "done"},
		{Role: "user", Content: "do the thing"},
	}
}

// wireCheck is a model server that enforces what real servers enforce on
// the history: every assistant tool call has an id, a name and JSON object
// arguments, ids are unique within a message, every call is answered right
// after its message, exactly once, and no tool message answers nothing.
func wireCheck(t *testing.T) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var problems []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		var bad []string
		if err := json.Unmarshal(body, &req); err != nil {
			bad = append(bad, err.Error())
		}
		open := map[string]bool{}
		for i, m := range req.Messages {
			if m.Role != "tool" {
				for id := range open {
					bad = append(bad, fmt.Sprintf("message %d: call %q unanswered", i, id))
				}
				open = map[string]bool{}
			}
			switch m.Role {
			case "assistant":
				for _, c := range m.ToolCalls {
					var obj map[string]any
					switch {
					case c.ID == "" || c.Function.Name == "":
						bad = append(bad, fmt.Sprintf("message %d: call without id or name", i))
					case open[c.ID]:
						bad = append(bad, fmt.Sprintf("message %d: id %q twice", i, c.ID))
					case json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil:
						bad = append(bad, fmt.Sprintf("message %d: arguments %q not a JSON object", i, c.Function.Arguments))
					}
					open[c.ID] = true
				}
			case "tool":
				if !open[m.ToolCallID] {
					bad = append(bad, fmt.Sprintf("message %d: result for %q answers no open call", i, m.ToolCallID))
				}
				delete(open, m.ToolCallID)
			}
		}
		mu.Lock()
		problems = append(problems, bad...)
		mu.Unlock()
		if len(bad) > 0 {
			http.Error(w, `{"error":{"message":"`+strings.ReplaceAll(bad[0], `"`, `'`)+`"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fine\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &problems
}

// TestRunPoisonedHistoryStillWorks: whatever the store holds, the next
// input's request is one a server accepts, and every repair is logged.
func TestRunPoisonedHistoryStillWorks(t *testing.T) {
	srv, problems := wireCheck(t)
	h := newHarness(t, "off")
	h.j.initial = poisoned()
	var logs bytes.Buffer
	h.r.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.r.NewModel = func(s Session) Model { return model.New(model.Config{BaseURL: srv.URL + "/v1", MaxRetries: -1}) }
	res := h.run(t)
	if res.Outcome != "completed" || res.Reply == nil || *res.Reply != "fine" {
		t.Fatalf("result = %+v; server saw: %v", res, *problems)
	}
	if len(*problems) != 0 {
		t.Fatalf("the request broke the server's rules: %v", *problems)
	}
	for _, want := range []string{"without a function name", "had no id", "a second call with id", "not a JSON object",
		"answers no call", "unknown role", "had no result"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no logged repair %q in:\n%s", want, logs.String())
		}
	}
	if n := len(Repair(poisoned())); n == 0 {
		t.Fatal("Repair lists nothing for a poisoned history")
	}
	if notes := Repair([]Stored{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []model.ToolCall{term("c1", "ls")}},
		{Role: "tool", ToolCallID: "c1", Content: "r"}, {Role: "assistant", Content: "ok"}}); len(notes) != 0 {
		t.Fatalf("Repair of a sound history = %q, want none", notes)
	}
}

// TestRunMalformedReplyFailsCleanly: a reply whose tool call names no
// function fails the turn with the reason; nothing runs, nothing is
// stored; the next input runs.
func TestRunMalformedReplyFailsCleanly(t *testing.T) {
	h := newHarness(t, "off", calls(term("call_a", "touch ran"), model.ToolCall{ID: "call_b", Arguments: `{"command":"touch ran2"}`}), says("ok"))
	res := h.run(t)
	if res.Outcome != "failed" || !strings.Contains(res.Error, "malformed reply") || !strings.Contains(res.Error, "names no function") {
		t.Fatalf("result = %+v, want failed with the reason", res)
	}
	if h.exists("ran") || h.exists("ran2") || len(h.j.assistant) != 0 || len(h.j.started) != 0 {
		t.Fatalf("a malformed reply ran or stored something: assistant=%v started=%v", h.j.assistant, h.j.started)
	}
	wantCompleted(t, h.run(t)) // the next input
}

// TestRunRepeatedCallRunsOnce: a server that repeats one call (same id,
// same function, same arguments) in its reply gets it run once.
func TestRunRepeatedCallRunsOnce(t *testing.T) {
	c := term("call_x", "echo x >> count")
	h := newHarness(t, "off", calls(c, c), says("ok"))
	wantCompleted(t, h.run(t))
	b, err := os.ReadFile(filepath.Join(h.cwd, "count"))
	if err != nil || string(b) != "x\n" {
		t.Fatalf("count = %q (%v), want one run", b, err)
	}
	if len(h.j.completed) != 1 || h.j.completed[0].CallID != "call_x" {
		t.Fatalf("completed = %+v", h.j.completed)
	}
	checkPaired(t, h.m.requests()[1].Messages)
}

// TestRunTimeoutArgument: "timeout": 60.0 runs the command; a timeout the
// daemon does not allow (beyond terminal.max_timeout, or one that would
// overflow) is a tool error the model reads, and nothing runs; a small one
// is honoured.
func TestRunTimeoutArgument(t *testing.T) {
	h := newHarness(t, "off", calls(
		model.ToolCall{ID: "t60", Name: "terminal", Arguments: `{"command":"touch ran60","timeout":60.0}`},
		model.ToolCall{ID: "huge", Name: "terminal", Arguments: `{"command":"touch ranhuge","timeout":18446744074}`},
		model.ToolCall{ID: "over", Name: "terminal", Arguments: `{"command":"touch ranover","timeout":121}`},
		model.ToolCall{ID: "zero", Name: "terminal", Arguments: `{"command":"touch ranzero","timeout":0}`},
		model.ToolCall{ID: "short", Name: "terminal", Arguments: `{"command":"sleep 30","timeout":1}`},
	), says("ok"))
	h.r.Config.MaxTimeout = 120 * time.Second
	wantCompleted(t, h.run(t))
	if ev, _ := h.resultOf(t, "t60"); !ev.OK || !h.exists("ran60") {
		t.Fatalf("timeout 60.0: %+v", ev)
	}
	for id, want := range map[string]string{"huge": "greater than the maximum", "over": "timeout: 121 is greater than the maximum 120 seconds (terminal.max_timeout)",
		"zero": "timeout: minimum: got 0, want 1"} {
		ev, v := h.resultOf(t, id)
		msg, _ := v["error"].(string)
		if ev.OK || ev.Ran || !strings.Contains(msg, want) || !strings.Contains(msg, "nothing was run") {
			t.Errorf("%s: result %q, want an error containing %q", id, ev.Result, want)
		}
	}
	if h.exists("ranhuge") || h.exists("ranover") || h.exists("ranzero") {
		t.Fatal("a refused call ran")
	}
	if _, v := h.resultOf(t, "short"); v["timed_out"] != true {
		t.Fatalf("timeout 1 on sleep 30: %v", v)
	}
}
