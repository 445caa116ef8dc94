package journeys

// Journeys of the agent-turn layer (issue 4) against the real binary and the
// fake model: tool loops, approvals (session / always / timeout), clarify,
// interrupts while a tool runs or an approval is open, model failures, and
// the exact request body. Helpers here are prefixed "tr" to stay clear of
// the other journey files.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// trRespond answers a prompt and returns the status or the error.
func trRespond(t *testing.T, c *fixtures.Client, sessionID string, p prompt, key string, value any) (string, error) {
	t.Helper()
	method := "approval.respond"
	if key == "answer" {
		method = "clarify.respond"
	}
	var res struct {
		Status   string `json:"status"`
		PromptID string `json:"prompt_id"`
	}
	err := c.Call(ctxT(t), method, map[string]any{"session_id": sessionID, "prompt_id": p.PromptID,
		"execution_generation": p.ExecutionGeneration, key: value}, &res)
	if err == nil && res.PromptID != p.PromptID {
		t.Fatalf("%s answered for prompt %q, want %q", method, res.PromptID, p.PromptID)
	}
	return res.Status, err
}

// trTurnEnd waits for turn.completed of admissionID and returns its payload.
func trTurnEnd(t *testing.T, c *fixtures.Client, admissionID string) (outcome, errText string) {
	t.Helper()
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == admissionID })
	var p struct {
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Outcome, p.Error
}

// trEventsOf returns the received events of type typ for admissionID.
func trEventsOf(c *fixtures.Client, admissionID, typ string) []fixtures.Event {
	var out []fixtures.Event
	for _, e := range c.Events() {
		if e.AdmissionID == admissionID && e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// trValid asserts that a recorded request is a valid Chat Completions
// conversation: system first, every assistant tool call answered by exactly
// one tool message right after it, no tool message without its call, and
// every user content a plain string.
func trValid(t *testing.T, r fixtures.RecordedRequest) {
	t.Helper()
	ms := r.Messages
	if len(ms) == 0 || ms[0].Role != "system" {
		t.Fatalf("request does not start with a system message: %s", trRoles(r))
	}
	for i := 0; i < len(ms); i++ {
		switch ms[i].Role {
		case "user":
			if _, ok := ms[i].Content.(string); !ok {
				t.Fatalf("message %d: user content is %T, want a string", i, ms[i].Content)
			}
		case "tool":
			t.Fatalf("message %d: tool message %q answers no call of the assistant message before it (%s)", i, ms[i].ToolCallID, trRoles(r))
		case "assistant":
			open := map[string]bool{}
			for _, c := range ms[i].ToolCalls {
				if c.ID == "" || open[c.ID] {
					t.Fatalf("message %d: empty or repeated tool call id %q", i, c.ID)
				}
				open[c.ID] = true
			}
			j := i + 1
			for ; j < len(ms) && ms[j].Role == "tool"; j++ {
				if !open[ms[j].ToolCallID] {
					t.Fatalf("message %d: tool message %q answers no open call (%s)", j, ms[j].ToolCallID, trRoles(r))
				}
				if _, ok := ms[j].Content.(string); !ok {
					t.Fatalf("message %d: tool content is %T", j, ms[j].Content)
				}
				delete(open, ms[j].ToolCallID)
			}
			if len(open) > 0 {
				t.Fatalf("message %d: tool calls without a result %v (%s)", i, open, trRoles(r))
			}
			i = j - 1
		}
	}
}

func trRoles(r fixtures.RecordedRequest) string {
	var rs []string
	for _, m := range r.Messages {
		rs = append(rs, m.Role)
	}
	return strings.Join(rs, ",")
}

// trToolResult decodes the tool message content for callID in the last
// request with the last user text text.
func trToolResult(t *testing.T, m *fixtures.FakeModel, text, callID string) map[string]any {
	t.Helper()
	reqs := m.RequestsWithLastUser(text)
	if len(reqs) == 0 {
		t.Fatalf("no request for %q", text)
	}
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == "tool" && (callID == "" || msg.ToolCallID == callID) {
			s, _ := msg.Content.(string)
			var v map[string]any
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("tool result %q is not a JSON object", s)
			}
			return v
		}
	}
	t.Fatalf("no tool result for %q in the last request for %q (%s)", callID, text, trRoles(reqs[len(reqs)-1]))
	return nil
}

func trExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func trTerm(id, command string) fixtures.FakeToolCall {
	return fixtures.FakeToolCall{ID: id, Name: "terminal", Arguments: jsonArgs(map[string]string{"command": command})}
}

// TestToolLoopSeveralIterations: three model calls, three commands, the
// results fed back in order, and the final text persisted.
func TestToolLoopSeveralIterations(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("loop please",
		fixtures.Reply{Text: "first, one", ToolCalls: []fixtures.FakeToolCall{trTerm("c1", "echo one")}},
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("c2", "echo two"), trTerm("c3", "echo three; exit 4")}},
		fixtures.Reply{Text: "finished: one two three"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "loop", "loop please")
	if out, errText := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, errText)
	}
	reqs := m.RequestsWithLastUser("loop please")
	if len(reqs) != 3 {
		t.Fatalf("model called %d times, want 3", len(reqs))
	}
	for i, want := range []string{"system,user", "system,user,assistant,tool", "system,user,assistant,tool,assistant,tool,tool"} {
		trValid(t, reqs[i])
		if got := trRoles(reqs[i]); got != want {
			t.Fatalf("request %d roles %s, want %s", i+1, got, want)
		}
	}
	for id, want := range map[string]struct {
		out  string
		code float64
	}{"c1": {"one\n", 0}, "c2": {"two\n", 0}, "c3": {"three\n", 4}} {
		v := trToolResult(t, m, "loop please", id)
		if v["output"] != want.out || v["exit_code"] != want.code {
			t.Fatalf("result of %s = %v", id, v)
		}
	}
	// Events: one tool.started and tool.completed per call, in order.
	var started, completed []string
	for _, e := range trEventsOf(c, r.AdmissionID, "tool.started") {
		var p struct {
			ToolCallID string `json:"tool_call_id"`
		}
		json.Unmarshal(e.Payload, &p)
		started = append(started, p.ToolCallID)
	}
	for _, e := range trEventsOf(c, r.AdmissionID, "tool.completed") {
		var p struct {
			ToolCallID string `json:"tool_call_id"`
			OK         bool   `json:"ok"`
			ExitCode   *int   `json:"exit_code"`
		}
		json.Unmarshal(e.Payload, &p)
		completed = append(completed, fmt.Sprintf("%s:%v:%d", p.ToolCallID, p.OK, *p.ExitCode))
	}
	if !slices.Equal(started, []string{"c1", "c2", "c3"}) || !slices.Equal(completed, []string{"c1:true:0", "c2:true:0", "c3:false:4"}) {
		t.Fatalf("tool events: started %v completed %v", started, completed)
	}
	if n := len(trEventsOf(c, r.AdmissionID, "message.completed")); n != 3 {
		t.Fatalf("%d message.completed events, want 3", n)
	}
	snap := resume(t, d.Dial(t), s.SessionID)
	var roles []string
	for _, msg := range snap.Messages {
		roles = append(roles, msg.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant,tool,tool,assistant" ||
		snap.Messages[len(snap.Messages)-1].Content != "finished: one two three" || snap.Messages[1].Content != "first, one" {
		t.Fatalf("transcript = %+v", snap.Messages)
	}
}

// TestApprovalSessionAndAlways: "session" allows the pattern for the rest
// of that session only; "always" allows it in every session.
func TestApprovalSessionAndAlways(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
		os.MkdirAll(filepath.Join(dir, v, "sub"), 0o755)
	}
	for i, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
		m.On("delete "+v, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm(fmt.Sprintf("call_del_%d", i), "rm -rf "+v)}}, fixtures.Reply{Text: "deleted " + v})
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	c := d.Dial(t)
	s1 := createSession(t, c, map[string]any{"cwd": dir})
	s2 := createSession(t, c, map[string]any{"cwd": dir})
	s3 := createSession(t, c, map[string]any{"cwd": dir})
	for _, s := range []snapshot{s1, s2, s3} {
		resume(t, c, s.SessionID)
	}
	// run submits text and, when answer is not "", answers its approval.
	run := func(s snapshot, text, answer string) receipt {
		t.Helper()
		r := submit(t, c, s.SessionID, strings.ReplaceAll(text, " ", "-"), text)
		if answer != "" {
			p := waitPrompt(t, c, r.AdmissionID, "approval")
			if st, err := trRespond(t, c, s.SessionID, p, "choice", answer); err != nil || st != "resolved" {
				t.Fatalf("respond %s: %q %v", answer, st, err)
			}
		}
		if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
			t.Fatalf("%s: outcome %s (%s)", text, out, e)
		}
		return r
	}
	noPrompt := func(r receipt) {
		t.Helper()
		if ps := trEventsOf(c, r.AdmissionID, "prompt.opened"); len(ps) != 0 {
			t.Fatalf("admission %s opened %d prompts, want none (allowlisted)", r.InputID, len(ps))
		}
	}
	gone := func(v string) {
		t.Helper()
		if trExists(filepath.Join(dir, v)) {
			t.Fatalf("%s still exists: the approved command did not run", v)
		}
	}

	r := run(s1, "delete v1", "session")
	p := trEventsOf(c, r.AdmissionID, "prompt.opened")
	if len(p) != 1 || !strings.Contains(string(p[0].Payload), `"pattern":"sandboxed:rm-recursive"`) || !strings.Contains(string(p[0].Payload), `"command":"rm -rf v1"`) {
		t.Fatalf("prompt.opened = %v", p)
	}
	gone("v1")
	noPrompt(run(s1, "delete v2", "")) // same pattern, same session
	gone("v2")
	run(s2, "delete v3", "always") // another session still asks
	gone("v3")
	noPrompt(run(s3, "delete v4", "")) // always: a third session
	gone("v4")
	noPrompt(run(s2, "delete v5", ""))
	gone("v5")

	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var sess, always []string
	db.Select(&sess, `SELECT session_id || '|' || pattern FROM session_approvals`)
	db.Select(&always, `SELECT pattern FROM approval_allowlist`)
	if !slices.Equal(sess, []string{s1.SessionID + "|sandboxed:rm-recursive"}) || !slices.Equal(always, []string{"sandboxed:rm-recursive"}) {
		t.Fatalf("session_approvals %v, approval_allowlist %v", sess, always)
	}
}

