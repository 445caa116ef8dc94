package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// The payloads the client renders are protocol's (docs/protocol.md Part 2,
// sections C and E): clarifyPayload and clarifyQuestion name them here,
// approvalPayload adds what the client says about an approval.

type (
	clarifyPayload  = protocol.ClarifyPayload
	clarifyQuestion = protocol.ClarifyQuestion
)

// approvalPayload is an approval prompt's payload (protocol.ApprovalPayload)
// with the client's wording of its choices and sandbox.
type approvalPayload struct {
	protocol.ApprovalPayload
}

// approvalOf decodes an approval prompt's payload; a payload that does not
// decode gives what could be read of it (the zero value at worst: all four
// choices, no command).
func approvalOf(p protocol.Prompt) approvalPayload {
	a, _ := p.Approval()
	return approvalPayload{a}
}

// clarifyOf decodes a clarify prompt's payload, like approvalOf.
func clarifyOf(p protocol.Prompt) clarifyPayload {
	c, _ := p.Clarify()
	return c
}

// promptToolCallID is the tool call a prompt gates ("" when its payload
// does not say).
func promptToolCallID(p protocol.Prompt) string {
	switch p.Kind {
	case protocol.KindApproval:
		return approvalOf(p).ToolCallID
	case protocol.KindClarify:
		return clarifyOf(p).ToolCallID
	}
	return ""
}

// offered is the prompt's choices (all four when the payload lists none).
func (a approvalPayload) offered() []string {
	if len(a.Choices) == 0 {
		return []string{string(protocol.ChoiceOnce), string(protocol.ChoiceSession), string(protocol.ChoiceAlways), string(protocol.ChoiceDeny)}
	}
	out := make([]string, len(a.Choices))
	for i, c := range a.Choices {
		out[i] = string(c)
	}
	return out
}

// escalated is the payload's sandbox_permissions when the model asks to
// run the command outside the sandbox (with its justification).
const escalated = "escalated"

// unsandboxed reports whether the command would run outside any sandbox.
func (a approvalPayload) unsandboxed() bool {
	return a.SandboxPermissions == escalated || a.Sandbox.Unsandboxed
}

// unsandboxedNote says why the command runs unsandboxed ("" when it runs
// in the sandbox, or the payload does not say).
func (a approvalPayload) unsandboxedNote() string {
	switch {
	case a.Kind == protocol.ApprovalKindMCP && a.Sandbox.Unsandboxed && a.Sandbox.Mode != "off" && a.Sandbox.Unavailable == "":
		return "REMOTE: this MCP server is reached over HTTP, outside the sandbox"
	case a.SandboxPermissions == escalated:
		return "UNSANDBOXED: the model asks to run this OUTSIDE the sandbox"
	case a.Sandbox.Unsandboxed && a.Sandbox.Unavailable != "":
		return "UNSANDBOXED: the sandbox is not available (" + visibleLine(a.Sandbox.Unavailable) + ")"
	case a.Sandbox.Unsandboxed:
		return "UNSANDBOXED: this session's sandbox mode is off"
	}
	return ""
}

// remembers says what "session" / "always" would remember.
func (a approvalPayload) remembers() string {
	off := a.offered()
	if a.Pattern == "" || (!slices.Contains(off, string(protocol.ChoiceSession)) && !slices.Contains(off, string(protocol.ChoiceAlways))) {
		return "nothing: approved for this run only"
	}
	return "session/always remember pattern " + visibleLine(a.Pattern)
}

// prettyArgs is an MCP call's arguments indented for the approval card,
// made visible (protocol.VisibleJSON); "{}" when there are none.
func prettyArgs(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(protocol.VisibleJSON(raw), &v) != nil {
		return visibleLine(string(raw))
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return visibleLine(string(raw))
	}
	return string(b)
}

// mcpLine is the scrollback line of an MCP server's new status, made
// visible: "MCP fs: ready (3 tools: a, b, c)", "MCP fs: failed — ERROR".
func mcpLine(st style, s protocol.MCPServerStatus) string {
	name := "MCP " + visibleLine(s.Name) + ": "
	switch s.Status {
	case protocol.MCPReady:
		return st.green(name+"ready") + st.dim(fmt.Sprintf(" (%d tools: %s)", len(s.Tools), clip(visibleLine(strings.Join(s.Tools, ", ")), 200)))
	case protocol.MCPFailed:
		return st.red(name + "failed — " + clip(oneLine(visibleLine(s.Error)), 300) + " (its tools are withdrawn; restarting)")
	}
	line := name + string(s.Status)
	if s.Error != "" {
		line += " (last error: " + clip(oneLine(visibleLine(s.Error)), 200) + ")"
	}
	return st.dim(line)
}

// mcpSummary is the status line's part about the MCP servers ("" when the
// session has none): "mcp 2/3 ready", red when one failed.
func mcpSummary(st style, list []protocol.MCPServerStatus) string {
	if len(list) == 0 {
		return ""
	}
	ready, failed := 0, 0
	for _, s := range list {
		switch s.Status {
		case protocol.MCPReady:
			ready++
		case protocol.MCPFailed:
			failed++
		}
	}
	text := fmt.Sprintf("mcp %d/%d ready", ready, len(list))
	if failed > 0 {
		return st.red(text + fmt.Sprintf(", %d failed", failed))
	}
	return text
}

// toolCall is one of a message's tool_calls.
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// promptSummary is one line describing a prompt.
func promptSummary(p protocol.Prompt) string {
	switch p.Kind {
	case protocol.KindApproval:
		a := approvalOf(p)
		what := visibleLine(a.Command)
		if a.Kind == protocol.ApprovalKindMCP {
			// The whole arguments, never clipped: what is approved is what
			// runs (a model could pad them to push the rest past a clip).
			what = "MCP " + visibleLine(a.Server) + "/" + visibleLine(a.Tool) + " " + oneLine(visibleLine(string(protocol.VisibleJSON(a.Arguments))))
		}
		s := fmt.Sprintf("%s  (%s; %s; choices %s)", what, visibleLine(a.Reason), a.remembers(), strings.Join(a.offered(), "/"))
		if a.unsandboxed() {
			s = "[UNSANDBOXED] " + s
			if a.Justification != "" {
				s += " justification: " + visibleLine(a.Justification)
			}
		}
		return s
	case protocol.KindClarify:
		var qs []string
		for _, q := range clarifyOf(p).Questions {
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
	case protocol.ToolTerminal:
		if c, ok := a["command"].(string); ok {
			return "$ " + visibleLine(c)
		}
	case protocol.ToolClarify:
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
	o, _ := protocol.ToolCompletedPayload{Name: name, OK: ok, ExitCode: exitCode, Result: result}.Outcome()
	switch {
	case o.Error != nil:
		return "✗ " + o.Error.Error, o.Error.Output // an interrupted command keeps what it printed
	case o.Terminal != nil:
		r := o.Terminal
		line = fmt.Sprintf("exit %d", r.ExitCode)
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
	case o.Clarify != nil:
		if o.Clarify.TimedOut {
			return "no answer (timed out)", ""
		}
		var ans []string
		for _, x := range o.Clarify.Responses {
			if x.Answer != nil {
				ans = append(ans, fmt.Sprint(answerText(x.Answer)))
			}
		}
		return "answered: " + strings.Join(ans, "; "), ""
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

// parseCalls reads a message's tool_calls ([{id, name, arguments}]); none
// when it has none or they do not parse.
func parseCalls(raw []byte) []toolCall {
	var calls []toolCall
	json.Unmarshal(raw, &calls)
	return calls
}
