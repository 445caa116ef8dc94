package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

func TestClassifyExitCodes(t *testing.T) {
	cases := []struct {
		err     error
		started bool
		code    int
	}{
		{protocol.Errorf(protocol.ReasonNotFound, "unknown session %q", "x"), true, exitNotFound},
		{protocol.Errorf(protocol.ReasonStaleGeneration, "stale"), true, exitFailed},
		{protocol.Errorf(protocol.ReasonInvalidParams, "bad cwd"), true, exitFailed}, // the daemon refused it: 1, not a usage error
		{context.DeadlineExceeded, true, exitTimeout},
		{usageError("--limit must be >= 0"), true, exitUsage},
		{&rpc.ClosedError{Status: 1001}, true, exitUnreachable},
		{fail(exitUnreachable, "no daemon"), true, exitUnreachable},
		{errors.New("unknown flag: --x"), false, exitUsage},
		{context.Canceled, true, exitInterrupted},
		{errors.New("something else"), true, exitFailed},
	}
	for _, c := range cases {
		if code, msg := classify(c.err, c.started); code != c.code || msg == "" {
			t.Errorf("classify(%v) = %d %q, want %d", c.err, code, msg, c.code)
		}
	}
	if got := oneLine("a\n  b\r\nc "); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
}

func TestResolveHome(t *testing.T) {
	t.Setenv("SESSIOND_HOME", "/env/home")
	t.Setenv("XDG_STATE_HOME", "/xdg")
	t.Setenv("HOME", "/users/me")
	for _, c := range []struct{ flag, env, xdg, want string }{
		{"/flag", "/env/home", "/xdg", "/flag"},
		{"", "/env/home", "/xdg", "/env/home"},
		{"", "", "/xdg", "/xdg/sessiond"},
		{"", "", "", "/users/me/.local/state/sessiond"},
	} {
		t.Setenv("SESSIOND_HOME", c.env)
		t.Setenv("XDG_STATE_HOME", c.xdg)
		if got, err := resolveHome(c.flag); err != nil || got != c.want {
			t.Errorf("resolveHome(%q) with env %q xdg %q = %q, %v; want %q", c.flag, c.env, c.xdg, got, err, c.want)
		}
	}
	rel, _ := resolveHome("relative")
	if !filepath.IsAbs(rel) {
		t.Errorf("resolveHome(relative) = %q, want absolute", rel)
	}
}

// The "no daemon" error names the home it looked in, where that home came
// from, and commands that start a daemon on exactly that home.
func TestNoDaemonHint(t *testing.T) {
	t.Setenv("SESSIOND_HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	for _, c := range []struct{ flag, env, home, origin, quoted string }{
		{"", "", "/users/me/.local/state/sessiond", "the default", "/users/me/.local/state/sessiond"},
		{"", "/srv/my home", "/srv/my home", "from $SESSIOND_HOME", "'/srv/my home'"},
		{"/tmp/it's", "/srv/x", "/tmp/it's", "from --home", `'/tmp/it'\''s'`},
	} {
		t.Setenv("SESSIOND_HOME", c.env)
		origin := homeOrigin(c.flag)
		_, err := readDescriptor(c.home, origin)
		code, msg := classify(err, true)
		if code != exitUnreachable || !strings.Contains(origin, c.origin) {
			t.Errorf("%+v: exit %d, origin %q", c, code, origin)
		}
		for _, want := range []string{"no daemon running for home " + c.home + " (" + origin + ")",
			"`sessiond --home " + c.quoted + "`", "`SESSIOND_HOME=" + c.quoted + " make run`"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%+v: the hint %q lacks %q", c, msg, want)
			}
		}
	}
}

// The exit-code table is in the root help once; each verb points to it.
func TestHelpExitCodes(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), "sessionctl", []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	root := out.String()
	for _, want := range []string{exitCodesHelp, "SESSIOND_HOME=~/.sessiond make run", "`make run`"} {
		if !strings.Contains(root, want) {
			t.Errorf("the root help lacks %q:\n%s", want, root)
		}
	}
	for _, verb := range []string{"status", "sessions", "new", "attach", "send", "pending", "resolve", "cancel", "interrupt", "approve", "answer",
		"rename", "rm", "show", "approvals", "completion"} {
		out.Reset()
		if code := run(context.Background(), "sessionctl", []string{verb, "--help"}, strings.NewReader(""), &out, &out); code != 0 {
			t.Fatalf("%s --help exited %d", verb, code)
		}
		if h := out.String(); !strings.Contains(h, exitCodesPointer) || strings.Contains(h, "130  ") {
			t.Errorf("%s --help must point to the root's exit codes, not repeat them:\n%s", verb, h)
		}
	}
}

