package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/tools"
)

// ---- in-test fakes ----

// fakeModel answers by a script indexed by call number (0-based); the last
// entry repeats. It records every request.
type fakeModel struct {
	mu     sync.Mutex
	reqs   []model.Request
	script []func(req model.Request) (*model.Response, error)
}

func (f *fakeModel) Stream(ctx context.Context, req model.Request, onDelta func(string)) (*model.Response, error) {
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, req)
	step := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()
	resp, err := step(req)
	if err == nil && resp != nil && resp.Content != "" {
		onDelta(resp.Content)
	}
	return resp, err
}

func (f *fakeModel) requests() []model.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]model.Request(nil), f.reqs...)
}

func says(text string) func(model.Request) (*model.Response, error) {
	return func(model.Request) (*model.Response, error) {
		return &model.Response{Content: text, FinishReason: "stop"}, nil
	}
}

func calls(cs ...model.ToolCall) func(model.Request) (*model.Response, error) {
	return func(model.Request) (*model.Response, error) {
		return &model.Response{ToolCalls: cs, FinishReason: "tool_calls"}, nil
	}
}

func term(id, command string) model.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": command})
	return model.ToolCall{ID: id, Name: "terminal", Arguments: string(b)}
}

type assistantRec struct {
	Content string
	Calls   []model.ToolCall
}

// fakeJournal keeps the turn in memory.
type fakeJournal struct {
	mu        sync.Mutex
	initial   []Stored
	assistant []assistantRec
	started   []ToolEvent
	running   []tools.ProcessIdentity
	completed []ToolEvent
	deltas    []string
}

func (j *fakeJournal) Transcript(ctx context.Context, t Turn) ([]Stored, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Stored(nil), j.initial...), nil
}

func (j *fakeJournal) AssistantMessage(ctx context.Context, t Turn, content string, cs []model.ToolCall) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.assistant = append(j.assistant, assistantRec{content, cs})
	return nil
}

func (j *fakeJournal) ToolStarted(ctx context.Context, t Turn, ev ToolEvent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.started = append(j.started, ev)
	return nil
}

func (j *fakeJournal) ToolRunning(ctx context.Context, t Turn, ev ToolEvent, proc tools.ProcessIdentity) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running = append(j.running, proc)
	return nil
}

func (j *fakeJournal) ToolCompleted(ctx context.Context, t Turn, ev ToolEvent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.completed = append(j.completed, ev)
	return nil
}

func (j *fakeJournal) Delta(t Turn, typ protocol.EventType, payload any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, _ := json.Marshal(payload)
	j.deltas = append(j.deltas, string(typ)+" "+string(b))
}

func (j *fakeJournal) results() []ToolEvent {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]ToolEvent(nil), j.completed...)
}

// fakePrompter answers every Ask with answer (nil: answered "once") and
// reports allowed patterns.
type fakePrompter struct {
	mu      sync.Mutex
	asks    []prompts.Ask
	queries []string // "session|pattern" of Allowed calls
	allowed map[string]bool
	answer  func(ctx context.Context, a prompts.Ask) (prompts.Outcome, error)
}

func (p *fakePrompter) Ask(ctx context.Context, a prompts.Ask) (prompts.Outcome, error) {
	p.mu.Lock()
	p.asks = append(p.asks, a)
	answer := p.answer
	p.mu.Unlock()
	if answer == nil {
		return answered(`{"choice":"once"}`), nil
	}
	return answer(ctx, a)
}

func (p *fakePrompter) Allowed(ctx context.Context, sessionID, pattern string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queries = append(p.queries, sessionID+"|"+pattern)
	return p.allowed[pattern], nil
}

func (p *fakePrompter) AllowedInSession(ctx context.Context, sessionID, pattern string) (bool, error) {
	return p.Allowed(ctx, sessionID, pattern)
}

func (p *fakePrompter) asked() []prompts.Ask {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]prompts.Ask(nil), p.asks...)
}

func answered(resp string) prompts.Outcome {
	return prompts.Outcome{PromptID: "prm_x", Resolution: prompts.ResolutionAnswered, Response: json.RawMessage(resp)}
}

