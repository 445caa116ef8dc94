package model

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
)

// accumulator folds streamed chunks into a Response.
//
// Tool calls are assembled by the rules documented in the package doc
// ("Tool-call assembly"): one call per logical call, whatever the
// chunking. In short, a delta belongs to
//   - the call that already carries its id, whatever index it comes on (a
//     server repeating a call on a second index does not make a second
//     call);
//   - else the current call of its index (the latest call started at that
//     index; with no index, the latest call), unless it opens a new call: it
//     has an id, the current call already has a different one, and it names
//     a function (a delta without a name whose id differs is the same call
//     whose id changed); a delta that repeats the current call's name with a
//     fresh id while that call's arguments are still incomplete JSON
//     continues it too (servers that mint an id per chunk); without ids, a
//     named delta with arguments after a call whose arguments are complete
//     JSON starts the next call.
//
// So arguments of different calls are never concatenated and one call is
// never split.
type accumulator struct {
	content strings.Builder
	calls   []*callState
	byIndex map[int64]int  // delta index -> position in calls of its current call
	byID    map[string]int // every id a call was given -> its position in calls
	finish  string
	usage   *Usage
}

// callState is one tool call being assembled.
type callState struct {
	id        string // the first id the server gave it
	name      string
	args      strings.Builder // fragments sent at the call's own index
	dup       strings.Builder // fragments sent at another index (a repeat)
	index     int64
	hasIndex  bool
	objectArg bool // arguments came as a JSON object, not a string
}

// streamFailure is an error the server reported inside the stream.
type streamFailure struct {
	body   []byte // the server's text
	reason string // how it was reported
}

// add folds one chunk in. It returns a non-nil failure when the chunk
// reports an error (on a choice or as an error finish_reason); the text of
// the chunk has been passed to onDelta first.
func (a *accumulator) add(chunk *openai.ChatCompletionChunk, onDelta func(string)) *streamFailure {
	if chunk.JSON.Usage.Valid() {
		u := chunk.Usage
		a.usage = &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	} else if xg, ok := chunk.JSON.ExtraFields["x_groq"]; ok {
		// Groq reports usage under x_groq.usage on the last chunk.
		var v struct {
			Usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
				TotalTokens      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal([]byte(xg.Raw()), &v) == nil && v.Usage != nil {
			a.usage = &Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens, TotalTokens: v.Usage.TotalTokens}
		}
	}
	var fail *streamFailure
	for i := range chunk.Choices {
		ch := &chunk.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever requested (n is unset)
		}
		content := ch.Delta.Content
		if raw := ch.Delta.JSON.Content.Raw(); !ch.Delta.JSON.Content.Valid() && strings.HasPrefix(strings.TrimSpace(raw), "[") {
			content = textParts([]byte(raw))
		}
		for _, text := range [2]string{content, ch.Delta.Refusal} {
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
		if ef, ok := ch.JSON.ExtraFields["error"]; ok && isError([]byte(ef.Raw())) && fail == nil {
			fail = &streamFailure{body: []byte(ef.Raw()), reason: "error on the choice"}
		}
		if ch.FinishReason != "" {
			a.finish = validUTF8(ch.FinishReason)
			if errorFinish(a.finish) && fail == nil {
				fail = &streamFailure{reason: fmt.Sprintf("finish_reason %q", a.finish)}
			}
		}
	}
	return fail
}

// textParts reads content sent as a list of typed parts: the text of the
// "text" (and "output_text") parts, joined; thinking, reasoning and any
// other part is left out. A list that does not parse gives "".
func textParts(raw []byte) string {
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		var s string
		if json.Unmarshal(p, &s) == nil { // a bare string part
			b.WriteString(s)
			continue
		}
		var v struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(p, &v) == nil && (v.Type == "text" || v.Type == "output_text") {
			b.WriteString(v.Text)
		}
	}
	return b.String()
}

// isError reports whether raw, the value of an "error" field, reports an
// error: anything but absent, null, false, "" and an empty object or list.
func isError(raw []byte) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", `""`, "{}", "[]":
		return false
	}
	return true
}

// errorFinish reports whether a finish_reason names a failure rather than an
// end of the reply: "error" (OpenRouter, Mistral), "abort" (vLLM), and any
// reason containing "error", "abort", "fail" or "cancel".
func errorFinish(reason string) bool {
	r := strings.ToLower(reason)
	for _, w := range []string{"error", "abort", "fail", "cancel"} {
		if strings.Contains(r, w) {
			return true
		}
	}
	return false
}

