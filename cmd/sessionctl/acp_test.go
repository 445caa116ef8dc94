package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sessiond/sessiond/protocol"
)

// The ACP bridge's mapping tables, without Node or a daemon (the Node test
// in test/acp drives the whole bridge).

func TestACPStopFor(t *testing.T) {
	const resolve = "sessionctl resolve ses_1 adm_1"
	cases := []struct {
		status, outcome, errText string
		stop                     acp.StopReason
		reason                   string // error data reason when the request fails
	}{
		{"terminal", "completed", "", acp.StopReasonEndTurn, ""},
		{"terminal", "interrupted", "interrupted by session.interrupt", acp.StopReasonCancelled, ""},
		{"terminal", "cancelled", "", acp.StopReasonCancelled, ""},
		{"terminal", "failed", "reached agent.max_iterations (50) model calls without a final answer", acp.StopReasonMaxTurnRequests, ""},
		{"terminal", "failed", "model: connection refused", "", "turn_failed"},
		{"unknown", "", "", "", "unknown_execution"},
	}
	for _, c := range cases {
		stop, rerr := stopFor(c.status, c.outcome, c.errText, resolve)
		if c.reason == "" {
			if rerr != nil || stop != c.stop {
				t.Errorf("stopFor(%s, %s) = %q, %v; want %q", c.status, c.outcome, stop, rerr, c.stop)
			}
			continue
		}
		if rerr == nil {
			t.Errorf("stopFor(%s, %s) = %q; want an error with reason %s", c.status, c.outcome, stop, c.reason)
			continue
		}
		data := rerr.Data.(map[string]any)
		if rerr.Code != protocol.CodeRefused || data["reason"] != c.reason {
			t.Errorf("stopFor(%s, %s) error = %v; want code -32000 reason %s", c.status, c.outcome, rerr, c.reason)
		}
		if c.status == "unknown" && (!strings.Contains(rerr.Message, "`"+resolve+"`") || data["resolve"] != resolve) {
			t.Errorf("the unknown prompt's error does not give the resolve command: %v", rerr)
		}
		if c.status == "terminal" && (!strings.Contains(rerr.Message, c.errText) || data["error"] != c.errText) {
			t.Errorf("the failed turn's error does not carry the daemon's reason: %v", rerr)
		}
	}
}

