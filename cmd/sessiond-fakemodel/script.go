package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/fixtures/fakemodel"
)

// scriptHelp documents the script; it is printed at start and in --help.
const scriptHelp = `  run: CMD             calls the terminal tool with CMD (approvals apply), then
                       summarises the exit status and the output
  ask: Q | A | B       calls the clarify tool: question Q with choices A and B
                       (without "|": a free-text question), then repeats the answer
  anything else        streams back "You said: <your message>"`

// script computes the fake model's reply to one request: to a tool result,
// a summary of it; to "run: CMD", a terminal call; to "ask: Q | A | B", a
// clarify call; to anything else, an echo.
func script(r fakemodel.RecordedRequest) fakemodel.Reply {
	if r.LastIsToolResult {
		return fakemodel.Reply{Text: summarise(r)}
	}
	text := strings.TrimSpace(r.LastUserText())
	if cmd, ok := cutPrefixFold(text, "run:"); ok {
		switch {
		case cmd == "":
			return fakemodel.Reply{Text: "Nothing to run: write `run: COMMAND`, e.g. `run: ls -la`."}
		case !slices.Contains(r.Tools, "terminal"):
			return fakemodel.Reply{Text: fmt.Sprintf("I cannot run `%s`: this session has no terminal tool.", cmd)}
		}
		return toolCall("terminal", map[string]any{"command": cmd})
	}
	if q, ok := cutPrefixFold(text, "ask:"); ok {
		parts := strings.Split(q, "|")
		question := strings.TrimSpace(parts[0])
		var choices []string
		for _, c := range parts[1:] {
			if c = strings.TrimSpace(c); c != "" {
				choices = append(choices, c)
			}
		}
		switch {
		case question == "":
			return fakemodel.Reply{Text: "Nothing to ask: write `ask: QUESTION | CHOICE | CHOICE`, e.g. `ask: Which colour? | red | blue`."}
		case !slices.Contains(r.Tools, "clarify"):
			return fakemodel.Reply{Text: fmt.Sprintf("I cannot ask %q: this session has no clarify tool.", question)}
		}
		args := map[string]any{"question": question}
		if len(choices) > 0 {
			args["choices"] = choices
		}
		return toolCall("clarify", args)
	}
	return fakemodel.Reply{Text: "You said: " + text}
}

// cutPrefixFold is strings.CutPrefix, case-insensitive, with the rest
// trimmed.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(s[len(prefix):]), true
}

func toolCall(name string, args map[string]any) fakemodel.Reply {
	b, _ := json.Marshal(args)
	return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: name, Arguments: string(b)}}}
}

// summarise answers the result of the request's last tool call.
func summarise(r fakemodel.RecordedRequest) string {
	last := r.Messages[len(r.Messages)-1]
	name, args := "", ""
	for _, m := range slices.Backward(r.Messages) {
		for _, tc := range m.ToolCalls {
			if tc.ID == last.ToolCallID {
				name, args = tc.Name, tc.Arguments
			}
		}
		if name != "" {
			break
		}
	}
	content, _ := last.Content.(string)
	var res struct {
		Error     string `json:"error"`
		ExitCode  *int   `json:"exit_code"`
		Output    string `json:"output"`
		TimedOut  bool   `json:"timed_out"`
		Responses []struct {
			Answer any `json:"answer"`
		} `json:"responses"`
	}
	if json.Unmarshal([]byte(content), &res) != nil {
		return fmt.Sprintf("The %s tool returned: %s", orUnknown(name), content)
	}
	switch name {
	case "terminal":
		var a struct {
			Command string `json:"command"`
		}
		json.Unmarshal([]byte(args), &a)
		if res.Error != "" {
			return fmt.Sprintf("`%s` did not run normally: %s", a.Command, res.Error)
		}
		var b strings.Builder
		switch {
		case res.TimedOut:
			fmt.Fprintf(&b, "`%s` timed out.", a.Command)
		case res.ExitCode != nil:
			fmt.Fprintf(&b, "`%s` exited with status %d.", a.Command, *res.ExitCode)
		default:
			fmt.Fprintf(&b, "`%s` finished.", a.Command)
		}
		if out := strings.TrimRight(res.Output, "\n"); out != "" {
			fmt.Fprintf(&b, " Its output:\n\n```\n%s\n```", out)
		} else {
			b.WriteString(" It printed nothing.")
		}
		return b.String()
	case "clarify":
		if res.Error != "" {
			return "The question was not answered: " + res.Error
		}
		var answers []string
		for _, x := range res.Responses {
			if x.Answer != nil {
				answers = append(answers, answerText(x.Answer))
			}
		}
		if len(answers) == 0 {
			return "No answer came, so I will not guess."
		}
		return "You answered: " + strings.Join(answers, "; ") + "."
	}
	return fmt.Sprintf("The %s tool returned: %s", orUnknown(name), content)
}

func answerText(a any) string {
	if l, ok := a.([]any); ok {
		s := make([]string, 0, len(l))
		for _, x := range l {
			s = append(s, fmt.Sprint(x))
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprint(a)
}

func orUnknown(name string) string {
	if name == "" {
		return "(unknown)"
	}
	return name
}

// describe is the log line of one request and its reply.
func describe(r fakemodel.RecordedRequest, reply fakemodel.Reply) string {
	in := fmt.Sprintf("%q", clip(r.LastUserText(), 60))
	if r.LastIsToolResult {
		in = "a tool result for " + in
	}
	out := fmt.Sprintf("text %q", clip(reply.Text, 60))
	if len(reply.ToolCalls) > 0 {
		out = fmt.Sprintf("%s %s", reply.ToolCalls[0].Name, reply.ToolCalls[0].Arguments)
	}
	return in + " → " + out
}

// clip shortens s to n runes on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