type harness struct {
	cwd string
	m   *fakeModel
	j   *fakeJournal
	p   *fakePrompter
	r   *Runner
}

func newHarness(t *testing.T, mode string, script ...func(model.Request) (*model.Response, error)) *harness {
	h := &harness{cwd: t.TempDir(), m: &fakeModel{script: script},
		j: &fakeJournal{initial: []Stored{{Role: "user", Content: "do the thing"}}}, p: &fakePrompter{}}
	h.r = &Runner{
		Config: Config{ApprovalMode: mode, ApprovalTimeout: time.Minute, ClarifyTimeout: time.Minute,
			MaxIterations: 10, TerminalTimeout: 20 * time.Second},
		Journal: h.j, Prompter: h.p,
		NewModel: func(s Session) Model { return h.m },
	}
	return h
}

func (h *harness) run(t *testing.T) Result {
	t.Helper()
	return h.runCtx(t, context.Background())
}

func (h *harness) runCtx(t *testing.T, ctx context.Context) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return h.r.Run(ctx, Session{ID: "ses_1", Cwd: h.cwd, Model: "the-model", BaseURL: "http://127.0.0.1:1/v1",
		Toolsets: []string{"terminal", "clarify"}}, Turn{SessionID: "ses_1", AdmissionID: "adm_1", Generation: 7})
}

func (h *harness) exists(name string) bool {
	_, err := os.Stat(filepath.Join(h.cwd, name))
	return err == nil
}

// resultOf returns the recorded tool result of call id, decoded.
func (h *harness) resultOf(t *testing.T, id string) (ToolEvent, map[string]any) {
	t.Helper()
	for _, ev := range h.j.results() {
		if ev.CallID == id {
			var v map[string]any
			if err := json.Unmarshal([]byte(ev.Result), &v); err != nil {
				t.Fatalf("result of %s is not a JSON object: %q", id, ev.Result)
			}
			return ev, v
		}
	}
	t.Fatalf("no tool result for %s; results: %+v", id, h.j.results())
	return ToolEvent{}, nil
}

func wantCompleted(t *testing.T, res Result) {
	t.Helper()
	if res.Outcome != "completed" || res.Error != "" {
		t.Fatalf("result = %+v, want completed", res)
	}
}

// ---- tests ----

