package model

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
)

// accumulator folds streamed chunks into a Response.
//
// Tool calls are keyed by id, not by index alone: real servers send several
// calls all with index 0 (or no index at all) and tell them apart only by
// their ids. The rule:
//   - the "current" call of a delta is the latest call started at the
//     delta's index, or, when the delta carries no index, the latest call;
//   - a delta with a non-empty id that differs from the current call's id
//     starts a new call (a repeated id continues the call);
//   - a delta without an id continues the current call, or starts one if
//     there is none.
//
// So arguments of different calls are never concatenated.
type accumulator struct {
	content strings.Builder
	calls   []*ToolCall
	byIndex map[int64]int // delta index -> position in calls of its latest call
	finish  string
	usage   *Usage
}

func (a *accumulator) add(chunk *openai.ChatCompletionChunk, onDelta func(string)) {
	if chunk.JSON.Usage.Valid() {
		u := chunk.Usage
		a.usage = &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	}
	for i := range chunk.Choices {
		ch := &chunk.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever requested (n is unset)
		}
		for _, text := range [2]string{ch.Delta.Content, ch.Delta.Refusal} {
			if text == "" {
				continue
			}
			text = validUTF8(text)
			a.content.WriteString(text)
			if onDelta != nil {
				onDelta(text)
			}
		}
		for j := range ch.Delta.ToolCalls {
			a.addToolDelta(&ch.Delta.ToolCalls[j])
		}
		if ch.FinishReason != "" {
			a.finish = validUTF8(ch.FinishReason)
		}
	}
}

func (a *accumulator) addToolDelta(d *openai.ChatCompletionChunkChoiceDeltaToolCall) {
	d.ID, d.Function.Name, d.Function.Arguments = validUTF8(d.ID), validUTF8(d.Function.Name), validUTF8(d.Function.Arguments)
	hasIndex := d.JSON.Index.Valid()
	var cur *ToolCall
	if hasIndex {
		if pos, ok := a.byIndex[d.Index]; ok {
			cur = a.calls[pos]
		}
	} else if n := len(a.calls); n > 0 {
		cur = a.calls[n-1]
	}
	switch {
	case cur == nil, d.ID != "" && cur.ID != "" && d.ID != cur.ID:
		cur = &ToolCall{ID: d.ID}
		a.calls = append(a.calls, cur)
		if hasIndex {
			if a.byIndex == nil {
				a.byIndex = make(map[int64]int)
			}
			a.byIndex[d.Index] = len(a.calls) - 1
		}
	case cur.ID == "":
		cur.ID = d.ID // a call whose id arrives after its first fragment
	}
	// Names normally arrive once; some servers repeat them on every delta,
	// a few split them. Ignore exact repeats, append fragments.
	if name := d.Function.Name; name != "" && name != cur.Name {
		cur.Name += name
	}
	cur.Arguments += d.Function.Arguments
}

// response returns the accumulated reply. Tool calls without an id get a
// generated one and empty arguments become "{}". A missing finish_reason is
// inferred (callers only ask once the stream is known to be complete).
func (a *accumulator) response() *Response {
	r := &Response{Content: a.content.String(), FinishReason: a.finish, Usage: a.usage}
	for _, c := range a.calls {
		tc := *c
		if tc.ID == "" {
			tc.ID = newCallID()
		}
		if strings.TrimSpace(tc.Arguments) == "" {
			tc.Arguments = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, tc)
	}
	if r.FinishReason == "" {
		if len(r.ToolCalls) > 0 {
			r.FinishReason = "tool_calls"
		} else {
			r.FinishReason = "stop"
		}
	}
	return r
}

// validUTF8 replaces each invalid UTF-8 sequence in s with U+FFFD. The
// chunk decoder passes raw bytes of JSON strings through unchecked; text
// that is not UTF-8 would be stored, shown and sent back to the model
// differently (encoding/json replaces it on marshal, a server may refuse
// the next request), so it is made valid once, here.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// newCallID makes an id for a tool call the server sent without one, so the
// agent can pair the tool result with it.
func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
