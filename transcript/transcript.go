package transcript

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Message roles of the transcript (the CHECK of messages.role).
// RoleBoundary closes a turn that did not complete (interrupted, failed or
// lost in a crash or a takeover); it is sent to the model as a short
// assistant note so that the lost turn never merges into the next request.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleBoundary  = "boundary"
)

// KindSynthetic marks tool results that sessiond wrote for tool calls that
// never got a real one ("not run: turn interrupted").
const KindSynthetic = "synthetic"

// ToolCall is one assistant tool call: its id, the function's name and its
// arguments (JSON text, as the model sent them).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Entry is one transcript message. ToolCalls are set on assistant entries,
// ToolCallID on tool entries; Kind is "" or KindSynthetic.
type Entry struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	Kind       string
}

// Texts given to the model (and shown to people) for work that did not
// complete.
const (
	// SyntheticInterrupted is the result of a tool call that never ran.
	SyntheticInterrupted = "not run: turn interrupted"
	// InterruptedWhileRunning is the result the agent gives a command that
	// was running when its turn was stopped.
	InterruptedWhileRunning = "interrupted while running: the command was killed when the turn was stopped; its effects are unknown"
	// CrashedWhileRunning is the result of a command that was running when
	// the daemon that ran it died or lost the session (a tool.running event
	// but no result). A command on a host that is gone cannot be killed
	// from another host.
	CrashedWhileRunning = "interrupted while running: the daemon stopped while this command ran; " +
		"its process group was killed at the next start if it still ran; its effects are unknown"
)

// Ending is the set of texts that close one turn: NotRun for tool calls
// that never started, Running for calls whose command had started (it ran,
// its effects are unknown), and Boundary for the closing row.
type Ending struct {
	NotRun, Running, Boundary string
}

// Interrupted is the ending of a turn stopped by session.interrupt, a
// graceful stop or a lost lease.
func Interrupted() Ending {
	return Ending{NotRun: SyntheticInterrupted,
		Running:  "interrupted while running: the turn was interrupted while this command ran; its process group was killed and its effects are unknown",
		Boundary: "[turn interrupted before it finished]"}
}

// Failed is the ending of a turn that failed with errText.
func Failed(errText string) Ending {
	return Ending{NotRun: "not run: turn failed",
		Running:  "the turn failed while this command ran; its process group was killed and its effects are unknown",
		Boundary: "[turn failed: " + errText + "]"}
}

// Lost is the ending of a turn whose daemon died (or lost its lease) while
// it ran, resolved by an operator without re-running it.
func Lost() Ending {
	return Ending{NotRun: "not run: the daemon stopped during this turn",
		Running:  CrashedWhileRunning,
		Boundary: "[turn lost: the daemon stopped while it ran; an operator resolved it without re-running]"}
}

// Close returns the entries that close a turn that did not complete, given
// the turn's entries in order and the ids of the calls whose command had
// started: a synthetic tool result (Kind KindSynthetic) for every call of
// an assistant entry without a result, worded e.Running when its id is in
// running and e.NotRun otherwise, then one boundary entry. Errors: none;
// the result always ends with the boundary.
func Close(turn []Entry, running []string, e Ending) []Entry {
	answered := map[string]bool{}
	for _, m := range turn {
		if m.Role == RoleTool && m.ToolCallID != "" {
			answered[m.ToolCallID] = true
		}
	}
	var out []Entry
	for _, m := range turn {
		if m.Role != RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			if answered[c.ID] {
				continue
			}
			text := e.NotRun
			if slices.Contains(running, c.ID) {
				text = e.Running
			}
			out = append(out, Entry{Role: RoleTool, Content: text, ToolCallID: c.ID, Kind: KindSynthetic})
			answered[c.ID] = true
		}
	}
	return append(out, Entry{Role: RoleBoundary, Content: e.Boundary})
}