func TestRunToolLoopThreeIterations(t *testing.T) {
	h := newHarness(t, "manual",
		calls(term("c1", "echo one")),
		calls(term("c2", "echo two"), term("c3", "echo three >&2; exit 3")),
		says("all done"))
	res := h.run(t)
	wantCompleted(t, res)
	if res.Reply == nil || *res.Reply != "all done" {
		t.Fatalf("Reply = %v, want the final answer", res.Reply)
	}

	reqs := h.m.requests()
	if len(reqs) != 3 {
		t.Fatalf("model called %d times, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Model != "the-model" {
			t.Fatalf("request %d model %q", i, r.Model)
		}
		var names []string
		for _, tl := range r.Tools {
			names = append(names, tl.Name)
			if !json.Valid(tl.Parameters) {
				t.Fatalf("tool %s parameters are not JSON", tl.Name)
			}
		}
		if !slices.Equal(names, []string{"terminal", "clarify"}) {
			t.Fatalf("request %d tools %v", i, names)
		}
		checkPaired(t, r.Messages)
	}
	roles := func(r model.Request) string {
		var rs []string
		for _, m := range r.Messages {
			rs = append(rs, m.Role)
		}
		return strings.Join(rs, ",")
	}
	if got := roles(reqs[0]); got != "system,user" {
		t.Fatalf("request 1 roles %s", got)
	}
	if got := roles(reqs[1]); got != "system,user,assistant,tool" {
		t.Fatalf("request 2 roles %s", got)
	}
	if got := roles(reqs[2]); got != "system,user,assistant,tool,assistant,tool,tool" {
		t.Fatalf("request 3 roles %s", got)
	}
	if reqs[2].Messages[1].Content != "do the thing" {
		t.Fatalf("user message %q", reqs[2].Messages[1].Content)
	}
	// The results the model saw are the ones persisted, in call order.
	var seen []string
	for _, m := range reqs[2].Messages {
		if m.Role == model.RoleTool {
			seen = append(seen, m.ToolCallID)
		}
	}
	if !slices.Equal(seen, []string{"c1", "c2", "c3"}) {
		t.Fatalf("tool results in request 3: %v", seen)
	}
	for i, want := range []struct {
		id, out string
		code    int
		ok      bool
	}{{"c1", "one\n", 0, true}, {"c2", "two\n", 0, true}, {"c3", "three\n", 3, false}} {
		ev, v := h.resultOf(t, want.id)
		if v["output"] != want.out || v["exit_code"] != float64(want.code) || ev.OK != want.ok ||
			ev.ExitCode == nil || *ev.ExitCode != want.code || ev.Name != "terminal" {
			t.Fatalf("result %d = %+v %v", i, ev, v)
		}
		if reqs[2].Messages[map[int]int{0: 3, 1: 5, 2: 6}[i]].Content != ev.Result {
			t.Fatalf("request 3 does not carry the persisted result of %s", want.id)
		}
	}
	if len(h.j.started) != 3 || string(h.j.started[0].Args) != `{"command":"echo one"}` {
		t.Fatalf("tool.started = %+v", h.j.started)
	}
	// Each command that ran recorded its process group and identity.
	if len(h.j.running) != 3 || slices.ContainsFunc(h.j.running, func(p tools.ProcessIdentity) bool { return p.PID <= 1 }) {
		t.Fatalf("tool.running = %+v", h.j.running)
	}
	if runtime.GOOS == "linux" && (h.j.running[0].BootID == "" || h.j.running[0].StartTicks == 0) {
		t.Fatalf("tool.running without an identity on Linux: %+v", h.j.running[0])
	}
	// The final answer is the caller's to persist (in the settle).
	if len(h.j.assistant) != 2 || len(h.j.assistant[1].Calls) != 2 {
		t.Fatalf("assistant messages = %+v", h.j.assistant)
	}
	if !slices.Contains(h.j.deltas, `message.delta {"text":"all done"}`) {
		t.Fatalf("deltas = %v", h.j.deltas)
	}
	if !slices.Contains(h.j.deltas, `tool.output {"tool_call_id":"c1","text":"one\n"}`) {
		t.Fatalf("deltas = %v", h.j.deltas)
	}
	if len(h.p.asked()) != 0 {
		t.Fatalf("safe commands asked for approval: %+v", h.p.asked())
	}
}

func TestRunMaxIterations(t *testing.T) {
	n := 0
	h := newHarness(t, "off", func(model.Request) (*model.Response, error) {
		n++ // the fake model serialises calls
		return &model.Response{ToolCalls: []model.ToolCall{term(fmt.Sprintf("c%d", n), "true")}, FinishReason: "tool_calls"}, nil
	})
	h.r.Config.MaxIterations = 3
	res := h.run(t)
	if res.Outcome != "failed" || !strings.Contains(res.Error, "max_iterations") || !strings.Contains(res.Error, "3") {
		t.Fatalf("result = %+v, want failed naming max_iterations (3)", res)
	}
	if n := len(h.m.requests()); n != 3 {
		t.Fatalf("model called %d times, want 3", n)
	}
	// Every call was answered even though the loop gave up; ids are unique.
	if len(h.j.completed) != 3 {
		t.Fatalf("tool results = %d, want 3", len(h.j.completed))
	}
	ids := map[string]bool{}
	for _, ev := range h.j.completed {
		if ev.CallID == "" || ids[ev.CallID] {
			t.Fatalf("empty or repeated call id %q", ev.CallID)
		}
		ids[ev.CallID] = true
	}
}

