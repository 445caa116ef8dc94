package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// Payload shapes of docs/protocol.md Part 2 (sections C and E) that the
// client renders.

type approvalPayload struct {
	ToolCallID string   `json:"tool_call_id"`
	Command    string   `json:"command"`
	Cwd        string   `json:"cwd"`
	Risk       string   `json:"risk"`
	Reason     string   `json:"reason"`
	Pattern    string   `json:"pattern"`
	Choices    []string `json:"choices"`
	// SandboxPermissions is "escalated" when the model asks to run the
	// command outside the sandbox, with its Justification.
	SandboxPermissions string `json:"sandbox_permissions"`
	Justification      string `json:"justification"`
	Sandbox            *struct {
		Mode        string `json:"mode"`
		Unsandboxed bool   `json:"unsandboxed"`
		Unavailable string `json:"unavailable"`
	} `json:"sandbox"`
}

// offered is the prompt's choices (all four when the payload lists none).
func (a approvalPayload) offered() []string {
	if len(a.Choices) == 0 {
		return []string{"once", "session", "always", "deny"}
	}
	return a.Choices
}

// unsandboxed reports whether the command would run outside any sandbox.
func (a approvalPayload) unsandboxed() bool {
	return a.SandboxPermissions == "escalated" || (a.Sandbox != nil && a.Sandbox.Unsandboxed)
}

// unsandboxedNote says why the command runs unsandboxed ("" when it runs
// in the sandbox, or the payload does not say).
func (a approvalPayload) unsandboxedNote() string {
	switch {
	case a.SandboxPermissions == "escalated":
		return "UNSANDBOXED: the model asks to run this OUTSIDE the sandbox"
	case a.Sandbox != nil && a.Sandbox.Unsandboxed && a.Sandbox.Unavailable != "":
		return "UNSANDBOXED: the sandbox is not available (" + visibleLine(a.Sandbox.Unavailable) + ")"
	case a.Sandbox != nil && a.Sandbox.Unsandboxed:
		return "UNSANDBOXED: this session's sandbox mode is off"
	}
	return ""
}

// remembers says what "session" / "always" would remember.
func (a approvalPayload) remembers() string {
	off := a.offered()
	if a.Pattern == "" || (!slices.Contains(off, "session") && !slices.Contains(off, "always")) {
		return "nothing: approved for this run only"
	}
	return "session/always remember pattern " + visibleLine(a.Pattern)
}

type clarifyQuestion struct {
	ID          string   `json:"id"`
	Question    string   `json:"question"`
	Choices     []string `json:"choices"`
	MultiSelect bool     `json:"multi_select"`
}

type clarifyPayload struct {
	ToolCallID string            `json:"tool_call_id"`
	Questions  []clarifyQuestion `json:"questions"`
}

