package journeys

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

// Journeys for the stream shapes real OpenAI-compatible servers send (issue
// 12): the fake model serves them verbatim (Reply.RawSSE) to the real
// binary.

// finishFrame is a chunk that ends the reply with reason.
func finishFrame(reason string) string {
	return `data: {"id":"chatcmpl-q","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}` + "\n\n"
}

// toolFrame is a chunk carrying one tool-call delta (JSON).
func toolFrame(call string) string { return sseChunk(`{"tool_calls":[` + call + `]}`) }

const doneFrame = "data: [DONE]\n\n"

// quirkSession starts a daemon (approvals off) on m and a session in a
// fresh directory.
func quirkSession(t *testing.T, m *fixtures.FakeModel, extra string) (*fixtures.Daemon, *fixtures.Client, string, string) {
	t.Helper()
	cfg := "approvals: {mode: off}"
	if extra != "" {
		cfg += "\n" + extra
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg)})
	c := d.Dial(t)
	dir := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	return d, c, s.SessionID, dir
}

// wantTurn submits text and waits for the turn's end with outcome want.
func wantTurn(t *testing.T, c *fixtures.Client, sessionID, inputID, text, want string) string {
	t.Helper()
	r := submit(t, c, sessionID, inputID, text)
	out, errText := trTurnEnd(t, c, r.AdmissionID)
	if out != want {
		t.Fatalf("%q: outcome %s (%s), want %s", text, out, errText, want)
	}
	return errText
}

// nextInputWorks: the session's next input completes, and its request is
// one a strict server accepts.
func nextInputWorks(t *testing.T, m *fixtures.FakeModel, c *fixtures.Client, sessionID, inputID string) fixtures.RecordedRequest {
	t.Helper()
	wantTurn(t, c, sessionID, inputID, "and after that", "completed")
	reqs := m.RequestsWithLastUser("and after that")
	last := reqs[len(reqs)-1]
	trValid(t, last)
	for i, msg := range last.Messages {
		for _, tc := range msg.ToolCalls {
			if tc.Name == "" || tc.ID == "" {
				t.Fatalf("message %d: tool call %+v without name or id", i, tc)
			}
		}
	}
	return last
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return strings.Fields(string(b))
}

// TestQuirkToolCallIDChanges: the call's id changes after its first chunk
// and the later chunks carry no name. It is one call: it runs once, the
// turn completes, and the session's next input works (it used to be stored
// as two calls, one without a name, failing this and every later input).
func TestQuirkToolCallIDChanges(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("id changes", fixtures.Reply{RawSSE: []byte(
		toolFrame(`{"index":0,"id":"call_first","type":"function","function":{"name":"terminal","arguments":"{\"command\":"}}`) +
			toolFrame(`{"index":0,"id":"call_second","type":"function","function":{"arguments":"\"echo ran >> count.txt\"}"}}`) +
			finishFrame("tool_calls") + doneFrame)},
		fixtures.Reply{Text: "done"})
	m.On("and after that", fixtures.Reply{Text: "still here"})
	_, c, sid, dir := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "id changes", "completed")
	if got := lines(t, filepath.Join(dir, "count.txt")); len(got) != 1 {
		t.Fatalf("count.txt = %q, want the command run once", got)
	}
	nextInputWorks(t, m, c, sid, "i2")
}

// TestQuirkSameCallOnTwoIndexes: a server repeats one call (same id) at a
// second index. It runs once.
func TestQuirkSameCallOnTwoIndexes(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	call := func(index int) string {
		return fmt.Sprintf(`{"index":%d,"id":"call_x","type":"function","function":{"name":"terminal","arguments":"{\"command\":\"echo ran >> count.txt\"}"}}`, index)
	}
	m.On("repeat it", fixtures.Reply{RawSSE: []byte(toolFrame(call(0)) + toolFrame(call(1)) + finishFrame("tool_calls") + doneFrame)},
		fixtures.Reply{Text: "done"})
	m.On("and after that", fixtures.Reply{Text: "still here"})
	_, c, sid, dir := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "repeat it", "completed")
	if got := lines(t, filepath.Join(dir, "count.txt")); len(got) != 1 {
		t.Fatalf("count.txt = %q, want the command run once", got)
	}
	last := nextInputWorks(t, m, c, sid, "i2")
	n := 0
	for _, msg := range last.Messages {
		n += len(msg.ToolCalls)
	}
	if n != 1 {
		t.Fatalf("%d tool calls in the history, want 1", n)
	}
}