func TestWrongVerb(t *testing.T) {
	clar := protocol.Prompt{PromptID: "prm_1", Kind: "clarify"}
	appr := protocol.Prompt{PromptID: "prm_2", Kind: "approval"}
	if got := newApp(nil, nil, nil).wrongVerb(protocol.MethodApprovalRespond, "ses_1", clar); !strings.Contains(got, "`sessionctl answer ses_1 prm_1 TEXT...`") {
		t.Errorf("approve on a clarify prompt: %q", got)
	}
	if got := newApp(nil, nil, nil).wrongVerb(protocol.MethodClarifyRespond, "ses_1", appr); !strings.Contains(got, "`sessionctl approve ses_1 prm_2 --choice") {
		t.Errorf("answer on an approval: %q", got)
	}
	if newApp(nil, nil, nil).wrongVerb(protocol.MethodApprovalRespond, "ses_1", appr) != "" || newApp(nil, nil, nil).wrongVerb(protocol.MethodClarifyRespond, "ses_1", clar) != "" {
		t.Error("a fitting verb was refused")
	}
}

func TestClarifyAnswer(t *testing.T) {
	q := clarifyQuestion{Question: "color?", Choices: []string{"red", "blue", "green"}}
	multi := q
	multi.MultiSelect = true
	for _, c := range []struct {
		q    clarifyQuestion
		text string
		want any
	}{
		{q, "2", "blue"},
		{q, "teal please", "teal please"},
		{q, "7", "7"},
		{q, "1,3", "1,3"}, // several numbers on a single-choice question: free text
		{multi, "1,3", []string{"red", "green"}},
		{multi, "1 2", []string{"red", "blue"}},
		{clarifyQuestion{Question: "name?"}, "3", "3"},
	} {
		if got := clarifyAnswer(c.q, c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("clarifyAnswer(%v, %q) = %#v, want %#v", c.q.Choices, c.text, got, c.want)
		}
	}
}

func testModel() *tuiModel {
	m := newTUI(&link{app: newApp(nil, nil, nil), sessionID: "ses_1"}, protocol.Snapshot{SessionID: "ses_1", Title: "t", Model: "m", Cwd: "/w"}, 42, 50)
	m.st = style{} // plain text to compare
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	return m
}

func event(typ, adm string, payload any) eventMsg {
	b, _ := json.Marshal(payload)
	return eventMsg{protocol.Event{SessionID: "ses_1", Type: protocol.EventType(typ), AdmissionID: adm, Payload: b}}
}

// The scrollback is printed one batch at a time, in order.
func TestTUIPrintsInOrder(t *testing.T) {
	m := newTUI(&link{app: newApp(nil, nil, nil), sessionID: "ses_1"}, protocol.Snapshot{SessionID: "ses_1"}, 42, 50)
	if cmd := m.Init(); cmd != nil {
		t.Fatal("Init must wait for the window size before printing")
	}
	if _, cmd := m.Update(tea.WindowSizeMsg{Width: 100, Height: 30}); cmd == nil || !m.printing {
		t.Fatal("the header was not printed once the width was known")
	}
	m.Update(event("turn.started", "adm_1", map[string]any{"text": "hi"}))
	m.Update(event("message.completed", "adm_1", map[string]any{"message": map[string]any{"role": "assistant", "content": "hello"}}))
	if !m.printing || len(m.printQ) != 2 {
		t.Fatalf("lines must wait for the batch in flight: printing=%v queue=%q", m.printing, m.printQ)
	}
	m.Update(printedMsg{})
	if !m.printing || len(m.printQ) != 0 {
		t.Fatalf("the next batch must start after printedMsg: printing=%v queue=%q", m.printing, m.printQ)
	}
}

