package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sessiond/sessiond/protocol"
)

// This file holds the pure mappings of the ACP bridge (sessionctl acp):
// prompt content to text, turn outcomes to stop reasons, daemon events and
// stored messages to session/update notifications, and approval options to
// approval.respond choices. acp.go does the I/O.

// acpPermission maps an ACP permission option id to the approval.respond
// choice it sends. allow_always is the daemon's "session" choice: the same
// command pattern runs without asking for the rest of this session. The
// daemon's "always" (a persistent allowlist across sessions) is not offered
// in an editor card: one click in an editor should not widen what every
// future session may run; `sessionctl approve --choice always` still can.
var acpPermission = []struct {
	ID     acp.PermissionOptionId
	Kind   acp.PermissionOptionKind
	Name   string
	Choice string
}{
	{"allow_once", acp.PermissionOptionKindAllowOnce, "Allow once", "once"},
	{"allow_always", acp.PermissionOptionKindAllowAlways, "Allow for this session", "session"},
	{"reject_once", acp.PermissionOptionKindRejectOnce, "Reject", "deny"},
}

// approvalOptions are the options of an approval's permission request:
// those whose choice the prompt offers (offered, the payload's choices; an
// escalation offers only once and deny), all of them when offered is empty
// (a daemon that does not list its choices).
func approvalOptions(offered []string) []acp.PermissionOption {
	out := make([]acp.PermissionOption, 0, len(acpPermission))
	for _, p := range acpPermission {
		if len(offered) == 0 || slices.Contains(offered, p.Choice) {
			out = append(out, acp.PermissionOption{OptionId: p.ID, Kind: p.Kind, Name: p.Name})
		}
	}
	return out
}

// approvalChoice maps the editor's permission outcome to an approval.respond
// choice: a selected option to its choice, the cancelled outcome (the
// editor's session/cancel) and any unknown option id to "deny".
func approvalChoice(o acp.RequestPermissionOutcome) string {
	if o.Selected != nil {
		for _, p := range acpPermission {
			if p.ID == o.Selected.OptionId {
				return p.Choice
			}
		}
	}
	return "deny"
}

// clarifyOptionPrefix prefixes the option ids of a clarification's
// permission request ("choice:0", "choice:1", …).
const clarifyOptionPrefix = "choice:"

// clarifyDecline is the option id that leaves a clarification unanswered.
const clarifyDecline = "decline"

// clarifyOptions turns a one-question clarification with choices into
// permission options: one allow_once option per choice, then a reject_once
// "Don't answer". ok is false when the clarification is not of that shape
// (free text, several questions, multi-select): the bridge then explains in
// an agent message how to answer.
func clarifyOptions(p clarifyPayload) (opts []acp.PermissionOption, ok bool) {
	if len(p.Questions) != 1 || len(p.Questions[0].Choices) == 0 || p.Questions[0].MultiSelect {
		return nil, false
	}
	for i, c := range p.Questions[0].Choices {
		opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(fmt.Sprintf("%s%d", clarifyOptionPrefix, i)),
			Kind: acp.PermissionOptionKindAllowOnce, Name: c})
	}
	opts = append(opts, acp.PermissionOption{OptionId: clarifyDecline, Kind: acp.PermissionOptionKindRejectOnce, Name: "Don't answer"})
	return opts, true
}

// clarifyChoice is the answer a permission outcome gives a clarification
// made by clarifyOptions; ok is false when the editor declined or cancelled.
func clarifyChoice(p clarifyPayload, o acp.RequestPermissionOutcome) (answer string, ok bool) {
	if o.Selected == nil || len(p.Questions) != 1 {
		return "", false
	}
	var i int
	if _, err := fmt.Sscanf(string(o.Selected.OptionId), clarifyOptionPrefix+"%d", &i); err != nil {
		return "", false
	}
	if i < 0 || i >= len(p.Questions[0].Choices) {
		return "", false
	}
	return p.Questions[0].Choices[i], true
}

// elicitationSchema is the form of a clarification: one property per
// question, "q0", "q1", …, titled by the question; a string (with an enum
// of the choices when it has some), or an array of choices for
// multi-select. Every question is required.
func elicitationSchema(p clarifyPayload) acp.UnstableElicitationSchema {
	props := map[string]any{}
	var req []string
	for i, q := range p.Questions {
		key := fmt.Sprintf("q%d", i)
		prop := map[string]any{"type": "string", "title": q.Question}
		switch {
		case q.MultiSelect && len(q.Choices) > 0:
			prop = map[string]any{"type": "array", "title": q.Question, "items": map[string]any{"type": "string", "enum": q.Choices}}
		case len(q.Choices) > 0:
			prop["enum"] = q.Choices
		}
		props[key] = prop
		req = append(req, key)
	}
	return acp.UnstableElicitationSchema{Type: "object", Properties: props, Required: req}
}

