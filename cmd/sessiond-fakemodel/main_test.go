package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/fakemodel"
)

func TestMain(m *testing.M) { os.Exit(fixtures.Main(m)) }

const wait = 60 * time.Second

// streamed is what one streamed chat completion said.
type streamed struct {
	content string
	calls   []fakemodel.ToolCall // arguments reassembled from their pieces
}

// chat posts messages (and the tools the daemon offers) with "stream":
// true to baseURL and reassembles the server-sent events.
func chat(t *testing.T, baseURL string, tools []string, msgs ...map[string]any) streamed {
	t.Helper()
	var specs []any
	for _, name := range tools {
		specs = append(specs, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}})
	}
	body, _ := json.Marshal(map[string]any{"model": fakemodel.ModelName, "stream": true, "messages": msgs, "tools": specs})
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Post(baseURL+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out streamed
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			out.content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				for len(out.calls) <= tc.Index {
					out.calls = append(out.calls, fakemodel.ToolCall{})
				}
				call := &out.calls[tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Name += tc.Function.Name
				call.Arguments += tc.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil || !done {
		t.Fatalf("the stream ended without [DONE] (%v)", err)
	}
	return out
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// followUp is the conversation after a tool call: the assistant's call and
// the tool's result.
func followUp(text string, call fakemodel.ToolCall, result string) []map[string]any {
	return []map[string]any{
		user(text),
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": call.Arguments}}}},
		{"role": "tool", "tool_call_id": call.ID, "content": result},
	}
}

func oneCall(t *testing.T, got streamed, name string, wantArgs map[string]any) fakemodel.ToolCall {
	t.Helper()
	if len(got.calls) != 1 || got.calls[0].Name != name || got.calls[0].ID == "" {
		t.Fatalf("want one %s call, got %+v (text %q)", name, got.calls, got.content)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(got.calls[0].Arguments), &args); err != nil {
		t.Fatalf("%s arguments %q: %v", name, got.calls[0].Arguments, err)
	}
	if a, b := fmt.Sprint(args), fmt.Sprint(wantArgs); a != b {
		t.Fatalf("%s arguments %s, want %s", name, a, b)
	}
	return got.calls[0]
}

// The script over HTTP, as the daemon speaks it: an echo, a terminal call
// and its summary, a clarify call and its summary.
func TestScript(t *testing.T) {
	var log bytes.Buffer
	m, err := start("127.0.0.1:0", 0, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url := m.URL()
	tools := []string{"terminal", "clarify"}

	if got := chat(t, url, tools, user("hello there")); got.content != "You said: hello there" || len(got.calls) != 0 {
		t.Errorf("plain prompt: %+v", got)
	}

	call := oneCall(t, chat(t, url, tools, user("run: ls -la /tmp")), "terminal", map[string]any{"command": "ls -la /tmp"})
	got := chat(t, url, tools, followUp("run: ls -la /tmp", call, `{"exit_code":0,"output":"a.txt\nb.txt\n","truncated":false,"total_bytes":12,"duration_ms":3}`)...)
	if want := "`ls -la /tmp` exited with status 0. Its output:\n\n```\na.txt\nb.txt\n```"; got.content != want || len(got.calls) != 0 {
		t.Errorf("terminal summary: %q, want %q", got.content, want)
	}
	got = chat(t, url, tools, followUp("run: ls -la /tmp", call, `{"error":"denied by the user"}`)...)
	if !strings.Contains(got.content, "did not run normally: denied by the user") {
		t.Errorf("denied terminal summary: %q", got.content)
	}

	call = oneCall(t, chat(t, url, tools, user("Ask: Which colour? | red | blue |")), "clarify",
		map[string]any{"question": "Which colour?", "choices": []any{"red", "blue"}})
	got = chat(t, url, tools, followUp("Ask: Which colour? | red | blue |", call, `{"responses":[{"question":"Which colour?","choices_offered":["red","blue"],"answer":"blue"}]}`)...)
	if got.content != "You answered: blue." {
		t.Errorf("clarify summary: %q", got.content)
	}
	oneCall(t, chat(t, url, tools, user("ask: What is your name?")), "clarify", map[string]any{"question": "What is your name?"})

	// Without the tool, or without a command, it explains instead of calling.
	if got := chat(t, url, nil, user("run: ls")); len(got.calls) != 0 || !strings.Contains(got.content, "no terminal tool") {
		t.Errorf("run without the terminal tool: %+v", got)
	}
	if got := chat(t, url, tools, user("run:")); len(got.calls) != 0 || !strings.Contains(got.content, "Nothing to run") {
		t.Errorf("run without a command: %+v", got)
	}

	m.Close() // waits for the handlers: the log is complete
	if !strings.Contains(log.String(), `"run: ls -la /tmp" → terminal {"command":"ls -la /tmp"}`) {
		t.Errorf("log:\n%s", log.String())
	}
}

// run refuses a non-loopback address before listening; on loopback it
// prints the URL and the config snippet and stops when its context ends.
func TestRun(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8399", ":8399", "192.0.2.7:8399"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"--listen", addr}, &stdout, &stderr); code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "not a loopback address") {
			t.Errorf("--listen %s: exit %d, stdout %q, stderr %q", addr, code, stdout.String(), stderr.String())
		}
	}
	if code := run(context.Background(), []string{"--chunk-delay", "soon"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("a bad flag exited %d, want 2", code)
	}

	t.Setenv("SESSIOND_HOME", "/somewhere/home")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"--listen", "127.0.0.1:0", "--quiet"}, pw, io.Discard)
		pw.Close()
		exited <- code
	}()
	out := bufio.NewReader(pr)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v", err)
	}
	url := ""
	for _, f := range strings.Fields(first) {
		if strings.HasPrefix(f, "http://") {
			url = f
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("banner %q does not name the base URL", first)
	}
	if got := chat(t, url, nil, user("ping")); got.content != "You said: ping" {
		t.Errorf("the served model answered %q", got.content)
	}
	cancel()
	rest, _ := io.ReadAll(out)
	if code := <-exited; code != 0 {
		t.Errorf("run exited %d after its context ended", code)
	}
	for _, want := range []string{
		"Put these lines in /somewhere/home/config.yaml,",
		"model: {provider: openai, default: " + fakemodel.ModelName + ", base_url: " + url + "}",
		"run: CMD", "ask: Q | A | B",
	} {
		if !strings.Contains(string(rest), want) {
			t.Errorf("the banner lacks %q:\n%s%s", want, first, rest)
		}
	}
}

