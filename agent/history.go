package agent

import (
	"fmt"

	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/transcript"
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
// as an assistant note (transcript.RoleBoundary).
const RoleBoundary = transcript.RoleBoundary

// InterruptedWhileRunning is the result of a command that was running when
// its turn was interrupted: its process group was killed and its effects
// are unknown.
const InterruptedWhileRunning = transcript.InterruptedWhileRunning

// SyntheticInterrupted is the result given to a tool call that never got
// one (its turn was interrupted, failed or lost).
const SyntheticInterrupted = transcript.SyntheticInterrupted

// SystemPrompt is the short system message that starts every request.
// %s is the session's working directory.
const SystemPrompt = `You are an agent working for a user on their machine through sessiond.
Working directory: %s
Use the terminal tool to run shell commands (one /bin/sh -c command line per call); commands that could destroy data need the user's approval and some are never run. Use the clarify tool to ask the user when a requirement is ambiguous instead of guessing. Finish with a short plain-text answer.`

// BuildMessages turns the transcript into a valid Chat Completions
// conversation after the system prompt (transcript.Repair: boundary rows
// become assistant notes; every assistant tool call gets a tool result, a
// synthetic SyntheticInterrupted one when the transcript has none, placed
// before the next non-tool message; tool results that answer no earlier
// call are dropped). The user messages appear exactly as stored, once each.
//
// A stored history can never make the request invalid (see Repair): the
// repairs it needs are made here, and listed by Repair.
func BuildMessages(cwd string, stored []Stored) []model.Message {
	msgs, _ := buildMessages(cwd, stored)
	return msgs
}

// Repair returns, in order, a description of every repair BuildMessages
// makes to the stored transcript so that no server refuses the request
// (the list is transcript.Repair's). An empty list means the transcript is
// sent as stored.
func Repair(stored []Stored) []string {
	_, notes := buildMessages("", stored)
	return notes
}

func buildMessages(cwd string, stored []Stored) ([]model.Message, []string) {
	in := make([]transcript.Entry, len(stored))
	for i, m := range stored {
		e := transcript.Entry{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			e.ToolCalls = append(e.ToolCalls, transcript.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		in[i] = e
	}
	repaired, notes := transcript.Repair(in)
	out := make([]model.Message, 0, len(repaired)+1)
	out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf(SystemPrompt, cwd)})
	for _, e := range repaired {
		m := model.Message{Role: e.Role, Content: e.Content, ToolCallID: e.ToolCallID}
		for _, c := range e.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, m)
	}
	return out, notes
}