func TestTUIEventsAndCtrlC(t *testing.T) {
	m := testModel()
	m.Update(event("admission.updated", "adm_1", protocol.Receipt{AdmissionID: "adm_1", InputID: "i1", Seq: 1, Status: "started"}))
	m.Update(event("admission.updated", "adm_2", protocol.Receipt{AdmissionID: "adm_2", InputID: "i2", Seq: 2, Status: "queued", Reason: "busy"}))
	gen := int64(3)
	ev := event("turn.started", "adm_1", map[string]any{"text": "first"})
	ev.ev.ExecutionGeneration = &gen
	m.Update(ev)
	m.Update(event("message.delta", "adm_1", map[string]any{"text": "partial ans"}))
	view := m.View().Content
	if !strings.Contains(view, "partial ans") || !strings.Contains(view, "queued #2 (waits: busy)") || !strings.Contains(view, "turn running") {
		t.Fatalf("view:\n%s", view)
	}
	m.Update(event("prompt.opened", "adm_1", map[string]any{"prompt": protocol.Prompt{PromptID: "p1", Kind: "approval",
		ExecutionGeneration: 3, Payload: json.RawMessage(`{"command":"rm -rf x","cwd":"/w","reason":"recursive delete","risk":"dangerous"}`)}}))
	view = m.View().Content
	for _, want := range []string{"approval needed", "rm -rf x", "/w", "recursive delete", "[o] once", "[d] deny"} {
		if !strings.Contains(view, want) {
			t.Fatalf("approval box lacks %q:\n%s", want, view)
		}
	}
	// Typing is refused while an approval waits.
	m.Update(tea.KeyPressMsg{Code: 'x', Text: "x"})
	if len(m.input) != 0 || !strings.Contains(m.notice, "press o") {
		t.Fatalf("input %q notice %q", string(m.input), m.notice)
	}
	m.Update(event("prompt.closed", "adm_1", map[string]any{"prompt_id": "p1", "resolution": "timed_out"}))

	// Ctrl-C interrupts first (not connected here: it says so), then a
	// second one within the window detaches.
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if m.detached || m.lastCtrlC.IsZero() {
		t.Fatal("the first Ctrl-C of a running turn must not detach")
	}
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if !m.detached {
		t.Fatal("a second Ctrl-C within the window must detach")
	}

	// Idle: the first Ctrl-C detaches.
	m = testModel()
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if !m.detached {
		t.Fatal("Ctrl-C while idle must detach")
	}
	// An old first Ctrl-C does not count.
	m = testModel()
	m.running = "adm_9"
	m.lastCtrlC = time.Now().Add(-3 * detachWindow)
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if m.detached {
		t.Fatal("a Ctrl-C long after the first must interrupt again, not detach")
	}
}

func TestTUIClarifyKeepsTheDraft(t *testing.T) {
	m := testModel()
	m.running = "adm_1"
	for _, r := range "half a thought" {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	m.Update(event("prompt.opened", "adm_1", map[string]any{"prompt": protocol.Prompt{PromptID: "p2", Kind: "clarify",
		ExecutionGeneration: 1, Payload: json.RawMessage(`{"questions":[{"question":"Which?","choices":["a","b"]}]}`)}}))
	if m.clar == nil || len(m.input) != 0 || !strings.Contains(m.View().Content, "2) b") {
		t.Fatalf("clarify did not take the input: %q\n%s", string(m.input), m.View().Content)
	}
	m.Update(event("prompt.closed", "adm_1", map[string]any{"prompt_id": "p2", "resolution": "answered", "response": map[string]any{"answer": "b"}}))
	if m.clar != nil || string(m.input) != "half a thought" {
		t.Fatalf("the draft did not come back: %q", string(m.input))
	}
}

// TestHintsArePasteable: a printed hint names the program as it was run
// (a path when run by one) and carries the --home that was given.
func TestHintsArePasteable(t *testing.T) {
	a := newApp(nil, nil, nil)
	if got := a.cmdline("resolve", "ses_1", "adm_1"); got != "sessionctl resolve ses_1 adm_1" {
		t.Fatalf("plain: %q", got)
	}
	a.prog, a.home = progName("bin/sessionctl"), "/tmp/my home"
	if got := a.cmdline("resolve", "ses_1", "adm_1"); got != "bin/sessionctl --home '/tmp/my home' resolve ses_1 adm_1" {
		t.Fatalf("by path with --home: %q", got)
	}
	if got := progName("sessionctl"); got != "sessionctl" {
		t.Fatalf("progName on PATH: %q", got)
	}
}

// TestLateAnswerAndBadInputIDExitCodes: an answer that came after the
// prompt was answered exits 1 (it was not applied), also with --json; a
// malformed --input-id is a usage error (exit 2) found before any call.
func TestLateAnswerAndBadInputIDExitCodes(t *testing.T) {
	var out strings.Builder
	a := newApp(nil, &out, &out)
	for _, jsonOut := range []bool{false, true} {
		a.jsonOut = jsonOut
		err := a.printRespond(protocol.RespondResult{PromptID: "prm_1", Status: "already_resolved"}, "approval")
		if code := a.exitCode(err); code != exitFailed {
			t.Fatalf("json=%v: late answer exits %d (%v), want %d", jsonOut, code, err, exitFailed)
		}
		if err := a.printRespond(protocol.RespondResult{PromptID: "prm_1", Status: "resolved"}, "approval"); a.exitCode(err) != exitOK {
			t.Fatalf("json=%v: applied answer: %v", jsonOut, err)
		}
	}
	for _, id := range []string{"has space", strings.Repeat("x", 129), "ümlaut", "semi;colon"} {
		var stderr strings.Builder
		code := run(context.Background(), "sessionctl", []string{"--home", t.TempDir(), "send", "ses_1", "hi", "--input-id", id},
			strings.NewReader(""), &stderr, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), "--input-id") {
			t.Fatalf("--input-id %q: exit %d, %s", id, code, stderr.String())
		}
	}
	if !validInputID("ci-build_1234:attempt.2") {
		t.Fatal("a valid input id was refused")
	}
}