// TestQuirkErrorInsideStream: every shape of an error sent inside an HTTP
// 200 stream, after partial text, fails the turn with the server's text;
// the partial text is not kept as an answer, and the next input works.
func TestQuirkErrorInsideStream(t *testing.T) {
	partial := sseChunk(`{"role":"assistant","content":"partial ans"}`)
	cases := []struct {
		name, body, want string
	}{
		{"error object (OpenAI, LiteLLM, Ollama)", partial + `data: {"error":{"message":"upstream exploded","type":"server_error"}}` + "\n\n", "upstream exploded"},
		{"object error (vLLM)", partial + `data: {"object":"error","message":"context too long for vllm","type":"BadRequestError","code":400}` + "\n\n", "context too long for vllm"},
		{"finish_reason error (OpenRouter)", partial + `data: {"id":"g","object":"chat.completion.chunk","error":{"code":"server_error","message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\n" + doneFrame, "Provider disconnected"},
		{"finish_reason error alone (Mistral)", partial + finishFrame("error") + doneFrame, `finish_reason "error"`},
		{"error field (llama.cpp)", partial + `error: {"code":400,"message":"the request exceeds the available context size"}` + "\n\n" + doneFrame, "exceeds the available context size"},
		{"event error (Groq)", partial + "event: error\ndata: {\"error\":{\"message\":\"Service Unavailable\"}}\n\n", "Service Unavailable"},
	}
	m := fixtures.NewFakeModel(t)
	for _, tc := range cases {
		m.On(tc.name, fixtures.Reply{RawSSE: []byte(tc.body)})
	}
	m.On("and after that", fixtures.Reply{Text: "still here"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := createSession(t, c, map[string]any{})
			resume(t, c, s.SessionID)
			errText := wantTurn(t, c, s.SessionID, fmt.Sprint("e", i), tc.name, "failed")
			if !strings.Contains(errText, tc.want) || !strings.Contains(errText, "error in the stream") {
				t.Fatalf("error %q, want the server's text %q", errText, tc.want)
			}
			last := nextInputWorks(t, m, c, s.SessionID, fmt.Sprint("n", i))
			for _, msg := range last.Messages {
				if s, _ := msg.Content.(string); msg.Role == "assistant" && strings.Contains(s, "partial ans") {
					t.Fatalf("the partial text was kept as an answer: %+v", msg)
				}
			}
		})
	}
}

// TestQuirkContentParts: content sent as a list of typed parts (Mistral's
// reasoning models) is read as its text parts; the thinking is never the
// answer, nor sent back.
func TestQuirkContentParts(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("think first", fixtures.Reply{RawSSE: []byte(
		sseChunk(`{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"SECRET REASONING"}]}]}`) +
			sseChunk(`{"content":[{"type":"text","text":"Hel"}],"reasoning_content":"MORE SECRET"}`) +
			sseChunk(`{"content":[{"type":"text","text":"lo"}]}`) + finishFrame("stop") + doneFrame)})
	m.On("and after that", fixtures.Reply{Text: "still here"})
	_, c, sid, _ := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "think first", "completed")
	last := nextInputWorks(t, m, c, sid, "i2")
	if got, _ := last.Messages[2].Content.(string); last.Messages[2].Role != "assistant" || got != "Hello" {
		t.Fatalf("stored answer = %+v, want \"Hello\"", last.Messages[2])
	}
	if strings.Contains(string(last.Raw), "SECRET") {
		t.Fatal("the reasoning was stored and sent back")
	}
}

// TestQuirkPoisonedHistoryRecovers: a transcript row an older build stored
// (a call split in two, one half without a name) no longer fails every
// later input: the history is repaired before the request.
func TestQuirkPoisonedHistoryRecovers(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("run it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_a", "echo ok")}}, fixtures.Reply{Text: "done"})
	m.On("and after that", fixtures.Reply{Text: "still here"})
	d, c, sid, _ := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "run it", "completed")
	db, err := sqlx.Open("sqlite", "file:"+filepath.Join(d.Home, "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE messages SET tool_calls = ? WHERE session_id = ? AND role = 'assistant' AND tool_calls IS NOT NULL`,
		`[{"id":"call_a","name":"terminal","arguments":"{\"command\":"},{"id":"call_b","name":"","arguments":"\"echo ok\"}"}]`, sid)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("poisoning the store: %v (%d rows)", err, n)
	}
	nextInputWorks(t, m, c, sid, "i2")
	wantTurn(t, c, sid, "i3", "and after that", "completed") // and the one after
}

// TestQuirkTimeoutArguments: "timeout": 60.0 runs the command; a timeout
// beyond terminal.max_timeout, or one that would overflow, is a tool error
// the model reads, and the command does not run.
func TestQuirkTimeoutArguments(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("timeouts", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{
		{ID: "t60", Name: "terminal", Arguments: `{"command":"touch ran60","timeout":60.0}`},
		{ID: "huge", Name: "terminal", Arguments: `{"command":"touch ranhuge","timeout":18446744074}`},
		{ID: "over", Name: "terminal", Arguments: `{"command":"touch ranover","timeout":301}`},
	}}, fixtures.Reply{Text: "done"})
	_, c, sid, dir := quirkSession(t, m, "terminal: {max_timeout: 300}")
	wantTurn(t, c, sid, "i1", "timeouts", "completed")
	reqs := m.RequestsWithLastUser("timeouts")
	results := map[string]string{}
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == "tool" {
			results[msg.ToolCallID], _ = msg.Content.(string)
		}
	}
	if !strings.Contains(results["t60"], `"exit_code":0`) {
		t.Errorf("timeout 60.0: %s", results["t60"])
	}
	if !strings.Contains(results["huge"], "greater than the maximum") || !strings.Contains(results["over"], "terminal.max_timeout") {
		t.Errorf("out-of-range results: huge %s; over %s", results["huge"], results["over"])
	}
	for _, f := range []string{"ranhuge", "ranover"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s: the refused command ran", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran60")); err != nil {
		t.Errorf("timeout 60.0 did not run: %v", err)
	}
}

// TestQuirkShellHelperFinishes: a tee behind a process substitution gets
// to write its file after the shell exits.
func TestQuirkShellHelperFinishes(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("tee it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_t", `bash -c 'exec > >(tee -a t5.log) 2>&1; echo hi'`)}},
		fixtures.Reply{Text: "done"})
	_, c, sid, dir := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "tee it", "completed")
	if got := lines(t, filepath.Join(dir, "t5.log")); len(got) != 1 || got[0] != "hi" {
		t.Fatalf("t5.log = %q", got)
	}
}
