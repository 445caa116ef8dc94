package agent

import (
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
func BuildMessages(cwd string, transcript []Stored) []model.Message {
	out := make([]model.Message, 0, len(transcript)+1)
	out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf(SystemPrompt, cwd)})
	var open []string             // call ids of the last assistant message still unanswered, in order
	issued := map[string]bool{}   // every call id seen so far
	answered := map[string]bool{} // call ids with a result already emitted
	closeOpen := func() {
		for _, id := range open {
			if !answered[id] {
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: id, Content: SyntheticInterrupted})
				answered[id] = true
			}
		}
		open = nil
	}
	for _, m := range transcript {
		switch m.Role {
		case model.RoleTool:
			if !issued[m.ToolCallID] || answered[m.ToolCallID] || !contains(open, m.ToolCallID) {
				continue // orphan or duplicate: the API would refuse it
			}
			answered[m.ToolCallID] = true
			out = append(out, model.Message{Role: model.RoleTool, ToolCallID: m.ToolCallID, Content: m.Content})
		case model.RoleAssistant:
			closeOpen()
			msg := model.Message{Role: model.RoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls}
			for _, c := range m.ToolCalls {
				issued[c.ID] = true
				open = append(open, c.ID)
			}
			out = append(out, msg)
		case RoleBoundary:
			closeOpen()
			out = append(out, model.Message{Role: model.RoleAssistant, Content: m.Content})
		default: // user
			closeOpen()
			out = append(out, model.Message{Role: model.RoleUser, Content: m.Content})
		}
	}
	closeOpen()
	return out
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
