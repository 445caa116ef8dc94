package model

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func TestRequestJSON(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("ok"), finishChunk("stop"), "[DONE]"))
	c := testClient(s, func(cfg *Config) { cfg.APIKey = "sk-test" })
	req := Request{
		Model: "qwen3-coder",
		Messages: []Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "list files"},
			{Role: "assistant", ToolCalls: []ToolCall{
				{ID: "call_1", Name: "terminal", Arguments: `{"command":"ls"}`},
				{ID: "call_2", Name: "clarify", Arguments: `{}`},
			}},
			{Role: "tool", ToolCallID: "call_1", Content: "a.txt\n"},
			{Role: "tool", ToolCallID: "call_2", Content: "not run: turn interrupted"},
			{Role: "assistant", Content: "Here: a.txt"},
			{Role: "user", Content: "thanks"},
		},
		Tools: []Tool{{
			Name:        "terminal",
			Description: "run a shell command",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","maximum":12345678901234567890}},"required":["command"]}`),
		}, {
			Name: "noargs",
		}},
	}
	if _, _, err := stream(t, c, req); err != nil {
		t.Fatal(err)
	}

	r := s.lastReq.Load().(*http.Request)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		t.Errorf("got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}

	want := `{
	  "model": "qwen3-coder",
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "system", "content": "be brief"},
	    {"role": "user", "content": "list files"},
	    {"role": "assistant", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "clarify", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\n"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "not run: turn interrupted"},
	    {"role": "assistant", "content": "Here: a.txt"},
	    {"role": "user", "content": "thanks"}
	  ],
	  "tools": [
	    {"type": "function", "function": {
	      "name": "terminal",
	      "description": "run a shell command",
	      "parameters": {"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","maximum":12345678901234567890}},"required":["command"]}
	    }},
	    {"type": "function", "function": {"name": "noargs"}}
	  ]
	}`
	body := s.lastBody.Load().([]byte)
	assertJSONEqual(t, body, []byte(want))

	// Schema numbers are passed through verbatim, not via float64.
	if !bytes.Contains(body, []byte("12345678901234567890")) {
		t.Errorf("large schema number was rewritten: %s", body)
	}
}

func TestRequestWithoutAPIKeySendsNoAuthorization(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("ok"), "[DONE]"))
	if _, _, err := stream(t, testClient(s, nil), simpleReq()); err != nil {
		t.Fatal(err)
	}
	if got := s.lastReq.Load().(*http.Request).Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestAssistantWithoutToolCallsSendsEmptyContent(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("ok"), "[DONE]"))
	req := Request{Model: "m", Messages: []Message{
		{Role: "user", Content: "a"}, {Role: "assistant", Content: ""}, {Role: "user", Content: "b"},
	}}
	if _, _, err := stream(t, testClient(s, nil), req); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(s.lastBody.Load().([]byte), &got); err != nil {
		t.Fatal(err)
	}
	if c, ok := got.Messages[1]["content"]; !ok || c != "" {
		t.Errorf("assistant message = %v, want content \"\"", got.Messages[1])
	}
}

func TestInvalidRequests(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("ok"), "[DONE]"))
	c := testClient(s, nil)
	cases := map[string]Request{
		"unknown role":         {Model: "m", Messages: []Message{{Role: "robot", Content: "x"}}},
		"tool without call id": {Model: "m", Messages: []Message{{Role: "tool", Content: "x"}}},
		"tool call without id": {Model: "m", Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "t"}}}}},
		"parameters not object": {Model: "m", Messages: []Message{{Role: "user", Content: "x"}},
			Tools: []Tool{{Name: "t", Parameters: json.RawMessage(`[1,2]`)}}},
		"parameters invalid json": {Model: "m", Messages: []Message{{Role: "user", Content: "x"}},
			Tools: []Tool{{Name: "t", Parameters: json.RawMessage(`{"type":`)}}},
		"tool without name": {Model: "m", Messages: []Message{{Role: "user", Content: "x"}}, Tools: []Tool{{}}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := stream(t, c, req)
			asError(t, err, KindInvalidRequest)
		})
	}
	t.Run("bad base url", func(t *testing.T) {
		_, _, err := stream(t, New(Config{BaseURL: "127.0.0.1:8080/v1"}), simpleReq())
		asError(t, err, KindInvalidRequest)
	})
	if n := s.requests.Load(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	dg := json.NewDecoder(bytes.NewReader(got))
	dg.UseNumber()
	dw := json.NewDecoder(bytes.NewReader(want))
	dw.UseNumber()
	if err := dg.Decode(&g); err != nil {
		t.Fatalf("got invalid JSON: %v\n%s", err, got)
	}
	if err := dw.Decode(&w); err != nil {
		t.Fatalf("want invalid JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("request body mismatch\n got: %s\nwant: %s", gi, wi)
	}
}