// TestTUIStatusLine: the status line says a session is held by an unknown
// input (not "idle"), and while disconnected it offers no interrupt.
func TestTUIStatusLine(t *testing.T) {
	m := testModel()
	if got := m.statusLine(); !strings.Contains(got, "idle") {
		t.Fatalf("fresh session: %q", got)
	}
	gen := int64(3)
	m.pending = []protocol.Receipt{{AdmissionID: "adm_1", Seq: 1, Status: "unknown", ExecutionGeneration: &gen}}
	if got := m.statusLine(); !strings.Contains(got, "held (unknown input") || strings.Contains(got, "idle") {
		t.Fatalf("held session: %q", got)
	}
	m.connected, m.connNote = false, "connection lost"
	if got := m.statusLine(); strings.Contains(got, "interrupts") || !strings.Contains(got, "connection lost") {
		t.Fatalf("disconnected: %q", got)
	}
}

// TestCompletion: a script per shell on stdout; another shell is a usage
// error (exit 2).
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_sessionctl", "zsh": "#compdef sessionctl", "fish": "complete -c sessionctl"} {
		var out, errb strings.Builder
		if code := run(context.Background(), "sessionctl", []string{"completion", shell}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: exit %d, stdout lacks %q; stderr %s", shell, code, want, errb.String())
		}
	}
	var out, errb strings.Builder
	if code := run(context.Background(), "sessionctl", []string{"completion", "tcsh"}, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "bash, zsh or fish") {
		t.Errorf("completion tcsh: exit %d, stderr %q", code, errb.String())
	}
}

// printed is what m has queued for the scrollback: a model that never got
// a window size (width 0) keeps every line queued.
func printed(m *tuiModel) string { return strings.Join(m.printQ, "\n") }

// unsizedModel is testModel without a window size, so it prints nothing.
func unsizedModel(snap protocol.Snapshot) *tuiModel {
	m := newTUI(&link{app: newApp(nil, nil, nil), sessionID: "ses_1"}, snap, 42, 50)
	m.st = style{}
	return m
}

// TestTUIInterruptedCommandKeepsItsOutput: a command interrupted while
// running leaves the last lines of the output it printed live on screen,
// under its "interrupted while running" line.
func TestTUIInterruptedCommandKeepsItsOutput(t *testing.T) {
	m := unsizedModel(protocol.Snapshot{SessionID: "ses_1"})
	m.Update(event("tool.started", "adm_1", map[string]any{"tool_call_id": "c1", "name": "terminal", "args": map[string]string{"command": "make test"}}))
	m.Update(event("tool.output", "adm_1", map[string]any{"tool_call_id": "c1", "text": "line 1\nline 2\nlast words\n"}))
	m.Update(event("tool.completed", "adm_1", map[string]any{"tool_call_id": "c1", "name": "terminal", "ok": false, "exit_code": -1,
		"result": map[string]any{"error": "interrupted while running: its effects are unknown", "exit_code": -1}}))
	out := printed(m)
	if !strings.Contains(out, "│ last words") || !strings.Contains(out, "│ line 2") || !strings.Contains(out, "interrupted while running") {
		t.Fatalf("the interrupted command's output is gone:\n%s", out)
	}
}