// TestPromptTimeouts: an approval nobody answers is a deny (fail closed)
// and a clarify nobody answers tells the model to use its judgement.
func TestPromptTimeouts(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "victim"), 0o755)
	m.On("delete slowly", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_slow", "touch ran && rm -rf victim")}}, fixtures.Reply{Text: "ok, not deleted"})
	m.On("ask slowly", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: "call_q", Name: "clarify",
		Arguments: `{"question":"Which one?","choices":["a","b"]}`}}}, fixtures.Reply{Text: "I picked a"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
		"approvals: {mode: manual, timeout: 1}\nagent: {clarify_timeout: 1}")})
	c := d.Dial(t)
	sa := createSession(t, c, map[string]any{"cwd": dir})
	sc := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, sa.SessionID)
	resume(t, c, sc.SessionID)
	ra := submit(t, c, sa.SessionID, "a", "delete slowly")
	rc := submit(t, c, sc.SessionID, "c", "ask slowly") // runs concurrently in its own session
	pa := waitPrompt(t, c, ra.AdmissionID, "approval")
	pc := waitPrompt(t, c, rc.AdmissionID, "clarify")
	for _, x := range []struct {
		r receipt
		p prompt
	}{{ra, pa}, {rc, pc}} {
		closed := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
			return e.Type == "prompt.closed" && strings.Contains(string(e.Payload), x.p.PromptID)
		})
		if !strings.Contains(string(closed.Payload), `"resolution":"timed_out"`) {
			t.Fatalf("prompt.closed = %s", closed.Payload)
		}
		if out, e := trTurnEnd(t, c, x.r.AdmissionID); out != "completed" {
			t.Fatalf("outcome %s (%s)", out, e)
		}
	}
	v := trToolResult(t, m, "delete slowly", "call_slow")
	if msg, _ := v["error"].(string); !strings.HasPrefix(msg, "not run") || !strings.Contains(msg, "timed out") {
		t.Fatalf("approval result = %v", v)
	}
	if trExists(filepath.Join(dir, "ran")) || !trExists(filepath.Join(dir, "victim")) {
		t.Fatal("a command whose approval timed out ran")
	}
	v = trToolResult(t, m, "ask slowly", "call_q")
	note, _ := v["note"].(string)
	resp := v["responses"].([]any)[0].(map[string]any)
	if v["timed_out"] != true || !strings.Contains(note, "No answer came") || !strings.Contains(note, "judgement") || resp["answer"] != nil {
		t.Fatalf("clarify result = %v", v)
	}
	// The turns ended: a late answer is stale.
	_, err := trRespond(t, c, sa.SessionID, pa, "choice", "once")
	wantReason(t, err, -32000, "stale_generation")
	_, err = trRespond(t, c, sc.SessionID, pc, "answer", "a")
	wantReason(t, err, -32000, "stale_generation")
	if trExists(filepath.Join(dir, "ran")) {
		t.Fatal("a late answer ran the command")
	}
}