// The script through the real daemon: a session on the fake model echoes,
// runs a command and asks a question.
func TestScriptThroughDaemon(t *testing.T) {
	m, err := start("127.0.0.1:0", 0, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fmt.Sprintf(
		"model: {provider: openai, default: %s, base_url: %q}\napprovals: {mode: manual}\n", fakemodel.ModelName, m.URL())})
	c := d.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := c.Call(ctx, "session.create", map[string]any{"cwd": t.TempDir()}, &snap); err != nil {
		t.Fatal(err)
	}
	s := snap.SessionID
	// turn submits text and returns the content of the turn's last
	// assistant message once the turn completed; opened, if set, is called
	// with each prompt the turn opens.
	n := 0
	turn := func(text string, opened func(promptID, kind string, gen int64)) string {
		t.Helper()
		n++
		var r struct {
			AdmissionID string `json:"admission_id"`
		}
		if err := c.Call(ctx, "prompt.submit", map[string]any{"session_id": s, "input_id": fmt.Sprint("in-", n), "text": text}, &r); err != nil {
			t.Fatalf("submit %q: %v", text, err)
		}
		if opened != nil {
			ev := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "prompt.opened" && e.AdmissionID == r.AdmissionID })
			var p struct {
				Prompt struct {
					PromptID            string `json:"prompt_id"`
					Kind                string `json:"kind"`
					ExecutionGeneration int64  `json:"execution_generation"`
				} `json:"prompt"`
			}
			json.Unmarshal(ev.Payload, &p)
			opened(p.Prompt.PromptID, p.Prompt.Kind, p.Prompt.ExecutionGeneration)
		}
		ev := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == r.AdmissionID })
		if !strings.Contains(string(ev.Payload), `"completed"`) {
			t.Fatalf("turn %q: %s", text, ev.Payload)
		}
		last := ""
		for _, e := range c.Events() {
			if e.Type != "message.completed" || e.AdmissionID != r.AdmissionID {
				continue
			}
			var p struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(e.Payload, &p) == nil && p.Message.Role == "assistant" && p.Message.Content != "" {
				last = p.Message.Content
			}
		}
		return last
	}
	if err := c.Call(ctx, "session.resume", map[string]any{"session_id": s}, nil); err != nil {
		t.Fatal(err)
	}

	if got := turn("hello daemon", nil); got != "You said: hello daemon" {
		t.Errorf("echo: %q", got)
	}
	if got := turn("run: echo fake-model-works", nil); !strings.Contains(got, "`echo fake-model-works` exited with status 0") || !strings.Contains(got, "\nfake-model-works\n") {
		t.Errorf("run: %q", got)
	}
	got := turn("ask: Which colour? | red | blue", func(id, kind string, gen int64) {
		if kind != "clarify" {
			t.Fatalf("prompt %s is %q, want clarify", id, kind)
		}
		if err := c.Call(ctx, "clarify.respond", map[string]any{"session_id": s, "prompt_id": id, "execution_generation": gen, "answer": "blue"}, nil); err != nil {
			t.Fatalf("clarify.respond: %v", err)
		}
	})
	if got != "You answered: blue." {
		t.Errorf("ask: %q", got)
	}
}