func TestRunModelErrorFailsWithServerText(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"http 500 json", &model.Error{Kind: model.KindHTTPStatus, Status: 500, Body: `{"error":{"message":"upstream exploded"}}`},
			[]string{"500", "upstream exploded"}},
		{"garbage", &model.Error{Kind: model.KindBadResponse, Status: 200, Body: "<html>gateway says no</html>"},
			[]string{"gateway says no"}},
		{"truncated", &model.Error{Kind: model.KindTruncated}, []string{"truncated", "ended before completion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "off", calls(term("c1", "echo one")),
				func(model.Request) (*model.Response, error) { return nil, tc.err })
			res := h.run(t)
			if res.Outcome != "failed" {
				t.Fatalf("result = %+v, want failed", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Error, w) {
					t.Fatalf("error %q lacks %q", res.Error, w)
				}
			}
			if len(h.j.assistant) != 1 || len(h.j.completed) != 1 {
				t.Fatalf("first iteration not persisted: %+v %+v", h.j.assistant, h.j.completed)
			}
		})
	}
}

func TestRunHardlineRefusedInModeOff(t *testing.T) {
	// Harmless if it did run: the marker would prove it.
	h := newHarness(t, "off", calls(term("c1", "touch marker; mkfs.ext4 /nonexistent/sessiond-test")), says("ok"))
	wantCompleted(t, h.run(t))
	ev, v := h.resultOf(t, "c1")
	msg, _ := v["error"].(string)
	if ev.OK || !strings.Contains(msg, "never run") || !strings.Contains(msg, "mkfs") {
		t.Fatalf("result = %+v", ev)
	}
	if h.exists("marker") {
		t.Fatal("a hardline command ran")
	}
	if len(h.p.asked()) != 0 {
		t.Fatal("a hardline command was offered for approval")
	}
}

func TestRunApprovalModes(t *testing.T) {
	const safe, danger = "echo safe > safe.txt", "rm -rf victim"
	for _, tc := range []struct {
		mode     string
		allowed  map[string]bool
		asked    []string // commands asked, in order
		patterns []string
		queries  []string
	}{
		{mode: "manual", asked: []string{danger}, patterns: []string{"rm-recursive"}, queries: []string{"ses_1|rm-recursive"}},
		{mode: "", asked: []string{danger}, patterns: []string{"rm-recursive"}, queries: []string{"ses_1|rm-recursive"}},
		{mode: "strict", asked: []string{safe, danger}, patterns: []string{"command:" + safe, "rm-recursive"},
			queries: []string{"ses_1|command:" + safe, "ses_1|rm-recursive"}},
		{mode: "off"},
		{mode: "manual", allowed: map[string]bool{"rm-recursive": true}, queries: []string{"ses_1|rm-recursive"}},
		{mode: "strict", allowed: map[string]bool{"rm-recursive": true}, asked: []string{safe}, patterns: []string{"command:" + safe},
			queries: []string{"ses_1|command:" + safe, "ses_1|rm-recursive"}},
	} {
		name := tc.mode
		if tc.allowed != nil {
			name += "-allowlisted"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.mode, calls(term("c1", safe), term("c2", danger)), says("ok"))
			h.p.allowed = tc.allowed
			os.MkdirAll(filepath.Join(h.cwd, "victim", "sub"), 0o755)
			wantCompleted(t, h.run(t))
			var asked, patterns []string
			for _, a := range h.p.asked() {
				p := a.Payload.(protocol.ApprovalPayload)
				asked = append(asked, p.Command)
				patterns = append(patterns, p.Pattern)
				if a.Kind != prompts.KindApproval || a.SessionID != "ses_1" || a.AdmissionID != "adm_1" || a.Generation != 7 || a.Timeout != time.Minute {
					t.Fatalf("ask = %+v", a)
				}
				if p.Cwd != h.cwd || p.Reason == "" || !slices.Equal(p.Choices, []protocol.Choice{"once", "session", "always", "deny"}) {
					t.Fatalf("payload = %+v", p)
				}
				if p.ToolCallID != map[string]string{safe: "c1", danger: "c2"}[p.Command] {
					t.Fatalf("payload tool_call_id = %v", p.ToolCallID)
				}
			}
			if !slices.Equal(asked, tc.asked) || !slices.Equal(patterns, tc.patterns) {
				t.Fatalf("asked %v with patterns %v; want %v %v", asked, patterns, tc.asked, tc.patterns)
			}
			if !slices.Equal(h.p.queries, tc.queries) {
				t.Fatalf("allowlist queries %v, want %v", h.p.queries, tc.queries)
			}
			// Everything was approved (once) or allowed, so both ran.
			if !h.exists("safe.txt") || h.exists("victim") {
				t.Fatalf("commands did not run: safe.txt %v, victim %v", h.exists("safe.txt"), h.exists("victim"))
			}
		})
	}
}