// elicitationAnswer reads an accepted form into clarify.respond's answer:
// the one question's answer (a string, or a list for multi-select), or one
// answer per question in order (a multi-select one joined with ", ").
func elicitationAnswer(p clarifyPayload, content map[string]any) (any, bool) {
	var all []string
	var single any
	for i := range p.Questions {
		v, ok := content[fmt.Sprintf("q%d", i)]
		if !ok || v == nil {
			return nil, false
		}
		switch x := v.(type) {
		case string:
			single = x
			all = append(all, x)
		case []any:
			l := make([]string, 0, len(x))
			for _, e := range x {
				l = append(l, fmt.Sprint(e))
			}
			single = l
			all = append(all, strings.Join(l, ", "))
		default:
			single = fmt.Sprint(x)
			all = append(all, fmt.Sprint(x))
		}
	}
	if len(p.Questions) == 1 {
		return single, true
	}
	return all, len(all) > 0
}

// stopFor maps a settled admission to the prompt's stop reason, or to the
// error the session/prompt request fails with (errText is the turn's error).
//
//	completed                          -> end_turn
//	interrupted (session/cancel, stop) -> cancelled
//	cancelled (withdrawn while queued) -> cancelled
//	failed at agent.max_iterations     -> max_turn_requests
//	failed otherwise                   -> error -32000 {reason: "turn_failed", error}
//	unknown (daemon crashed mid-turn)  -> error -32000 {reason: "unknown_execution", resolve}
func stopFor(status, outcome, errText, resolveCmd string) (acp.StopReason, *acp.RequestError) {
	if status == string(protocol.StatusUnknown) {
		return "", &acp.RequestError{Code: protocol.CodeRefused,
			Message: fmt.Sprintf("the daemon stopped while this prompt ran, so whether it had effects is unknown; it holds the session's queue until an operator decides: run `%s`", resolveCmd),
			Data:    map[string]any{"reason": string(protocol.ReasonUnknownExecution), "resolve": resolveCmd}}
	}
	switch outcome {
	case string(protocol.OutcomeCompleted):
		return acp.StopReasonEndTurn, nil
	case string(protocol.OutcomeInterrupted), string(protocol.OutcomeCancelled):
		return acp.StopReasonCancelled, nil
	case string(protocol.OutcomeFailed):
		if strings.Contains(errText, "max_iterations") {
			return acp.StopReasonMaxTurnRequests, nil
		}
	}
	if errText == "" {
		errText = "the turn ended " + outcome
	}
	return "", &acp.RequestError{Code: protocol.CodeRefused, Message: "turn " + outcome + ": " + errText,
		Data: map[string]any{"reason": "turn_" + outcome, "error": errText}}
}

// refusal maps a daemon refusal of prompt.submit to the request's error,
// keeping the daemon's reason; its message and string data are made
// visible (rpc's VisibleStrings covers results, not error responses).
func refusal(err error) *acp.RequestError {
	var e *protocol.Error
	if re, ok := err.(*protocol.Error); ok {
		e = re
	}
	if e == nil {
		return &acp.RequestError{Code: protocol.CodeRefused, Message: err.Error(), Data: map[string]any{"reason": "daemon_error"}}
	}
	data := map[string]any{"reason": string(e.Reason)}
	for k, v := range e.Data {
		if s, ok := v.(string); ok {
			v = visible(s, true) // a refusal is not a result: the connection left it as it came
		}
		data[k] = v
	}
	code := e.Code
	if code == 0 {
		code = protocol.CodeRefused
	}
	return &acp.RequestError{Code: code, Message: visible(e.Message, true), Data: data}
}

// promptText turns ACP prompt content into the daemon's input text: text
// blocks as they are, a resource link as "[name](uri)", an embedded text
// resource as a fenced block headed by its uri. Images, audio and binary
// resources are refused (the prompt capabilities do not advertise them).
func promptText(blocks []acp.ContentBlock) (string, error) {
	var parts []string
	for i, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			name := b.ResourceLink.Name
			if name == "" {
				name = b.ResourceLink.Uri
			}
			parts = append(parts, fmt.Sprintf("[%s](%s)", name, b.ResourceLink.Uri))
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			fence := "```"
			for strings.Contains(r.Text, fence) {
				fence += "`"
			}
			parts = append(parts, fmt.Sprintf("%s\n%s%s\n%s\n%s", r.Uri, fence, "", strings.TrimRight(r.Text, "\n"), fence))
		case b.Resource != nil:
			return "", fmt.Errorf("prompt[%d]: binary resources are not supported (only text and text resources)", i)
		case b.Image != nil:
			return "", fmt.Errorf("prompt[%d]: images are not supported (the agent does not advertise the image prompt capability)", i)
		case b.Audio != nil:
			return "", fmt.Errorf("prompt[%d]: audio is not supported (the agent does not advertise the audio prompt capability)", i)
		default:
			return "", fmt.Errorf("prompt[%d]: unknown content block", i)
		}
	}
	text := strings.Join(parts, "\n\n")
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("prompt: no text")
	}
	return text, nil
}

