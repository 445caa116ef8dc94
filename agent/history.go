package agent

import (
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/model"
)

// Stored is one transcript entry as the journal keeps it. Role is user,
// assistant, tool or boundary.
type Stored struct {
	Role       string
	Content    string
	ToolCalls  []model.ToolCall
	ToolCallID string
}

// RoleBoundary closes a turn that did not complete; it is sent to the model
// as an assistant note.
const RoleBoundary = "boundary"

// InterruptedWhileRunning is the result of a command that was running when
// its turn was interrupted: its process group was killed and its effects
// are unknown.
const InterruptedWhileRunning = "interrupted while running: the command was killed when the turn was stopped; its effects are unknown"

// SyntheticInterrupted is the result given to a tool call that never got
// one (its turn was interrupted, failed or lost).
const SyntheticInterrupted = "not run: turn interrupted"

// SystemPrompt is the short system message that starts every request.
// %s is the session's working directory.
const SystemPrompt = `You are an agent working for a user on their machine through sessiond.
Working directory: %s
Use the terminal tool to run shell commands (one /bin/sh -c command line per call); commands that could destroy data need the user's approval and some are never run. Use the clarify tool to ask the user when a requirement is ambiguous instead of guessing. Finish with a short plain-text answer.`

// BuildMessages turns the transcript into a valid Chat Completions
// conversation after the system prompt: boundary rows become assistant
// notes; every assistant tool call gets a tool result (a synthetic
// SyntheticInterrupted one when the transcript has none) placed before the
// next non-tool message; tool results that answer no earlier call are
// dropped. The user messages appear exactly as stored, once each.
//
// A stored history can never make the request invalid (see Repair): the
// repairs it needs are made here, and listed by Repair.
func BuildMessages(cwd string, transcript []Stored) []model.Message {
	msgs, _ := buildMessages(cwd, transcript)
	return msgs
}

// Repair returns, in order, a description of every repair BuildMessages
// makes to transcript so that no server refuses the request, whatever an
// older build or a misbehaving server left in the store:
//   - an assistant tool call without a function name is dropped (with its
//     result), and so is an assistant message left with neither text nor
//     calls;
//   - a tool call without an id gets one ("call_repaired_<row>_<n>"; a
//     result cannot name it, so it gets the synthetic one);
//   - a second call with the same id in one message is dropped;
//   - arguments that are not a JSON object are sent as "{}" (servers that
//     render the history through a chat template parse them and refuse the
//     whole request otherwise); the stored text is unchanged;
//   - a tool message that answers no call of the assistant message before
//     it, or answers one twice, is dropped;
//   - a call left without a result gets SyntheticInterrupted;
//   - a row with an unknown role is dropped.
//
// An empty list means the transcript is sent as stored.
func Repair(transcript []Stored) []string {
	_, notes := buildMessages("", transcript)
	return notes
}

func buildMessages(cwd string, transcript []Stored) ([]model.Message, []string) {
	out := make([]model.Message, 0, len(transcript)+1)
	out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf(SystemPrompt, cwd)})
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	var open []string             // call ids of the last assistant message, in order
	answered := map[string]bool{} // ids of open answered so far
	dropped := map[string]bool{}  // ids of dropped calls: their results go silently with them
	closeOpen := func(row int) {
		for _, id := range open {
			if !answered[id] {
				note("row %d: tool call %q had no result: given %q", row, id, SyntheticInterrupted)
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: id, Content: SyntheticInterrupted})
			}
		}
		open = nil
		answered = map[string]bool{}
	}
	for i, m := range transcript {
		switch m.Role {
		case model.RoleTool:
			switch {
			case contains(open, m.ToolCallID) && !answered[m.ToolCallID]:
				answered[m.ToolCallID] = true
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: m.ToolCallID, Content: m.Content})
			case dropped[m.ToolCallID] && !contains(open, m.ToolCallID):
				// the result of a dropped call: already noted with the call
			case contains(open, m.ToolCallID):
				note("row %d: dropped a second result for tool call %q", i, m.ToolCallID)
			default:
				note("row %d: dropped a tool result for %q, which answers no call of the assistant message before it", i, m.ToolCallID)
			}
			continue
		case model.RoleAssistant:
			closeOpen(i)
			msg := model.Message{Role: model.RoleAssistant, Content: m.Content}
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
			out = append(out, model.Message{Role: model.RoleAssistant, Content: m.Content})
		case model.RoleUser:
			closeOpen(i)
			out = append(out, model.Message{Role: model.RoleUser, Content: m.Content})
		default:
			note("row %d: dropped a message with unknown role %q", i, m.Role)
		}
	}
	closeOpen(len(transcript))
	return out, notes
}

// isJSONObject reports whether s is one JSON object.
func isJSONObject(s string) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
