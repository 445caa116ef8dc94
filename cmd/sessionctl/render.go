package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/sessiond/sessiond/rpc"
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
func promptSummary(p rpc.Prompt) string {
	switch p.Kind {
	case "approval":
		var a approvalPayload
		json.Unmarshal(p.Payload, &a)
		return fmt.Sprintf("%s  (%s)", a.Command, a.Reason)
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

// toolSummary is how a tool call is shown: the command for terminal, the
// question for clarify, else the name and arguments.
func toolSummary(name string, args json.RawMessage) string {
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		var s string
		if json.Unmarshal(args, &s) == nil && json.Unmarshal([]byte(s), &a) != nil {
			return name + " " + clip(oneLine(s), 200)
		}
	}
	switch name {
	case "terminal":
		if c, ok := a["command"].(string); ok {
			return "$ " + c
		}
	case "clarify":
		if q, ok := a["question"].(string); ok {
			return "? " + q
		}
		if qs, ok := a["questions"].([]any); ok && len(qs) > 0 {
			if q, ok := qs[0].(map[string]any); ok {
				return fmt.Sprintf("? %v", q["question"])
			}
		}
	}
	return name + " " + clip(oneLine(string(args)), 200)
}

// resultSummary describes a tool's result in one line, and returns the
// terminal output (for a tail) when there is one.
func resultSummary(name string, ok bool, exitCode *int, result json.RawMessage) (line, output string) {
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
func (s style) blue(t string) string   { return s.wrap("34", t) }
func (s style) cyan(t string) string   { return s.wrap("36", t) }