func TestRunApprovalFailsClosed(t *testing.T) {
	const cmd = "touch ran && rm -rf victim"
	for _, tc := range []struct {
		name   string
		answer func(ctx context.Context, a prompts.Ask) (prompts.Outcome, error)
		want   string
	}{
		{"deny", func(context.Context, prompts.Ask) (prompts.Outcome, error) { return answered(`{"choice":"deny"}`), nil }, "denied"},
		{"invalid choice", func(context.Context, prompts.Ask) (prompts.Outcome, error) {
			return answered(`{"choice":"yes please"}`), nil
		}, "denied"},
		{"timeout", func(context.Context, prompts.Ask) (prompts.Outcome, error) {
			return prompts.Outcome{Resolution: prompts.ResolutionTimedOut}, nil
		}, "timed out"},
		{"timeout with store error", func(context.Context, prompts.Ask) (prompts.Outcome, error) {
			return prompts.Outcome{Resolution: prompts.ResolutionTimedOut}, errors.New("storage unavailable: disk full")
		}, "not run"},
		{"fenced", func(context.Context, prompts.Ask) (prompts.Outcome, error) {
			return prompts.Outcome{Resolution: prompts.ResolutionFenced}, nil
		}, "fenced"},
		{"not live", func(context.Context, prompts.Ask) (prompts.Outcome, error) {
			return prompts.Outcome{}, prompts.ErrNotLive
		}, "not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "manual", calls(term("c1", cmd)), says("ok"))
			h.p.answer = tc.answer
			os.MkdirAll(filepath.Join(h.cwd, "victim"), 0o755)
			wantCompleted(t, h.run(t))
			ev, v := h.resultOf(t, "c1")
			msg, _ := v["error"].(string)
			if ev.OK || ev.ExitCode != nil || !strings.HasPrefix(msg, "not run") || !strings.Contains(msg, tc.want) {
				t.Fatalf("result = %+v", ev)
			}
			if h.exists("ran") || !h.exists("victim") {
				t.Fatal("the command ran without an approval")
			}
			if len(h.p.asked()) != 1 {
				t.Fatalf("asked %d times", len(h.p.asked()))
			}
		})
	}
}

// An interrupt (ctx cancelled) while the approval is open ends the turn at
// once, the command never runs and no result is persisted (the settle
// writes the synthetic one).
func TestRunInterruptedWhileApprovalOpen(t *testing.T) {
	h := newHarness(t, "manual", calls(term("c1", "touch ran && rm -rf victim")), says("ok"))
	ctx, cancel := context.WithCancel(context.Background())
	asking := make(chan struct{})
	h.p.answer = func(ctx context.Context, a prompts.Ask) (prompts.Outcome, error) {
		close(asking)
		<-ctx.Done()
		// A late answer racing the interrupt must not help.
		return answered(`{"choice":"once"}`), nil
	}
	go func() { <-asking; cancel() }()
	res := h.runCtx(t, ctx)
	if res.Outcome != "failed" || res.Error != "interrupted" {
		t.Fatalf("result = %+v", res)
	}
	if h.exists("ran") {
		t.Fatal("the command ran after the interrupt")
	}
	if len(h.j.completed) != 0 || len(h.m.requests()) != 1 {
		t.Fatalf("turn went on after the interrupt: results %+v, requests %d", h.j.completed, len(h.m.requests()))
	}
}