// TestClarifyMultiSelect: a list answer goes back as a list; several
// questions answered with one entry each.
func TestClarifyMultiSelect(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("pick toppings", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: "call_m", Name: "clarify",
		Arguments: `{"question":"Which toppings?","choices":["cheese","ham","olives"],"multi_select":true}`}}}, fixtures.Reply{Text: "cheese and olives"})
	m.On("two questions", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: "call_2q", Name: "clarify",
		Arguments: `{"questions":[{"question":"Size?","choices":["S","L"]},{"question":"Name?"}]}`}}}, fixtures.Reply{Text: "L for Ann"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)

	r := submit(t, c, s.SessionID, "m", "pick toppings")
	p := waitPrompt(t, c, r.AdmissionID, "clarify")
	opened := trEventsOf(c, r.AdmissionID, "prompt.opened")
	if len(opened) != 1 || !strings.Contains(string(opened[0].Payload), `"multi_select":true`) {
		t.Fatalf("prompt.opened = %v", opened)
	}
	if _, err := trRespond(t, c, s.SessionID, p, "choice", "once"); fixtures.ErrorReason(err) != "not_found" {
		t.Fatalf("approval.respond to a clarify prompt: %v, want not_found", err)
	}
	if st, err := trRespond(t, c, s.SessionID, p, "answer", []string{"cheese", "olives"}); err != nil || st != "resolved" {
		t.Fatalf("respond: %q %v", st, err)
	}
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	v := trToolResult(t, m, "pick toppings", "call_m")
	b, _ := json.Marshal(v["responses"])
	if string(b) != `[{"answer":["cheese","olives"],"choices_offered":["cheese","ham","olives"],"question":"Which toppings?"}]` {
		t.Fatalf("responses = %s", b)
	}

	r = submit(t, c, s.SessionID, "2q", "two questions")
	p = waitPrompt(t, c, r.AdmissionID, "clarify")
	if st, err := trRespond(t, c, s.SessionID, p, "answer", []string{"L", "Ann"}); err != nil || st != "resolved" {
		t.Fatalf("respond: %q %v", st, err)
	}
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	b, _ = json.Marshal(trToolResult(t, m, "two questions", "call_2q")["responses"])
	if string(b) != `[{"answer":"L","choices_offered":["S","L"],"question":"Size?"},{"answer":"Ann","choices_offered":[],"question":"Name?"}]` {
		t.Fatalf("responses = %s", b)
	}
}

// procGroupAlive lists the live (not zombie) processes of process group
// pgid, as "pid:comm".
func procGroupAlive(pgid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid && f[0] != "Z" && f[0] != "X" {
			comm := string(b[bytes.IndexByte(b, '(')+1 : i])
			out = append(out, fmt.Sprintf("%d:%s", pid, comm))
		}
	}
	return out
}

// pidAlive reports whether pid exists and is not a zombie.
// hostProcIn finds a process whose cwd is dir and whose /proc cmdline is
// cmdline, as the host sees it: its pid, its parent's pid and its process
// group (zeros when there is none).
func hostProcIn(dir, cmdline string) (pid, ppid, pgid int) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0, 0, 0
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(cl) != cmdline {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err != nil || cwd != real {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ = strconv.Atoi(f[1])
		pgid, _ = strconv.Atoi(f[2])
		return n, ppid, pgid
	}
	return 0, 0, 0
}

func pidAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestInterruptWhileToolRuns: session.interrupt kills the command's whole
// process group, the turn settles interrupted, and the next request pairs
// every tool call with a result.
func TestInterruptWhileToolRuns(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	// The command runs in a PID namespace of its own (the sandbox): $$ and $!
	// are pids of that namespace, so the test finds the processes by their
	// host pids instead: the sleep by its arguments and cwd, its parent (the
	// shell) and its process group as /proc shows them here.
	cmd := `sleep 300 & echo started > started; wait; echo finished > finished`
	m.On("run forever", fixtures.Reply{Text: "starting", ToolCalls: []fixtures.FakeToolCall{trTerm("call_long", cmd)}}, fixtures.Reply{Text: "never"})
	m.On("after the interrupt", fixtures.Reply{Text: "fine"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "long", "run forever")
	var pgid, child, shell int
	fixtures.Eventually(t, wait, "the command to start its child", func() bool {
		if !trExists(filepath.Join(dir, "started")) {
			return false
		}
		child, shell, pgid = hostProcIn(dir, "sleep\x00300\x00")
		return child > 0
	})
	if !pidAlive(child) || !pidAlive(shell) || len(procGroupAlive(pgid)) < 2 {
		t.Fatalf("before the interrupt: child alive %v, group %v", pidAlive(child), procGroupAlive(pgid))
	}
	var res struct {
		Interrupted *string `json:"interrupted"`
	}
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Interrupted == nil || *res.Interrupted != r.AdmissionID {
		t.Fatalf("interrupt answered %v, want %s", res.Interrupted, r.AdmissionID)
	}
	// The interrupt answers after the settle, which follows the reaping of
	// the shell (the group leader): it is gone already.
	if pidAlive(pgid) {
		t.Fatalf("the command's leader %d is still alive after session.interrupt answered", pgid)
	}
	// SIGKILL to the rest of the group is delivered asynchronously.
	fixtures.Eventually(t, wait, fmt.Sprintf("process group %d to be gone", pgid), func() bool {
		return len(procGroupAlive(pgid)) == 0 && !pidAlive(child) && !pidAlive(shell) && !pidAlive(pgid)
	})
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "interrupted" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	rows := fixtures.Admissions(t, fixtures.OpenStoreReadOnly(t, d.Home), s.SessionID)
	if rows[0].Status != "terminal" || rows[0].Outcome.String != "interrupted" {
		t.Fatalf("row = %+v", rows[0])
	}
	// Settled: nothing more comes of the interrupted turn.
	if n := len(m.RequestsWithLastUser("run forever")); n != 1 {
		t.Fatalf("the interrupted turn called the model %d times", n)
	}
	if trExists(filepath.Join(dir, "finished")) {
		t.Fatal("the command ran to its end")
	}

	r2 := submit(t, c, s.SessionID, "next", "after the interrupt")
	if out, e := trTurnEnd(t, c, r2.AdmissionID); out != "completed" {
		t.Fatalf("next turn: %s (%s)", out, e)
	}
	reqs := m.RequestsWithLastUser("after the interrupt")
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	trValid(t, reqs[0])
	if got := trRoles(reqs[0]); got != "system,user,assistant,tool,assistant,user" {
		t.Fatalf("roles %s", got)
	}
	if !slices.Equal(reqs[0].UserTexts, []string{"run forever", "after the interrupt"}) {
		t.Fatalf("user texts %v", reqs[0].UserTexts)
	}
	// The command had started: the model is told it was killed and its
	// effects are unknown, never that it did not run.
	if tm := reqs[0].Messages[3]; tm.ToolCallID != "call_long" || !strings.Contains(tm.Content.(string), "interrupted while running") ||
		strings.Contains(tm.Content.(string), "not run") {
		t.Fatalf("tool message = %+v", tm)
	}
	res.Interrupted = &r.AdmissionID
	if got := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID}, &res); got != nil || res.Interrupted != nil {
		t.Fatalf("interrupt with nothing running: %v %v", got, res.Interrupted)
	}
}