func (a *accumulator) addToolDelta(d *openai.ChatCompletionChunkChoiceDeltaToolCall) {
	id, name := validUTF8(d.ID), validUTF8(d.Function.Name)
	args := validUTF8(d.Function.Arguments)
	object := false
	if raw := strings.TrimSpace(d.Function.JSON.Arguments.Raw()); !d.Function.JSON.Arguments.Valid() && strings.HasPrefix(raw, "{") {
		object = true // arguments sent as a JSON object: its text, as is
	}
	hasIndex := d.JSON.Index.Valid()

	var cur *callState
	if id != "" {
		if pos, ok := a.byID[id]; ok {
			cur = a.calls[pos]
		}
	}
	if cur == nil {
		var latest *callState
		if hasIndex {
			if pos, ok := a.byIndex[d.Index]; ok {
				latest = a.calls[pos]
			}
		} else if n := len(a.calls); n > 0 {
			latest = a.calls[n-1]
		}
		switch {
		case latest == nil:
		case name != "" && latest.name != "" && (id == "" || latest.id == "") &&
			strings.TrimSpace(args) != "" && latest.complete():
			// no ids to tell calls apart: a named delta with arguments after
			// a call whose arguments are complete starts the next call
		case id == "" || latest.id == "":
			cur = latest // no id yet, or an id arriving late
		case name == "":
			cur = latest // the id changed after the first chunk
		case name == latest.name && !latest.objectArg && strings.TrimSpace(latest.args.String()) != "" && !json.Valid([]byte(latest.args.String())):
			cur = latest // a fresh id per chunk, name repeated, arguments unfinished
		}
		if cur == nil {
			cur = &callState{index: d.Index, hasIndex: hasIndex}
			a.calls = append(a.calls, cur)
		}
		if hasIndex {
			if a.byIndex == nil {
				a.byIndex = make(map[int64]int)
			}
			if _, bound := a.byIndex[d.Index]; !bound || cur.index == d.Index {
				a.byIndex[d.Index] = a.position(cur)
			}
		}
	} else if hasIndex {
		// A known id on an index not yet bound: that index repeats this call.
		if _, bound := a.byIndex[d.Index]; !bound {
			if a.byIndex == nil {
				a.byIndex = make(map[int64]int)
			}
			a.byIndex[d.Index] = a.position(cur)
		}
	}
	if id != "" {
		if cur.id == "" {
			cur.id = id
		}
		if a.byID == nil {
			a.byID = make(map[string]int)
		}
		if _, ok := a.byID[id]; !ok {
			a.byID[id] = a.position(cur)
		}
	}
	if !cur.hasIndex && hasIndex && cur.args.Len() == 0 {
		cur.index, cur.hasIndex = d.Index, true
	}
	// Names normally arrive once; some servers repeat them on every delta,
	// a few split them. Ignore exact repeats, append fragments.
	if name != "" && name != cur.name {
		cur.name += name
	}
	if object {
		cur.objectArg = true
	}
	if hasIndex && cur.hasIndex && d.Index != cur.index {
		cur.dup.WriteString(args)
	} else {
		cur.args.WriteString(args)
	}
}

// complete reports whether the call's arguments so far are a whole JSON
// value.
func (c *callState) complete() bool {
	args := strings.TrimSpace(c.args.String())
	return c.objectArg || (args != "" && json.Valid([]byte(args)))
}

func (a *accumulator) position(c *callState) int {
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i] == c {
			return i
		}
	}
	return -1
}

// arguments resolves a call's argument text: the fragments sent at its own
// index, and those sent at another index only when they complete them (a
// complete repeat of the call is not appended twice; a whole repeat of a
// call whose first sending is incomplete replaces it).
func (c *callState) arguments() string {
	args, dup := c.args.String(), c.dup.String()
	switch {
	case strings.TrimSpace(dup) == "":
	case strings.TrimSpace(args) == "":
		args = dup
	case json.Valid([]byte(args)):
		// the repeat re-sent arguments already complete
	case json.Valid([]byte(args + dup)):
		args += dup // the repeat carried the rest
	case json.Valid([]byte(dup)):
		args = dup // the repeat is whole, the first sending was cut
	default:
		args += dup
	}
	return args
}

// response returns the accumulated reply. Tool calls without an id get a
// generated one and empty arguments become "{}". A missing finish_reason is
// inferred (callers only ask once the stream is known to be complete).
func (a *accumulator) response() *Response {
	r := &Response{Content: a.content.String(), FinishReason: a.finish, Usage: a.usage}
	for _, c := range a.calls {
		tc := ToolCall{ID: c.id, Name: c.name, Arguments: c.arguments()}
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
