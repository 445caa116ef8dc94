package model

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestStreamText(t *testing.T) {
	s := newServer(t, sseHandler(
		roleChunk(), textChunk("Hel"), textChunk("lo, "), textChunk("wörld"),
		finishChunk("stop"), usageChunk(7, 3), "[DONE]",
	))
	resp, deltas, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hel", "lo, ", "wörld"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	want := &Response{Content: "Hello, wörld", FinishReason: "stop", Usage: &Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("resp = %+v, want %+v", resp, want)
	}
}

func TestNilOnDelta(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("a"), finishChunk("stop"), "[DONE]"))
	resp, err := testClient(s, nil).Stream(t.Context(), simpleReq(), nil)
	if err != nil || resp.Content != "a" {
		t.Fatalf("resp=%+v err=%v", resp, err)
	}
}

// SSE framing variants seen in the wild: CRLF line ends, no space after the
// colon, keep-alive comments, an event name, and a final event without a
// trailing blank line after [DONE].
func TestFrameVariants(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write([]byte(": keep-alive\r\n\r\n" +
			"data:" + textChunk("a") + "\r\n\r\n" +
			"event: message\ndata: " + textChunk("b") + "\n\n" +
			": ping\n\n" +
			"data: " + finishChunk("stop") + "\n\n" +
			"data: [DONE]\n\n"))
	})
	resp, deltas, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "ab" || strings.Join(deltas, "|") != "a|b" || resp.FinishReason != "stop" {
		t.Errorf("resp=%+v deltas=%q", resp, deltas)
	}
}

// Quirk 1: two calls both at index 0 with different ids are two calls, and
// their arguments are never concatenated.
func TestToolCallsSameIndexDifferentIDs(t *testing.T) {
	s := newServer(t, sseHandler(
		roleChunk(),
		toolChunk(0, "call_a", "terminal", ""),
		toolChunk(0, "", "", `{"command":`),
		toolChunk(0, "", "", `"ls"}`),
		toolChunk(0, "call_b", "terminal", `{"command":"pwd"}`),
		finishChunk("tool_calls"),
		"[DONE]",
	))
	resp, deltas, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "terminal", Arguments: `{"command":"ls"}`},
		{ID: "call_b", Name: "terminal", Arguments: `{"command":"pwd"}`},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
	if resp.FinishReason != "tool_calls" || len(deltas) != 0 || resp.Content != "" {
		t.Errorf("resp=%+v deltas=%q", resp, deltas)
	}
}

// Quirk 1b: the same when "index" is omitted entirely.
func TestToolCallsWithoutIndex(t *testing.T) {
	s := newServer(t, sseHandler(
		toolChunk(-1, "call_a", "terminal", `{"command":`),
		toolChunk(-1, "", "", `"ls"}`),
		toolChunk(-1, "call_b", "clarify", `{"question":"ok?"}`),
		toolChunk(-1, "call_c", "terminal", ``),
		finishChunk("tool_calls"),
		"[DONE]",
	))
	resp, _, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "terminal", Arguments: `{"command":"ls"}`},
		{ID: "call_b", Name: "clarify", Arguments: `{"question":"ok?"}`},
		{ID: "call_c", Name: "terminal", Arguments: `{}`}, // empty arguments become {}
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
}

// The OpenAI shape: parallel calls at index 0 and 1, continuation deltas
// carry only the index.
func TestToolCallsParallelByIndex(t *testing.T) {
	s := newServer(t, sseHandler(
		textChunk("Let me look."),
		toolChunk(0, "call_a", "terminal", ""),
		toolChunk(1, "call_b", "terminal", ""),
		toolChunk(0, "", "", `{"command":"ls"}`),
		toolChunk(1, "", "", `{"command":`),
		toolChunk(1, "", "", `"pwd"}`),
		finishChunk("tool_calls"),
		usageChunk(1, 2),
		"[DONE]",
	))
	resp, deltas, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "terminal", Arguments: `{"command":"ls"}`},
		{ID: "call_b", Name: "terminal", Arguments: `{"command":"pwd"}`},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
	if resp.Content != "Let me look." || len(deltas) != 1 || resp.Usage == nil || resp.Usage.TotalTokens != 3 {
		t.Errorf("resp=%+v deltas=%q", resp, deltas)
	}
}