// TestInterruptWhileApprovalOpen: the prompt closes interrupted, a late
// answer gets stale_generation, and the command never runs.
func TestInterruptWhileApprovalOpen(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "victim"), 0o755)
	m.On("risky", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_risky", "touch ran && rm -rf victim")}}, fixtures.Reply{Text: "never"})
	m.On("and now", fixtures.Reply{Text: "ok"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "risky", "risky")
	p := waitPrompt(t, c, r.AdmissionID, "approval")

	// A wrong generation is refused and interrupts nothing.
	wrong := p.ExecutionGeneration + 1
	err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID, "execution_generation": wrong}, nil)
	wantReason(t, err, -32000, "stale_generation")

	var res struct {
		Interrupted *string `json:"interrupted"`
	}
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID, "execution_generation": p.ExecutionGeneration}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Interrupted == nil || *res.Interrupted != r.AdmissionID {
		t.Fatalf("interrupt answered %v", res.Interrupted)
	}
	closed := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.Type == "prompt.closed" && strings.Contains(string(e.Payload), p.PromptID)
	})
	if !strings.Contains(string(closed.Payload), `"resolution":"interrupted"`) {
		t.Fatalf("prompt.closed = %s", closed.Payload)
	}
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "interrupted" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	for _, choice := range []string{"once", "always"} {
		_, err := trRespond(t, c, s.SessionID, p, "choice", choice)
		wantReason(t, err, -32000, "stale_generation")
	}
	if snap := resume(t, d.Dial(t), s.SessionID); len(snap.Prompts) != 0 {
		t.Fatalf("snapshot still lists prompts: %+v", snap.Prompts)
	}

	r2 := submit(t, c, s.SessionID, "next", "and now")
	if out, e := trTurnEnd(t, c, r2.AdmissionID); out != "completed" {
		t.Fatalf("next turn: %s (%s)", out, e)
	}
	reqs := m.RequestsWithLastUser("and now")
	trValid(t, reqs[0])
	if len(m.RequestsWithLastUser("risky")) != 1 {
		t.Fatal("the interrupted turn called the model again")
	}
	// The turn is over and a later turn completed: the command never ran.
	if trExists(filepath.Join(dir, "ran")) || !trExists(filepath.Join(dir, "victim")) {
		t.Fatal("the command ran after the interrupt")
	}
	var n int
	fixtures.OpenStoreReadOnly(t, d.Home).Get(&n, `SELECT count(*) FROM approval_allowlist`)
	if n != 0 {
		t.Fatal("a stale 'always' answer was recorded")
	}
}