func TestRunClarify(t *testing.T) {
	args := `{"question":"Which colours?","choices":["red","green","blue"],"multi_select":true}`
	t.Run("answered with a list", func(t *testing.T) {
		h := newHarness(t, "manual", calls(model.ToolCall{ID: "q1", Name: "clarify", Arguments: args}), says("ok"))
		h.p.answer = func(ctx context.Context, a prompts.Ask) (prompts.Outcome, error) {
			return answered(`{"answer":["red","blue"]}`), nil
		}
		wantCompleted(t, h.run(t))
		asks := h.p.asked()
		if len(asks) != 1 || asks[0].Kind != prompts.KindClarify || asks[0].Timeout != time.Minute {
			t.Fatalf("asks = %+v", asks)
		}
		ev, _ := h.resultOf(t, "q1")
		want := `{"responses":[{"question":"Which colours?","choices_offered":["red","green","blue"],"answer":["red","blue"]}]}`
		if !ev.OK || ev.Result != want {
			t.Fatalf("result = %s\nwant %s", ev.Result, want)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		h := newHarness(t, "manual", calls(model.ToolCall{ID: "q1", Name: "clarify", Arguments: args}), says("ok"))
		h.p.answer = func(ctx context.Context, a prompts.Ask) (prompts.Outcome, error) {
			return prompts.Outcome{Resolution: prompts.ResolutionTimedOut}, nil
		}
		wantCompleted(t, h.run(t))
		_, v := h.resultOf(t, "q1")
		note, _ := v["note"].(string)
		if v["timed_out"] != true || !strings.Contains(note, "No answer came") || !strings.Contains(note, "judgement") {
			t.Fatalf("result = %v", v)
		}
		resp := v["responses"].([]any)[0].(map[string]any)
		if resp["answer"] != nil || resp["question"] != "Which colours?" {
			t.Fatalf("response = %v", resp)
		}
	})
}

func TestRunBadToolCalls(t *testing.T) {
	h := newHarness(t, "off", calls(
		model.ToolCall{ID: "u1", Name: "browser", Arguments: `{"url":"http://example.com"}`},
		model.ToolCall{ID: "a1", Name: "terminal", Arguments: `{"command": 5}`},
		model.ToolCall{ID: "a2", Name: "terminal", Arguments: `not json at all`},
		model.ToolCall{ID: "a3", Name: "terminal", Arguments: `{"command":"   "}`},
		model.ToolCall{ID: "a4", Name: "clarify", Arguments: `{}`},
		model.ToolCall{ID: "a5", Name: "clarify", Arguments: `[1,2]`},
	), says("sorry"))
	wantCompleted(t, h.run(t))
	for id, want := range map[string]string{"u1": `unknown tool "browser"`, "a1": "invalid terminal arguments",
		"a2": "invalid terminal arguments", "a3": "command is empty", "a4": "invalid clarify arguments", "a5": "invalid clarify arguments"} {
		ev, v := h.resultOf(t, id)
		msg, _ := v["error"].(string)
		if ev.OK || !strings.Contains(msg, want) {
			t.Fatalf("result of %s = %q, want an error containing %q", id, ev.Result, want)
		}
	}
	if len(h.p.asked()) != 0 {
		t.Fatal("a bad call opened a prompt")
	}
	// The invalid arguments are reported in tool.started as a JSON string.
	for _, ev := range h.j.started {
		if !json.Valid(ev.Args) {
			t.Fatalf("tool.started args of %s are not JSON: %s", ev.CallID, ev.Args)
		}
	}
	reqs := h.m.requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times", len(reqs))
	}
	checkPaired(t, reqs[1].Messages)
}