// Some servers repeat the id (and name) on every delta of a call: that
// continues the call rather than starting a new one.
func TestToolCallsRepeatedIDContinues(t *testing.T) {
	s := newServer(t, sseHandler(
		toolChunk(0, "call_a", "terminal", `{"command":`),
		toolChunk(0, "call_a", "terminal", `"ls"}`),
		finishChunk("tool_calls"),
		"[DONE]",
	))
	resp, _, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{{ID: "call_a", Name: "terminal", Arguments: `{"command":"ls"}`}}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
}

// Servers that send no ids get distinct generated ids.
func TestToolCallsWithoutIDs(t *testing.T) {
	s := newServer(t, sseHandler(
		toolChunk(0, "", "terminal", `{"command":"ls"}`),
		toolChunk(1, "", "terminal", `{"command":"pwd"}`),
		finishChunk("tool_calls"),
		"[DONE]",
	))
	resp, _, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	a, b := resp.ToolCalls[0], resp.ToolCalls[1]
	if !strings.HasPrefix(a.ID, "call_") || !strings.HasPrefix(b.ID, "call_") || a.ID == b.ID {
		t.Errorf("ids = %q, %q: want distinct generated ids", a.ID, b.ID)
	}
	if a.Arguments != `{"command":"ls"}` || b.Arguments != `{"command":"pwd"}` {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
}

// Quirk 2: a final chunk with "choices": [] and usage finishes normally.
func TestUsageOnlyFinalChunk(t *testing.T) {
	s := newServer(t, sseHandler(
		textChunk("hi"),
		finishChunk("stop"),
		usageChunk(11, 1),
		"[DONE]",
	))
	resp, _, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage == nil || *resp.Usage != (Usage{PromptTokens: 11, CompletionTokens: 1, TotalTokens: 12}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.FinishReason != "stop" || resp.Content != "hi" {
		t.Errorf("resp = %+v", resp)
	}
}

// Quirk 2b: the usage chunk is the last thing sent (finish_reason earlier, no
// [DONE]): still complete.
func TestFinishReasonWithoutDone(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("hi"), finishChunk("length"), usageChunk(1, 1)))
	resp, _, err := stream(t, testClient(s, nil), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "length" || resp.Usage == nil {
		t.Errorf("resp = %+v", resp)
	}
}

// Quirk 3: [DONE] without any finish_reason completes, with the reason
// inferred.
func TestDoneWithoutFinishReason(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		s := newServer(t, sseHandler(textChunk("hi"), usageChunk(1, 1), "[DONE]"))
		resp, _, err := stream(t, testClient(s, nil), simpleReq())
		if err != nil {
			t.Fatal(err)
		}
		if resp.FinishReason != "stop" || resp.Content != "hi" {
			t.Errorf("resp = %+v", resp)
		}
	})
	t.Run("tool calls", func(t *testing.T) {
		s := newServer(t, sseHandler(toolChunk(0, "call_a", "terminal", `{"command":"ls"}`), "[DONE]"))
		resp, _, err := stream(t, testClient(s, nil), simpleReq())
		if err != nil {
			t.Fatal(err)
		}
		if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 1 {
			t.Errorf("resp = %+v", resp)
		}
	})
}

// One Client serves concurrent Streams (run with -race).
func TestConcurrentStreams(t *testing.T) {
	s := newServer(t, sseHandler(textChunk("a"), textChunk("b"), finishChunk("stop"), "[DONE]"))
	c := testClient(s, nil)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			resp, err := c.Stream(t.Context(), simpleReq(), nil)
			if err == nil && resp.Content != "ab" {
				err = fmt.Errorf("content %q", resp.Content)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