// toolTitle and toolKind describe a daemon tool call for the editor: a
// terminal call is kind execute titled by its command; a clarify call is
// kind think titled by its question.
func toolTitle(name string, args json.RawMessage) string {
	s := toolSummary(name, args)
	s = strings.TrimPrefix(s, "$ ")
	return strings.TrimPrefix(s, "? ")
}

func toolKind(name string) acp.ToolKind {
	switch name {
	case protocol.ToolTerminal:
		return acp.ToolKindExecute
	case protocol.ToolClarify:
		return acp.ToolKindThink
	}
	return acp.ToolKindOther
}

// rawArgs decodes tool arguments (a JSON object, or a string holding one)
// for rawInput, its strings made visible (protocol.VisibleJSON).
func rawArgs(args json.RawMessage) any {
	args = protocol.VisibleJSON(args)
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	return v
}

// toolResult reads a tool's result (the tool message content, or
// tool.completed's result) into the text shown, made visible (newlines
// kept), and whether it failed: a terminal result fails on an error or a
// non-zero exit, a clarify result on an error or a timeout.
func toolResult(name string, result string, ok *bool) (text string, failed bool) {
	text, failed = toolResultOf(name, string(protocol.VisibleJSON(json.RawMessage(result))), ok)
	return visible(text, true), failed
}

func toolResultOf(name string, result string, ok *bool) (text string, failed bool) {
	r := strings.TrimSpace(result)
	shape := protocol.ToolTerminal // any result but clarify's is read as a terminal one: its output, timeout and exit status
	if name == protocol.ToolClarify {
		shape = name
	}
	o, err := protocol.ToolCompletedPayload{Name: shape, Result: json.RawMessage(r)}.Outcome()
	if err != nil || !strings.HasPrefix(r, "{") || !json.Valid([]byte(r)) {
		return result, ok != nil && !*ok
	}
	switch {
	case o.Error != nil:
		text, failed = o.Error.Error, true
	case o.Clarify != nil:
		var as []string
		for _, r := range o.Clarify.Responses {
			if r.Answer != nil {
				as = append(as, answerText(r.Answer))
			}
		}
		text, failed = strings.Join(as, "; "), o.Clarify.TimedOut
		if o.Clarify.TimedOut {
			text = "the question timed out"
		}
	case o.Terminal != nil:
		t := o.Terminal
		text = t.Output
		if t.TimedOut {
			failed = true
			text += "\n[timed out]"
		}
		if t.ExitCode != 0 {
			failed = true
			text += fmt.Sprintf("\n[exit status %d]", t.ExitCode)
		}
	}
	if ok != nil && !*ok {
		failed = true
	}
	if text = strings.TrimLeft(text, "\n"); text == "" {
		text = "(no output)"
	}
	return text, failed
}

// toolStatus is the ACP status of a finished tool call.
func toolStatus(failed bool) acp.ToolCallStatus {
	if failed {
		return acp.ToolCallStatusFailed
	}
	return acp.ToolCallStatusCompleted
}

// replayUpdates turns a stored transcript into the session/update payloads
// session/load replays: user messages as user_message_chunk, assistant
// text as agent_message_chunk, each tool call as tool_call followed by a
// tool_call_update with its final status and output. Boundary notes and
// other kinds of message (kind != "") are the daemon's bookkeeping and are
// not shown.
func replayUpdates(msgs []protocol.Message) []acp.SessionUpdate {
	var out []acp.SessionUpdate
	names := map[string]string{}
	for _, m := range msgs {
		if m.Kind != "" {
			continue
		}
		switch m.Role {
		case protocol.RoleUser:
			if m.Content != "" {
				out = append(out, acp.UpdateUserMessageText(m.Content))
			}
		case protocol.RoleAssistant:
			if strings.TrimSpace(m.Content) != "" {
				out = append(out, acp.UpdateAgentMessageText(m.Content))
			}
			var calls []toolCall
			json.Unmarshal(m.ToolCalls, &calls)
			for _, c := range calls {
				names[c.ID] = c.Name
				args := json.RawMessage(c.Arguments)
				out = append(out, acp.StartToolCall(acp.ToolCallId(c.ID), toolTitle(c.Name, args),
					acp.WithStartKind(toolKind(c.Name)), acp.WithStartStatus(acp.ToolCallStatusPending),
					acp.WithStartRawInput(rawArgs(args))))
			}
		case protocol.RoleTool:
			name := names[m.ToolCallID]
			text, failed := toolResult(name, m.Content, nil)
			out = append(out, acp.UpdateToolCall(acp.ToolCallId(m.ToolCallID), acp.WithUpdateStatus(toolStatus(failed)),
				acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}),
				acp.WithUpdateRawOutput(rawArgs(json.RawMessage(m.Content)))))
		}
	}
	return out
}