type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type terminalResult struct {
	ExitCode   *int   `json:"exit_code"`
	Output     string `json:"output"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Error      string `json:"error"`
}

type clarifyResult struct {
	Responses []struct {
		Question string `json:"question"`
		Answer   any    `json:"answer"`
	} `json:"responses"`
	TimedOut bool   `json:"timed_out"`
	Error    string `json:"error"`
}

// promptSummary is one line describing a prompt.
func promptSummary(p protocol.Prompt) string {
	switch p.Kind {
	case "approval":
		var a approvalPayload
		json.Unmarshal(p.Payload, &a)
		s := fmt.Sprintf("%s  (%s; %s; choices %s)", visibleLine(a.Command), visibleLine(a.Reason), a.remembers(), strings.Join(a.offered(), "/"))
		if a.unsandboxed() {
			s = "[UNSANDBOXED] " + s
			if a.Justification != "" {
				s += " justification: " + visibleLine(a.Justification)
			}
		}
		return s
	case "clarify":
		var c clarifyPayload
		json.Unmarshal(p.Payload, &c)
		var qs []string
		for _, q := range c.Questions {
			s := q.Question
			if len(q.Choices) > 0 {
				s += " [" + strings.Join(q.Choices, "/") + "]"
			}
			qs = append(qs, s)
		}
		return strings.Join(qs, "; ")
	}
	return string(p.Payload)
}

// toolSummary is how a tool call is shown, on one line and made visible
// (protocol.VisibleJSON, then visibleLine: a newline in a command shows as
// \n, so it cannot print a line of its own): "$ COMMAND" for terminal,
// "? QUESTION" for clarify, else the name and the arguments (a JSON object,
// or a string holding one) clipped to 200 bytes.
func toolSummary(name string, args json.RawMessage) string {
	args = protocol.VisibleJSON(args)
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		var s string
		if json.Unmarshal(args, &s) == nil && json.Unmarshal([]byte(s), &a) != nil {
			return name + " " + clip(oneLine(visibleLine(s)), 200)
		}
	}
	switch name {
	case "terminal":
		if c, ok := a["command"].(string); ok {
			return "$ " + visibleLine(c)
		}
	case "clarify":
		if q, ok := a["question"].(string); ok {
			return "? " + visibleLine(q)
		}
		if qs, ok := a["questions"].([]any); ok && len(qs) > 0 {
			if q, ok := qs[0].(map[string]any); ok {
				return "? " + visibleLine(fmt.Sprint(q["question"]))
			}
		}
	}
	return name + " " + clip(oneLine(visibleLine(string(args))), 200)
}

// resultSummary describes a tool's result (a JSON object, or a string
// holding one) in one line, and returns the terminal output (for a tail)
// when there is one; both made visible (protocol.VisibleJSON; the output
// keeps its newlines).
func resultSummary(name string, ok bool, exitCode *int, result json.RawMessage) (line, output string) {
	line, output = resultSummaryOf(name, ok, exitCode, protocol.VisibleJSON(result))
	return visibleLine(line), output
}

func resultSummaryOf(name string, ok bool, exitCode *int, result json.RawMessage) (line, output string) {
	var s string
	if json.Unmarshal(result, &s) == nil {
		result = json.RawMessage(s)
	}
	switch name {
	case "terminal":
		var r terminalResult
		if json.Unmarshal(result, &r) == nil {
			if r.Error != "" {
				return "✗ " + r.Error, r.Output // an interrupted command keeps what it printed
			}
			code := r.ExitCode
			if code == nil {
				code = exitCode
			}
			line = "exit ?"
			if code != nil {
				line = fmt.Sprintf("exit %d", *code)
			}
			if r.TimedOut {
				line += " (timed out)"
			}
			if r.DurationMS > 0 {
				line += fmt.Sprintf(" · %d ms", r.DurationMS)
			}
			if r.Truncated {
				line += " · output truncated"
			}
			return line, r.Output
		}
	case "clarify":
		var r clarifyResult
		if json.Unmarshal(result, &r) == nil {
			if r.Error != "" {
				return "✗ " + r.Error, ""
			}
			if r.TimedOut {
				return "no answer (timed out)", ""
			}
			var ans []string
			for _, x := range r.Responses {
				if x.Answer != nil {
					ans = append(ans, fmt.Sprint(answerText(x.Answer)))
				}
			}
			return "answered: " + strings.Join(ans, "; "), ""
		}
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(result, &e) == nil && e.Error != "" {
		return "✗ " + e.Error, ""
	}
	if ok {
		return "ok", ""
	}
	return "failed", ""
}

func answerText(a any) string {
	if l, ok := a.([]any); ok {
		var s []string
		for _, x := range l {
			s = append(s, fmt.Sprint(x))
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprint(a)
}

// tailLines returns the last n non-empty-trailing lines of s.
func tailLines(s string, n int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// style holds the few SGR sequences the terminal UI uses; empty under
// NO_COLOR.
type style struct {
	on bool
}

func newStyle() style { return style{on: os.Getenv("NO_COLOR") == ""} }

func (s style) wrap(code, text string) string {
	if !s.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s style) bold(t string) string   { return s.wrap("1", t) }
func (s style) dim(t string) string    { return s.wrap("2", t) }
func (s style) red(t string) string    { return s.wrap("31", t) }
func (s style) green(t string) string  { return s.wrap("32", t) }
func (s style) yellow(t string) string { return s.wrap("33", t) }
func (s style) cyan(t string) string   { return s.wrap("36", t) }