// Repair turns a stored transcript into a valid chat conversation, in
// order, and describes every repair it made (nil: sent as stored). The
// result holds only user, assistant and tool entries: boundary rows become
// assistant notes; every assistant tool call gets a tool result (a
// SyntheticInterrupted one when the transcript has none) placed before the
// next non-tool entry. Repairs, whatever an older build or a misbehaving
// server left in the store:
//   - an assistant tool call without a function name is dropped (with its
//     result), and so is an assistant entry left with neither text nor
//     calls;
//   - a tool call without an id gets one ("call_repaired_<row>_<n>"; a
//     result cannot name it, so it gets the synthetic one);
//   - a second call with the same id in one entry is dropped;
//   - arguments that are not a JSON object are sent as "{}" (servers that
//     render the history through a chat template parse them and refuse the
//     whole request otherwise); the stored text is unchanged;
//   - a tool entry that answers no call of the assistant entry before it,
//     or answers one twice, is dropped;
//   - a call left without a result gets SyntheticInterrupted;
//   - a row with an unknown role is dropped.
//
// The user entries appear exactly as stored, once each.
func Repair(stored []Entry) ([]Entry, []string) {
	out := make([]Entry, 0, len(stored))
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	var open []string             // call ids of the last assistant entry, in order
	answered := map[string]bool{} // ids of open answered so far
	dropped := map[string]bool{}  // ids of dropped calls: their results go silently with them
	closeOpen := func(row int) {
		for _, id := range open {
			if !answered[id] {
				note("row %d: tool call %q had no result: given %q", row, id, SyntheticInterrupted)
				out = append(out, Entry{Role: RoleTool, ToolCallID: id, Content: SyntheticInterrupted})
			}
		}
		open = nil
		answered = map[string]bool{}
	}
	for i, m := range stored {
		switch m.Role {
		case RoleTool:
			switch {
			case slices.Contains(open, m.ToolCallID) && !answered[m.ToolCallID]:
				answered[m.ToolCallID] = true
				out = append(out, Entry{Role: RoleTool, ToolCallID: m.ToolCallID, Content: m.Content})
			case dropped[m.ToolCallID] && !slices.Contains(open, m.ToolCallID):
				// the result of a dropped call: already noted with the call
			case slices.Contains(open, m.ToolCallID):
				note("row %d: dropped a second result for tool call %q", i, m.ToolCallID)
			default:
				note("row %d: dropped a tool result for %q, which answers no call of the assistant message before it", i, m.ToolCallID)
			}
			continue
		case RoleAssistant:
			closeOpen(i)
			msg := Entry{Role: RoleAssistant, Content: m.Content}
			seen := map[string]bool{}
			for j, c := range m.ToolCalls {
				switch {
				case c.Name == "":
					note("row %d: dropped tool call %d (id %q) without a function name", i, j, c.ID)
					if c.ID != "" {
						dropped[c.ID] = true
					}
					continue
				case c.ID == "":
					c.ID = fmt.Sprintf("call_repaired_%d_%d", i, j)
					note("row %d: tool call %d (%s) had no id: sent as %q", i, j, c.Name, c.ID)
				case seen[c.ID]:
					note("row %d: dropped tool call %d, a second call with id %q", i, j, c.ID)
					continue
				}
				if !isJSONObject(c.Arguments) {
					note("row %d: tool call %q: arguments are not a JSON object, sent as {}", i, c.ID)
					c.Arguments = "{}"
				}
				seen[c.ID] = true
				delete(dropped, c.ID)
				msg.ToolCalls = append(msg.ToolCalls, c)
				open = append(open, c.ID)
			}
			if len(m.ToolCalls) > 0 && len(msg.ToolCalls) == 0 && m.Content == "" {
				note("row %d: dropped an assistant message left with neither text nor tool calls", i)
				continue
			}
			out = append(out, msg)
		case RoleBoundary:
			closeOpen(i)
			out = append(out, Entry{Role: RoleAssistant, Content: m.Content})
		case RoleUser:
			closeOpen(i)
			out = append(out, Entry{Role: RoleUser, Content: m.Content})
		default:
			note("row %d: dropped a message with unknown role %q", i, m.Role)
		}
	}
	closeOpen(len(stored))
	return out, notes
}

// isJSONObject reports whether s is one JSON object.
func isJSONObject(s string) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}