func TestACPApprovalChoices(t *testing.T) {
	ids := func(opts []acp.PermissionOption) (got [][2]string) {
		for _, o := range opts {
			got = append(got, [2]string{string(o.OptionId), string(o.Kind)})
		}
		return got
	}
	want := [][2]string{{"allow_once", "allow_once"}, {"allow_always", "allow_always"}, {"reject_once", "reject_once"}}
	for _, offered := range [][]string{nil, {"once", "session", "always", "deny"}} {
		if got := ids(approvalOptions(offered)); !reflect.DeepEqual(got, want) {
			t.Fatalf("approval options for %v = %v, want %v", offered, got, want)
		}
	}
	// An escalation is approved for one run only: no "allow always" card.
	if got, want := ids(approvalOptions([]string{"once", "deny"})), [][2]string{{"allow_once", "allow_once"}, {"reject_once", "reject_once"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("escalation options = %v, want %v", got, want)
	}
	cases := []struct {
		outcome acp.RequestPermissionOutcome
		choice  string
	}{
		{acp.NewRequestPermissionOutcomeSelected("allow_once"), "once"},
		{acp.NewRequestPermissionOutcomeSelected("allow_always"), "session"},
		{acp.NewRequestPermissionOutcomeSelected("reject_once"), "deny"},
		{acp.NewRequestPermissionOutcomeSelected("something_else"), "deny"},
		{acp.NewRequestPermissionOutcomeCancelled(), "deny"},
	}
	for _, c := range cases {
		if got := approvalChoice(c.outcome); got != c.choice {
			t.Errorf("approvalChoice(%+v) = %q, want %q", c.outcome, got, c.choice)
		}
	}
}

func TestACPClarifyAsPermission(t *testing.T) {
	p := clarifyPayload{Questions: []clarifyQuestion{{Question: "Which colour?", Choices: []string{"red", "blue"}}}}
	opts, ok := clarifyOptions(p)
	if !ok || len(opts) != 3 || opts[0].Name != "red" || opts[1].Name != "blue" || opts[2].Kind != acp.PermissionOptionKindRejectOnce {
		t.Fatalf("clarifyOptions = %+v, %v", opts, ok)
	}
	if a, ok := clarifyChoice(p, acp.NewRequestPermissionOutcomeSelected(opts[1].OptionId)); !ok || a != "blue" {
		t.Errorf("choosing option 1 answers %q, %v; want blue", a, ok)
	}
	for _, o := range []acp.RequestPermissionOutcome{
		acp.NewRequestPermissionOutcomeSelected(clarifyDecline),
		acp.NewRequestPermissionOutcomeSelected("choice:7"),
		acp.NewRequestPermissionOutcomeCancelled(),
	} {
		if a, ok := clarifyChoice(p, o); ok {
			t.Errorf("outcome %+v answered %q; want no answer", o, a)
		}
	}
	for _, p := range []clarifyPayload{
		{Questions: []clarifyQuestion{{Question: "Name?"}}},
		{Questions: []clarifyQuestion{{Question: "A?", Choices: []string{"x"}}, {Question: "B?", Choices: []string{"y"}}}},
		{Questions: []clarifyQuestion{{Question: "Which?", Choices: []string{"x", "y"}, MultiSelect: true}}},
	} {
		if _, ok := clarifyOptions(p); ok {
			t.Errorf("clarifyOptions(%+v) offered a permission card; free text, several questions and multi-select need a form or a message", p)
		}
	}
}

func TestACPElicitation(t *testing.T) {
	p := clarifyPayload{Questions: []clarifyQuestion{
		{Question: "Name?"},
		{Question: "Which?", Choices: []string{"x", "y"}, MultiSelect: true},
		{Question: "Colour?", Choices: []string{"red", "blue"}},
	}}
	s := elicitationSchema(p)
	b, _ := json.Marshal(s)
	want := `{"properties":{"q0":{"title":"Name?","type":"string"},"q1":{"items":{"enum":["x","y"],"type":"string"},"title":"Which?","type":"array"},"q2":{"enum":["red","blue"],"title":"Colour?","type":"string"}},"required":["q0","q1","q2"],"type":"object"}`
	if string(b) != want {
		t.Errorf("schema =\n%s\nwant\n%s", b, want)
	}
	a, ok := elicitationAnswer(p, map[string]any{"q0": "Ada", "q1": []any{"x", "y"}, "q2": "blue"})
	if !ok || !reflect.DeepEqual(a, []string{"Ada", "x, y", "blue"}) {
		t.Errorf("answer = %#v, %v", a, ok)
	}
	if _, ok := elicitationAnswer(p, map[string]any{"q0": "Ada"}); ok {
		t.Error("a form missing answers was taken")
	}
	one := clarifyPayload{Questions: []clarifyQuestion{{Question: "Which?", Choices: []string{"x", "y"}, MultiSelect: true}}}
	if a, ok := elicitationAnswer(one, map[string]any{"q0": []any{"y"}}); !ok || !reflect.DeepEqual(a, []string{"y"}) {
		t.Errorf("multi-select answer = %#v, %v; want the list", a, ok)
	}
}

func TestACPPromptText(t *testing.T) {
	text, err := promptText([]acp.ContentBlock{
		acp.TextBlock("explain this"),
		acp.ResourceLinkBlock("main.go", "file:///src/main.go"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///src/a.md", Text: "has ``` fence\n"}}),
	})
	want := "explain this\n\n[main.go](file:///src/main.go)\n\nfile:///src/a.md\n````\nhas ``` fence\n````"
	if err != nil || text != want {
		t.Errorf("promptText = %q, %v\nwant %q", text, err, want)
	}
	bad := []struct {
		blocks []acp.ContentBlock
		msg    string
	}{
		{[]acp.ContentBlock{acp.ImageBlock("AAAA", "image/png")}, "images are not supported"},
		{[]acp.ContentBlock{acp.AudioBlock("AAAA", "audio/wav")}, "audio is not supported"},
		{[]acp.ContentBlock{acp.ResourceBlock(acp.EmbeddedResourceResource{BlobResourceContents: &acp.BlobResourceContents{Uri: "file:///x", Blob: "AA"}})}, "binary resources"},
		{[]acp.ContentBlock{acp.TextBlock("  ")}, "no text"},
		{nil, "no text"},
	}
	for _, c := range bad {
		if _, err := promptText(c.blocks); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("promptText(%+v) error = %v, want %q", c.blocks, err, c.msg)
		}
	}
}

func TestACPToolResult(t *testing.T) {
	no := false
	cases := []struct {
		name, result string
		ok           *bool
		text         string
		failed       bool
	}{
		{"terminal", `{"exit_code":0,"output":"hi\n"}`, nil, "hi\n", false},
		{"terminal", `{"exit_code":0,"output":""}`, nil, "(no output)", false},
		{"terminal", `{"exit_code":2,"output":"boom\n"}`, nil, "boom\n\n[exit status 2]", true},
		{"terminal", `{"exit_code":null,"output":"","timed_out":true}`, nil, "[timed out]", true},
		{"terminal", `{"error":"denied by the user"}`, nil, "denied by the user", true},
		{"terminal", `{"exit_code":0,"output":"x"}`, &no, "x", true},
		{"clarify", `{"responses":[{"question":"Q","answer":"blue"}]}`, nil, "blue", false},
		{"clarify", `{"responses":[],"timed_out":true}`, nil, "the question timed out", true},
		{"terminal", `not json`, nil, "not json", false},
	}
	for _, c := range cases {
		text, failed := toolResult(c.name, c.result, c.ok)
		if text != c.text || failed != c.failed {
			t.Errorf("toolResult(%s, %s) = %q, %v; want %q, %v", c.name, c.result, text, failed, c.text, c.failed)
		}
	}
	if toolKind("terminal") != acp.ToolKindExecute || toolKind("clarify") != acp.ToolKindThink || toolKind("x") != acp.ToolKindOther {
		t.Error("tool kinds")
	}
	if got := toolTitle("terminal", json.RawMessage(`"{\"command\":\"ls -la\"}"`)); got != "ls -la" {
		t.Errorf("toolTitle of string-encoded args = %q", got)
	}
}

func TestACPReplay(t *testing.T) {
	msgs := []protocol.Message{
		{ID: 1, Role: "user", Content: "run: ls"},
		{ID: 2, Role: "assistant", ToolCalls: json.RawMessage(`[{"id":"c1","name":"terminal","arguments":"{\"command\":\"ls\"}"}]`)},
		{ID: 3, Role: "tool", ToolCallID: "c1", Content: `{"exit_code":1,"output":"nope"}`},
		{ID: 4, Role: "assistant", Content: "ls failed"},
		{ID: 5, Role: "assistant", Content: "[turn failed: x]", Kind: "boundary"},
	}
	var got []string
	for _, u := range replayUpdates(msgs) {
		b, _ := json.Marshal(u)
		var m map[string]any
		json.Unmarshal(b, &m)
		line := m["sessionUpdate"].(string)
		switch line {
		case "user_message_chunk", "agent_message_chunk":
			line += " " + m["content"].(map[string]any)["text"].(string)
		case "tool_call":
			line += " " + m["title"].(string) + " " + m["kind"].(string) + " " + m["rawInput"].(map[string]any)["command"].(string)
		case "tool_call_update":
			line += " " + m["toolCallId"].(string) + " " + m["status"].(string)
		}
		got = append(got, line)
	}
	want := []string{
		"user_message_chunk run: ls",
		"tool_call ls execute ls",
		"tool_call_update c1 failed",
		"agent_message_chunk ls failed",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replay =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestACPRefusalKeepsTheDaemonReason(t *testing.T) {
	e := refusal(protocol.Errorf(protocol.ReasonAdmissionConflict, "input id reused").With("admission_id", "adm_1"))
	d := e.Data.(map[string]any)
	if e.Code != protocol.CodeRefused || d["reason"] != "admission_conflict" || d["admission_id"] != "adm_1" || e.Message != "input id reused" {
		t.Errorf("refusal = %+v", e)
	}
	// Refusals are not results: the connection leaves them as they are,
	// and one may quote what another client or the model wrote.
	e = refusal(protocol.Errorf(protocol.ReasonNotFound, "session not found: ses_\x1b]0;t\x07").With("error", "x\x1b[2J"))
	if d := e.Data.(map[string]any); e.Message != "session not found: ses_␛]0;t␇" || d["error"] != "x␛[2J" {
		t.Errorf("refusal = %q %v", e.Message, d)
	}
}

func TestACPElicitationScope(t *testing.T) {
	frame := []byte(`{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{}},"_meta":{"sessiond":{"session_id":"ses_1","tool_call_id":"call_1"}}}}` + "\n")
	var buf strings.Builder
	w := &scopeWriter{w: &buf}
	if n, err := w.Write(frame); err != nil || n != len(frame) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	var m struct {
		ID     int            `json:"id"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &m); err != nil || !strings.HasSuffix(buf.String(), "}\n") {
		t.Fatalf("rewritten frame %q: %v", buf.String(), err)
	}
	if m.ID != 3 || m.Params["sessionId"] != "ses_1" || m.Params["toolCallId"] != "call_1" || m.Params["mode"] != "form" {
		t.Errorf("rewritten frame = %s", buf.String())
	}
	other := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}` + "\n")
	buf.Reset()
	w.Write(other)
	if buf.String() != string(other) {
		t.Errorf("other frames changed: %q", buf.String())
	}
}

// What the bridge decodes from JSON held in a string (a tool call's
// arguments, a tool message's result) reaches the editor made visible,
// whether or not the connection already did it.
func TestACPDecodedJSONIsVisible(t *testing.T) {
	if text, _ := toolResult("terminal", `{"exit_code":0,"output":"a\u001b]0;t\u0007\r\nb"}`, nil); text != "a␛]0;t␇\nb" {
		t.Errorf("toolResult text = %q", text)
	}
	if text, failed := toolResult("terminal", `{"error":"x\u001b[2J"}`, nil); text != "x␛[2J" || !failed {
		t.Errorf("toolResult error = %q, %v", text, failed)
	}
	for _, args := range []string{`{"command":"a\u001b[2J\rb"}`, `"{\"command\":\"a\\u001b[2J\\rb\"}"`} {
		in, _ := rawArgs(json.RawMessage(args)).(map[string]any)
		if in["command"] != "a␛[2J␍b" {
			t.Errorf("rawArgs(%s) = %#v", args, rawArgs(json.RawMessage(args)))
		}
		if got := toolTitle("terminal", json.RawMessage(args)); got != "a␛[2J␍b" {
			t.Errorf("toolTitle(%s) = %q", args, got)
		}
	}
	if raw := rawArgs(json.RawMessage(`{"output":"x\u0007"}`)); raw.(map[string]any)["output"] != "x␇" {
		t.Errorf("rawArgs of a result = %#v", raw)
	}
}

// An editor's stdio MCP servers become session.create's mcp_servers, their
// names made valid and unique; http and sse ones are skipped, by name.
func TestACPMCPServers(t *testing.T) {
	got, skipped := acpMCPServers([]acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "My files", Command: "/usr/bin/fs-mcp", Args: []string{"--root", "/w"}, Env: []acp.EnvVariable{{Name: "A", Value: "b"}}}},
		{Stdio: &acp.McpServerStdio{Name: "My__files", Command: "/x"}},
		{Stdio: &acp.McpServerStdio{Name: "ÿ", Command: "/y"}},
		{Stdio: &acp.McpServerStdio{Name: strings.Repeat("long", 20), Command: "/z"}},
		{Http: &acp.McpServerHttpInline{Name: "remote", Url: "https://x/mcp", Type: "http"}},
	})
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
		if err := protocol.ValidateMCPServer("s", s, false); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if strings.Join(names, ",") != "My_files,My_files-2,mcp,"+strings.Repeat("long", 8) {
		t.Errorf("names %v", names)
	}
	if got[0].Command != "/usr/bin/fs-mcp" || got[0].Args[1] != "/w" || got[0].Env["A"] != "b" {
		t.Errorf("first server %+v", got[0])
	}
	if len(skipped) != 1 || skipped[0] != "remote (http)" {
		t.Errorf("skipped %v", skipped)
	}
}