// A tool the session did not enable is unknown even if sessiond has it.
func TestRunToolNotInSessionToolsets(t *testing.T) {
	h := newHarness(t, "off", calls(term("c1", "touch ran")), says("ok"))
	res := h.r.Run(context.Background(), Session{ID: "ses_1", Cwd: h.cwd, Model: "m", Toolsets: []string{"clarify"}},
		Turn{SessionID: "ses_1", AdmissionID: "adm_1", Generation: 1})
	wantCompleted(t, res)
	ev, _ := h.resultOf(t, "c1")
	if ev.OK || !strings.Contains(ev.Result, "unknown tool") || h.exists("ran") {
		t.Fatalf("result = %+v, ran = %v", ev, h.exists("ran"))
	}
	if tl := h.m.requests()[0].Tools; len(tl) != 1 || tl[0].Name != "clarify" {
		t.Fatalf("tools = %+v", tl)
	}
}

// Calls with repeated or empty ids get unique ones so results pair.
func TestRunDuplicateCallIDs(t *testing.T) {
	h := newHarness(t, "off", calls(term("dup", "echo a"), term("dup", "echo b"), term("", "echo c")), says("ok"))
	wantCompleted(t, h.run(t))
	reqs := h.m.requests()
	checkPaired(t, reqs[1].Messages)
	ids := map[string]bool{}
	for _, ev := range h.j.completed {
		if ev.CallID == "" || ids[ev.CallID] {
			t.Fatalf("empty or repeated call id %q", ev.CallID)
		}
		ids[ev.CallID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("ids = %v", ids)
	}
}

// Some OpenAI-compatible servers number tool calls per response ("call_0",
// "call_1", …), so the same id comes back in a later iteration. Every
// request must still pair every assistant tool call with a result.
func TestRunCallIDsRepeatedAcrossIterations(t *testing.T) {
	h := newHarness(t, "off", calls(term("call_0", "echo a")), calls(term("call_0", "echo b")), says("ok"))
	wantCompleted(t, h.run(t))
	reqs := h.m.requests()
	if len(reqs) != 3 {
		t.Fatalf("model called %d times", len(reqs))
	}
	checkPaired(t, reqs[2].Messages)
	var results []string
	for _, m := range reqs[2].Messages {
		if m.Role == model.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], `"output":"a\n"`) || !strings.Contains(results[1], `"output":"b\n"`) {
		t.Fatalf("tool results the model saw: %q", results)
	}
}

// The same across turns: the session's transcript already holds "call_0"
// from an earlier turn.
func TestRunCallIDRepeatsOneFromAnEarlierTurn(t *testing.T) {
	h := newHarness(t, "off", calls(term("call_0", "echo new")), says("ok"))
	h.j.initial = []Stored{
		{Role: "user", Content: "earlier"},
		{Role: "assistant", ToolCalls: []model.ToolCall{term("call_0", "echo old")}},
		{Role: "tool", ToolCallID: "call_0", Content: `{"output":"old"}`},
		{Role: "assistant", Content: "earlier done"},
		{Role: "user", Content: "do the thing"},
	}
	wantCompleted(t, h.run(t))
	reqs := h.m.requests()
	checkPaired(t, reqs[1].Messages)
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != model.RoleTool || !strings.Contains(last.Content, `"output":"new\n"`) {
		t.Fatalf("last message the model saw = %+v", last)
	}
}

// TestRunRecordsTheMarkerTheCommandGot: tool.running records the very
// SESSIOND_TOOL_RUN value the command's environment carries (set by the
// agent, not read back from /proc), fresh for every command.
func TestRunRecordsTheMarkerTheCommandGot(t *testing.T) {
	h := newHarness(t, "off",
		calls(term("c1", "printf %s \"$"+tools.MarkerEnv+"\""), term("c2", "printf %s \"$"+tools.MarkerEnv+"\"")),
		says("done"))
	wantCompleted(t, h.run(t))
	if len(h.j.running) != 2 {
		t.Fatalf("tool.running = %+v", h.j.running)
	}
	for i, id := range []string{"c1", "c2"} {
		_, v := h.resultOf(t, id)
		if m := h.j.running[i].Marker; len(m) != 32 || v["output"] != m {
			t.Fatalf("%s: recorded marker %q, the command saw %q", id, m, v["output"])
		}
	}
	if h.j.running[0].Marker == h.j.running[1].Marker {
		t.Fatal("two commands got the same marker")
	}
}