// TestTUIHistoryShowsApprovals: the replayed transcript shows, under each
// tool call, its approval decision and who made it.
func TestTUIHistoryShowsApprovals(t *testing.T) {
	ev := func(seq int64, typ string, payload string) protocol.Event {
		return protocol.Event{SessionID: "ses_1", Seq: &seq, Type: protocol.EventType(typ), AdmissionID: "adm_1", Payload: json.RawMessage(payload)}
	}
	snap := protocol.Snapshot{SessionID: "ses_1", Messages: []protocol.Message{
		{Role: "user", Content: "clean up", AdmissionID: "adm_1"},
		{Role: "assistant", AdmissionID: "adm_1", ToolCalls: json.RawMessage(`[{"id":"c1","name":"terminal","arguments":"{\"command\":\"rm -rf build\"}"}]`)},
		{Role: "tool", AdmissionID: "adm_1", ToolCallID: "c1", Content: `{"output":"","exit_code":0,"duration_ms":3}`},
	}, Events: []protocol.Event{
		ev(1, "prompt.opened", `{"prompt":{"prompt_id":"p1","kind":"approval","payload":{"tool_call_id":"c1","command":"rm -rf build","risk":"dangerous","reason":"recursive delete"}}}`),
		ev(2, "prompt.closed", `{"prompt_id":"p1","resolution":"answered","response":{"choice":"session"},"answered_by":{"conn":"7","client":"vim-sessiond/2.1"}}`),
	}}
	m := unsizedModel(snap)
	out := printed(m)
	if !strings.Contains(out, "approval (dangerous: recursive delete): session by vim-sessiond/2.1 (connection 7)") {
		t.Fatalf("the replayed history lacks the approval decision:\n%s", out)
	}
}

func TestSenderNames(t *testing.T) {
	paired := &protocol.Sender{ID: "cli_1", Label: "phone", Client: "web", Version: "1.2"}
	for _, tc := range []struct {
		s            *protocol.Sender
		name, prefix string
	}{
		{nil, "-", "you › "},
		{&protocol.Sender{ID: "owner", Client: "sessionctl", Version: "0.1"}, "owner via sessionctl/0.1", "you › "},
		{paired, "phone (cli_1) via web/1.2", "phone › "},
		{&protocol.Sender{ID: "cli_2"}, "cli_2", "cli_2 › "},
	} {
		if got := senderName(tc.s); got != tc.name {
			t.Errorf("senderName(%+v) = %q, want %q", tc.s, got, tc.name)
		}
		if got := userPrefix(tc.s); got != tc.prefix {
			t.Errorf("userPrefix(%+v) = %q, want %q", tc.s, got, tc.prefix)
		}
	}
}

// TestTUINamesPairedSenders: attach prefixes a paired client's input with
// its label (from turn.started, else from its admission.updated event).
func TestTUINamesPairedSenders(t *testing.T) {
	m := testModel()
	phone := map[string]any{"id": "cli_1", "label": "phone", "client": "web"}
	m.Update(event("turn.started", "adm_1", map[string]any{"text": "hi", "sender": phone}))
	m.Update(event("admission.updated", "adm_2", map[string]any{"admission_id": "adm_2", "input_id": "i2", "status": "queued", "sender": map[string]any{"id": "cli_2", "label": "laptop"}}))
	m.Update(event("turn.started", "adm_2", map[string]any{"text": "next"}))
	m.Update(event("turn.started", "adm_3", map[string]any{"text": "mine", "sender": map[string]any{"id": "owner"}}))
	got := printed(m)
	for _, want := range []string{"phone › hi", "laptop › next", "you › mine"} {
		if !strings.Contains(got, want) {
			t.Fatalf("scrollback %q lacks %q", got, want)
		}
	}
}

// TestPairAndClientsUsage: bad arguments are usage errors (exit 2) found
// before any connection.
func TestPairAndClientsUsage(t *testing.T) {
	for _, args := range [][]string{{"pair", "--ttl", "0s"}, {"pair", "--ttl", "25h"}, {"pair", "extra"},
		{"clients", "rm"}, {"clients", "drop", "x"}, {"clients", "rm", "a", "b"}} {
		var stderr strings.Builder
		code := run(context.Background(), "sessionctl", append([]string{"--home", t.TempDir()}, args...), strings.NewReader(""), &stderr, &stderr)
		if code != exitUsage {
			t.Fatalf("sessionctl %v: exit %d, want %d; %s", args, code, exitUsage, stderr.String())
		}
	}
}