// sseChunk is one streamed chat.completion.chunk frame.
func sseChunk(delta string) string {
	return `data: {"id":"chatcmpl-broken","object":"chat.completion.chunk","created":1,"model":"fake-model","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
}

// TestModelFailures: a stream cut before [DONE], a 5xx, a 4xx and a non-JSON
// body each fail the turn with the server's text; the daemon lives and the
// next input completes with a valid request.
func TestModelFailures(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	truncated := sseChunk(`{"role":"assistant","content":""}`) + sseChunk(`{"content":"partial ans"}`)
	truncatedTool := sseChunk(`{"role":"assistant","content":""}`) +
		sseChunk(`{"tool_calls":[{"index":0,"id":"call_cut","type":"function","function":{"name":"terminal","arguments":"{\"comm"}}]}`)
	cases := []struct {
		text     string
		reply    fixtures.Reply
		want     []string
		requests int
	}{
		{"cut mid text", fixtures.Reply{RawSSE: []byte(truncated)}, []string{"truncated"}, 1},
		{"cut mid tool call", fixtures.Reply{RawSSE: []byte(truncatedTool)}, []string{"truncated"}, 1},
		// 500 may mean the request was processed: never retried, so the
		// input reaches the model once.
		{"server error", fixtures.Reply{Status: 500, Text: `{"error":{"message":"the fake upstream is on fire","type":"server_error"}}`}, []string{"500", "the fake upstream is on fire"}, 1},
		// 503 says the request was not taken: retried (twice), then failed.
		{"unavailable", fixtures.Reply{Status: 503, Text: `{"error":{"message":"overloaded, come back later"}}`}, []string{"503", "overloaded, come back later"}, 3},
		{"bad request", fixtures.Reply{Status: 400, Text: "model fake-model does not exist here"}, []string{"400", "model fake-model does not exist here"}, 1},
		{"garbage body", fixtures.Reply{RawSSE: []byte("<html><body>502 gateway garbage</body></html>")}, []string{"502 gateway garbage"}, 1},
	}
	for _, tc := range cases {
		m.On(tc.text, tc.reply)
	}
	m.On("and after that", fixtures.Reply{Text: "still here"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	for i, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			s := createSession(t, c, map[string]any{})
			resume(t, c, s.SessionID)
			r := submit(t, c, s.SessionID, fmt.Sprint("f", i), tc.text)
			out, errText := trTurnEnd(t, c, r.AdmissionID)
			if out != "failed" {
				t.Fatalf("outcome %s, want failed", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errText, w) {
					t.Errorf("error %q lacks %q", errText, w)
				}
			}
			if n := len(m.RequestsWithLastUser(tc.text)); n != tc.requests {
				t.Errorf("model asked %d times, want %d", n, tc.requests)
			}
			if !d.Running() {
				t.Fatal("the daemon died")
			}
			r2 := submit(t, c, s.SessionID, fmt.Sprint("n", i), "and after that")
			if out, e := trTurnEnd(t, c, r2.AdmissionID); out != "completed" {
				t.Fatalf("next turn: %s (%s)", out, e)
			}
			reqs := m.RequestsWithLastUser("and after that")
			last := reqs[len(reqs)-1]
			trValid(t, last)
			// The failed input reaches the model once more only as history,
			// closed by a boundary note; nothing of the broken reply leaks.
			if got := trRoles(last); got != "system,user,assistant,user" {
				t.Fatalf("roles %s", got)
			}
			if !slices.Equal(last.UserTexts, []string{tc.text, "and after that"}) {
				t.Fatalf("user texts %v", last.UserTexts)
			}
			note, _ := last.Messages[2].Content.(string)
			if strings.Contains(note, "partial ans") || len(last.Messages[2].ToolCalls) != 0 || !strings.Contains(note, "failed") {
				t.Fatalf("boundary note = %+v", last.Messages[2])
			}
		})
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil || info.PID != d.PID() {
		t.Fatalf("daemon.info: %+v %v", info, err)
	}
}

// TestRequestBodyExact: the body the fake receives for a one-tool turn.
func TestRequestBodyExact(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("say hi", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_hi_1", "echo hi")}}, fixtures.Reply{Text: "it said hi"})
	m.On("thanks", fixtures.Reply{Text: "you're welcome"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	dir := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": dir, "model": "exact-model-7"})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "hi", "say hi")
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	r = submit(t, c, s.SessionID, "thx", "thanks")
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, rq := range reqs {
		trValid(t, rq)
		if rq.Model != "exact-model-7" || !rq.Stream || !slices.Equal(rq.Tools, []string{"terminal", "clarify"}) {
			t.Fatalf("request %d: model %q stream %v tools %v", i, rq.Model, rq.Stream, rq.Tools)
		}
		var raw struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
			Messages []map[string]json.RawMessage `json:"messages"`
			Tools    []struct {
				Type     string `json:"type"`
				Function struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(rq.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		if !raw.StreamOptions.IncludeUsage {
			t.Fatalf("request %d: stream_options.include_usage not set: %s", i, rq.Raw)
		}
		for _, tl := range raw.Tools {
			if tl.Type != "function" || !bytes.HasPrefix(bytes.TrimSpace(tl.Function.Parameters), []byte("{")) {
				t.Fatalf("request %d: tool %+v", i, tl)
			}
		}
		// Every content on the wire is a JSON string (never parts, never null
		// for user, system and tool messages).
		for j, msg := range raw.Messages {
			var role string
			json.Unmarshal(msg["role"], &role)
			if role == "assistant" {
				continue
			}
			if c := bytes.TrimSpace(msg["content"]); len(c) == 0 || c[0] != '"' {
				t.Fatalf("request %d message %d (%s): content %s is not a string", i, j, role, c)
			}
		}
		sys, _ := rq.Messages[0].Content.(string)
		if !strings.Contains(sys, dir) {
			t.Fatalf("system prompt does not name the cwd: %q", sys)
		}
	}
	// Request 1: system, user.
	if got := trRoles(reqs[0]); got != "system,user" || reqs[0].Messages[1].Content != "say hi" {
		t.Fatalf("request 1: %s %+v", got, reqs[0].Messages)
	}
	// Request 2: the tool call and its result.
	r2 := reqs[1]
	if got := trRoles(r2); got != "system,user,assistant,tool" {
		t.Fatalf("request 2 roles %s", got)
	}
	if r2.Messages[1].Content != "say hi" {
		t.Fatalf("user content %#v", r2.Messages[1].Content)
	}
	a := r2.Messages[2]
	if len(a.ToolCalls) != 1 || a.ToolCalls[0] != (fixtures.FakeToolCall{ID: "call_hi_1", Name: "terminal", Arguments: `{"command":"echo hi"}`}) {
		t.Fatalf("assistant tool calls %+v", a.ToolCalls)
	}
	tm := r2.Messages[3]
	var result map[string]any
	if err := json.Unmarshal([]byte(tm.Content.(string)), &result); err != nil {
		t.Fatal(err)
	}
	if tm.ToolCallID != "call_hi_1" || result["output"] != "hi\n" || result["exit_code"] != float64(0) || result["truncated"] != false {
		t.Fatalf("tool message %+v", tm)
	}
	// Request 3: the whole first turn once, then the new input.
	r3 := reqs[2]
	if got := trRoles(r3); got != "system,user,assistant,tool,assistant,user" {
		t.Fatalf("request 3 roles %s", got)
	}
	if !slices.Equal(r3.UserTexts, []string{"say hi", "thanks"}) || r3.Messages[4].Content != "it said hi" || r3.Messages[3].Content != tm.Content {
		t.Fatalf("request 3 = %+v", r3.Messages)
	}
}

// TestRepeatedToolCallIDsStayPaired: servers that number their tool calls
// per response ("call_0" in every reply) must not break the transcript:
// every request still pairs each assistant tool call with its own result.
func TestRepeatedToolCallIDsStayPaired(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("two steps",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_0", "echo step-one")}},
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_0", "echo step-two")}},
		fixtures.Reply{Text: "both done"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "two", "two steps")
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, e)
	}
	reqs := m.RequestsWithLastUser("two steps")
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[2]
	trValid(t, last)
	var outs []string
	for _, msg := range last.Messages {
		if msg.Role == "tool" {
			outs = append(outs, msg.Content.(string))
		}
	}
	if len(outs) != 2 || !strings.Contains(outs[0], "step-one") || !strings.Contains(outs[1], "step-two") {
		t.Fatalf("tool results the model saw: %q", outs)
	}
}

// TestToolEnvWithholdsSecrets: a terminal command does not see the
// daemon's model API key (or other credential-like variables), so a model
// cannot read it with `env`; the environment is an allowlist (PATH, HOME,
// LANG, …) plus terminal.env_passthrough.
func TestToolEnvWithholdsSecrets(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("show env",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("e1", "env")}},
		fixtures.Reply{Text: "done"})
	const secret = "sk-journey-secret-0123456789"
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "terminal: {env_passthrough: [SESSIOND_JOURNEY_VISIBLE]}"),
		Env: []string{"OPENAI_API_KEY=" + secret, "MY_SERVICE_TOKEN=" + secret, "SESSIOND_JOURNEY_VISIBLE=yes",
			"DATABASE_URL=postgres://app:" + secret + "@db/app", "SESSIOND_JOURNEY_UNLISTED=no"}})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "env", "show env")
	if out, errText := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s (%s)", out, errText)
	}
	out, _ := trToolResult(t, m, "show env", "e1")["output"].(string)
	if !strings.Contains(out, "SESSIOND_JOURNEY_VISIBLE=yes") {
		t.Fatalf("env output lacks an ordinary variable:\n%s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "OPENAI_API_KEY") || strings.Contains(out, "SESSIOND_JOURNEY_UNLISTED") {
		t.Fatalf("a terminal command saw a secret:\n%s", out)
	}
}
